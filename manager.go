package jail

import (
	"errors"
	"io"
	"os"
	"time"

	"github.com/jail-sandbox/jail/api"
)

// Persistent sandboxes (docs/persistent.md): a Manager makes, finds and
// removes the sandboxes of one user, which live between commands and
// outlive the program that made them; a Sandbox runs commands in one.
// The CLI (jail create, exec, shell, ls, logs, stop, start, kill, rm) and
// jail serve's /v1/sandboxes* are both this type on the same state
// directory, so each sees the other's sandboxes.

var (
	// ErrNotFound: no sandbox of that name.
	ErrNotFound = errors.New("no such sandbox")
	// ErrExists: a sandbox of that name exists and Reuse was not asked
	// for.
	ErrExists = errors.New("a sandbox of that name exists")
	// ErrRunning: Remove without force of a sandbox that runs.
	ErrRunning = errors.New("the sandbox is running")
)

// Sandbox states, as Info and `jail ls` give them.
const (
	// StateRunning: ready for commands (some may run).
	StateRunning = "running"
	// StateStopped: its processes ended by Stop or Kill; its files kept.
	// The next Exec or Start brings it back.
	StateStopped = "stopped"
	// StateDead: its monitor is gone (killed, or the sandbox ended by
	// itself); only Remove is left to do.
	StateDead = "dead"
)

// Process is one command run in a persistent sandbox: what `jail exec`
// takes. Everything else (root, limits, filter, namespaces) is the
// sandbox's own.
type Process struct {
	// Command is the program and its arguments.
	Command []string
	// Env holds K=V entries added to the sandbox's environment for this
	// command.
	Env []string
	// Secrets are logical secret names injected as environment variables.
	Secrets []string
	// Workdir is the working directory ("": the sandbox's); User is
	// "UID[:GID]" ("": the sandbox's).
	Workdir string
	User    string
	// Timeout kills the command (and what it started) after this
	// wall-clock time; the exit status is then 124. 0: none.
	Timeout time.Duration
	// TTY runs the command on a pseudo-terminal of its own.
	TTY        bool
	WindowSize *WindowSize
	Resize     <-chan WindowSize
	// Signals delivers signals to forward to the command's process group.
	Signals <-chan os.Signal
	// Capture keeps the output in the Result (at most OutputLimit bytes
	// per stream, 0 meaning 1 MiB) in addition to streaming it.
	Capture     bool
	OutputLimit int64
	// Stdin, Stdout and Stderr connect the command; nil means nothing.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// NetDenials receives, once the command has ended, one line per
	// destination the sandbox's egress gateway denied to what the command
	// started, "net: denied HOST:PORT (reason)", read from the audit log;
	// nil: none.
	NetDenials io.Writer
}

// SandboxInfo is what `jail ls` and GET /v1/sandboxes/{name} show of a
// sandbox: its name, state, root, labels, times and use so far. It is the
// one type of the CLI, the Go API and the HTTP API (package api).
type SandboxInfo = api.SandboxInfo

// DefaultStopGrace is how long Stop waits after SIGTERM before SIGKILL.
const DefaultStopGrace = 10 * time.Second
