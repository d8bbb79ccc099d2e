package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/control"
	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/internal/spawn"
)

// EnterArg is argv[0] of the helper started as the enter role
// (docs/oci.md §1: exec).
const EnterArg = "jail:enter"

// ExecOptions are `jail oci exec`'s.
type ExecOptions struct {
	ID string
	// ProcessFile is --process (a runtime-spec Process as JSON); without
	// it Args, with the container's process as the defaults.
	ProcessFile string
	Args        []string
	Env         []string
	Cwd, User   string
	TTY         bool
	// Caps are added to every set but ambient; NoNewPrivs sets it.
	Caps       []string
	NoNewPrivs bool
	// AppArmor, SELinuxLabel: --apparmor and --process-label, over the
	// container's process's.
	AppArmor, SELinuxLabel string
	Detach                 bool
	PidFile                string
	ConsoleSocket          string
	// PreserveFDs is --preserve-fds: this process's descriptors 3, 4, ...
	// that the process gets at the same numbers.
	PreserveFDs int
}

// maxProcessFile bounds --process's file.
const maxProcessFile = 4 << 20

// execProcess is the process an exec runs: --process's, or the container's
// with the command line's changes.
func execProcess(o ExecOptions, base *specs.Process) (*specs.Process, error) {
	if o.ProcessFile != "" {
		f, err := os.Open(o.ProcessFile)
		if err != nil {
			return nil, fmt.Errorf("--process: %w", err)
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, maxProcessFile+1))
		if err != nil {
			return nil, fmt.Errorf("--process: %w", err)
		}
		if len(data) > maxProcessFile {
			return nil, fmt.Errorf("--process: larger than %d bytes", maxProcessFile)
		}
		var p specs.Process
		if err := json.Unmarshal(data, &p); err != nil {
			return nil, fmt.Errorf("--process %s: %w", o.ProcessFile, err)
		}
		// A process that names no AppArmor profile runs under the
		// container's, as runc's exec runs it: not unconfined in a
		// confined container (containerd's shim always passes --process).
		if p.ApparmorProfile == "" && base != nil {
			p.ApparmorProfile = base.ApparmorProfile
		}
		return &p, nil
	}
	if len(o.Args) == 0 {
		return nil, errors.New("exec: no command: give --process FILE or the command after the ID")
	}
	var p specs.Process
	if base != nil {
		p = *base
		p.Env = append([]string(nil), base.Env...)
	}
	p.Args = o.Args
	p.Terminal = o.TTY
	if o.AppArmor != "" {
		p.ApparmorProfile = o.AppArmor
	}
	if o.SELinuxLabel != "" {
		p.SelinuxLabel = o.SELinuxLabel
	}
	p.Env = append(p.Env, o.Env...)
	if o.Cwd != "" {
		p.Cwd = o.Cwd
	}
	if p.Cwd == "" {
		p.Cwd = "/"
	}
	if o.User != "" {
		uid, gid, ok := strings.Cut(o.User, ":")
		u, err := strconv.ParseUint(uid, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("--user %q: a numeric UID[:GID]", o.User)
		}
		p.User.UID, p.User.GID = uint32(u), 0
		if ok {
			g, err := strconv.ParseUint(gid, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("--user %q: a numeric UID[:GID]", o.User)
			}
			p.User.GID = uint32(g)
		}
	}
	if len(o.Caps) > 0 {
		c := specs.LinuxCapabilities{}
		if p.Capabilities != nil {
			c = *p.Capabilities
		}
		c.Bounding = append(append([]string(nil), c.Bounding...), o.Caps...)
		c.Effective = append(append([]string(nil), c.Effective...), o.Caps...)
		c.Permitted = append(append([]string(nil), c.Permitted...), o.Caps...)
		c.Inheritable = append(append([]string(nil), c.Inheritable...), o.Caps...)
		p.Capabilities = &c
	}
	if o.NoNewPrivs {
		p.NoNewPrivileges = true
	}
	return &p, nil
}

// differentNamespaces is the CLONE_NEW* flags of pid's namespaces that are
// not this process's: what an exec joins (joining one's own user
// namespace again is refused by the kernel).
func differentNamespaces(pid int) (int64, error) {
	var flags int64
	for _, ns := range []struct {
		name string
		flag int64
	}{
		{"user", unix.CLONE_NEWUSER}, {"mnt", unix.CLONE_NEWNS}, {"pid", unix.CLONE_NEWPID}, {"uts", unix.CLONE_NEWUTS},
		{"ipc", unix.CLONE_NEWIPC}, {"net", unix.CLONE_NEWNET}, {"cgroup", unix.CLONE_NEWCGROUP},
	} {
		mine, err := os.Readlink("/proc/self/ns/" + ns.name)
		if err != nil {
			continue // a namespace this kernel lacks
		}
		theirs, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "ns", ns.name))
		if err != nil {
			return 0, fmt.Errorf("the container's %s namespace: %w", ns.name, err)
		}
		if mine != theirs {
			flags |= ns.flag
		}
	}
	return flags, nil
}

// Exec runs a process in a created or running container (docs/oci.md §1):
// the helper's enter role joins the container's namespaces by its
// process's pidfd, in its cgroup, and forks the process, which takes the
// container's filter. With Detach it returns once the process runs (its pid
// in PidFile), leaving it to this process's parent (the shim, a
// subreaper); otherwise it waits and returns the process's exit status.
func (rt *Runtime) Exec(o ExecOptions) (int, error) {
	preserved, err := preservedFDs(o.PreserveFDs)
	if err != nil {
		return 0, err
	}
	defer func() {
		for _, f := range preserved {
			f.Close()
		}
	}()
	op, err := rt.open(o.ID)
	if err != nil {
		return 0, err
	}
	defer op.close()
	if op.status == specs.StateStopped {
		return 0, errors.New("cannot exec in a stopped container")
	}
	if op.status == StatePaused {
		return 0, errors.New("cannot exec in a paused container")
	}
	proc, err := execProcess(o, op.state.Process)
	if err != nil {
		return 0, err
	}
	if err := validateProcess(proc); err != nil {
		return 0, err
	}
	switch {
	case proc.Terminal && o.ConsoleSocket == "":
		return 0, errors.New("a terminal needs --console-socket")
	case !proc.Terminal && o.ConsoleSocket != "":
		return 0, errors.New("--console-socket needs a terminal (--tty, or process.terminal)")
	}
	labelWarnings, err := selinuxLabels(nil, "", proc.SelinuxLabel)
	if err != nil {
		return 0, err
	}
	if err := appArmorUsable(nil, proc.ApparmorProfile); err != nil {
		return 0, err
	}
	lastCap, err := readCapLastCap()
	if err != nil {
		return 0, err
	}
	process, warnings := translateProcess(proc, lastCap)
	warnings = append(labelWarnings, warnings...)
	for _, w := range warnings {
		rt.Log.Warn(w)
	}
	// The filters the container's process got (the profile's masks are
	// the container's mounts already).
	c := config.Container{Process: process, ExecFifoFD: -1, Seccomp: op.state.Seccomp, ProfileSeccomp: op.state.ProfileSeccomp}
	ns, err := differentNamespaces(op.state.Pid)
	if err != nil {
		return 0, err
	}
	c.Join = []config.JoinedNamespace{{Type: ns, FD: 4}}
	for i := range preserved {
		c.PreservedFDs = append(c.PreservedFDs, 5+i)
	}
	// The process is reparented here once the role ends, and to this
	// process's parent (the shim) once this one does.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return 0, fmt.Errorf("subreaper: %w", err)
	}
	pid, err := rt.enter(op, &c, o, preserved)
	if err != nil {
		return 0, err
	}
	if o.PidFile != "" {
		if err := WriteFileAtomic(o.PidFile, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			_ = unix.Kill(pid, unix.SIGKILL)
			return 0, fmt.Errorf("pid file: %w", err)
		}
	}
	if o.Detach {
		return 0, nil
	}
	op.close() // no lock while it runs: kill, state and delete go on
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if err == nil {
			break
		}
		if err != unix.EINTR {
			return 0, fmt.Errorf("wait for %d: %w", pid, err)
		}
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ws.ExitStatus(), nil
}

// enter starts the enter role in the container's cgroup with c and
// returns the pid of the process it forked, once it reported created.
func (rt *Runtime) enter(op *opened, c *config.Container, o ExecOptions, preserved []*os.File) (int, error) {
	prog, err := programs.Open(programs.Helper)
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	defer prog.Close()
	path, err := prog.PathFor(1)
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	conn, roleEnd, err := control.Pair()
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	defer conn.Close()
	conn.LimitReceive(control.MaxReport)
	role, err := spawn.Start(path, []string{EnterArg}, []string{}, append(roleStdio(c.Process.Terminal), roleEnd), &syscall.SysProcAttr{})
	roleEnd.Close()
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	child := 0
	fail := func(err error) (int, error) {
		_ = unix.Kill(role, unix.SIGKILL)
		_, _ = spawn.Wait(role)
		if child > 0 {
			_ = unix.Kill(child, unix.SIGKILL)
			_, _ = spawn.Wait(child)
		}
		return 0, err
	}
	if op.state.Cgroup != nil {
		if err := op.state.Cgroup.Enter(role); err != nil {
			return fail(err)
		}
	}
	if err := conn.Send(control.Message{Kind: control.KindEnter, Container: c}, append([]*os.File{op.pidfd}, preserved...)...); err != nil {
		return fail(fmt.Errorf("exec: %w", err))
	}
	for {
		m, files, err := conn.Recv()
		if err != nil {
			return fail(fmt.Errorf("exec: the enter role ended before the process started: %w", err))
		}
		var answerErr error
		switch m.Kind {
		case control.KindError:
			answerErr = fmt.Errorf("%s: %s", m.Step, m.Reason)
		case control.KindChild:
			if child != 0 || m.Pid <= 0 {
				answerErr = fmt.Errorf("exec: unexpected report of the process (%d)", m.Pid)
			}
			child = m.Pid
		case control.KindCreated:
			if child == 0 {
				answerErr = errors.New("exec: created before the process was reported")
			} else if c.Process.Terminal {
				if len(files) != 1 {
					answerErr = fmt.Errorf("exec: created with %d files, not the terminal", len(files))
				} else {
					answerErr = sendConsole(o.ConsoleSocket, files[0])
				}
			}
		default:
			answerErr = fmt.Errorf("exec: unexpected message %q from the enter role", m.Kind)
		}
		for _, f := range files {
			f.Close()
		}
		if answerErr != nil {
			return fail(answerErr)
		}
		if m.Kind == control.KindCreated {
			break
		}
	}
	if _, err := spawn.Wait(role); err != nil {
		return fail(fmt.Errorf("exec: the enter role: %w", err))
	}
	return child, nil
}
