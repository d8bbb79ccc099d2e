// Package control is the protocol between the supervisor and a sandbox's
// init over their private socketpair, and between a supervisor and its
// forker (package forker), which starts inits on its behalf.
//
// Messages are length-prefixed binary records on a SOCK_STREAM unix
// socket, encoded by code that ./gen generates from the types of a Message
// for both ends, this package's (wire_gen.go) and the C init's
// (internal/programs/init/wire.h); file descriptors (a pty master) travel
// as SCM_RIGHTS with the message header.
// The socket exists only between the two processes: the init marks it
// close-on-exec and is non-dumpable, so the sandboxed command can neither
// inherit it nor reach it through /proc.
package control

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/config"
)

// Message kinds. The supervisor sends KindConfig, then KindCgroup when the
// description says EnterCgroup (the v1 cgroup's tasks files attached, sent
// while the init builds the root), then KindRelease; the init answers with
// KindReady (built, waiting for the release) or KindError (setup failed),
// then KindExecError (the command could not be started) or KindStarted (the
// command's pidfd attached, then its terminal's master with a terminal),
// and finally KindExit.
const (
	KindConfig    = "config"
	KindCgroup    = "cgroup"
	KindRelease   = "release"
	KindReady     = "ready"
	KindError     = "error"
	KindExecError = "exec-error"
	KindStarted   = "started"
	KindExit      = "exit"
)

// Message kinds of a persistent sandbox (config.Init.Persistent), whose
// init serves commands once ready: KindExec (Exec, the request's id,
// non-zero and not reused; Process; stdin, stdout and stderr attached) is
// answered by KindStarted (Exec, Pid, the command's pidfd attached),
// KindExecError or KindError (Exec set: the exec failed, not the sandbox),
// and KindExit (Exec, Pid, Code, Signal) once that command is gone. Only
// the supervisor holds the socket; the commands never do. KindSignal (Exec,
// Signal, nothing attached) sends Signal to the process group of that
// command (it leads a session and a group of its own), so that what it
// started goes with it; a command already gone is not named any more, and
// the message is dropped unanswered.
const (
	KindExec   = "exec"
	KindSignal = "signal"
)

// More message kinds of a persistent sandbox. Its init serves several
// connections: the first (fd 3, its monitor's: docs/persistent.md) and
// one more for each KindAttach the monitor sends on the first (one socket
// attached, the init's end of a pair whose other end the monitor gives a
// client). Exec ids are per connection, and a connection's reports go to
// it alone; a KindSignal names only that connection's commands. When an
// attached connection hangs up, its running commands' process groups are
// killed; when the first does, everything is, and the init ends.
//
// On any connection: KindSignalAll (Signal, 0 to 64) sends Signal (unless
// 0) to every process in the sandbox but the init, and sets the sandbox's
// stopped mark to Stopped (an exec clears it); KindStatus is answered by
// KindStatus with Commands (the commands started on request still
// running, of every connection), Total (those started so far), Others
// (whether any process but the init is left), Stopped, and Active (Now of
// the last command's start or end, or of ready); KindEnd kills everything
// and ends the init with status 0 (Manager.Remove).
const (
	KindAttach    = "attach"
	KindSignalAll = "signal-all"
	KindStatus    = "status"
	KindEnd       = "end"
)

// Message kinds between a supervisor and its forker: KindSpawn (Spawn set,
// the child's files attached) is answered by KindSpawned (Pid, and the
// child's pidfd attached) or KindError; KindReaped (Pid, Code, Signal)
// follows once the child is gone.
const (
	KindSpawn   = "spawn"
	KindSpawned = "spawned"
	KindReaped  = "reaped"
)

// Message kinds of an OCI container (jail oci create, docs/oci.md), between
// jail oci and the helper's container role: KindContainer (Container set,
// the files its FD fields name attached) starts it. A container with a new
// user namespace reports KindUserns once it has made it, and waits for
// KindMapped, sent once the supervisor has written its id maps. The role
// then makes the rest and forks the container's init, reporting KindChild
// (Pid: the init's pid as the supervisor sees it); the init builds the
// root and reports KindCreated (its terminal's master attached, with a
// terminal) or KindError, and waits for the exec FIFO to be opened.
//
// KindEnter (Container set: Join, one entry whose FD is a pidfd of the
// container's init and whose Type is every namespace of it that differs
// from the caller's; Process; Seccomp) starts the helper's enter role,
// which joins them all at once, forks the process (jail oci exec) into the
// container, reports KindChild and ends; the process reports KindCreated
// (its terminal's master attached, with a terminal) and execs.
//
// A container with createContainer or startContainer hooks is sent
// KindState (State: the container's state, JSON) once the prestart and
// createRuntime hooks have run; its init waits for it before it runs the
// createContainer hooks and pivots into the root.
const (
	KindEnter     = "enter"
	KindContainer = "container"
	KindUserns    = "userns"
	KindMapped    = "mapped"
	KindChild     = "child"
	KindCreated   = "created"
	KindState     = "state"
)

// Message is one unit of the protocol. It and the types it holds are the
// protocol's one description: the Go and C ends (wire_gen.go, and the C
// init's internal/programs/init/wire.h) are generated from their fields, in
// declaration order, and their wire tags by go generate (./gen). MaxFiles,
// maxMessage and the version are gen's.
type Message struct {
	Kind string
	// Step and Reason describe a setup error: "jail: <step>: <reason>".
	Step   string
	Reason string
	// Code is the exit status (KindExit, KindExecError); Signal the signal
	// that killed the command, or 0.
	Code   int
	Signal int `wire:"min=0,max=128"`
	Pid    int `wire:"min=0"`
	// Running and Built, in a KindReady, are when the init's own code
	// began (its runtime and package initialisation done) and when its
	// root filesystem was built, as Now reads them. The benchmarks split
	// a start by them.
	Running, Built int64
	// Exec names a command of a persistent sandbox in KindExec and in
	// the init's reports about it; 0 in every other message.
	Exec uint64
	// CPU (microseconds, user and system) and MaxRSS (kilobytes) are a
	// command's own, in a persistent sandbox's KindExit: its rusage, and
	// its children's that it waited for.
	CPU, MaxRSS int64 `wire:"min=0"`
	// Commands, Others, Stopped and Active answer a KindStatus; Stopped
	// also asks for the mark in a KindSignalAll.
	Commands int `wire:"min=0,max=1048576"`
	Others   bool
	Stopped  bool
	Active   int64
	// Total, in a status, counts the commands started on request so far.
	Total  int64 `wire:"min=0"`
	Config *config.Init
	// Process, in a release, replaces Config.Process: the command of a
	// sandbox that was built before anyone asked for it (see jail.Pool).
	Process *config.Process
	// Spawn, in a KindSpawn, is the process the forker is to start.
	Spawn *Spawn
	// Container, in a KindContainer, is the OCI container to make.
	Container *config.Container
	// State, in a KindState, is the OCI state (JSON) the container's init
	// gives its hooks on stdin.
	State []byte
}

// Now is the time on the clock of the times an init reports:
// CLOCK_MONOTONIC in nanoseconds, which a pid or user namespace does not
// change.
func Now() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// Time turns a reading of Now, taken by any process, into a time.Time on
// this process's clock; zero stays zero.
func Time(now int64) time.Time {
	if now == 0 {
		return time.Time{}
	}
	return time.Now().Add(time.Duration(now - Now()))
}

// Spawn describes a process for the forker to start: what to execute, and
// the fields of syscall.SysProcAttr that jail uses. The files sent with it
// are, in order: stdin, stdout and stderr where set, the extra files (3, 4,
// ...), with CgroupDir the cgroup directory to clone into, and with
// Program the program to execute.
type Spawn struct {
	Path string
	Args []string
	Env  []string

	Stdin, Stdout, Stderr bool
	CgroupDir             bool
	// Program: the last file sent (after the cgroup directory) is what
	// the child executes, as its own /proc/self/fd/N, in place of Path:
	// a descriptor its sender checked, which no path can stand in for.
	Program bool

	Cloneflags  uint64
	UIDMap      []IDMap
	GIDMap      []IDMap
	Setgroups   bool
	Credential  bool
	UID, GID    uint32
	AmbientCaps []uint64 `wire:"max=63"`
	Setsid      bool
	Pdeathsig   int `wire:"min=0,max=64"`

	// CgroupEnter are the v1 tasks files the forking thread writes "0" to
	// before the fork, so that the child is born in the cgroup;
	// CgroupLeave those it writes after, to leave it.
	CgroupEnter []string
	CgroupLeave []string

	// Owner, when not -1, is the host uid that creates the child's user
	// namespace (spawn.StartAs).
	Owner int `wire:"min=-1,max=4294967295"`
}

// IDMap is one line of a uid or gid map.
type IDMap struct {
	ContainerID, HostID, Size int `wire:"min=0,max=4294967295"`
}

// MaxReport bounds a message that a supervisor accepts from an init or its
// forker (LimitReceive): their reports carry a step and a reason, which the
// C init builds in buffers of at most PATH_MAX+64 and 2*PATH_MAX+256 bytes,
// so a few KiB hold any honest one; only a config or a spawn, which go the
// other way, need maxMessage.
const MaxReport = 64 << 10

// Conn is one end of the control socket.
type Conn struct {
	file *os.File
	// limit bounds the body Recv accepts; 0 is maxMessage.
	limit uint32
}

// LimitReceive lowers the size of a message Recv accepts to max bytes (at
// most maxMessage), so that a peer that only reports cannot make this end
// allocate for a large message. It is set before the first Recv.
func (c *Conn) LimitReceive(max int) {
	if max > 0 && max < maxMessage {
		c.limit = uint32(max)
	}
}

// Pair returns the two connected ends: one for the supervisor, one to hand
// to the init as an inherited file. The supervisor's end is non-blocking, so
// that Go's poller waits on it rather than a thread of its own blocked in
// the kernel (each thread costs its creation and slows the exit); the
// init's blocks.
func Pair() (supervisor *Conn, init *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("control socketpair: %w", err)
	}
	if err := unix.SetNonblock(fds[1], false); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("control socketpair: %w", err)
	}
	return &Conn{file: os.NewFile(uintptr(fds[0]), "jail-control")}, os.NewFile(uintptr(fds[1]), "jail-control-init"), nil
}

// FromFD wraps an inherited control socket.
func FromFD(fd int) *Conn {
	return &Conn{file: os.NewFile(uintptr(fd), "jail-control")}
}

// Close closes this end.
func (c *Conn) Close() error { return c.file.Close() }

// File is the socket itself, for a process that hands it on (a persistent
// sandbox's holder to its monitor).
func (c *Conn) File() *os.File { return c.file }

// Hangup shuts the socket down both ways: the peer's reads end at once, and
// the descriptor stays open here until Close.
func (c *Conn) Hangup() error {
	raw, err := c.file.SyscallConn()
	if err != nil {
		return err
	}
	var shutErr error
	if err := raw.Control(func(fd uintptr) { shutErr = unix.Shutdown(int(fd), unix.SHUT_RDWR) }); err != nil {
		return err
	}
	return shutErr
}

// Send writes one message, with files passed as SCM_RIGHTS.
func (c *Conn) Send(m Message, files ...*os.File) error {
	body, err := encode(m)
	if err != nil {
		return fmt.Errorf("control: send %s: %w", m.Kind, err)
	}
	if len(body) > maxMessage {
		return fmt.Errorf("control: send %s: %d bytes, at most %d", m.Kind, len(body), maxMessage)
	}
	buf := make([]byte, 4+len(body))
	binary.LittleEndian.PutUint32(buf, uint32(len(body)))
	copy(buf[4:], body)
	var oob []byte
	if len(files) > MaxFiles {
		return fmt.Errorf("control: send %s: %d files, at most %d", m.Kind, len(files), MaxFiles)
	}
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	raw, err := c.file.SyscallConn()
	if err != nil {
		return err
	}
	var sendErr error
	// The first sendmsg carries the header and the descriptors; the rest
	// of a large body follows as plain writes.
	err = raw.Write(func(fd uintptr) bool {
		var n int
		n, sendErr = unix.SendmsgN(int(fd), buf, oob, nil, 0)
		if sendErr == unix.EAGAIN {
			return false
		}
		if sendErr == nil {
			buf = buf[n:]
		}
		return true
	})
	if err == nil {
		err = sendErr
	}
	if err == nil && len(buf) > 0 {
		_, err = c.file.Write(buf)
	}
	if err != nil {
		return fmt.Errorf("control: send %s: %w", m.Kind, err)
	}
	return nil
}

// Recv reads one message and any files that came with it. io.EOF means the
// peer closed the socket between messages.
func (c *Conn) Recv() (Message, []*os.File, error) {
	var m Message
	hdr := make([]byte, 4)
	oob := make([]byte, unix.CmsgSpace(4*MaxFiles))
	raw, err := c.file.SyscallConn()
	if err != nil {
		return m, nil, err
	}
	var n, oobn, flags int
	var recvErr error
	err = raw.Read(func(fd uintptr) bool {
		n, oobn, flags, _, recvErr = unix.Recvmsg(int(fd), hdr, oob, unix.MSG_CMSG_CLOEXEC)
		return recvErr != unix.EAGAIN
	})
	if err == nil {
		err = recvErr
	}
	if err != nil {
		return m, nil, fmt.Errorf("control: receive: %w", err)
	}
	if n == 0 {
		return m, nil, io.EOF
	}
	files, err := parseRights(oob[:oobn])
	if err != nil {
		return m, nil, err
	}
	if flags&unix.MSG_CTRUNC != 0 {
		// The kernel dropped what did not fit in oob: descriptors the
		// peer meant to pass are lost, so the message cannot be acted on.
		closeAll(files)
		return m, nil, fmt.Errorf("control: control message truncated: more than %d files, or other ancillary data", MaxFiles)
	}
	if n < 4 {
		if _, err := io.ReadFull(c.file, hdr[n:]); err != nil {
			closeAll(files)
			return m, nil, fmt.Errorf("control: short header: %w", err)
		}
	}
	size, limit := binary.LittleEndian.Uint32(hdr), uint32(maxMessage)
	if c.limit != 0 {
		limit = c.limit
	}
	if size > limit {
		closeAll(files)
		return m, nil, fmt.Errorf("control: message of %d bytes is too large (at most %d)", size, limit)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(c.file, body); err != nil {
		closeAll(files)
		return m, nil, fmt.Errorf("control: short message: %w", err)
	}
	m, err = decode(body)
	if err != nil {
		closeAll(files)
		return Message{}, nil, fmt.Errorf("control: decode: %w", err)
	}
	return m, files, nil
}

func parseRights(oob []byte) ([]*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("control: ancillary data: %w", err)
	}
	var files []*os.File
	for _, msg := range msgs {
		fds, err := unix.ParseUnixRights(&msg)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "jail-passed-fd"))
		}
	}
	return files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
