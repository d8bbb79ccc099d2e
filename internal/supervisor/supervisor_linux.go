package supervisor

import (
	"context"
	"errors"
	"fmt"
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
	stdout   *Capture
	stderr   *Capture
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
	// execs, in a persistent sandbox, takes the init's reports about its
	// commands (those with an Exec id).
	execs *execReplies
	// listeners are the sockets the init opened for the egress gateway,
	// attached to its ready report: set before ready is closed, and
	// taken by whoever hands them over.
	listeners []*os.File
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
	// The init only reports: a message of more than a report's size is
	// refused before anything is allocated for it.
	conn.LimitReceive(control.MaxReport)
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
	s.stdout, s.stderr = NewCapture(nil, false, 0), NewCapture(nil, false, 0)
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
		return s.abandonUnsent(err)
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

// abandonUnsent ends an init that could not be sent a message. An init
// that failed on its own (a mount source it could not open, say) reported
// why and closed its end, which is what broke the send: its report, already
// here, is the error, not the broken pipe. The listener is not running yet,
// so nothing else reads it.
func (s *supervisor) abandonUnsent(sendErr error) error {
	_ = s.abandonInit(nil)
	// The init is reaped: what it wrote is buffered, and nothing more
	// comes. The deadline only guards against a copy of its end held
	// elsewhere (a forker's, closed in the meantime by any honest one).
	_ = s.conn.File().SetReadDeadline(time.Now().Add(time.Second))
	for {
		msg, files, err := s.conn.Recv()
		for _, f := range files {
			f.Close()
		}
		if err != nil {
			return &SetupError{Step: "start", Err: sendErr}
		}
		if msg.Kind == control.KindError {
			return &SetupError{Step: msg.Step, Err: errors.New(msg.Reason)}
		}
	}
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
		return s.abandonUnsent(err)
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
		return s.abandonUnsent(err)
	}
	return nil
}

// close releases what the supervisor holds on the host: the cgroup (or the
// janitor that removes it), the control socket, the program and the plan's
// files.
func (s *supervisor) close() {
	// Listeners nobody took (the run ended before its gateway had them):
	// set before ready was closed, so read after it.
	select {
	case <-s.ready:
		for _, f := range s.listeners {
			f.Close()
		}
		s.listeners = nil
	default:
	}
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
	s.stdout = NewCapture(s.job.Stdout, s.job.Capture, s.job.OutputLimit)
	s.stderr = NewCapture(s.job.Stderr, s.job.Capture, s.job.OutputLimit)
	close(s.handout)

	// The init was born in its cgroup: the command may start as soon as
	// the init is ready.
	releaseMsg := control.Message{Kind: control.KindRelease, Process: process}
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
	// The gateway gets its sockets before the command can use them: a
	// gateway that refuses its rules ends the sandbox unstarted.
	var egressErr error
	release := true
	if s.job.Egress != nil {
		egressErr = s.handOverListeners(ctx)
		if errors.Is(egressErr, errNotReady) {
			// The timeout or the caller's cancellation came first: the
			// wait below ends the sandbox, unreleased, as either says.
			egressErr, release = nil, false
		}
	}
	switch {
	case egressErr != nil:
		_ = s.init.signal(syscall.SIGKILL)
	case release:
		if err := s.conn.Send(releaseMsg, files...); err != nil {
			_ = s.init.signal(syscall.SIGKILL)
		}
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
	res.Truncated = s.stdout.Truncated() || s.stderr.Truncated()

	switch {
	case rep.setupErr != nil:
		res.ExitCode = api.ExitSetup
		return res, rep.setupErr
	case egressErr != nil:
		res.ExitCode = api.ExitSetup
		return res, egressErr
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

// errNotReady: the run's timeout passed, or its context was done, before
// the init was ready.
var errNotReady = errors.New("the sandbox was not ready in time")

// handOverListeners waits for the init to be ready and gives the job's
// Egress its listeners. An init that ends first failed its setup, which
// its report says: that is the run's error, not this. The run's timeout
// and ctx bound the wait (errNotReady).
func (s *supervisor) handOverListeners(ctx context.Context) error {
	var deadline <-chan time.Time
	if s.job.Timeout > 0 {
		t := time.NewTimer(s.job.Timeout - time.Since(s.start))
		defer t.Stop()
		deadline = t.C
	}
	select {
	case <-s.ready:
	case <-s.reaped:
		return nil
	case <-ctx.Done():
		return errNotReady
	case <-deadline:
		return errNotReady
	}
	listeners := s.listeners
	s.listeners = nil
	defer func() {
		for _, f := range listeners {
			f.Close()
		}
	}()
	if len(listeners) != len(s.plan.Config.Listen) {
		return &SetupError{Step: "egress", Err: fmt.Errorf("the init opened %d of %d sockets", len(listeners), len(s.plan.Config.Listen))}
	}
	var pidfd *os.File
	if init, ok := s.init.(*childInit); ok {
		pidfd = init.pidfd
	}
	if err := s.job.Egress(listeners, pidfd); err != nil {
		var se *SetupError
		if errors.As(err, &se) {
			return err
		}
		return &SetupError{Step: "egress", Err: err}
	}
	return nil
}

// listen reads the init's reports until it closes the socket; the exit
// report also goes to s.exitReport as soon as it arrives.
func (s *supervisor) listen() report {
	var rep report
	readied := false
	for {
		msg, files, err := s.conn.Recv()
		if err != nil {
			return rep
		}
		if msg.Exec != 0 && s.execs != nil {
			s.execs.deliver(msg, files)
			continue
		}
		switch msg.Kind {
		case control.KindError:
			rep.setupErr = &SetupError{Step: msg.Step, Err: errors.New(msg.Reason)}
		case control.KindExecError:
			rep.execErr = &ExecError{Code: msg.Code, Reason: msg.Reason}
		case control.KindReady:
			if readied {
				// Said once by an honest init: a second must not
				// close ready again, a panic of the whole process.
				break
			}
			readied = true
			s.times.InitRunning, s.times.RootBuilt = control.Time(msg.Running), control.Time(msg.Built)
			if len(files) == len(s.plan.Config.Listen) {
				s.listeners, files = files, nil
			}
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
			if rep.exited {
				// exitReport holds one: a second send would block
				// this listener, and the run waiting for its reports.
				break
			}
			s.times.ExitReported = time.Now()
			rep.exited, rep.code, rep.signal = true, msg.Code, msg.Signal
			s.exitReport <- rep
		}
		for _, f := range files {
			f.Close()
		}
	}
}
