//go:build linux

package jail

import (
	"context"
	"errors"
	"time"
)

var errNotYet = errors.New("persistent sandboxes: not implemented yet")

// ManagerOptions configure a Manager; the zero value is the user's own
// state directory, audit log and secrets.
type ManagerOptions struct {
	// StateDir overrides the state directory ($XDG_RUNTIME_DIR/jail, or
	// /run/jail for root).
	StateDir string
	// AuditLog overrides the audit log's path ($XDG_STATE_HOME/jail/
	// audit.log, or /var/log/jail/audit.log for root); "-" writes none.
	AuditLog string
	// SecretEnv, when set, is consulted first for a secret NAME as
	// JAIL_SECRET_<NAME> (jail serve passes its own environment).
	SecretEnv func(key string) string
}

// Manager makes, finds and removes the persistent sandboxes of this
// process's user. Its methods may be called from several goroutines.
type Manager struct {
	opts ManagerOptions
}

// NewManager opens the state directory (making it if needed).
func NewManager(opts ManagerOptions) (*Manager, error) {
	return &Manager{opts: opts}, nil
}

// Close lets go of the connections the Manager keeps; the sandboxes live
// on.
func (m *Manager) Close() error { return nil }

// Create makes the sandbox spec.Name from spec's RUN OPTIONS and returns
// once it is ready for commands. spec.Command is not run. An existing
// sandbox of that name is ErrExists, unless spec.Reuse: then it is
// returned when it was made from the same resolved spec, and otherwise
// removed and made anew.
func (m *Manager) Create(ctx context.Context, spec Spec) (*Sandbox, error) {
	return nil, errNotYet
}

// Get returns the sandbox name, or ErrNotFound.
func (m *Manager) Get(name string) (*Sandbox, error) { return nil, errNotYet }

// List describes the user's sandboxes whose labels include every K=V of
// labels (nil: all), by name.
func (m *Manager) List(labels map[string]string) ([]SandboxInfo, error) {
	return nil, errNotYet
}

// Remove removes the sandbox name: a running or stopped one only with
// force (its processes are killed), a dead one always.
func (m *Manager) Remove(name string, force bool) error { return errNotYet }

// Sandbox is a handle on one persistent sandbox.
type Sandbox struct {
	m    *Manager
	name string
}

// Name is the sandbox's name.
func (s *Sandbox) Name() string { return s.name }

// Exec runs p in the sandbox (starting a stopped one first) and returns
// how it ended, as Run does: a *SetupError when it could not be started
// (exit status 125), an *ExecError when its program could not be executed
// (126, 127), and otherwise the Result, whatever its exit status.
func (s *Sandbox) Exec(ctx context.Context, p Process) (Result, error) {
	return Result{ExitCode: ExitSetup}, errNotYet
}

// Shell runs script with /bin/sh -c in the sandbox: Exec of
// {"/bin/sh", "-c", script} with p's other fields.
func (s *Sandbox) Shell(ctx context.Context, script string, p Process) (Result, error) {
	p.Command = []string{"/bin/sh", "-c", script}
	return s.Exec(ctx, p)
}

// Start brings a stopped sandbox back; a running one is left as it is.
func (s *Sandbox) Start(ctx context.Context) error { return errNotYet }

// Stop sends SIGTERM to every process in the sandbox and SIGKILL to what
// is left after grace (0: DefaultStopGrace), keeping its files.
func (s *Sandbox) Stop(ctx context.Context, grace time.Duration) error { return errNotYet }

// Kill sends SIGKILL to every process in the sandbox, keeping its files.
func (s *Sandbox) Kill() error { return errNotYet }

// Logs returns the combined output of the sandbox's commands, its last
// tail lines (0: all that is kept).
func (s *Sandbox) Logs(tail int) ([]byte, error) { return nil, errNotYet }

// Info describes the sandbox.
func (s *Sandbox) Info() (SandboxInfo, error) { return SandboxInfo{}, errNotYet }
