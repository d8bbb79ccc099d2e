// Package forker starts sandbox inits on behalf of a long-lived supervisor
// (a jail.Pool, and so `jail serve`) from a small process of its own.
//
// Starting an init needs a full fork of the process that starts it: Go
// forks without sharing memory (no vfork) whenever the child gets a new
// user namespace. A fork of the server write-protects its whole heap, and
// the server then takes a page fault, and every CPU a TLB flush, on each
// page it writes afterwards: about 3 ms of machine time per sandbox for an
// 8 MB heap, measured. The forker is a stage program of a few hundred
// pages, so its forks cost a fraction of that.
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

// Start starts the forker from program (the stage program).
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
func Main() {
	// Every fork happens on this thread, which ends only with the
	// process: a child's parent-death signal is bound to its forking
	// thread.
	runtime.LockOSThread()
	// Its work is one spawn at a time: a second P only adds wake-ups of
	// idle threads (measured: 0.2-0.3 ms of machine CPU per sandbox).
	runtime.GOMAXPROCS(1)
	conn := control.FromFD(3)
	var sendMu sync.Mutex
	send := func(m control.Message, files ...*os.File) {
		sendMu.Lock()
		defer sendMu.Unlock()
		_ = conn.Send(m, files...)
	}
	for {
		msg, files, err := conn.Recv()
		if err != nil {
			if err == io.EOF {
				os.Exit(0)
			}
			os.Exit(1)
		}
		if msg.Kind != control.KindSpawn || msg.Spawn == nil {
			closeFiles(files)
			send(control.Message{Kind: control.KindError, Reason: "forker: expected a spawn, got " + msg.Kind})
			continue
		}
		cmd, pidfd, err := startChild(msg.Spawn, files)
		closeFiles(files)
		if err != nil {
			send(control.Message{Kind: control.KindError, Reason: err.Error()})
			continue
		}
		send(control.Message{Kind: control.KindSpawned, Pid: cmd.Process.Pid}, pidfd)
		pidfd.Close()
		go func() {
			_ = cmd.Wait()
			st := cmd.ProcessState.Sys().(syscall.WaitStatus)
			m := control.Message{Kind: control.KindReaped, Pid: cmd.Process.Pid, Code: st.ExitStatus()}
			if st.Signaled() {
				m.Signal = int(st.Signal())
			}
			send(m)
		}()
	}
}

// startChild starts the child sp describes and opens its pidfd.
func startChild(sp *control.Spawn, files []*os.File) (*exec.Cmd, *os.File, error) {
	env := sp.Env
	if env == nil {
		env = []string{}
	}
	cmd := &exec.Cmd{Path: sp.Path, Args: sp.Args, Env: env, SysProcAttr: attrOf(sp)}
	take := func(want bool) (*os.File, error) {
		if !want {
			return nil, nil
		}
		if len(files) == 0 {
			return nil, errors.New("forker: fewer files than the spawn says")
		}
		f := files[0]
		files = files[1:]
		return f, nil
	}
	var err error
	var stdin, stdout, stderr *os.File
	if stdin, err = take(sp.Stdin); err != nil {
		return nil, nil, err
	}
	if stdout, err = take(sp.Stdout); err != nil {
		return nil, nil, err
	}
	if stderr, err = take(sp.Stderr); err != nil {
		return nil, nil, err
	}
	// Only set when present: an *os.File typed nil in an io.Reader is not
	// nil, and exec.Cmd would fail on it.
	if stdin != nil {
		cmd.Stdin = stdin
	}
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if stderr != nil {
		cmd.Stderr = stderr
	}
	if sp.CgroupDir {
		if len(files) == 0 {
			return nil, nil, errors.New("forker: no cgroup directory sent")
		}
		dir := files[len(files)-1]
		files = files[:len(files)-1]
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(dir.Fd())
	}
	cmd.ExtraFiles = files
	for _, tasks := range sp.CgroupEnter {
		if err := cgroupfile.Write(tasks, "0"); err != nil {
			leave(sp.CgroupLeave)
			return nil, nil, fmt.Errorf("cgroup: enter %s: %w", tasks, err)
		}
	}
	err = cmd.Start()
	if lerr := leave(sp.CgroupLeave); err == nil && lerr != nil {
		// The child is born where it belongs, but this thread cannot
		// leave its cgroup: the next child would be born in the wrong
		// one. Refuse this one and stop.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, nil, lerr
	}
	if err != nil {
		return nil, nil, fmt.Errorf("start: %w", err)
	}
	fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, nil, fmt.Errorf("pidfd: %w", err)
	}
	return cmd, os.NewFile(uintptr(fd), "pidfd"), nil
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
