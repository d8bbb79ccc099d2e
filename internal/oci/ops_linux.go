package oci

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// StatePaused is runc's status of a frozen container (the spec has none).
const StatePaused specs.ContainerState = "paused"

// opened is a container's state, locked, and its process when it lives.
type opened struct {
	store     *Store
	container *Container
	state     *State
	status    specs.ContainerState
	pidfd     *os.File // nil when stopped
}

func (o *opened) close() {
	if o.pidfd != nil {
		o.pidfd.Close()
	}
	if o.container != nil {
		o.container.Close()
	}
	o.store.Close()
}

// open opens and locks container id's state and finds its status: created
// while the exec FIFO is there and its process lives, running (or paused,
// its cgroup frozen) after, stopped once the process recorded is gone
// (another process that took its pid is not it).
func (rt *Runtime) open(id string) (*opened, error) {
	if err := ValidID(id); err != nil {
		return nil, err
	}
	store, err := OpenStore(rt.Root, false)
	if err != nil {
		return nil, err
	}
	o := &opened{store: store}
	if o.container, err = store.Open(id); err != nil {
		o.close()
		return nil, err
	}
	if o.state, err = o.container.ReadState(); err != nil {
		o.close()
		return nil, err
	}
	if err := o.refresh(); err != nil {
		o.close()
		return nil, err
	}
	return o, nil
}

func (o *opened) refresh() error {
	if o.pidfd != nil {
		o.pidfd.Close()
		o.pidfd = nil
	}
	pidfd, err := openProcess(o.state.Pid, o.state.StartTime)
	if err != nil {
		return err
	}
	o.pidfd = pidfd
	switch {
	case pidfd == nil:
		o.status = specs.StateStopped
	case o.container.HasFifo():
		o.status = specs.StateCreated
	case o.state.Cgroup != nil && o.state.Cgroup.Frozen():
		o.status = StatePaused
	default:
		o.status = specs.StateRunning
	}
	return nil
}

// specState is the state as the spec and runc's `state` show it.
func (o *opened) specState() specs.State {
	s := specs.State{
		Version: specs.Version, ID: o.state.ID, Status: o.status, Bundle: o.state.Bundle,
		Annotations: o.state.Annotations,
	}
	if o.status != specs.StateStopped {
		s.Pid = o.state.Pid
	}
	return s
}

// StateOutput is `jail oci state`'s JSON: the spec's state, with runc's
// rootfs and created, which go-runc reads too.
type StateOutput struct {
	specs.State
	Rootfs  string    `json:"rootfs"`
	Created time.Time `json:"created"`
	Owner   string    `json:"owner"`
}

// StateOf returns container id's state.
func (rt *Runtime) StateOf(id string) (*StateOutput, error) {
	o, err := rt.open(id)
	if err != nil {
		return nil, err
	}
	defer o.close()
	return &StateOutput{State: o.specState(), Rootfs: o.state.Rootfs, Created: o.state.Created, Owner: ownerName(o.state.Owner)}, nil
}

func ownerName(uid int) string {
	if uid == 0 {
		return "root"
	}
	return strconv.Itoa(uid)
}

// Start lets a created container's process run: it opens the exec FIFO,
// which the process waits on, reads the byte the process writes, and
// removes the FIFO; then the poststart hooks run.
func (rt *Runtime) Start(id string) error {
	o, err := rt.open(id)
	if err != nil {
		return err
	}
	defer o.close()
	switch o.status {
	case specs.StateStopped:
		return errors.New("cannot start a container that has stopped")
	case specs.StateRunning:
		return errors.New("cannot start an already running container")
	case StatePaused:
		return errors.New("cannot start a paused container")
	}
	fifo, err := o.container.OpenFifo()
	if err != nil {
		return err
	}
	defer fifo.Close()
	if err := awaitFifo(fifo, o.pidfd); err != nil {
		var failed startFailure
		if errors.As(err, &failed) {
			// The process is ending; it is not left to end alone.
			_ = signalPidfd(o.pidfd, unix.SIGKILL)
		}
		return err
	}
	if err := o.container.RemoveFifo(); err != nil {
		return fmt.Errorf("exec fifo: %w", err)
	}
	if h := o.state.Hooks; h != nil && len(h.Poststart) > 0 {
		o.status = specs.StateRunning
		if err := runHooks("poststart", h.Poststart, o.specState()); err != nil {
			// As runc: a container whose poststart failed is not left
			// running.
			_ = signalPidfd(o.pidfd, unix.SIGKILL)
			return err
		}
	}
	return nil
}

// fifoFailure starts what the container's init writes to the exec FIFO in
// place of its byte when it cannot start the process once started (a
// startContainer hook failed): the rest is its one-line error.
const fifoFailure = '!'

// startFailure is the error the container's init reported through the
// exec FIFO.
type startFailure string

func (e startFailure) Error() string { return string(e) }

// awaitFifo waits for the container's process to write its byte to the
// FIFO, or a failure (fifoFailure, then its error), or to end.
func awaitFifo(fifo, pidfd *os.File) error {
	fds := []unix.PollFd{
		{Fd: int32(fifo.Fd()), Events: unix.POLLIN},
		{Fd: int32(pidfd.Fd()), Events: unix.POLLIN},
	}
	for {
		_, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("exec fifo: %w", err)
		}
		if fds[0].Revents != 0 {
			// The init writes it at once (less than PIPE_BUF).
			var b [4096]byte
			n, err := unix.Read(int(fifo.Fd()), b[:])
			if err == unix.EAGAIN {
				continue
			}
			if err != nil {
				return fmt.Errorf("exec fifo: %w", err)
			}
			if n == 0 {
				return errors.New("the container's process closed the exec fifo without starting")
			}
			if b[0] == fifoFailure {
				return startFailure(oneLine(string(b[1:n]), 1024))
			}
			return nil
		}
		if fds[1].Revents != 0 {
			return errors.New("cannot start a container that has stopped")
		}
	}
}

// ParseSignal reads a signal as runc's kill takes it: a number, or a
// name with or without SIG.
func ParseSignal(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > 64 {
			return 0, fmt.Errorf("unknown signal %q", s)
		}
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("unknown signal %q", s)
}

// Kill sends sig to the container's process (through its pidfd), or with
// all to every process in its cgroup.
func (rt *Runtime) Kill(id string, sig syscall.Signal, all bool) error {
	o, err := rt.open(id)
	if err != nil {
		return err
	}
	defer o.close()
	if all && o.state.Cgroup != nil {
		return killCgroup(o.state.Cgroup, sig)
	}
	if o.pidfd == nil {
		return errors.New("container not running")
	}
	if err := signalPidfd(o.pidfd, sig); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return errors.New("container not running")
		}
		return fmt.Errorf("kill: %w", err)
	}
	return nil
}

// killCgroup signals every process in cg: each through a pidfd opened
// before it is checked to be still in cg, so that a pid reused outside
// since the listing is never signalled.
func killCgroup(cg *Cgroup, sig syscall.Signal) error {
	pids, err := cg.Pids()
	if err != nil {
		return err
	}
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		pidfd := os.NewFile(uintptr(fd), "pidfd")
		if cg.Contains(pid) {
			_ = signalPidfd(pidfd, sig)
		}
		pidfd.Close()
	}
	return nil
}

// Delete removes a stopped container (or a created one, whose process is
// killed, as runc does); a running or paused one only with force, killing
// it. Its processes are gone, and its cgroup and state removed, on return;
// then the poststop hooks run. With force, a container that does not
// exist is not an error.
func (rt *Runtime) Delete(id string, force bool) error {
	o, err := rt.open(id)
	if errors.Is(err, ErrNotExist) && force {
		return rt.removeLeftover(id)
	}
	if err != nil {
		return err
	}
	defer o.close()
	switch o.status {
	case specs.StateRunning, StatePaused:
		if !force {
			return fmt.Errorf("cannot delete container %s that is not stopped: %s", id, o.status)
		}
	}
	if o.pidfd != nil {
		_ = signalPidfd(o.pidfd, unix.SIGKILL)
	}
	if err := o.state.Cgroup.Remove(); err != nil {
		return err
	}
	if o.pidfd != nil {
		if err := waitExit(o.pidfd); err != nil {
			return fmt.Errorf("wait for the container's process: %w", err)
		}
	}
	o.status = specs.StateStopped
	if h := o.state.Hooks; h != nil {
		runHooksWarning("poststop", h.Poststop, o.specState(), rt.Log.Warn)
	}
	err = o.container.Remove()
	o.container = nil
	return err
}

// removeLeftover removes what a create left that ended before it wrote
// the state (delete --force, the shim's cleanup of a killed create): the
// cgroup it recorded, with what is in it (the container's init, a hook),
// and the state directory.
func (rt *Runtime) removeLeftover(id string) error {
	store, err := OpenStore(rt.Root, false)
	if errors.Is(err, ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer store.Close()
	c, err := store.Open(id)
	if errors.Is(err, ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := c.ReadState(); !errors.Is(err, ErrNotExist) {
		c.Close()
		if err == nil {
			// A create of the same id finished between the two opens.
			return rt.Delete(id, true)
		}
		return fmt.Errorf("container %s: state unreadable: %v", id, err)
	}
	cg, err := c.ReadCgroup()
	if err == nil {
		err = cg.Remove()
	}
	if err != nil {
		c.Close()
		return fmt.Errorf("container %s: %w", id, err)
	}
	return c.Remove()
}

// Pause freezes a running container's cgroup; Resume thaws a paused one.
func (rt *Runtime) Pause(id string, pause bool) error {
	o, err := rt.open(id)
	if err != nil {
		return err
	}
	defer o.close()
	switch {
	case pause && o.status != specs.StateRunning:
		return errors.New("container not running")
	case !pause && o.status != StatePaused:
		return errors.New("container not paused")
	case o.state.Cgroup == nil:
		return errors.New("the container has no cgroup to freeze")
	}
	return o.state.Cgroup.Freeze(pause)
}

// Pids lists the processes of the container: its cgroup's, or its process
// alone without one.
func (rt *Runtime) Pids(id string) ([]int, error) {
	o, err := rt.open(id)
	if err != nil {
		return nil, err
	}
	defer o.close()
	if o.state.Cgroup != nil {
		pids, err := o.state.Cgroup.Pids()
		if pids == nil {
			pids = []int{}
		}
		return pids, err
	}
	if o.pidfd != nil {
		return []int{o.state.Pid}, nil
	}
	return []int{}, nil
}

// PsTable runs ps with args (-ef when none) and writes its header and the
// lines of pids.
func PsTable(pids []int, args []string, out io.Writer) error {
	if len(args) == 0 {
		args = []string{"-ef"}
	}
	b, err := exec.Command("ps", args...).Output()
	if err != nil {
		return fmt.Errorf("ps: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	if !sc.Scan() {
		return errors.New("ps: no output")
	}
	header := sc.Text()
	col := -1
	for i, f := range strings.Fields(header) {
		if f == "PID" {
			col = i
		}
	}
	if col < 0 {
		return errors.New("ps: no PID column")
	}
	want := map[int]bool{}
	for _, p := range pids {
		want[p] = true
	}
	fmt.Fprintln(out, header)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > col {
			if n, err := strconv.Atoi(f[col]); err == nil && want[n] {
				fmt.Fprintln(out, sc.Text())
			}
		}
	}
	return nil
}

// Update writes new resources (a LinuxResources JSON) to the container's
// cgroup.
func (rt *Runtime) Update(id string, resources []byte) error {
	var r specs.LinuxResources
	if err := json.Unmarshal(resources, &r); err != nil {
		return fmt.Errorf("resources: %w", err)
	}
	o, err := rt.open(id)
	if err != nil {
		return err
	}
	defer o.close()
	if o.state.Cgroup == nil {
		return errors.New("the container has no cgroup")
	}
	err = o.state.Cgroup.Update(&r)
	// Saved even when a limit failed: the device rules in force may have
	// changed before it.
	if werr := o.container.WriteState(o.state); err == nil {
		err = werr
	}
	return err
}

// List returns the state of every container in the root.
func (rt *Runtime) List() ([]StateOutput, error) {
	store, err := OpenStore(rt.Root, false)
	if errors.Is(err, ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ids, err := store.List()
	store.Close()
	if err != nil {
		return nil, err
	}
	var out []StateOutput
	for _, id := range ids {
		s, err := rt.StateOf(id)
		if err != nil {
			continue // removed meanwhile, or a create under way's
		}
		out = append(out, *s)
	}
	return out, nil
}

// oneLine is s, which the container's side wrote, as one line of at most
// max bytes: what is not printable becomes a space (control characters,
// C1's too, line and paragraph separators, format characters such as a
// right-to-left override, bytes that are not UTF-8), and a cut line ends
// in "...".
func oneLine(s string, max int) string {
	s = strings.TrimSpace(strings.Map(func(r rune) rune {
		if !unicode.IsPrint(r) || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s))
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}
