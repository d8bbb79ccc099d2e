// Package jail runs commands in Linux sandboxes: fresh user, mount, pid, net,
// ipc, uts and cgroup namespaces, a read-only root filesystem with host
// secrets masked, no capabilities and no_new_privs. It needs no daemon and
// works for root and for ordinary users alike.
//
// A Pool re-executes the calling binary as its forker and its cgroup
// janitor; the package's initialisation turns such a start into them
// before main runs (Init), so an embedding program needs no step of its
// own. A sandbox's init is a small static C program that the
// module carries for amd64 and arm64 (internal/programs), so nothing but
// `go get` is needed; image import and pull and user profiles (YAML) need
// the tools program of a `make build` and fail with a message without it.
//
//	func main() {
//		res, err := jail.Run(ctx, jail.Spec{Command: []string{"python3", "-c", "print(1)"}, Stdout: os.Stdout})
//		...
//	}
//
// Run returns a *SetupError when jail itself could not build or start the
// sandbox (exit status 125 in the CLI), an *ExecError when the command could
// not be executed (126) or found (127), and otherwise a nil error and the
// Result of the command, whatever its own exit status.
//
// A program that starts many sandboxes keeps a Pool: its sandboxes are
// built ahead of need, and a run in one costs about a fork and an exec.
package jail

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jail-sandbox/jail/api"
	"github.com/jail-sandbox/jail/internal/supervisor"
)

// Version is the version of jail.
const Version = "0.1.0"

// Exit statuses that jail itself gives, beside the command's own.
const (
	ExitTimeout       = api.ExitTimeout
	ExitSetup         = api.ExitSetup
	ExitNotExecutable = api.ExitNotExecutable
	ExitNotFound      = api.ExitNotFound
)

// Spec describes one sandboxed command: the RUN OPTIONS of the CLI.
type Spec struct {
	// Command is the program and its arguments.
	Command []string
	// Image names an image of the local store (ImageStore): its layers
	// are the read-only root, and its Entrypoint, Cmd, Env, WorkingDir and
	// User the defaults of the command.
	Image string
	// Pull says when Run and Manager.Create fetch Image from its registry
	// first, as `jail image pull` does: PullMissing ("", the zero value,
	// or "missing") when the store does not hold it, PullAlways every
	// time (the registry's current image under that name replaces the
	// stored one), PullNever never (a missing image is a SetupError). A
	// persistent sandbox's image is fixed at its creation: Start never
	// pulls.
	Pull string
	// PullProgress receives a pull's progress (lines meant for a
	// terminal); nil shows none.
	PullProgress io.Writer
	// Rootfs is a directory used as the read-only lower layer of the root,
	// with a private writable layer on top unless ReadOnly. Empty means
	// the host's own tree, read-only.
	Rootfs string
	// Profile names the policy (seccomp, limits); "" means "default".
	Profile string
	// Memory in bytes (0: 512 MiB), CPUs in cores (0: 1), Pids (0: 256).
	Memory int64
	CPUs   float64
	Pids   int
	// Timeout kills the whole sandbox after this wall-clock time (0: none).
	Timeout time.Duration
	// Net is "" or "none": only a loopback interface, nothing out; or
	// "allow=RULE[,RULE...]": the loopback too, and jail's egress gateway
	// as the one way out, to the hosts and ports the rules allow, every
	// attempt in the audit log ("allow=" denies everything, on record;
	// docs/egress.md has the grammar).
	Net string
	// NetDenials receives one line per destination the gateway denied,
	// "net: denied HOST:PORT (reason)", while the command runs; nil
	// discards them (the audit log has them all).
	NetDenials io.Writer
	// NetLimits bound what the gateway lets the sandbox use of the host's
	// network (--net-limit); the zero value is MaxConns 256, no other.
	NetLimits NetLimits
	// Workspace is a host directory bound read-write at /workspace, which
	// becomes the working directory.
	Workspace string
	// Mounts are extra bind mounts from the host.
	Mounts []Mount
	// Env holds K=V entries added to the sandbox's minimal environment.
	Env []string
	// Secrets are logical secret names (jail secret add): each value is
	// read when the command starts, injected as the environment variable
	// NAME, and replaced by [secret:NAME] in the command's output.
	Secrets []string
	// SecretEnv, when set, is asked first for JAIL_SECRET_<NAME> (jail
	// serve passes its own environment).
	SecretEnv func(string) string
	// User is "UID[:GID]" inside the sandbox; "" means 0:0.
	User string
	// Workdir is the working directory inside; Hostname the host name.
	Workdir  string
	Hostname string
	// ReadOnly: no writable layer over the root filesystem.
	ReadOnly bool
	// TTY runs the command on a pseudo-terminal: Stdin is copied to it,
	// its output to Stdout (stderr is the same terminal).
	TTY        bool
	WindowSize *WindowSize
	// Resize delivers new terminal sizes while a TTY command runs.
	Resize <-chan WindowSize
	// Signals delivers signals to forward to the command (sent to it
	// directly, by pidfd; the ones that arrive before it runs are sent
	// once it does).
	Signals <-chan os.Signal
	// Capture keeps the output in the Result (at most OutputLimit bytes
	// per stream, 0 meaning 1 MiB), in addition to streaming it.
	Capture     bool
	OutputLimit int64
	// Labels are free-form K=V metadata: shown by Manager.List, filtered
	// on, and written into the audit log.
	Labels map[string]string
	// Name, Reuse, TTL and IdleTimeout are for Manager.Create only: the
	// sandbox's name; return an existing sandbox of that name made from
	// the same spec (one made from another is replaced); remove the
	// sandbox this long after its creation, or after this long with no
	// command running (0: never).
	Name        string
	Reuse       bool
	TTL         time.Duration
	IdleTimeout time.Duration
	// Stdin, Stdout and Stderr connect the command; nil means nothing.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Notices receives jail's own remarks about the sandbox (such as
	// limits this host cannot enforce), one line each, once the command
	// has started; nil discards them.
	Notices io.Writer
}

// Values of Spec.Pull (the API's "pull" and --pull take the same).
const (
	PullNever   = api.PullNever
	PullMissing = api.PullMissing
	PullAlways  = api.PullAlways
)

// NetLimits are a sandbox's limits on the egress gateway: connections at
// once (0: 256), bytes both ways over its life, and bytes per second both
// ways (0: none).
type NetLimits struct {
	MaxConns int   `json:"max_conns,omitempty"`
	MaxBytes int64 `json:"max_bytes,omitempty"`
	Rate     int64 `json:"rate,omitempty"`
}

// Mount is a bind mount of a host path into the sandbox.
type Mount struct {
	Source      string
	Destination string
	Writable    bool
}

// WindowSize is a terminal's size in characters: Rows and Cols.
type WindowSize = supervisor.WindowSize

// Result is how a sandboxed command ended: its exit code (the status the
// CLI exits with: 128+N when killed by signal N, 124 on timeout), the
// signal, whether the timeout or the OOM killer ended it, the output kept
// with Capture and whether more was dropped, and its wall-clock time, CPU
// time and peak memory. It is the one result type of jail: its JSON form
// is the result object of the CLI's --json, of the HTTP API and of its
// client (package api). Run leaves Error empty; the server sets it.
type Result = api.Result

// SetupError means jail could not build or start the sandbox; nothing of the
// command ran. Step names the step or option at fault and Err says why;
// Refused means the request itself was refused (a bad option, an unknown
// profile or image, a mount source that may not be mounted) before
// anything was started on the host.
type SetupError = supervisor.SetupError

// ExecError means the sandbox was built but the command could not be
// executed: Code is 127 when it was not found, 126 otherwise, and Reason
// says why.
type ExecError = supervisor.ExecError

// ExitCode is the status the CLI exits with for err: the ExecError's code,
// 125 for any other error, or 0 for none.
func ExitCode(err error) int {
	var ee *ExecError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	default:
		return ExitSetup
	}
}

func invalid(step, format string, args ...any) error {
	return &SetupError{Step: step, Err: fmt.Errorf(format, args...)}
}
