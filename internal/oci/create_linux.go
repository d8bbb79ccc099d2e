package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/control"
	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/internal/spawn"
)

// RoleArg is argv[0] of the helper program started as a container's role
// (docs/oci.md §2).
const RoleArg = "jail:container"

// Runtime is the global options of a `jail oci` command.
type Runtime struct {
	// Root is --root ("" for DefaultRoot).
	Root string
	// SystemdCgroup: linux.cgroupsPath is in systemd's form.
	SystemdCgroup bool
	// Rootless is --rootless: "true", "false", or "" / "auto" (true when
	// not root). A rootless runtime goes on without a cgroup when it may
	// make none and the bundle asks for no resources.
	Rootless string
	Log      *Logger
	// ResolveProfile finds the jail profile a bundle's ProfileAnnotation
	// names; nil refuses such bundles.
	ResolveProfile ProfileResolver
	// role, when set, is what create starts in place of the helper's
	// container role (the tests' stand-in).
	role *roleCommand
}

// roleCommand is a program to start as the container's role.
type roleCommand struct {
	path string
	args []string
}

func (rt *Runtime) rootless() bool {
	switch rt.Rootless {
	case "true":
		return true
	case "false":
		return false
	}
	return os.Geteuid() != 0
}

// CreateOptions are `jail oci create`'s.
type CreateOptions struct {
	ID            string
	Bundle        string
	PidFile       string
	ConsoleSocket string
	// NoPivot and NoNewKeyring are accepted: jail always pivots (a
	// container whose root cannot be pivoted to fails; --no-pivot is
	// warned about), and the role is to give the container a session
	// keyring of its own whatever --no-new-keyring says (jail's init
	// does): both are the stricter choice.
	NoPivot, NoNewKeyring bool
	PreserveFDs           int
}

// creation is one create under way: what to undo if it fails.
type creation struct {
	rt        *Runtime
	container *Container
	cgroup    *Cgroup
	role      int // pid; 0 once reaped
	rolePidfd *os.File
	init      int
	initPidfd *os.File
}

// Create makes a container from a bundle and leaves its process waiting on
// the exec FIFO (docs/oci.md §2): on return its pid is in the state (and
// --pid-file), and it is this process's child, which becomes the caller's
// (the shim's, a subreaper) once this process exits.
func (rt *Runtime) Create(o CreateOptions) error {
	if err := ValidID(o.ID); err != nil {
		return err
	}
	preserved, err := preservedFDs(o.PreserveFDs)
	if err != nil {
		return err
	}
	defer func() {
		for _, f := range preserved {
			f.Close()
		}
	}()
	if o.Bundle == "" {
		o.Bundle = "."
	}
	b, err := LoadBundle(o.Bundle)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := Validate(b.Spec); err != nil {
		return err
	}
	terminal := b.Spec.Process.Terminal
	switch {
	case terminal && o.ConsoleSocket == "":
		return errors.New("process.terminal needs --console-socket")
	case !terminal && o.ConsoleSocket != "":
		return errors.New("--console-socket needs process.terminal")
	}
	if ns, _ := validateNamespaces(b.Spec.Linux.Namespaces); os.Geteuid() != 0 && !ns.has("user") {
		// Said before anything is made, rather than as unshare's EPERM.
		return errors.New("linux.namespaces: no user namespace: jail oci run by an unprivileged user makes a container only in one (runc spec --rootless writes such a bundle)")
	}
	cgPath, err := CgroupPath(b.Spec.Linux.CgroupsPath, o.ID, rt.SystemdCgroup)
	if err != nil {
		return err
	}
	store, err := OpenStore(rt.Root, true)
	if err != nil {
		return err
	}
	defer store.Close()
	c, err := store.Create(o.ID)
	if err != nil {
		return err
	}
	cr := &creation{rt: rt, container: c}
	if err := cr.run(b, o, cgPath, preserved); err != nil {
		cr.abort()
		return err
	}
	return c.Close()
}

func (cr *creation) run(b *Bundle, o CreateOptions, cgPath string, preserved []*os.File) error {
	rt, spec := cr.rt, b.Spec
	p, err := Translate(b, TranslateOptions{CompileSeccomp: seccompCompiler(), ResolveProfile: rt.ResolveProfile})
	if err != nil {
		return err
	}
	defer p.Close()
	if o.NoPivot {
		p.Warnings = append(p.Warnings, "--no-pivot is ignored: jail always pivots to the root")
	}
	for _, w := range p.Warnings {
		rt.Log.Warn(w)
	}
	fifo, err := cr.container.MakeFifo()
	if err != nil {
		return err
	}
	p.Container.ExecFifoFD = p.Attach(fifo)
	for _, f := range preserved {
		p.Container.PreservedFDs = append(p.Container.PreservedFDs, p.Attach(f))
	}
	if err := cr.makeCgroup(cgPath, withDeviceDefaults(spec.Linux.Resources, spec.Linux.Devices)); err != nil {
		return err
	}
	if cr.cgroup != nil {
		cr.cgroup.DeviceDefaults = deviceAllows(spec.Linux.Devices) // for update
		if err := cr.container.WriteCgroup(cr.cgroup); err != nil {
			return err
		}
	}
	// The role's child, the container's process, is this process's once
	// the role exits, and the shim's once this one does.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("subreaper: %w", err)
	}
	conn, err := cr.startRole(spec.Process.Terminal)
	if err != nil {
		return err
	}
	defer conn.Close()
	if cr.cgroup != nil {
		if err := cr.cgroup.Enter(cr.role); err != nil {
			return err
		}
	}
	rt.Log.Debugf("role %d started; sending the container", cr.role)
	if err := conn.Send(control.Message{Kind: control.KindContainer, Container: &p.Container}, p.Files...); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	p.Close() // the role has its copies
	if err := cr.converse(conn, b, o); err != nil {
		return err
	}
	if err := cr.reapRole(); err != nil {
		return err
	}
	st, err := readProcStat(cr.init)
	if err != nil {
		return fmt.Errorf("the container's process %d: %w", cr.init, err)
	}
	state := &State{
		ID: o.ID, Bundle: b.Path, Rootfs: p.Container.Rootfs, Pid: cr.init, StartTime: st.StartTime,
		Created: time.Now().UTC(), Annotations: spec.Annotations, Cgroup: cr.cgroup, Owner: os.Geteuid(), Hooks: spec.Hooks,
		Process: spec.Process, Seccomp: p.Container.Seccomp, ProfileSeccomp: p.Container.ProfileSeccomp,
	}
	if err := cr.container.WriteState(state); err != nil {
		return err
	}
	if o.PidFile != "" {
		if err := WriteFileAtomic(o.PidFile, []byte(strconv.Itoa(cr.init)), 0o644); err != nil {
			return fmt.Errorf("pid file: %w", err)
		}
	}
	return nil
}

func (cr *creation) makeCgroup(path string, r *specs.LinuxResources) error {
	cg, err := NewCgroup(path, r)
	if err == nil {
		cr.cgroup = cg
		return nil
	}
	if cr.rt.rootless() && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS)) && emptyResources(r) {
		cr.rt.Log.Warn(fmt.Sprintf("no cgroup (%v): the container runs in the caller's", err))
		return nil
	}
	return err
}

// withDeviceDefaults is r with, after the bundle's device rules (when it
// has any), an allow rule for every device the container is given (the
// default ones and linux.devices) and its terminals (/dev/ptmx and
// /dev/pts/*), as runc appends them: a bundle that denies all, as
// containerd's do, still gets the devices it lists.
func withDeviceDefaults(r *specs.LinuxResources, devices []specs.LinuxDevice) *specs.LinuxResources {
	if r == nil || len(r.Devices) == 0 {
		return r
	}
	out := *r
	out.Devices = append(append([]specs.LinuxDeviceCgroup(nil), r.Devices...), deviceAllows(devices)...)
	return &out
}

func ptr[T any](v T) *T { return &v }

func emptyResources(r *specs.LinuxResources) bool {
	return r == nil || r.Memory == nil && r.CPU == nil && r.Pids == nil && len(r.HugepageLimits) == 0 && len(r.Devices) == 0
}

// startRole starts the helper as the container's role, with this
// command's stdio (the container's, without a terminal; /dev/null with
// one) and the control socket on fd 3, in an empty environment.
func (cr *creation) startRole(terminal bool) (*control.Conn, error) {
	role := cr.rt.role
	if role == nil {
		prog, err := programs.Open(programs.Helper)
		if err != nil {
			return nil, fmt.Errorf("start: %w", err)
		}
		defer prog.Close()
		path, err := prog.PathFor(1)
		if err != nil {
			return nil, fmt.Errorf("start: %w", err)
		}
		role = &roleCommand{path: path, args: []string{RoleArg}}
	}
	conn, roleEnd, err := control.Pair()
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	defer roleEnd.Close()
	pidfd := -1
	attr := &syscall.SysProcAttr{PidFD: &pidfd}
	pid, err := spawn.Start(role.path, role.args, []string{}, append(roleStdio(terminal), roleEnd), attr)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("start: %w", err)
	}
	cr.role = pid
	if pidfd >= 0 {
		cr.rolePidfd = os.NewFile(uintptr(pidfd), "role-pidfd")
	}
	conn.LimitReceive(control.MaxReport)
	return conn, nil
}

// converse answers the role's reports until the container is created.
func (cr *creation) converse(conn *control.Conn, b *Bundle, o CreateOptions) error {
	for {
		m, files, err := conn.Recv()
		if errors.Is(err, io.EOF) {
			return errors.New("start: the container's role ended before the container was created")
		}
		if err != nil {
			return fmt.Errorf("start: %w", err)
		}
		err = cr.answer(conn, m, files, b, o)
		for _, f := range files {
			f.Close()
		}
		if err != nil {
			return err
		}
		if m.Kind == control.KindCreated {
			if cr.init == 0 {
				return errors.New("start: the container's role reported created before its process")
			}
			return nil
		}
	}
}

// maxReported bounds the step and the reason of a failure the container's
// role or init reports (the C end's are shorter).
const maxReported = 16 << 10

func (cr *creation) answer(conn *control.Conn, m control.Message, files []*os.File, b *Bundle, o CreateOptions) error {
	spec := b.Spec
	switch m.Kind {
	case control.KindError:
		// The reason may quote a createContainer hook's output, which
		// the C end made one line of bytes only.
		return fmt.Errorf("%s: %s", oneLine(m.Step, maxReported), oneLine(m.Reason, maxReported))
	case control.KindUserns:
		pid := cr.role
		if m.Pid != 0 {
			pid = m.Pid
		}
		if err := writeIDMaps(pid, spec.Linux); err != nil {
			return err
		}
		return conn.Send(control.Message{Kind: control.KindMapped})
	case control.KindChild:
		if cr.init != 0 || m.Pid <= 0 {
			return fmt.Errorf("start: unexpected report of the container's process (%d)", m.Pid)
		}
		if err := cr.adoptInit(m.Pid); err != nil {
			return err
		}
		if spec.Process.OOMScoreAdj != nil {
			if err := setOOMScoreAdj(cr.init, *spec.Process.OOMScoreAdj); err != nil {
				return err
			}
		}
		state := specs.State{Version: specs.Version, ID: o.ID, Status: specs.StateCreated, Pid: cr.init, Bundle: b.Path, Annotations: spec.Annotations}
		if h := spec.Hooks; h != nil {
			if err := runHooks("prestart", h.Prestart, state); err != nil {
				return err
			}
			if err := runHooks("createRuntime", h.CreateRuntime, state); err != nil {
				return err
			}
			if len(h.CreateContainer) > 0 || len(h.StartContainer) > 0 {
				return sendHookState(conn, state)
			}
		}
		return nil
	case control.KindCreated:
		if !spec.Process.Terminal {
			return nil
		}
		if len(files) != 1 {
			return fmt.Errorf("start: created with %d files, not the terminal", len(files))
		}
		return sendConsole(o.ConsoleSocket, files[0])
	}
	return fmt.Errorf("start: unexpected message %q from the container's role", m.Kind)
}

// sendHookState sends the container's init the state its createContainer
// and startContainer hooks get on stdin (status created, as runc gives
// its startContainer hooks: the container's process is not running yet).
// The init waits for it, before it pivots into the root, so it also tells
// it that the createRuntime hooks have run. A send that fails (the init
// is gone) is not the error: the init's report, or its end, which the
// next receive reads, says why.
func sendHookState(conn *control.Conn, state specs.State) error {
	state.Status = specs.StateCreated
	data, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("hooks: state: %w", err)
	}
	_ = conn.Send(control.Message{Kind: control.KindState, State: data})
	return nil
}

// setOOMScoreAdj gives the container's process (pid, this process's
// descendant, not reaped) the bundle's oom_score_adj at create, as runc
// does, through the host's /proc (the container's is its root's owner's to
// arrange), and is the only one to: a value below the process's own needs
// CAP_SYS_RESOURCE, and without it create fails with a clear error,
// instead of the process at start, where a pod sandbox's error goes
// nowhere.
func setOOMScoreAdj(pid, value int) error {
	path := fmt.Sprintf("/proc/%d/oom_score_adj", pid)
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("oom_score_adj: %w", err)
	}
	current, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return fmt.Errorf("oom_score_adj: %q", data)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(strconv.Itoa(value))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		if value < current {
			return fmt.Errorf("process.oomScoreAdj %d: %v (lowering it from %d needs CAP_SYS_RESOURCE)", value, err, current)
		}
		return fmt.Errorf("process.oomScoreAdj %d: %v", value, err)
	}
	return nil
}

// adoptInit takes pid as the container's process: a child of the role's
// (or of this process, the role gone), identified by a pidfd.
func (cr *creation) adoptInit(pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("start: the container's process %d: %w", pid, err)
	}
	pidfd := os.NewFile(uintptr(fd), "init-pidfd")
	st, err := readProcStat(pid)
	if err != nil || st.Ppid != cr.role && st.Ppid != os.Getpid() {
		pidfd.Close()
		return fmt.Errorf("start: process %d is not the container's role's child", pid)
	}
	cr.init, cr.initPidfd = pid, pidfd
	return nil
}

// reapRole waits for the role, which exits once it has forked the
// container's process.
func (cr *creation) reapRole() error {
	if cr.role == 0 {
		return nil
	}
	_, err := spawn.Wait(cr.role)
	cr.role = 0
	if cr.rolePidfd != nil {
		cr.rolePidfd.Close()
		cr.rolePidfd = nil
	}
	if err != nil {
		return fmt.Errorf("start: the container's role: %w", err)
	}
	return nil
}

// abort undoes a failed create: the container's processes killed and
// reaped, its cgroup and state directory removed.
func (cr *creation) abort() {
	if cr.initPidfd != nil {
		_ = signalPidfd(cr.initPidfd, unix.SIGKILL)
	}
	if cr.rolePidfd != nil {
		_ = signalPidfd(cr.rolePidfd, unix.SIGKILL)
	} else if cr.role != 0 {
		_ = unix.Kill(cr.role, unix.SIGKILL)
	}
	if cr.role != 0 {
		_, _ = spawn.Wait(cr.role)
		cr.role = 0
	}
	if err := cr.cgroup.Remove(); err != nil {
		cr.rt.Log.Warn(err.Error())
	}
	if cr.initPidfd != nil {
		// Reparented here once the role is gone.
		_ = waitExit(cr.initPidfd)
		var ws unix.WaitStatus
		_, _ = unix.Wait4(cr.init, &ws, unix.WNOHANG, nil)
		cr.initPidfd.Close()
	}
	if err := cr.container.Remove(); err != nil {
		cr.rt.Log.Warn(err.Error())
	}
}
