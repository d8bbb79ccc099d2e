// Package forker starts sandbox inits on behalf of a long-lived supervisor
// (a jail.Pool, and so `jail serve`) from a small process of its own.
//
// Starting an init needs a full fork of the process that starts it: Go
// forks without sharing memory (no vfork) whenever the child gets a new
// user namespace. A fork of the server write-protects its whole heap, and
// the server then takes a page fault, and every CPU a TLB flush, on each
// page it writes afterwards: about 3 ms of machine time per sandbox for an
// 8 MB heap, measured. The forker is the supervisor's binary re-executed
// (jail.Init runs Main), which touches a few hundred pages, so its forks
// cost a fraction of that.
//
// Invariants: the forker forks every child from its main thread, which
// lives as long as the forker, so a child's parent-death signal fires
// exactly when the forker ends; the forker ends when its supervisor closes
// the socket or dies, so no init outlives the supervisor that asked for it.
// On cgroup v1 the forking thread enters the child's cgroup before the
// fork and leaves it after, as the supervisor's own thread does for a cold
// start; on v2 the child is cloned into the cgroup's directory. The forker
// keeps no file it was sent once the child has it.
package forker

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/cgroups/cgroupfile"
	"github.com/jail-sandbox/jail/internal/control"
	"github.com/jail-sandbox/jail/internal/spawn"
)

// Arg is argv[0] of the forker process.
const Arg = "jail:forker"

// Forker is the supervisor's handle on its forker process.
type Forker struct {
	conn *control.Conn
	cmd  *exec.Cmd

	spawnMu sync.Mutex // one spawn at a time: replies come in order
	replies chan reply

	mu       sync.Mutex
	children map[int]*Child
	gone     error // set once the forker's socket is closed
	done     chan struct{}
}

type reply struct {
	msg   control.Message
	files []*os.File
	child *Child // of a KindSpawned, already registered
}

// Child is a process the forker started.
type Child struct {
	Pid    int
	pidfd  *os.File
	reaped chan struct{}
	code   int
	signal int
	err    error
}

// Start starts the forker from program (the running binary,
// /proc/self/exe, whose main calls jail.Init).
func Start(program string) (*Forker, error) {
	// Our end is non-blocking, so that Go's poller waits on it and Close
	// ends a read in progress; the forker's end blocks.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("forker: socketpair: %w", err)
	}
	if err := unix.SetNonblock(fds[1], false); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, fmt.Errorf("forker: socketpair: %w", err)
	}
	ours := control.FromFD(fds[0])
	// The forker only reports (spawned, reaped, an error).
	ours.LimitReceive(control.MaxReport)
	theirs := os.NewFile(uintptr(fds[1]), "jail-forker")
	defer theirs.Close()
	cmd := &exec.Cmd{
		Path:       program,
		Args:       []string{Arg},
		Env:        []string{},
		ExtraFiles: []*os.File{theirs},
		// Its own process group: a terminal's ^C to the supervisor must
		// not reach it and the sandboxes before the supervisor decides.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := cmd.Start(); err != nil {
		ours.Close()
		return nil, fmt.Errorf("forker: %w", err)
	}
	f := &Forker{conn: ours, cmd: cmd, replies: make(chan reply), children: map[int]*Child{}, done: make(chan struct{})}
	go f.read()
	return f, nil
}

// read dispatches what the forker says: replies to the spawn in progress,
// and the ends of children.
func (f *Forker) read() {
	defer close(f.done)
	for {
		msg, files, err := f.conn.Recv()
		if err != nil {
			f.mu.Lock()
			f.gone = fmt.Errorf("forker: gone: %w", err)
			for pid, c := range f.children {
				c.err = f.gone
				close(c.reaped)
				delete(f.children, pid)
			}
			f.mu.Unlock()
			close(f.replies)
			return
		}
		if msg.Kind == control.KindReaped {
			f.mu.Lock()
			if c := f.children[msg.Pid]; c != nil {
				c.code, c.signal = msg.Code, msg.Signal
				close(c.reaped)
				delete(f.children, msg.Pid)
			}
			f.mu.Unlock()
			for _, file := range files {
				file.Close()
			}
			continue
		}
		r := reply{msg: msg, files: files}
		if msg.Kind == control.KindSpawned && len(files) == 1 {
			// Registered before the next message is read, which may be
			// its end.
			r.child = &Child{Pid: msg.Pid, pidfd: files[0], reaped: make(chan struct{})}
			f.mu.Lock()
			f.children[msg.Pid] = r.child
			f.mu.Unlock()
		}
		f.replies <- r
	}
}

// Spawn starts a child as sp describes, with files (see control.Spawn for
// their order). The caller keeps its files; the forker's copies are closed
// once the child has them.
func (f *Forker) Spawn(sp control.Spawn, files []*os.File) (*Child, error) {
	f.spawnMu.Lock()
	defer f.spawnMu.Unlock()
	if err := f.conn.Send(control.Message{Kind: control.KindSpawn, Spawn: &sp}, files...); err != nil {
		return nil, fmt.Errorf("forker: %w", err)
	}
	r, ok := <-f.replies
	if !ok {
		f.mu.Lock()
		defer f.mu.Unlock()
		return nil, f.gone
	}
	if r.child == nil {
		for _, file := range r.files {
			file.Close()
		}
		if r.msg.Kind == control.KindError {
			return nil, errors.New(r.msg.Reason)
		}
		return nil, fmt.Errorf("forker: unexpected answer %q", r.msg.Kind)
	}
	return r.child, nil
}

// Err is why the forker can start no more children (it is gone), or nil.
func (f *Forker) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gone
}

// Signal sends sig to the child through its pidfd, which cannot reach
// another process that reused the pid. The descriptor is used under the
// file's own reference, so a concurrent Wait cannot close it, and its
// number be reused by another child's pidfd, mid-call.
func (c *Child) Signal(sig syscall.Signal) error {
	select {
	case <-c.reaped:
		return os.ErrProcessDone
	default:
	}
	return spawn.Signal(c.pidfd, sig)
}

// Wait waits for the child to end and returns its exit code, or the signal
// that killed it.
func (c *Child) Wait() (code, signal int, err error) {
	<-c.reaped
	c.pidfd.Close()
	return c.code, c.signal, c.err
}

// Exited reports whether the child is known to have ended: reaped, or gone
// with its forker (whose death its parent-death signal follows).
func (c *Child) Exited() bool {
	select {
	case <-c.reaped:
		return true
	default:
		return false
	}
}

// Kill kills the forker process outright (for tests of what survives it).
func (f *Forker) Kill() error { return f.cmd.Process.Kill() }

// Close ends the forker; children still running die with it (their
// parent-death signal), so callers end theirs first. A forker that had
// already gone (Err) is no error here: its owner went on without it.
func (f *Forker) Close() error {
	goneBefore := f.Err() != nil
	f.conn.Close()
	<-f.done
	err := f.cmd.Wait()
	if goneBefore {
		return nil
	}
	return err
}

// Main is the forker process: it serves spawns on descriptor 3 until the
// supervisor closes it, then exits, which kills every child it started
// that is still alive.
//
// It is one loop on one thread: poll the socket and the pidfds of the
// children, reap those that ended, serve the spawn that came. A goroutine
// per child blocked in wait would each hold a thread in the kernel, and
// every end would hand the one P between threads (measured: 0.1-0.2 ms of
// machine CPU per sandbox in thread switches).
func Main() {
	// Every fork happens on this thread, which ends only with the
	// process: a child's parent-death signal is bound to its forking
	// thread.
	runtime.LockOSThread()
	// One P: a second only woke idle threads (0.2-0.3 ms of machine CPU
	// per sandbox, measured when the forker still had goroutines).
	runtime.GOMAXPROCS(1)
	conn := control.FromFD(3)
	children := map[int]*child{} // by pidfd
	for {
		polled := []unix.PollFd{{Fd: 3, Events: unix.POLLIN}}
		for fd := range children {
			polled = append(polled, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		}
		if _, err := unix.Poll(polled, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			os.Exit(1)
		}
		for _, p := range polled[1:] {
			if p.Revents != 0 {
				c := children[int(p.Fd)]
				if m, ok := c.reap(); ok {
					delete(children, int(p.Fd))
					_ = conn.Send(m)
				}
			}
		}
		if polled[0].Revents == 0 {
			continue
		}
		msg, files, err := conn.Recv()
		if err != nil {
			if err == io.EOF {
				os.Exit(0)
			}
			os.Exit(1)
		}
		if msg.Kind != control.KindSpawn || msg.Spawn == nil {
			closeFiles(files)
			_ = conn.Send(control.Message{Kind: control.KindError, Reason: "forker: expected a spawn, got " + msg.Kind})
			continue
		}
		c, err := startChild(msg.Spawn, files)
		closeFiles(files)
		if err != nil {
			_ = conn.Send(control.Message{Kind: control.KindError, Reason: err.Error()})
			continue
		}
		children[int(c.pidfd.Fd())] = c
		_ = conn.Send(control.Message{Kind: control.KindSpawned, Pid: c.pid}, c.pidfd)
	}
}

// child is a process the forker started and has not reaped yet.
type child struct {
	pid   int
	pidfd *os.File // polled: readable once the child has ended
}

// reap collects the child's end, if it has ended, as the message that
// reports it.
func (c *child) reap() (control.Message, bool) {
	var status unix.WaitStatus
	pid, err := unix.Wait4(c.pid, &status, unix.WNOHANG, nil)
	if err == unix.EINTR || (err == nil && pid == 0) {
		return control.Message{}, false
	}
	c.pidfd.Close()
	m := control.Message{Kind: control.KindReaped, Pid: c.pid}
	switch {
	case err != nil:
		// Not ours to wait for any more: nothing else reaps here, so
		// this does not happen; report it as a kill rather than hang.
		m.Signal = int(unix.SIGKILL)
	case status.Signaled():
		m.Signal = int(status.Signal())
	default:
		m.Code = status.ExitStatus()
	}
	return m, true
}

// startChild starts the child sp describes with its pidfd.
func startChild(sp *control.Spawn, files []*os.File) (*child, error) {
	take := func(want bool) (*os.File, error) {
		if !want {
			return nil, nil // spawn.Start gives it /dev/null
		}
		if len(files) == 0 {
			return nil, errors.New("forker: fewer files than the spawn says")
		}
		f := files[0]
		files = files[1:]
		return f, nil
	}
	var childFiles []*os.File
	for _, want := range []bool{sp.Stdin, sp.Stdout, sp.Stderr} {
		f, err := take(want)
		if err != nil {
			return nil, err
		}
		childFiles = append(childFiles, f)
	}
	path := sp.Path
	if sp.Program {
		if len(files) == 0 {
			return nil, errors.New("forker: no program sent")
		}
		program := files[len(files)-1]
		files = files[:len(files)-1]
		// Above the descriptors the child's setup writes (0..n-1) and
		// passes through (n..2n-1), n its files.
		n := 3 + len(files)
		fd, err := unix.FcntlInt(program.Fd(), unix.F_DUPFD_CLOEXEC, 2*n)
		if err != nil {
			return nil, fmt.Errorf("forker: program descriptor: %w", err)
		}
		defer unix.Close(fd)
		path = fmt.Sprintf("/proc/self/fd/%d", fd)
	}
	attr := attrOf(sp)
	if sp.CgroupDir {
		if len(files) == 0 {
			return nil, errors.New("forker: no cgroup directory sent")
		}
		dir := files[len(files)-1]
		files = files[:len(files)-1]
		attr.UseCgroupFD, attr.CgroupFD = true, int(dir.Fd())
	}
	childFiles = append(childFiles, files...)
	pidfd := -1
	attr.PidFD = &pidfd
	env := sp.Env
	if env == nil {
		env = []string{}
	}
	for _, tasks := range sp.CgroupEnter {
		if err := cgroupfile.Write(tasks, "0"); err != nil {
			leave(sp.CgroupLeave)
			return nil, fmt.Errorf("cgroup: enter %s: %w", tasks, err)
		}
	}
	pid, err := spawn.StartAs(sp.Owner, path, sp.Args, env, childFiles, attr)
	if err != nil {
		leave(sp.CgroupLeave)
		return nil, err
	}
	c := &child{pid: pid, pidfd: os.NewFile(uintptr(pidfd), "pidfd")}
	if err := leave(sp.CgroupLeave); err != nil {
		// The child is born where it belongs, but this thread cannot
		// leave its cgroup: the next child would be born in the wrong
		// one. Refuse this one and stop.
		_ = unix.Kill(pid, unix.SIGKILL)
		var status unix.WaitStatus
		_, _ = unix.Wait4(pid, &status, 0, nil)
		c.pidfd.Close()
		return nil, err
	}
	return c, nil
}

func leave(tasks []string) error {
	var first error
	for _, t := range tasks {
		if err := cgroupfile.Write(t, "0"); err != nil && first == nil {
			first = fmt.Errorf("cgroup: leave %s: %w", t, err)
		}
	}
	return first
}

// attrOf is the SysProcAttr a spawn describes.
func attrOf(sp *control.Spawn) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{
		Cloneflags:                 uintptr(sp.Cloneflags),
		GidMappingsEnableSetgroups: sp.Setgroups,
		AmbientCaps:                uintptrs(sp.AmbientCaps),
		Setsid:                     sp.Setsid,
		Pdeathsig:                  syscall.Signal(sp.Pdeathsig),
	}
	attr.UidMappings = idMaps(sp.UIDMap)
	attr.GidMappings = idMaps(sp.GIDMap)
	if sp.Credential {
		attr.Credential = &syscall.Credential{Uid: sp.UID, Gid: sp.GID}
	}
	return attr
}

// SpawnOf describes the start of path with args, the environment env and
// attr for the forker. It refuses attributes the forker does not carry,
// rather than drop them.
func SpawnOf(path string, args, env []string, attr *syscall.SysProcAttr) (control.Spawn, error) {
	rest := *attr
	rest.Cloneflags, rest.UidMappings, rest.GidMappings, rest.GidMappingsEnableSetgroups = 0, nil, nil, false
	rest.Credential, rest.AmbientCaps, rest.Setsid, rest.Pdeathsig = nil, nil, false, 0
	if attr.Credential != nil && (len(attr.Credential.Groups) > 0 || attr.Credential.NoSetGroups) {
		return control.Spawn{}, errors.New("forker: supplementary groups are not carried")
	}
	if !isZero(&rest) {
		return control.Spawn{}, errors.New("forker: process attributes it cannot carry")
	}
	sp := control.Spawn{
		Path: path, Args: args, Env: env,
		Cloneflags: uint64(attr.Cloneflags),
		UIDMap:     mapsOf(attr.UidMappings), GIDMap: mapsOf(attr.GidMappings),
		Setgroups: attr.GidMappingsEnableSetgroups,
		Setsid:    attr.Setsid, Pdeathsig: int(attr.Pdeathsig),
		Owner: -1,
	}
	for _, c := range attr.AmbientCaps {
		sp.AmbientCaps = append(sp.AmbientCaps, uint64(c))
	}
	if c := attr.Credential; c != nil {
		sp.Credential, sp.UID, sp.GID = true, c.Uid, c.Gid
	}
	return sp, nil
}

func isZero(attr *syscall.SysProcAttr) bool {
	return reflect.DeepEqual(*attr, syscall.SysProcAttr{})
}

func mapsOf(m []syscall.SysProcIDMap) []control.IDMap {
	var out []control.IDMap
	for _, l := range m {
		out = append(out, control.IDMap{ContainerID: l.ContainerID, HostID: l.HostID, Size: l.Size})
	}
	return out
}

func idMaps(m []control.IDMap) []syscall.SysProcIDMap {
	var out []syscall.SysProcIDMap
	for _, l := range m {
		out = append(out, syscall.SysProcIDMap{ContainerID: l.ContainerID, HostID: l.HostID, Size: l.Size})
	}
	return out
}

func uintptrs(v []uint64) []uintptr {
	var out []uintptr
	for _, x := range v {
		out = append(out, uintptr(x))
	}
	return out
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
