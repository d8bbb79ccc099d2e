// Package initstage is the Go init of a sandbox: the stage program (see
// internal/programs), started by the supervisor inside fresh user, mount,
// pid, net, ipc, uts and cgroup namespaces, where it is pid 1. A full build
// starts the C init (internal/programs/init) instead, which does the same
// step for step without a runtime to start; this one runs in a build
// without the helper programs (a plain go build), or where the C init's
// program cannot be opened. The integration test
// TestInitsBuildTheSameSandbox holds the two to the same sandbox.
//
// Main reads the sandbox description from the control socket (fd 3), builds
// the root filesystem, sets host name and loopback, enters its v1 cgroup
// when the supervisor made it meanwhile, then forks the command
// and stays behind as its reaper: it reaps orphans and reports how the
// command ended. It hands the supervisor a pidfd of the command, through
// which the supervisor signals the command itself: the init handles no
// signal, which spares it the Go runtime's signal threads (three of its
// seven). When it exits, the kernel kills everything left in the pid
// namespace; when the supervisor dies, PR_SET_PDEATHSIG kills the init.
//
// Invariants: the init is non-dumpable before anything of the sandbox runs,
// so the command (which shares its uid) cannot ptrace it or open /proc/1/fd,
// environ or exe (it turns non-dumpable once the supervisor has written its
// id maps, which needs it dumpable); every descriptor but stdio is
// close-on-exec; and the command is forked from one dedicated OS thread whose
// privileges were dropped first, in the order written in lockDown and spawn.
package initstage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/control"
	"github.com/jail-sandbox/jail/namespaces"
	"github.com/jail-sandbox/jail/netns"
	"github.com/jail-sandbox/jail/rootfs"
	"github.com/jail-sandbox/jail/seccomp/filter"
)

// Arg is argv[0] of a process started as a sandbox init.
const Arg = "jail:init"

// Environ is the environment an init starts with. The init works on its one
// locked thread and otherwise waits; a single P spares it the threads the Go
// runtime starts to run goroutines on an idle P (0.5 ms of CPU per sandbox
// here). The command gets the environment its description names.
func Environ() []string { return []string{"GOMAXPROCS=1"} }

// controlFD is where the supervisor puts the control socket.
const controlFD = 3

// Main runs the init stage and exits with the command's status.
func Main() {
	// Every step below, and the fork of the command, happens on this one
	// OS thread: privilege changes are per-thread, and the command
	// inherits the state of the thread that forks it.
	runtime.LockOSThread()
	os.Exit(run())
}

// undelivered are the signals someone might send the init itself: the ones
// a terminal, a service manager or kill sends by default.
var undelivered = []syscall.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT,
}

// leaveSignalsToKernel gives the undelivered signals their default action
// again, in place of the handler the Go runtime installed at start (which
// would end the init on SIGINT, SIGTERM or SIGHUP, and dump its goroutines
// on SIGQUIT). The kernel delivers to a pid namespace's init only the
// signals it handles, from inside the sandbox or outside: these are dropped,
// as for any container init without handlers; SIGKILL from outside still
// ends it. The command, which is signalled by the supervisor through its
// pidfd, starts with default actions either way.
func leaveSignalsToKernel() error {
	// The kernel's struct sigaction, all zero: SIG_DFL, no flags, no mask.
	var dfl [4]uint64
	for _, sig := range undelivered {
		_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
		if errno != 0 {
			return fmt.Errorf("default action for %v: %w", sig, errno)
		}
	}
	return nil
}

// setupError is a failure before the command runs.
type setupError struct {
	step string
	err  error
}

func (e *setupError) Error() string { return e.step + ": " + e.err.Error() }

// execError means the command itself could not be started.
type execError struct {
	code   int
	reason string
}

func (e *execError) Error() string { return e.reason }

func run() int {
	running := control.Now()
	// Whatever the supervisor's own parent leaked to it, nothing but stdio
	// may reach the command.
	if err := unix.CloseRange(controlFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return 1
	}
	conn := control.FromFD(controlFD)
	if err := leaveSignalsToKernel(); err != nil {
		return 1
	}
	// Started by a thread that kept its capabilities across a change of
	// its uid (SECBIT_NO_SETUID_FIXUP) to create the user namespace as its
	// owner (spawn.StartAs): the kernel starts the new namespace's
	// credentials with default securebits, and this makes sure of it,
	// since the command's user switch relies on uid changes dropping
	// capabilities.
	if bits, err := unix.PrctlRetInt(unix.PR_GET_SECUREBITS, 0, 0, 0, 0); err != nil || bits != 0 {
		if _, _, errno := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_SET_SECUREBITS, 0, 0); errno != 0 {
			return 1
		}
	}

	msg, files, err := conn.Recv()
	if err != nil || msg.Kind != control.KindConfig || msg.Config == nil {
		return 1
	}
	cfg := msg.Config
	// The supervisor sends the description once it has written the id
	// maps: the init may have been started before them, and writing them
	// needs it dumpable.
	if cfg.TakeRoot {
		if err := takeRoot(); err != nil {
			_ = conn.Send(control.Message{Kind: control.KindError, Step: "take sandbox root", Reason: err.Error()})
			return 1
		}
		// Changing ids cleared the parent-death signal. Should the parent
		// have died before this, the supervisor hangs up the control
		// socket (see supervisor.discard), and the init ends at its next
		// message.
		if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
			return 1
		}
	}
	// Not reachable through /proc or ptrace by anything in the sandbox,
	// which starts only later.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return 1
	}
	closeFiles(files)

	cmd, err := setup(cfg, conn, running)
	if err != nil {
		var se *setupError
		var ee *execError
		switch {
		case errors.As(err, &ee):
			_ = conn.Send(control.Message{Kind: control.KindExecError, Code: ee.code, Reason: ee.reason})
			return ee.code
		case errors.As(err, &se):
			_ = conn.Send(control.Message{Kind: control.KindError, Step: se.step, Reason: se.err.Error()})
		default:
			_ = conn.Send(control.Message{Kind: control.KindError, Step: "init", Reason: err.Error()})
		}
		return 1
	}

	code, sig := reap(cmd)
	endRemaining()
	_ = conn.Send(control.Message{Kind: control.KindExit, Code: code, Signal: sig})
	return code
}

// enterCgroup moves this thread, which forks the command, into the
// sandbox's v1 cgroup: writing 0 to a tasks file moves the writer, without
// the global lock that moving another task takes (an RCU grace period after
// an idle moment). The files were opened by the supervisor; the kernel
// checks the opener's credentials. The other threads of the init stay where
// it was started; nothing of the command ever runs outside. The cgroup
// namespace the command gets is made here, after the move, so that it is
// rooted at the sandbox's cgroup.
func enterCgroup(tasks []*os.File) error {
	if len(tasks) == 0 {
		return errors.New("no cgroup to enter")
	}
	for _, f := range tasks {
		if _, err := f.Write([]byte("0")); err != nil {
			return fmt.Errorf("enter %s: %w", f.Name(), err)
		}
	}
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("cgroup namespace: %w", err)
	}
	return nil
}

// takeRoot makes the init sandbox root. Started as host root before its ids
// were mapped, it is unmapped until then: it could neither own what it
// creates nor pass ids on to the command. Only this thread changes, which
// builds the root filesystem and forks the command, and is the process's
// first thread (the one ps and /proc/PID/status show) when the stage program
// runs the init; Go's syscall package would stop the world once per call to
// change every thread, 0.3 ms and more, and does so only when this is not
// the first thread. The init's other threads keep the unmapped ids, with the
// init's capabilities inside the sandbox only: they signal, wait and talk to
// the supervisor, and touch no file.
func takeRoot() error {
	firstThread := unix.Gettid() == unix.Getpid()
	// Each call takes (0, 0, 0): no groups, then gid 0, then uid 0.
	for _, step := range []struct {
		name      string
		nr        uintptr
		allThread func() error
	}{
		{"setgroups", unix.SYS_SETGROUPS, func() error { return syscall.Setgroups(nil) }},
		{"setresgid", unix.SYS_SETRESGID, func() error { return syscall.Setresgid(0, 0, 0) }},
		{"setresuid", unix.SYS_SETRESUID, func() error { return syscall.Setresuid(0, 0, 0) }},
	} {
		var err error
		if firstThread {
			if _, _, errno := unix.RawSyscall(step.nr, 0, 0, 0); errno != 0 {
				err = errno
			}
		} else {
			err = step.allThread()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", step.name, err)
		}
	}
	return nil
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// setup builds the sandbox and starts the command; it returns its pid.
func setup(cfg *config.Init, conn *control.Conn, running int64) (int, error) {
	if err := rootfs.Build(cfg); err != nil {
		var se *rootfs.StepError
		if errors.As(err, &se) {
			return 0, &setupError{step: se.Step, err: se.Err}
		}
		return 0, &setupError{step: "root filesystem", err: err}
	}
	built := control.Now()
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return 0, &setupError{step: "set host name", err: err}
	}
	if err := netns.LoopbackUp(); err != nil {
		return 0, &setupError{step: "network", err: err}
	}
	if err := setRlimits(cfg.Limits); err != nil {
		return 0, &setupError{step: "rlimits", err: err}
	}
	// Nothing of the sandbox has run yet: the init enters its cgroup now,
	// which the supervisor made while the root was built, and the command
	// is forked inside it.
	if cfg.EnterCgroup {
		msg, files, err := conn.Recv()
		if err != nil || msg.Kind != control.KindCgroup {
			closeFiles(files)
			return 0, &setupError{step: "cgroup", err: errors.New("supervisor went away")}
		}
		err = enterCgroup(files)
		closeFiles(files)
		if err != nil {
			return 0, &setupError{step: "cgroup", err: err}
		}
	}

	stdio := []uintptr{0, 1, 2}
	var master *os.File
	if cfg.Process.TTY {
		var slave *os.File
		var err error
		master, slave, err = openPty(cfg.Process.Rows, cfg.Process.Cols)
		if err != nil {
			return 0, &setupError{step: "terminal", err: err}
		}
		defer master.Close()
		defer slave.Close()
		stdio = []uintptr{slave.Fd(), slave.Fd(), slave.Fd()}
	}

	// The supervisor releases the command once everything outside the
	// sandbox (its cgroup placement) is in place. A sandbox built ahead of
	// need (jail.Pool) waits here, ready, and learns its command and its
	// stdin only now.
	// A session keyring of its own, anonymous (a NULL name: a named one
	// would be shared with whoever joins the name): the caller's may hold
	// keys.
	if _, _, errno := unix.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); errno != 0 && errno != unix.ENOSYS {
		return 0, &setupError{step: "session keyring", err: errno}
	}
	if err := lockDown(cfg.Capabilities); err != nil {
		return 0, err
	}
	if err := conn.Send(control.Message{Kind: control.KindReady, Running: running, Built: built}); err != nil {
		return 0, &setupError{step: "report ready", err: err}
	}
	msg, files, err := conn.Recv()
	if err != nil || msg.Kind != control.KindRelease {
		return 0, &setupError{step: "wait for release", err: fmt.Errorf("supervisor went away")}
	}
	for _, f := range files[min(len(files), 1):] {
		f.Close()
	}
	process := &cfg.Process
	if msg.Process != nil {
		if msg.Process.TTY != process.TTY {
			return 0, &setupError{step: "release", err: errors.New("a terminal cannot be added to a built sandbox")}
		}
		process = msg.Process
	}
	if len(files) > 0 {
		defer files[0].Close()
		if process.TTY {
			return 0, &setupError{step: "release", err: errors.New("stdin of a terminal command comes through the terminal")}
		}
		stdio[0] = files[0].Fd()
	}

	pid, pidfd, err := spawn(process, cfg.Seccomp, stdio)
	if err != nil {
		return 0, err
	}
	defer pidfd.Close()
	started := control.Message{Kind: control.KindStarted, Pid: pid}
	if master != nil {
		err = conn.Send(started, pidfd, master)
	} else {
		err = conn.Send(started, pidfd)
	}
	if err != nil {
		return 0, &setupError{step: "report start", err: err}
	}
	return pid, nil
}

// lockDown takes from this thread, which forks the command, the first two
// of the things the command must not have; spawn takes the third. Nothing
// the init does on this thread between them needs either. It runs before the
// init reports ready, so that a sandbox built ahead of need has it done.
// The init keeps its own privileges on its other threads: it still has to
// reap and report.
func lockDown(keep uint64) error {
	// 1. Capabilities: the bounding set keeps only the profile's
	// (namespaced) ones, so no exec can ever grant another; ambient and
	// inheritable are cleared. Permitted and effective stay until the exec
	// (they let the child switch user); the exec then computes a root
	// command's as the bounding set and any other user's as empty.
	if err := dropCapabilities(keep); err != nil {
		return &setupError{step: "drop capabilities", err: err}
	}
	// 2. No exec may grant privileges (setuid bits, file capabilities).
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return &setupError{step: "no_new_privs", err: err}
	}
	return nil
}

// spawn starts the command from this thread, after lockDown, once the
// profile's filter is loaded. It returns the command's pid and a pidfd of
// it.
func spawn(p *config.Process, policy filter.Filter, stdio []uintptr) (int, *os.File, error) {
	path, err := lookPath(p.Args[0], envValue(p.Env, "PATH"), p.Cwd)
	if err != nil {
		return 0, nil, err
	}
	if st, err := os.Stat(p.Cwd); err != nil || !st.IsDir() {
		return 0, nil, &setupError{step: "workdir " + p.Cwd, err: errors.New("no such directory in the sandbox")}
	}

	// 3. The profile's seccomp filter, last (steps 1 and 2 are in
	// lockDown): from here on this thread, and the command forked from it,
	// make only the syscalls it allows.
	if err := filter.Load(policy); err != nil {
		return 0, nil, &setupError{step: "seccomp", err: err}
	}

	pidfd := -1
	attr := &syscall.ProcAttr{
		Dir:   p.Cwd,
		Env:   p.Env,
		Files: stdio,
		Sys: &syscall.SysProcAttr{
			Setsid:  true,
			Setctty: p.TTY,
			Ctty:    0,
			// CLONE_PIDFD, which every profile's clone rule lets
			// through: it is no namespace flag.
			PidFD: &pidfd,
		},
	}
	if p.SwitchUser {
		attr.Sys.Credential = &syscall.Credential{Uid: p.UID, Gid: p.GID, Groups: []uint32{}}
	}
	pid, err := syscall.ForkExec(path, p.Args, attr)
	if err != nil {
		return 0, nil, execFailure(p.Args[0], err)
	}
	return pid, os.NewFile(uintptr(pidfd), "command-pidfd"), nil
}

// setRlimits applies the fallback limits. RLIMIT_NPROC is counted per user
// namespace, so it bounds this sandbox's tasks, not the caller's others.
func setRlimits(l config.Limits) error {
	for _, r := range []struct {
		resource int
		value    int64
	}{{unix.RLIMIT_DATA, l.RlimitData}, {unix.RLIMIT_NPROC, l.RlimitNproc}} {
		if r.value <= 0 {
			continue
		}
		lim := unix.Rlimit{Cur: uint64(r.value), Max: uint64(r.value)}
		if err := unix.Setrlimit(r.resource, &lim); err != nil {
			return err
		}
	}
	if l.RlimitStack > 0 {
		// The hard limit bounds a stack's growth; the soft one stays
		// small, since threads' stacks are sized from it.
		var lim unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_STACK, &lim); err != nil {
			return err
		}
		maxStack := uint64(l.RlimitStack)
		if lim.Cur == unix.RLIM_INFINITY || lim.Cur > maxStack {
			lim.Cur = min(maxStack, 8<<20)
		}
		lim.Max = maxStack
		if err := unix.Setrlimit(unix.RLIMIT_STACK, &lim); err != nil {
			return err
		}
	}
	return nil
}

func dropCapabilities(keep uint64) error {
	// Past the last capability the kernel knows, dropping fails with
	// EINVAL; a kernel that does not say gets up to 40 tried.
	last := uintptr(40)
	if n, err := namespaces.LastCap(); err == nil {
		last = n
	}
	for c := uintptr(0); c <= last; c++ {
		if c < 64 && keep&(1<<c) != 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("bounding set: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("ambient set: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// reap waits for the command, reaping every orphan in the meantime, and
// returns its exit status as jail reports it.
func reap(cmd int) (code, sig int) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 1, 0
		}
		if pid != cmd {
			continue
		}
		switch {
		case ws.Exited():
			return ws.ExitStatus(), 0
		case ws.Signaled():
			return 128 + int(ws.Signal()), int(ws.Signal())
		}
	}
}

// endRemaining kills and reaps whatever the command left running, and lets
// go of the init's stdio. After it, nothing in the sandbox runs but the init,
// and the supervisor's output pipes are at EOF: it may answer as soon as the
// exit report arrives, while the kernel still tears the namespaces down.
func endRemaining() {
	// The thread that forked the command dropped its capabilities; the
	// others keep the init's, which signalling processes of another uid
	// takes. kill(-1) from pid 1 reaches every other process of the
	// namespace.
	killed := make(chan struct{})
	go func() {
		_ = unix.Kill(-1, unix.SIGKILL)
		close(killed)
	}()
	<-killed
	for {
		_, err := unix.Wait4(-1, nil, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			break
		}
	}
	if null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0); err == nil {
		for fd := 0; fd <= 2; fd++ {
			_ = unix.Dup3(null, fd, 0)
		}
		_ = unix.Close(null)
	}
}

// openPty allocates a terminal in the sandbox's own devpts.
func openPty(rows, cols uint16) (master, slave *os.File, err error) {
	m, err := unix.Open("/dev/pts/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	master = os.NewFile(uintptr(m), "pty-master")
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	// TIOCGPTPEER opens the peer through the master itself, not by a path
	// that something could have replaced.
	s, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno != 0 {
		master.Close()
		return nil, nil, fmt.Errorf("open pty peer: %w", errno)
	}
	slave = os.NewFile(s, "pty-slave")
	if rows > 0 && cols > 0 {
		_ = unix.IoctlSetWinsize(m, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	}
	return master, slave, nil
}

// lookPath finds the command as a shell would, with the sandbox's PATH.
func lookPath(name, path, cwd string) (string, error) {
	// What is returned is what to execute once in cwd: the path as a
	// shell gives it to execve (a script's $0), relative ones included.
	if strings.Contains(name, "/") {
		return name, checkExecutable(name, inCwd(cwd, name))
	}
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	denied := ""
	for _, dir := range filepath.SplitList(path) {
		candidate := name
		if dir != "" {
			candidate = dir + "/" + name
		}
		full := inCwd(cwd, candidate)
		if len(full) >= unix.PathMax {
			return "", &execError{code: 126, reason: fmt.Sprintf("exec %s: a PATH entry is too long", name)}
		}
		err := checkExecutable(name, full)
		if err == nil {
			return candidate, nil
		}
		var ee *execError
		if errors.As(err, &ee) && ee.code == 126 && denied == "" {
			denied = full
		}
	}
	if denied != "" {
		return "", &execError{code: 126, reason: fmt.Sprintf("exec %s: %s: permission denied", name, denied)}
	}
	return "", &execError{code: 127, reason: fmt.Sprintf("exec %s: command not found", name)}
}

// inCwd is the path rel names from the command's working directory cwd
// (rel itself when absolute): the init checks the command before the
// command's process changes into cwd.
func inCwd(cwd, rel string) string {
	if filepath.IsAbs(rel) {
		return rel
	}
	return cwd + "/" + rel
}

func checkExecutable(name, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return &execError{code: 127, reason: fmt.Sprintf("exec %s: no such file or directory", name)}
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return &execError{code: 126, reason: fmt.Sprintf("exec %s: permission denied", name)}
	}
	return nil
}

func execFailure(name string, err error) error {
	code := 126
	if errors.Is(err, unix.ENOENT) {
		code = 127
	}
	return &execError{code: code, reason: fmt.Sprintf("exec %s: %v", name, err)}
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}
