package supervisor

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/spawn"
)

// signal passes sig on to the command.
func (s *supervisor) signal(sig os.Signal) error {
	if n, ok := sig.(syscall.Signal); ok {
		return s.command.signal(n)
	}
	return fmt.Errorf("signal %v: not a Unix signal", sig)
}

// commandHandle signals a sandbox's command through the pidfd its init
// hands over once the command runs (KindStarted). The supervisor signals the
// command itself, rather than asking the init to: the init handles no
// signal. The pidfd reaches into the sandbox's pid namespace and never
// names another process. Signals asked for before it arrives wait for it.
type commandHandle struct {
	mu      sync.Mutex
	pidfd   *os.File
	pending []syscall.Signal
	closed  bool
}

// maxPendingSignals bounds the signals kept for a command not yet started.
const maxPendingSignals = 64

// started takes the command's pidfd and delivers the signals that waited.
func (c *commandHandle) started(pidfd *os.File) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.pidfd != nil {
		pidfd.Close()
		return
	}
	c.pidfd = pidfd
	for _, sig := range c.pending {
		_ = c.send(sig)
	}
	c.pending = nil
}

// signal sends sig to the command, or keeps it until the command runs.
func (c *commandHandle) signal(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return nil
	case c.pidfd == nil:
		if len(c.pending) < maxPendingSignals {
			c.pending = append(c.pending, sig)
		}
		return nil
	}
	return c.send(sig)
}

func (c *commandHandle) send(sig syscall.Signal) error {
	err := spawn.Signal(c.pidfd, sig)
	if err == unix.ESRCH {
		return nil // it has ended
	}
	if err != nil {
		return fmt.Errorf("signal %v: %w", sig, err)
	}
	return nil
}

// close drops the pidfd and any signal still waiting.
func (c *commandHandle) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.pidfd != nil {
		c.pidfd.Close()
		c.pidfd = nil
	}
	c.pending = nil
}

// connectStdio makes the pipes of the init's stdio, and the readers of its
// output, unless the command gets a terminal.
func (s *supervisor) connectStdio(cmd *initStart, childEnds *[]*os.File) error {
	fail := func(err error) error {
		return &SetupError{Step: "start", Err: err}
	}
	if !s.job.TTY {
		for _, out := range []struct {
			set  func(*os.File)
			sink **Capture
		}{
			{func(f *os.File) { cmd.stdout = f }, &s.stdout},
			{func(f *os.File) { cmd.stderr = f }, &s.stderr},
		} {
			r, w, err := os.Pipe()
			if err != nil {
				return fail(err)
			}
			out.set(w)
			*childEnds = append(*childEnds, w)
			s.copies.Add(1)
			go func(r *os.File, sink **Capture) {
				defer s.copies.Done()
				defer r.Close()
				// Nothing is written before the command runs, and its
				// sink is known only then.
				<-s.handout
				_, _ = io.Copy(*sink, r)
			}(r, out.sink)
		}
		stdin, err := s.stdinFor()
		if err != nil {
			return err
		}
		if stdin != nil {
			cmd.stdin = stdin
			if _, passed := s.job.Stdin.(*os.File); !passed || stdin != s.job.Stdin {
				*childEnds = append(*childEnds, stdin)
			}
		}
	}
	return nil
}

// stdinFor returns the file the init gets as stdin: a pipe that jail
// copies the caller's stdin into. The caller's own descriptor is never
// handed over (a sandbox could write back into a file through it, fchdir
// to a directory and walk the host's tree, or reopen a pipe's other end
// through /proc), except /dev/null, which reaches nothing; a terminal is
// never (TIOCSTI), and a directory is refused.
func (s *supervisor) stdinFor() (*os.File, error) {
	if s.job.Stdin == nil {
		return nil, nil
	}
	if f, ok := s.job.Stdin.(*os.File); ok {
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			return nil, &SetupError{Step: "stdin", Err: err}
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFDIR:
			return nil, &SetupError{Step: "stdin", Err: errors.New("is a directory"), Refused: true}
		case st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == unix.Mkdev(1, 3):
			return f, nil
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, &SetupError{Step: "stdin", Err: err}
	}
	in := s.job.Stdin
	go func() {
		defer w.Close()
		_, _ = io.Copy(w, in)
	}()
	return r, nil
}

// attachTerminal connects the command's terminal to the caller's streams.
func (s *supervisor) attachTerminal(master *os.File) {
	s.masterMu.Lock()
	s.master = master
	s.masterMu.Unlock()
	if s.job.Stdin != nil {
		go func() { _, _ = io.Copy(master, s.job.Stdin) }()
	}
	s.copies.Add(1)
	go func() {
		defer s.copies.Done()
		// Reading the master fails with EIO once the last process holding
		// the terminal is gone: that is the end of the output.
		_, _ = io.Copy(s.stdout, master)
	}()
}

func (s *supervisor) resize(size WindowSize) {
	s.masterMu.Lock()
	defer s.masterMu.Unlock()
	if s.master != nil {
		_ = unix.IoctlSetWinsize(int(s.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols})
	}
}

// Capture streams output to a writer and, when asked, keeps up to limit
// bytes of it (a run's, and an exec's into a persistent sandbox).
type Capture struct {
	w         io.Writer
	keep      bool
	limit     int64
	buf       []byte
	truncated bool
}

func NewCapture(w io.Writer, keep bool, limit int64) *Capture {
	return &Capture{w: w, keep: keep, limit: limit}
}

func (c *Capture) Write(p []byte) (int, error) {
	if c.keep {
		room := c.limit - int64(len(c.buf))
		switch {
		case room >= int64(len(p)):
			c.buf = append(c.buf, p...)
		case room > 0:
			c.buf = append(c.buf, p[:room]...)
			c.truncated = true
		default:
			c.truncated = true
		}
	}
	if c.w != nil {
		// A writer that fails must not stop the draining of the pipe, or
		// the command would block on a full pipe.
		if _, err := c.w.Write(p); err != nil {
			c.w = nil
		}
	}
	return len(p), nil
}

func (c *Capture) String() string { return string(c.buf) }

// Truncated reports whether output past the limit was dropped.
func (c *Capture) Truncated() bool { return c.truncated }
