package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/api"
	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/control"
)

// Client is a connection of its own to a persistent sandbox's init, which
// the sandbox's monitor attached (docs/persistent.md): the process that
// holds it runs commands in the sandbox, asks its status, signals or ends
// it. Exec ids are the client's own; the init names to it only its own
// commands. Closing the client (or its process's end) kills the commands
// it started that still run. Its methods may be called from several
// goroutines.
type Client struct {
	conn    *control.Conn
	sending sync.Mutex
	execs   *execReplies
	// asking serialises status requests; statuses takes their answers.
	asking   sync.Mutex
	statuses chan control.Message
	// gone is closed once the connection has ended.
	gone      chan struct{}
	closeOnce sync.Once
	// monitor is a pidfd of the sandbox's monitor (nil: none known), for
	// a removal the sandbox does not answer.
	monitor *os.File
	// refusal is why the init refused the connection, if it did.
	refusal atomic.Pointer[SetupError]
}

// ErrSandboxGone: the sandbox's monitor or init is gone (or went away
// during the request).
var ErrSandboxGone = errors.New("the sandbox is not running")

// ErrNoControlSocket: the sandbox has no control socket (Dial's ENOENT):
// gone, or still being made, which only its lock tells apart. It is an
// ErrSandboxGone.
var ErrNoControlSocket = fmt.Errorf("no control socket: %w", ErrSandboxGone)

// MonitorRefusal: the sandbox's monitor is alive but could not hand its
// init a connection for this client, for Reason (the kernel refused to
// pass the descriptor: ETOOMANYREFS when the monitor's user has too many
// descriptors in flight, which a rootless sandbox's processes can cause).
// It holds a pidfd of the monitor, for a removal by force; Close lets go
// of it.
type MonitorRefusal struct {
	Reason  string
	monitor *os.File
}

func (e *MonitorRefusal) Error() string { return e.Reason }

// KillMonitor SIGKILLs the monitor that refused (see Client.KillMonitor).
func (e *MonitorRefusal) KillMonitor() error {
	if e.monitor == nil {
		return errors.New("the monitor is not known")
	}
	return unix.PidfdSendSignal(int(e.monitor.Fd()), unix.SIGKILL, nil, 0)
}

// Close lets go of the monitor's pidfd.
func (e *MonitorRefusal) Close() {
	if e.monitor != nil {
		e.monitor.Close()
	}
}

// Dial connects to the monitor listening at ctl.sock in the sandbox's
// state directory dir (reached through the descriptor, so that the path is
// never looked up again) and returns the connection it attached.
func Dial(dir *os.File) (*Client, error) {
	sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("connect to the sandbox: %w", err)
	}
	addr := &unix.SockaddrUnix{Name: filepath.Join("/proc/self/fd", strconv.Itoa(int(dir.Fd())), "ctl.sock")}
	err = unix.Connect(sock, addr)
	if err != nil {
		unix.Close(sock)
		if errors.Is(err, unix.ENOENT) {
			return nil, ErrNoControlSocket
		}
		if errors.Is(err, unix.ECONNREFUSED) {
			return nil, ErrSandboxGone
		}
		return nil, fmt.Errorf("connect to the sandbox: %w", err)
	}
	// The monitor's one message: the attached connection.
	if err := unix.SetNonblock(sock, true); err != nil {
		unix.Close(sock)
		return nil, err
	}
	first := control.FromFD(sock)
	first.LimitReceive(control.MaxReport)
	msg, files, err := first.Recv()
	// The monitor, named once it has answered: by the pidfd the kernel
	// keeps of the listener's process (SO_PEERPIDFD, Linux 6.5), else by
	// its pid, opened while its answer shows it alive.
	var monitor *os.File
	if raw, rerr := first.File().SyscallConn(); err == nil && rerr == nil {
		_ = raw.Control(func(fd uintptr) {
			if pidfd, perr := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD); perr == nil && pidfd >= 0 {
				monitor = os.NewFile(uintptr(pidfd), "monitor-pidfd")
				return
			}
			if cred, perr := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); perr == nil && cred.Pid > 0 {
				if pidfd, perr := unix.PidfdOpen(int(cred.Pid), 0); perr == nil {
					monitor = os.NewFile(uintptr(pidfd), "monitor-pidfd")
				}
			}
		})
	}
	first.Close()
	if err != nil || msg.Kind != "attached" || len(files) != 1 {
		for _, f := range files {
			f.Close()
		}
		if err == nil && msg.Kind == control.KindError && msg.Step == "connect" && msg.Reason != "" {
			return nil, &MonitorRefusal{Reason: msg.Reason, monitor: monitor}
		}
		if monitor != nil {
			monitor.Close()
		}
		return nil, ErrSandboxGone
	}
	fd, err := unix.FcntlInt(files[0].Fd(), unix.F_DUPFD_CLOEXEC, 3)
	files[0].Close()
	if err != nil {
		return nil, fmt.Errorf("connect to the sandbox: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	conn := control.FromFD(fd)
	conn.LimitReceive(control.MaxReport)
	c := &Client{
		monitor:  monitor,
		conn:     conn,
		execs:    &execReplies{waiting: map[uint64]chan execReply{}},
		statuses: make(chan control.Message, 1),
		gone:     make(chan struct{}),
	}
	go c.read()
	return c, nil
}

// read routes the init's reports: those about a command to its Exec, a
// status to the Status that asked.
func (c *Client) read() {
	defer close(c.gone)
	for {
		msg, files, err := c.conn.Recv()
		if err != nil {
			return
		}
		if msg.Exec != 0 {
			c.execs.deliver(msg, files)
			continue
		}
		for _, f := range files {
			f.Close()
		}
		if msg.Kind == control.KindError && msg.Step == "connect" {
			// The init refused the connection; it closes it next.
			c.refusal.Store(&SetupError{Step: "connect", Err: errors.New(msg.Reason)})
			continue
		}
		if msg.Kind == control.KindStatus {
			select {
			case c.statuses <- msg:
			default: // not asked for
			}
		}
	}
}

func (c *Client) send(msg control.Message, files ...*os.File) error {
	c.sending.Lock()
	defer c.sending.Unlock()
	if err := c.conn.Send(msg, files...); err != nil {
		return c.goneError()
	}
	return nil
}

// goneError is why the connection ended: the init's refusal, or
// ErrSandboxGone.
func (c *Client) goneError() error {
	// A send fails as soon as the init has closed its end; its refusal,
	// sent before, is read a moment later.
	select {
	case <-c.gone:
		if r := c.refusal.Load(); r != nil {
			return r
		}
	case <-time.After(time.Second):
	}
	return ErrSandboxGone
}

// Close ends the connection: the commands it started that still run are
// killed by the init.
func (c *Client) Close() {
	c.closeOnce.Do(func() {
		_ = c.conn.Hangup()
		<-c.gone
		c.conn.Close()
		if c.monitor != nil {
			c.monitor.Close()
		}
	})
}

// KillMonitor SIGKILLs the sandbox's monitor, for a sandbox that does not
// answer: its init's first connection hangs up, and its cgroup janitor
// kills whatever is left in the cgroup.
func (c *Client) KillMonitor() error {
	if c.monitor == nil {
		return errors.New("the monitor is not known")
	}
	return unix.PidfdSendSignal(int(c.monitor.Fd()), unix.SIGKILL, nil, 0)
}

// Gone is closed once the connection has ended (the sandbox, or its
// monitor, is gone, or Close was called).
func (c *Client) Gone() <-chan struct{} { return c.gone }

// Status is a persistent sandbox's state as its init tells it.
type Status struct {
	// Commands started on request that still run.
	Commands int
	// Others: a process other than the init is left.
	Others bool
	// Stopped: a stop marked it so, and no exec has run since.
	Stopped bool
	// Active: the last command's start or end (or the sandbox's ready).
	Active time.Time
	// Total counts the commands started so far.
	Total int64
}

// Status asks the init how the sandbox is.
func (c *Client) Status(ctx context.Context) (Status, error) {
	c.asking.Lock()
	defer c.asking.Unlock()
	if err := c.send(control.Message{Kind: control.KindStatus}); err != nil {
		return Status{}, err
	}
	select {
	case m := <-c.statuses:
		return Status{Commands: m.Commands, Others: m.Others, Stopped: m.Stopped, Active: control.Time(m.Active), Total: m.Total}, nil
	case <-c.gone:
		return Status{}, c.goneError()
	case <-ctx.Done():
		return Status{}, ctx.Err()
	}
}

// SignalAll sends sig (unless 0) to every process in the sandbox but its
// init, and sets its stopped mark to stopped (an exec clears it).
func (c *Client) SignalAll(sig unix.Signal, stopped bool) error {
	return c.send(control.Message{Kind: control.KindSignalAll, Signal: int(sig), Stopped: stopped})
}

// End kills everything in the sandbox and ends its init with status 0, on
// which its monitor removes the sandbox's state directory and ends.
func (c *Client) End() error {
	return c.send(control.Message{Kind: control.KindEnd})
}

// ExecRequest is one command for Client.Exec.
type ExecRequest struct {
	Process *config.Process
	// Stdin, Stdout and Stderr are sent to the command (the caller may
	// close them once Exec has returned); all nil with a terminal.
	Stdin, Stdout, Stderr *os.File
	// Started, when set, is called once the command runs, with its
	// terminal's master (nil without one), which it then owns.
	Started func(master *os.File)
	// Signals delivers signals for the command's process group.
	Signals <-chan os.Signal
}

// ExecStatus is how a command ended: Code as jail reports it (128+N for
// signal N), Signal, and its CPU time and peak memory (its own and its
// children's that it waited for).
type ExecStatus struct {
	Code, Signal int
	CPU          time.Duration
	MaxRSS       int64
	// Pid is the command's pid as this process sees it (read from the
	// pidfd the init sent), 0 when not known: the audit log's "exec".
	Pid int
}

// Exec runs req in the sandbox and returns how it ended. A command that
// cannot be started is an *ExecError (126, 127) or a *SetupError; when ctx
// is done the command's process group is killed and ctx.Err() returned
// with its status.
func (c *Client) Exec(ctx context.Context, req ExecRequest) (ExecStatus, error) {
	var files []*os.File
	if !req.Process.TTY {
		files = []*os.File{req.Stdin, req.Stdout, req.Stderr}
	}
	st, err := runExec(ctx, c.send, c.execs, c.gone, req, files)
	if err != nil && errors.Is(err, ErrSandboxGone) {
		// A refusal arrives before the connection's end: the reader
		// has it once the end is read.
		select {
		case <-c.gone:
		case <-time.After(time.Second):
		}
	}
	if r := c.refusal.Load(); r != nil && err != nil {
		return st, r
	}
	return st, err
}

// pidOfPidfd is the pid a pidfd names, as this process sees it (its
// fdinfo's Pid), or 0.
func pidOfPidfd(f *os.File) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", f.Fd()))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			if pid, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && pid > 0 {
				return pid
			}
		}
	}
	return 0
}

// runExec is one exec on a connection to an init: send sends a message
// on it, replies routes its reports, gone is closed when it ends.
func runExec(ctx context.Context, send func(control.Message, ...*os.File) error, replies *execReplies, gone <-chan struct{}, req ExecRequest, files []*os.File) (ExecStatus, error) {
	id, ch := replies.open()
	defer replies.forget(id)
	msg := control.Message{Kind: control.KindExec, Exec: id, Process: req.Process}
	if err := send(msg, files...); err != nil {
		return ExecStatus{Code: api.ExitSetup}, &SetupError{Step: "exec", Err: err}
	}
	var pidfd *os.File
	startedPid := 0
	defer func() {
		if pidfd != nil {
			pidfd.Close()
		}
	}()
	// killed: ctx ended, and the init was asked to kill the command's
	// process group, so that what the command started goes too. The init
	// reads the request after the exec's, so it also kills a command that
	// starts after the cancel; not the pidfd, since a command killed by it
	// could be reaped, and its group forgotten, before the init reads the
	// request.
	killed := false
	signalGroup := func(sig unix.Signal) {
		_ = send(control.Message{Kind: control.KindSignal, Exec: id, Signal: int(sig)})
	}
	done := ctx.Done()
	for {
		select {
		case r := <-ch:
			switch r.msg.Kind {
			case control.KindStarted:
				if len(r.files) > 0 {
					pidfd = r.files[0]
					startedPid = pidOfPidfd(pidfd)
				}
				var master *os.File
				if len(r.files) > 1 {
					master = r.files[1]
				}
				for _, f := range r.files[min(len(r.files), 2):] {
					f.Close()
				}
				if req.Started != nil {
					req.Started(master)
				} else if master != nil {
					master.Close()
				}
				continue
			case control.KindExit:
				st := ExecStatus{Code: r.msg.Code, Signal: r.msg.Signal, CPU: time.Duration(r.msg.CPU) * time.Microsecond, MaxRSS: r.msg.MaxRSS * 1024, Pid: startedPid}
				if killed {
					return st, ctx.Err()
				}
				return st, nil
			case control.KindExecError:
				return ExecStatus{Code: r.msg.Code}, &ExecError{Code: r.msg.Code, Reason: r.msg.Reason}
			case control.KindError:
				return ExecStatus{Code: api.ExitSetup}, &SetupError{Step: r.msg.Step, Err: errors.New(r.msg.Reason)}
			default:
				return ExecStatus{Code: api.ExitSetup}, &SetupError{Step: "exec", Err: fmt.Errorf("unexpected report %q", r.msg.Kind)}
			}
		case sig := <-req.Signals:
			if s, ok := sig.(unix.Signal); ok && s > 0 && s < 65 {
				signalGroup(s)
			}
		case <-done:
			done, killed = nil, true
			signalGroup(unix.SIGKILL)
		case <-gone:
			if len(ch) == 0 {
				return ExecStatus{Code: api.ExitSetup}, &SetupError{Step: "exec", Err: fmt.Errorf("it ended: %w", ErrSandboxGone)}
			}
			gone = nil
		}
	}
}
