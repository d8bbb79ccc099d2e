package supervisor

import (
	"errors"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/forker"
	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/internal/spawn"
)

// initProcess is a sandbox's init as its supervisor sees it: a child of the
// supervisor, or of its pool's forker.
type initProcess interface {
	pid() int
	signal(sig syscall.Signal) error
	// wait returns once the init is reaped, with its resource usage when
	// known.
	wait() (*syscall.Rusage, error)
	// gone reports whether the init is known to have ended, which a
	// forker tells a moment before wait returns.
	gone() bool
}

// childInit is an init the supervisor started itself (package spawn).
// pidfd, when the kernel gave one, is non-blocking: Go's poller waits for
// the init's end (a pidfd turns readable then) rather than a thread blocked
// in wait4, and signals go through it, so that none can reach another
// process that took the pid once the init is reaped.
type childInit struct {
	id    int
	pidfd *os.File

	mu     sync.Mutex
	reaped bool
}

func (c *childInit) pid() int { return c.id }

func (c *childInit) signal(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reaped {
		return os.ErrProcessDone
	}
	if c.pidfd == nil {
		return syscall.Kill(c.id, sig)
	}
	return spawn.Signal(c.pidfd, sig)
}

func (c *childInit) gone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reaped
}

func (c *childInit) wait() (*syscall.Rusage, error) {
	if c.pidfd != nil {
		if raw, err := c.pidfd.SyscallConn(); err == nil {
			_ = raw.Read(func(fd uintptr) bool {
				var info unix.Siginfo
				err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
				// Not exited yet: the kernel reports no signal.
				return err != nil || info.Signo != 0
			})
		}
	}
	usage, err := spawn.Wait(c.id)
	c.mu.Lock()
	c.reaped = true
	if c.pidfd != nil {
		c.pidfd.Close()
	}
	c.mu.Unlock()
	return usage, err
}

// forkedInit is an init that the pool's forker started.
type forkedInit struct{ child *forker.Child }

func (f forkedInit) pid() int { return f.child.Pid }

func (f forkedInit) signal(sig syscall.Signal) error { return f.child.Signal(sig) }

func (f forkedInit) gone() bool { return f.child.Exited() }

func (f forkedInit) wait() (*syscall.Rusage, error) {
	code, sig, err := f.child.Wait()
	if err != nil {
		return nil, err
	}
	return nil, spawn.StatusError(code, syscall.Signal(sig))
}

// startInit starts the init in its new namespaces with its stdio and its end
// of the control socket. On return, only the supervisor's ends of the pipes
// remain open here.
func (s *supervisor) startInit(initEnd *os.File) error {
	defer initEnd.Close()

	extra := append([]*os.File{initEnd}, s.plan.Files...)
	if err := s.openInit(); err != nil {
		return &SetupError{Step: "start", Err: err}
	}
	path, err := s.program.PathFor(len(extra))
	if err != nil {
		return &SetupError{Step: "start", Err: err}
	}
	// The init is started before its ids are mapped, which are written
	// once it runs, unless that cannot be set up.
	attr, err := s.plan.Identity.UnmappedSysProcAttr()
	s.unmapped = err == nil
	if !s.unmapped {
		if s.plan.Identity.SubIDs {
			// Only the helpers can map subordinate ids, once it runs.
			return &SetupError{Step: "start", Err: err}
		}
		attr = s.plan.Identity.SysProcAttr()
	}
	cmd := &initStart{
		path:  path,
		args:  []string{programs.InitArg},
		extra: extra,
		attr:  attr,
	}
	// The child's ends of the stdio pipes are closed here once it has
	// them, so EOF on ours means every process in the sandbox is gone.
	var childEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			f.Close()
		}
	}()
	if err := s.connectStdio(cmd, &childEnds); err != nil {
		return err
	}
	if s.lateEntry() {
		// Its cgroup namespace is made once it is in its cgroup, so that
		// the namespace is rooted there.
		cmd.attr.Cloneflags &^= syscall.CLONE_NEWCGROUP
	}
	if err := s.startInitCmd(cmd); err != nil {
		return err
	}
	if s.unmapped {
		if err := s.plan.Identity.MapIDs(s.init.pid()); err != nil {
			return s.abandonInit(&SetupError{Step: "start", Err: err})
		}
	}
	return nil
}

// openInit opens what the init runs: the helper program.
func (s *supervisor) openInit() error {
	p, err := s.source.Open(programs.Helper)
	s.program = p
	return err
}

// initStart describes the start of an init (with an empty environment):
// its program, arguments, its stdio (nil: /dev/null), the files it gets from
// descriptor 3 on, and its clone attributes.
type initStart struct {
	path                  string
	args                  []string
	stdin, stdout, stderr *os.File
	extra                 []*os.File
	attr                  *syscall.SysProcAttr
}

// startInitCmd starts the init that cmd describes: from here, by the pool's
// forker, or here through the cgroup's manager.
func (s *supervisor) startInitCmd(cmd *initStart) error {
	if s.byForker {
		return s.startForked(cmd)
	}
	pidfd := -1
	cmd.attr.PidFD = &pidfd
	start := func() error {
		files := append([]*os.File{cmd.stdin, cmd.stdout, cmd.stderr}, cmd.extra...)
		pid, err := spawn.StartAs(s.plan.Identity.Creator(), cmd.path, cmd.args, nil, files, cmd.attr)
		if err != nil {
			return &SetupError{Step: "start", Err: err}
		}
		init := &childInit{id: pid}
		if pidfd >= 0 {
			if unix.SetNonblock(pidfd, true) == nil {
				init.pidfd = os.NewFile(uintptr(pidfd), "init-pidfd")
			} else {
				unix.Close(pidfd)
			}
		}
		s.init = init
		return nil
	}
	if s.cgroup == nil {
		return start()
	}
	// The init is born in its cgroup, never attached later: the command
	// can never run outside it.
	if err := s.cgroup.Start(cmd.attr, start, s.reaped); err != nil {
		if s.init != nil {
			_ = s.abandonInit(nil)
		}
		var se *SetupError
		if errors.As(err, &se) {
			return err
		}
		return &SetupError{Step: "cgroup", Err: err}
	}
	return nil
}

// startForked has the pool's forker start cmd in the sandbox's cgroup.
func (s *supervisor) startForked(cmd *initStart) error {
	fail := func(step string, err error) error {
		return &SetupError{Step: step, Err: err}
	}
	// The forker executes the init from the descriptor sent with the
	// spawn (checked by programs.Open).
	sp, err := forker.SpawnOf(cmd.path, cmd.args, nil, cmd.attr)
	if err != nil {
		return fail("start", err)
	}
	sp.Owner = s.plan.Identity.Creator()
	program := s.program.File()
	sp.Program = program != nil
	var files []*os.File
	for _, std := range []struct {
		f   *os.File
		set *bool
	}{{cmd.stdin, &sp.Stdin}, {cmd.stdout, &sp.Stdout}, {cmd.stderr, &sp.Stderr}} {
		if std.f != nil {
			files = append(files, std.f)
			*std.set = true
		}
	}
	files = append(files, cmd.extra...)
	if s.cgroup != nil {
		place, err := s.cgroup.Placement()
		if err != nil {
			return fail("cgroup", err)
		}
		sp.CgroupEnter, sp.CgroupLeave = place.Enter, place.Leave
		if place.Dir != nil {
			defer place.Dir.Close()
			files = append(files, place.Dir)
			sp.CgroupDir = true
		}
	}
	if sp.Program {
		files = append(files, program)
	}
	child, err := s.forker.Spawn(sp, files)
	if err != nil {
		return fail("start", err)
	}
	s.init = forkedInit{child}
	return nil
}
