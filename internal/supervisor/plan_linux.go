package supervisor

import (
	"io"
	"os"
	"time"

	"github.com/jail-sandbox/jail/cgroups"
	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/privdir"
	"github.com/jail-sandbox/jail/namespaces"
)

// Plan is a validated and resolved jail.Spec: what the init needs, plus
// the host objects opened for it. The supervisor that gets it closes it.
type Plan struct {
	Config   config.Init
	Identity namespaces.Identity
	// Files are handed to the init after the control socket, as fd 4...
	Files []*os.File
	// Cgroup is the layout the sandbox's cgroup goes in (None: rlimits).
	Cgroup cgroups.Layout
	Limits cgroups.Limits
	// Notices are jail's own one-line remarks, shown once the command runs.
	Notices []string
	// Users is the password database, read once for all that asks it
	// while the sandbox is made (its programs' directory among them).
	Users *privdir.Passwd
}

// Close closes the plan's files.
func (p *Plan) Close() {
	for _, f := range p.Files {
		f.Close()
	}
}

// Job is what a run brings beside its sandbox: the streams of its command,
// its time limit and what it forwards while the command runs. A pooled
// sandbox is built without one and gets the caller's at its handout.
type Job struct {
	// Stdin, Stdout and Stderr connect the command; nil means nothing.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Notices receives the plan's notices once the command has started.
	Notices io.Writer
	// Capture keeps up to OutputLimit bytes of each stream in the Result.
	Capture     bool
	OutputLimit int64
	// Timeout kills the sandbox this long after the run began (0: none).
	Timeout time.Duration
	// TTY: the command runs on a terminal, which Resize sizes.
	TTY     bool
	Resize  <-chan WindowSize
	Signals <-chan os.Signal
	// Egress, when set, is given the sockets the init opened for the
	// egress gateway (Plan.Config.Listen) once it is ready, before the
	// command is released, and a pidfd of the init (nil when the kernel
	// gives none); it closes neither. An error ends the sandbox before its
	// command starts, and is the run's.
	Egress func(listeners []*os.File, initPidfd *os.File) error
}

// WindowSize is a terminal's size in characters.
type WindowSize struct {
	Rows, Cols uint16
}

// Timings are when a run reached each step, for the benchmarks that find
// which step a regression is in. The caller sets Start, Prepared and Done.
type Timings struct {
	Start, Prepared, Cgroup, InitStarted time.Time
	// InitRunning and RootBuilt are reported by the init: its own code
	// began, its root filesystem was built.
	InitRunning, RootBuilt             time.Time
	CommandStarted, ExitReported, Done time.Time
}
