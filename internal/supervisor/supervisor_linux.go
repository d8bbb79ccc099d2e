package supervisor

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/api"
	"github.com/jail-sandbox/jail/cgroups"
	"github.com/jail-sandbox/jail/cgroups/cgroupfile"
	"github.com/jail-sandbox/jail/cgroups/janitor"
	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/control"
	"github.com/jail-sandbox/jail/internal/forker"
	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/internal/spawn"
)

// Run builds the sandbox p describes, runs job's command in it and tears it
// down (see jail.Run). It takes over p.
func Run(ctx context.Context, job *Job, p *Plan, t *Timings) (api.Result, error) {
	return newSupervisor(job, p, t).runCold(ctx)
}

// runCold builds the sandbox and runs the command of the plan in it.
func (s *supervisor) runCold(ctx context.Context) (api.Result, error) {
	if err := s.boot(); err != nil {
		s.close()
		return api.Result{ExitCode: api.ExitSetup}, err
	}
	return s.finish(ctx, s.job, nil)
}

func newSupervisor(job *Job, p *Plan, t *Timings) *supervisor {
	return &supervisor{job: job, plan: p, start: t.Start, times: t,
		reaped: make(chan struct{}), handout: make(chan struct{}), finished: make(chan struct{}),
		reports: make(chan report, 1), ready: make(chan struct{}), exitReport: make(chan report, 1), waited: make(chan error, 1)}
}

// supervisor is the host side of one running sandbox.
type supervisor struct {
	job   *Job
	plan  *Plan
	start time.Time

	conn *control.Conn
	init initProcess // set once the init is started
	// usage is the init's resource usage, when known, once reaped is
	// closed.
	usage    *syscall.Rusage
	stdout   *capture
	stderr   *capture
	copies   sync.WaitGroup
	masterMu sync.Mutex
	master   *os.File      // the command's terminal, with --tty
	command  commandHandle // signals the command, once it runs
	cgroup   cgroups.Manager
	// source is where the init and the janitor are opened from, once
	// for both.
	source  *programs.Source
	program *programs.Program  // what the init runs (openInit)
	janitor chan janitorHandle // yields the janitor, once started
	// cgroupName names the sandbox's cgroup before it is made, for its
	// janitor.
	cgroupName string
	// janitorState is what janitor yielded.
	janitorState *janitorHandle
	// leftToJanitor: the init was still exiting when the result was
	// ready, so the janitor removes the cgroup once it is gone.
	leftToJanitor bool
	reaped        chan struct{} // closed once the init is reaped
	times         *Timings      // when each step was reached

	// handout is closed when the sandbox gets the command it runs: from
	// then on s.job is the caller's and the output has its captures.
	handout chan struct{}
	// finished is closed when finish or discard is done with the sandbox.
	finished chan struct{}
	// watch, when set, is the janitor shared by the sandboxes of a Pool,
	// and forker the process that starts their inits; onDone is called
	// once nothing of the sandbox is left on the host.
	watch  *janitor.Watch
	forker *forker.Forker
	// spares, when set, are the cgroups of a Pool's ended sandboxes that
	// this one may take in place of a new one, and gives its own to.
	spares *spareCgroups
	// byForker: the forker starts this sandbox's init (decided in boot).
	byForker bool
	// unmapped: the init was started before its id maps were written
	// (namespaces.Identity.UnmappedSysProcAttr), which startInit then did.
	unmapped bool
	onDone   func()
	// What the background readers of the init yield (see boot).
	reports    chan report   // everything the init said, once it is done
	ready      chan struct{} // closed when the init waits for its command
	exitReport chan report   // its exit report, the moment it arrives
	waited     chan error    // its wait status, once reaped
}

// report is what the init said over the control socket.
type report struct {
	setupErr *SetupError
	execErr  *ExecError
	exited   bool
	code     int
	signal   int
}

// boot builds the sandbox up to the point where its init waits for the
// command: the cgroup, the init in its namespaces, and the readers of its
// reports and output. On error, close undoes what was done.
func (s *supervisor) boot() (err error) {
	defer func() {
		if err != nil {
			s.bootFailed()
		}
	}()
	conn, initEnd, err := control.Pair()
	if err != nil {
		return &SetupError{Step: "start", Err: err}
	}
	s.conn = conn
	s.source = programs.NewSource(s.plan.Users)
	s.startJanitor()
	// Who starts the init is decided once, here: the cgroup's entry
	// depends on it. A forker that is gone (killed, say) no longer serves;
	// nor can it be sent more files than a message carries (the init's
	// socket, the plan's files and stdio, for an image of many layers):
	// such inits are started from here.
	// Nor can it write maps of subordinate ids, which take the setuid
	// helpers.
	s.byForker = s.forker != nil && s.forker.Err() == nil && 1+len(s.plan.Files)+4 <= control.MaxFiles && !s.plan.Identity.SubIDs
	if s.lateEntry() {
		err = s.bootThenEnter(initEnd)
	} else {
		err = s.bootInCgroup(initEnd)
	}
	if err != nil {
		return err
	}

	go func() { s.reports <- s.listen() }()
	go func() {
		usage, err := s.init.wait()
		s.usage = usage
		close(s.reaped)
		s.waited <- err
	}()
	return nil
}

// bootFailed lets go what waits for a sandbox that boot gave up on. No init
// runs by then (none started, or abandonInit reaped it), so no one else
// closes reaped; yet the janitor's release of the cgroup, and the thread
// that started the init in it (cgroups.Manager.Start), wait for it. The
// readers of the output, started with the init, wait for the handout
// before they drain their pipes to the end.
func (s *supervisor) bootFailed() {
	close(s.reaped)
	s.handOutNothing()
}

// handOutNothing ends the wait of the output's readers of a sandbox that
// runs no command: they drain their pipes into nothing.
func (s *supervisor) handOutNothing() {
	s.stdout, s.stderr = newCapture(nil, false, 0), newCapture(nil, false, 0)
	close(s.handout)
}

// lateEntry reports whether the init starts before its cgroup exists and
// moves itself in once it does: on v1, for an init this process starts
// itself. A thread that moves itself into a v1 cgroup takes no lock, and
// making the cgroup (0.5 ms) then overlaps the init's start and its
// building of the root (bootThenEnter). On v2 the init
// is cloned into its cgroup, which must exist first; a pool's forker has
// its thread enter the cgroup to fork the init there.
func (s *supervisor) lateEntry() bool {
	return s.plan.Cgroup.Version == cgroups.V1 && !s.byForker
}

// bootInCgroup makes the cgroup, then starts the init inside it and sends
// the description, once the init's ids are mapped.
func (s *supervisor) bootInCgroup(initEnd *os.File) error {
	if err := s.createCgroup(); err != nil {
		initEnd.Close()
		return err
	}
	s.times.Cgroup = time.Now()
	if err := s.startInit(initEnd); err != nil {
		return err
	}
	s.times.InitStarted = time.Now()
	if err := s.conn.Send(control.Message{Kind: control.KindConfig, Config: s.initConfig()}); err != nil {
		return s.abandonInit(&SetupError{Step: "start", Err: err})
	}
	return nil
}

// initConfig is the description the init gets.
func (s *supervisor) initConfig() *config.Init {
	cfg := s.plan.Config
	cfg.TakeRoot = s.unmapped && s.plan.Identity.TakesRoot()
	return &cfg
}

// abandonInit kills and reaps an init that will not be used, and returns
// err.
func (s *supervisor) abandonInit(err error) error {
	_ = s.init.signal(syscall.SIGKILL)
	_, _ = s.init.wait()
	return err
}

// bootThenEnter starts the init and sends it the description at once, so
// that it builds the root filesystem while the cgroup is made here; then it
// sends the cgroup's tasks files. The init moves the thread that forks the
// command in once the root is built, before anything of the sandbox runs,
// and the command is released only after that.
func (s *supervisor) bootThenEnter(initEnd *os.File) error {
	if err := s.startInit(initEnd); err != nil {
		return err
	}
	s.times.InitStarted = time.Now()
	abandon := s.abandonInit
	cfg := s.initConfig()
	cfg.EnterCgroup = true
	if err := s.conn.Send(control.Message{Kind: control.KindConfig, Config: cfg}); err != nil {
		return abandon(&SetupError{Step: "start", Err: err})
	}
	if err := s.createCgroup(); err != nil {
		return abandon(err)
	}
	s.times.Cgroup = time.Now()
	// The init was started without a cgroup namespace, which it makes
	// once it is in its cgroup: there must be one to enter.
	if s.cgroup == nil {
		return abandon(&SetupError{Step: "cgroup", Err: errors.New("no cgroup was made")})
	}
	place, err := s.cgroup.Placement()
	if err != nil {
		return abandon(&SetupError{Step: "cgroup", Err: err})
	}
	var files []*os.File
	for _, path := range place.Enter {
		f, err := cgroupfile.OpenWrite(path)
		if err != nil {
			return abandon(&SetupError{Step: "cgroup", Err: err})
		}
		defer f.Close()
		files = append(files, f)
	}
	if err := s.conn.Send(control.Message{Kind: control.KindCgroup}, files...); err != nil {
		return abandon(&SetupError{Step: "start", Err: err})
	}
	return nil
}

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

// close releases what the supervisor holds on the host: the cgroup (or the
// janitor that removes it), the control socket, the program and the plan's
// files.
func (s *supervisor) close() {
	s.command.close()
	s.destroyCgroup()
	if s.conn != nil {
		s.conn.Close()
	}
	if s.program != nil {
		s.program.Close()
	}
	if s.source != nil {
		// Not before: the janitor was opened from it, in the background
		// (destroyCgroup waited for that).
		s.source.Close()
	}
	s.plan.Close()
}

// ended reports whether the init is gone, say killed while it waited in a
// pool.
func (s *supervisor) ended() bool {
	select {
	case <-s.reaped:
		return true
	default:
	}
	return s.init != nil && s.init.gone()
}

// discard ends a booted sandbox that never ran a command. The hangup ends
// an init that outlived its parent (a pool's forker) without the parent-death
// signal: it waits for its command on the socket.
func (s *supervisor) discard() {
	defer close(s.finished)
	_ = s.init.signal(syscall.SIGKILL)
	<-s.reaped
	_ = s.conn.Hangup()
	s.handOutNothing()
	s.copies.Wait()
	s.close()
}

// finish gives a booted sandbox its command (process, or the one in the
// plan when nil), waits for it to end and tears the sandbox down.
func (s *supervisor) finish(ctx context.Context, job *Job, process *config.Process) (api.Result, error) {
	defer close(s.finished)
	defer s.close()
	s.job = job
	if process != nil {
		// A sandbox from a pool: its time starts now.
		s.start = time.Now()
	}
	s.stdout = newCapture(s.job.Stdout, s.job.Capture, s.job.OutputLimit)
	s.stderr = newCapture(s.job.Stderr, s.job.Capture, s.job.OutputLimit)
	close(s.handout)

	// The init was born in its cgroup: the command may start as soon as
	// the init is ready.
	release := control.Message{Kind: control.KindRelease, Process: process}
	var files []*os.File
	if process != nil && s.job.Stdin != nil {
		stdin, err := s.stdinFor()
		if err != nil {
			_ = s.init.signal(syscall.SIGKILL)
		} else {
			files = append(files, stdin)
			if stdin != s.job.Stdin {
				defer stdin.Close()
			}
		}
	}
	if err := s.conn.Send(release, files...); err != nil {
		_ = s.init.signal(syscall.SIGKILL)
	}

	var timeout <-chan time.Time
	if s.job.Timeout > 0 {
		t := time.NewTimer(s.job.Timeout - time.Since(s.start))
		defer t.Stop()
		timeout = t.C
	}

	var timedOut, cancelled, early bool
	var waitErr error
	var rep report
wait:
	for {
		select {
		case waitErr = <-s.waited:
			break wait
		case rep = <-s.exitReport:
			// The init killed and reaped everything else before
			// reporting: only its own exit and the kernel's teardown of
			// the namespaces remain, and the janitor removes the cgroup
			// once the init is gone. The answer need not wait for that.
			if s.janitorStarted() && !timedOut && !cancelled {
				early = true
				break wait
			}
		case <-timeout:
			timedOut = true
			_ = s.init.signal(syscall.SIGKILL)
		case <-ctx.Done():
			cancelled = true
			_ = s.init.signal(syscall.SIGKILL)
		case sig := <-s.job.Signals:
			_ = s.signal(sig)
		case size := <-s.job.Resize:
			s.resize(size)
		}
	}
	if !early {
		rep = <-s.reports
	}
	s.leftToJanitor = early
	s.copies.Wait()

	res := api.Result{WallMS: time.Since(s.start).Milliseconds()}
	// After an early answer, the init is still being waited for (and its
	// state written) in the background: only the cgroup's counters count.
	// (s.usage is read only when the wait is over: after an early answer
	// the waiting goroutine may still be writing it.)
	if !early && s.usage != nil {
		ru := s.usage
		res.CPUMS = (ru.Utime.Nano() + ru.Stime.Nano()) / 1e6
		res.PeakMemoryBytes = ru.Maxrss * 1024
	}
	if s.cgroup != nil {
		if usage, err := s.cgroup.Usage(); err == nil {
			res.CPUMS = usage.CPU.Milliseconds()
			if usage.PeakMemory > 0 {
				res.PeakMemoryBytes = usage.PeakMemory
			}
			res.OOMKilled = usage.OOMKills > 0
		}
	}
	res.Stdout, res.Stderr = s.stdout.String(), s.stderr.String()
	res.Truncated = s.stdout.truncated || s.stderr.truncated

	switch {
	case rep.setupErr != nil:
		res.ExitCode = api.ExitSetup
		return res, rep.setupErr
	case rep.execErr != nil:
		res.ExitCode = rep.execErr.Code
		return res, rep.execErr
	case timedOut:
		res.TimedOut = true
		res.ExitCode = api.ExitTimeout
	case cancelled:
		res.ExitCode, res.Signal = 128+int(unix.SIGKILL), int(unix.SIGKILL)
		return res, ctx.Err()
	case rep.exited:
		res.ExitCode, res.Signal = rep.code, rep.signal
	case res.OOMKilled:
		// The OOM killer took the init itself: the sandbox died of it.
		res.ExitCode, res.Signal = 128+int(unix.SIGKILL), int(unix.SIGKILL)
	default:
		res.ExitCode = api.ExitSetup
		return res, &SetupError{Step: "init", Err: fmt.Errorf("ended before reporting: %v", waitErr)}
	}
	return res, nil
}

// startJanitor names the sandbox's cgroup and starts, in the background,
// the janitor that removes it (the helper program), unless a pool's
// janitor (s.watch) watches the sandbox. It starts as early as boot does,
// to overlap the init's start; createCgroup waits for it.
func (s *supervisor) startJanitor() {
	if s.plan.Cgroup.Version == cgroups.None || s.watch != nil {
		return
	}
	s.cgroupName = sandboxName()
	paths := cgroups.PathsFor(s.plan.Cgroup, s.cgroupName)
	started := make(chan janitorHandle, 1)
	s.janitor = started
	go func() { started <- ownJanitor(s.source, paths) }()
}

// ownJanitor starts a janitor of paths of a sandbox's own, from src. It
// returns once the janitor runs, in a session of its own (spawn.Start
// returns after the exec): from then on no kill of this process, or of its
// process group or session, leaves paths to nobody. A zero handle: none
// could be started.
func ownJanitor(src *programs.Source, paths []string) janitorHandle {
	p, err := src.Open(programs.Helper)
	if err != nil {
		return janitorHandle{}
	}
	defer p.Close()
	release, wait, err := janitor.Start(p.Path, paths)
	if err != nil {
		return janitorHandle{}
	}
	return janitorHandle{release: func(bool) { release.Close(); go wait() }}
}

// createCgroup makes the sandbox's cgroup, with a janitor that removes it
// even if this process is killed: the supervisor's shared one (s.watch) or
// one of its own (startJanitor). Nothing is made before that janitor knows
// the cgroup's name and runs, so that there is no moment at which this
// process can die leaving a cgroup nobody removes. (Only where no janitor
// could be started is it made all the same: a later janitor's sweep takes
// it then.)
func (s *supervisor) createCgroup() error {
	if s.plan.Cgroup.Version == cgroups.None {
		return nil
	}
	if s.janitor == nil {
		started := make(chan janitorHandle, 1)
		s.janitor = started
		if s.spares != nil {
			// Its janitor watches it still: it was never forgotten.
			if cg := s.spares.take(s.plan.Cgroup, s.plan.Limits); cg != nil {
				s.cgroup = cg
				started <- s.watched(cg.Paths())
				return nil
			}
		}
		s.cgroupName = sandboxName()
		paths := cgroups.PathsFor(s.plan.Cgroup, s.cgroupName)
		if s.watch != nil && s.watch.Add(paths) == nil {
			started <- s.watched(paths)
		} else {
			started <- ownJanitor(s.source, paths)
		}
	}
	s.janitorStarted()
	cg, err := cgroups.New(s.plan.Cgroup, s.cgroupName, s.plan.Limits)
	if err != nil {
		return &SetupError{Step: "cgroup", Err: err}
	}
	s.cgroup = cg
	return nil
}

// watched is the handle of a cgroup that s.watch knows: once the supervisor
// is done, the cgroup is removed here (after the init is gone) and the
// janitor told.
func (s *supervisor) watched(paths []string) janitorHandle {
	return janitorHandle{watched: true, release: func(destroyed bool) {
		forget := func() {
			if !destroyed && s.spares != nil && s.cgroup != nil {
				kept, evicted := s.spares.give(s.plan.Cgroup, s.plan.Limits, s.cgroup)
				if evicted != nil {
					_ = removeWatched(s.watch, evicted)
				}
				if kept {
					s.done()
					return
				}
			}
			if destroyed || s.cgroup == nil || s.cgroup.Destroy() == nil {
				_ = s.watch.Forget(paths)
			}
			s.done()
		}
		if destroyed {
			forget()
			return
		}
		go func() {
			<-s.reaped
			forget()
		}()
	}}
}

// janitorHandle lets a started janitor go, telling it whether the cgroup is
// already removed; release is nil when it could not be started.
type janitorHandle struct {
	release func(destroyed bool)
	// watched: the shared janitor of s.watch; release ends with s.done.
	watched bool
}

// janitorStarted reports whether a janitor watches the sandbox's cgroup.
func (s *supervisor) janitorStarted() bool {
	if s.janitor == nil {
		return false
	}
	if s.janitorState == nil {
		h := <-s.janitor
		s.janitorState = &h
	}
	return s.janitorState.release != nil
}

// destroyCgroup removes the cgroup, or leaves that to the janitor when the
// init is still exiting, then lets the janitor go.
func (s *supervisor) destroyCgroup() {
	if s.cgroup != nil {
		s.cgroup.Settle()
	}
	if s.cgroup != nil && s.spares != nil && s.janitorStarted() && s.janitorState.watched {
		// Offered for reuse, or else removed, once the init is reaped.
		s.janitorState.release(false)
		return
	}
	destroyed := false
	if s.cgroup != nil && !s.leftToJanitor {
		destroyed = s.cgroup.Destroy() == nil
	} else if s.cgroup != nil {
		// Its counters are read: the janitor removes it once the init
		// is gone, or a sweep does.
		s.cgroup.Close()
	}
	if s.janitorStarted() {
		s.janitorState.release(destroyed)
		if s.janitorState.watched {
			return // s.done is called once the cgroup is gone
		}
	}
	s.done()
}

// done tells the owner of the supervisor (a Pool) that nothing of the
// sandbox is left on the host.
func (s *supervisor) done() {
	if s.onDone != nil {
		s.onDone()
	}
}

// sandboxName names a sandbox uniquely on this host.
func sandboxName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%d-%x", os.Getpid(), b)
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
			sink **capture
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
			go func(r *os.File, sink **capture) {
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

// listen reads the init's reports until it closes the socket; the exit
// report also goes to s.exitReport as soon as it arrives.
func (s *supervisor) listen() report {
	var rep report
	for {
		msg, files, err := s.conn.Recv()
		if err != nil {
			return rep
		}
		switch msg.Kind {
		case control.KindError:
			rep.setupErr = &SetupError{Step: msg.Step, Err: errors.New(msg.Reason)}
		case control.KindExecError:
			rep.execErr = &ExecError{Code: msg.Code, Reason: msg.Reason}
		case control.KindReady:
			s.times.InitRunning, s.times.RootBuilt = control.Time(msg.Running), control.Time(msg.Built)
			close(s.ready)
		case control.KindStarted:
			<-s.handout // s.job is the caller's from here on
			s.times.CommandStarted = time.Now()
			if s.job.Notices != nil {
				for _, n := range s.plan.Notices {
					fmt.Fprintln(s.job.Notices, n)
				}
			}
			// The command's pidfd, then its terminal with --tty.
			if len(files) > 0 {
				s.command.started(files[0])
				files = files[1:]
			}
			if len(files) == 1 && s.job.TTY {
				s.attachTerminal(files[0])
				files = nil
			}
		case control.KindExit:
			s.times.ExitReported = time.Now()
			rep.exited, rep.code, rep.signal = true, msg.Code, msg.Signal
			s.exitReport <- rep
		}
		for _, f := range files {
			f.Close()
		}
	}
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

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// capture streams output to a writer and, when asked, keeps up to limit
// bytes of it.
type capture struct {
	w         io.Writer
	keep      bool
	limit     int64
	buf       []byte
	truncated bool
}

func newCapture(w io.Writer, keep bool, limit int64) *capture {
	return &capture{w: w, keep: keep, limit: limit}
}

func (c *capture) Write(p []byte) (int, error) {
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

func (c *capture) String() string { return string(c.buf) }
