//go:build linux

package jail

import (
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/sandboxlog"
	"github.com/jail-sandbox/jail/internal/secrets"
	"github.com/jail-sandbox/jail/internal/supervisor"
)

// drainAfterExit is how long the output of an exec is still read once its
// command has exited while something it left running holds the output
// open: what the command wrote before its exit is in the pipe by then,
// and an exec must not wait for a background process it started.
const drainAfterExit = 20 * time.Millisecond

// maxDrain bounds the drain of an output that a process left running
// keeps writing to.
const maxDrain = 500 * time.Millisecond

// execIO is the stdio of one exec into a persistent sandbox: pipes made
// here (the caller's own descriptors never reach the sandbox, as for
// jail run), copied to the Process's writers and kept up to a limit with
// Capture, or a terminal whose master the init sends back.
type execIO struct {
	p      *Process
	stdout *supervisor.Capture
	stderr *supervisor.Capture
	// child holds the sandbox's ends until the init has them.
	child    []*os.File
	childMu  sync.Mutex
	readEnds []*os.File
	copies   sync.WaitGroup
	exited   atomic.Bool
	exitedAt atomic.Int64
	// stdinW is the write end of the stdin pipe, closed at the end.
	stdinW *os.File
	master *os.File
	// sinks are where each stream's copy writes, in the order of
	// outputs: its secrets' redaction first, then the stream and the
	// sandbox's log; flushed and closed by wait.
	sinks   []io.Writer
	closers []io.Closer
	values  secrets.Values
	log     *sandboxlog.Log
}

// newExecIO makes the stdio of p: its output, with every exact
// occurrence of a secret's value replaced by [secret:NAME], goes to its
// writers, is kept with Capture, and is appended to log (nil: none) line
// by line.
func newExecIO(p *Process, limit int64, values secrets.Values, log *sandboxlog.Log) *execIO {
	x := &execIO{
		p:      p,
		stdout: supervisor.NewCapture(p.Stdout, p.Capture, limit),
		stderr: supervisor.NewCapture(p.Stderr, p.Capture, limit),
		values: values,
		log:    log,
	}
	return x
}

// sink is what the copy of out writes to.
func (x *execIO) sink(out *supervisor.Capture) io.Writer {
	var w io.Writer = out
	if x.log != nil {
		line := x.log.Line()
		x.closers = append(x.closers, line)
		w = io.MultiWriter(out, line)
	}
	if x.values.Len() > 0 {
		r := secrets.NewRedactor(w, x.values)
		// Flushed before the line writers close, which come later.
		x.closers = append([]io.Closer{r}, x.closers...)
		w = r
	}
	return w
}

// pipes makes the command's stdin, stdout and stderr and starts their
// copies.
func (x *execIO) pipes(req *supervisor.ExecRequest) error {
	var stdin *os.File
	if x.p.Stdin == nil {
		null, err := os.Open(os.DevNull)
		if err != nil {
			return err
		}
		stdin = null
	} else {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		stdin, x.stdinW = r, w
		go func() {
			_, _ = io.Copy(w, x.p.Stdin)
			w.Close()
		}()
	}
	x.child = append(x.child, stdin)
	for _, out := range []*supervisor.Capture{x.stdout, x.stderr} {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		x.child = append(x.child, w)
		x.readEnds = append(x.readEnds, r)
		x.copy(x.sink(out), r)
	}
	req.Stdin, req.Stdout, req.Stderr = x.child[0], x.child[1], x.child[2]
	req.Started = func(master *os.File) {
		if master != nil {
			master.Close()
		}
		x.closeChild()
	}
	return nil
}

// copy copies r to out until its end, or, once the command has exited,
// until nothing more comes for drainAfterExit.
func (x *execIO) copy(out io.Writer, r *os.File) {
	x.copies.Add(1)
	go func() {
		defer x.copies.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				_, _ = out.Write(buf[:n])
				// A process left running that keeps writing gets
				// drainAfterExit more each time, up to maxDrain.
				if x.exited.Load() && time.Since(time.Unix(0, x.exitedAt.Load())) < maxDrain {
					_ = r.SetReadDeadline(time.Now().Add(drainAfterExit))
				}
			}
			if err != nil {
				return
			}
		}
	}()
}

// terminal takes the master of the command's terminal: the caller's stdin
// goes to it, its output to Stdout.
func (x *execIO) terminal(master *os.File) {
	if master == nil {
		return
	}
	// Pollable, for the drain's deadline.
	fd, err := unix.FcntlInt(master.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	master.Close()
	if err != nil {
		return
	}
	_ = unix.SetNonblock(fd, true)
	m := os.NewFile(uintptr(fd), "terminal")
	x.childMu.Lock()
	x.master = m
	x.childMu.Unlock()
	if x.p.WindowSize != nil {
		_ = unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: x.p.WindowSize.Rows, Col: x.p.WindowSize.Cols})
	}
	if x.p.Stdin != nil {
		go func() { _, _ = io.Copy(m, x.p.Stdin) }()
	}
	if x.p.Resize != nil {
		go func() {
			for size := range x.p.Resize {
				x.childMu.Lock()
				if x.master != nil {
					_ = unix.IoctlSetWinsize(int(x.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols})
				}
				x.childMu.Unlock()
			}
		}()
	}
	x.readEnds = append(x.readEnds, m)
	x.copy(x.sink(x.stdout), m)
}

func (x *execIO) closeChild() {
	x.childMu.Lock()
	defer x.childMu.Unlock()
	for _, f := range x.child {
		f.Close()
	}
	x.child = nil
}

// wait returns once the output has been copied: to its end, or what came
// until drainAfterExit after the command's exit.
func (x *execIO) wait() {
	x.closeChild()
	x.exitedAt.Store(time.Now().UnixNano())
	x.exited.Store(true)
	for _, r := range x.readEnds {
		_ = r.SetReadDeadline(time.Now().Add(drainAfterExit))
	}
	x.copies.Wait()
	for _, c := range x.closers {
		_ = c.Close()
	}
	x.closers = nil
}

// close lets go of everything.
func (x *execIO) close() {
	x.closeChild()
	if x.stdinW != nil {
		x.stdinW.Close()
	}
	x.childMu.Lock()
	for _, r := range x.readEnds {
		r.Close()
	}
	x.readEnds, x.master = nil, nil
	x.childMu.Unlock()
}

// fill puts the kept output into res.
func (x *execIO) fill(res *Result) {
	if x.p.Capture {
		res.Stdout, res.Stderr = x.stdout.String(), x.stderr.String()
		res.Truncated = x.stdout.Truncated() || x.stderr.Truncated()
	}
}
