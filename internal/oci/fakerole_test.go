package oci

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/control"
)

// The tests stand in for the helper's container role (C, written apart)
// with this test binary started again: fakeRoleArg speaks the role's side
// of the protocol (docs/oci.md §2) without building anything, and forks
// fakeInitArg, the container's process, which reports created, waits on
// the exec FIFO and then sleeps until killed. What they test is the Go
// side: create's conversation, the state, start, kill, ps, pause, delete.
const (
	fakeRoleArg = "jail-oci-test-fake-role"
	fakeInitArg = "jail-oci-test-fake-init"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case fakeRoleArg:
			os.Exit(fakeRole())
		case fakeInitArg:
			os.Exit(fakeInit())
		case deviceProbeArg:
			os.Exit(deviceProbe())
		}
	}
	os.Exit(m.Run())
}

func fakeRuntime(t *testing.T, root string) *Runtime {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &Runtime{Root: root, Log: &Logger{Stderr: os.Stderr}, role: &roleCommand{path: exe, args: []string{exe, fakeRoleArg}}}
}

func fakeFail(conn *control.Conn, format string, args ...any) int {
	_ = conn.Send(control.Message{Kind: control.KindError, Step: "fake role", Reason: fmt.Sprintf(format, args...)})
	return 1
}

// fakeRole checks the description it is sent, then forks the container's
// process with the control socket and the exec FIFO, and reports it.
func fakeRole() int {
	conn := control.FromFD(3)
	m, files, err := conn.Recv()
	if err != nil || m.Kind != control.KindContainer || m.Container == nil {
		return fakeFail(conn, "expected a container: %v %q", err, m.Kind)
	}
	c := m.Container
	if c.ExecFifoFD != 4+len(files)-1 {
		return fakeFail(conn, "exec fifo fd %d with %d files", c.ExecFifoFD, len(files))
	}
	for i, j := range c.Join {
		got, err := unix.IoctlRetInt(int(files[j.FD-4].Fd()), unix.NS_GET_NSTYPE)
		if err != nil || int64(got) != j.Type {
			return fakeFail(conn, "join %d: fd %d is type %#x (%v), not %#x", i, j.FD, got, err, j.Type)
		}
	}
	if c.Process.Args[0] == "fail-in-role" {
		return fakeFail(conn, "asked to")
	}
	if c.New&unix.CLONE_NEWUSER != 0 {
		if code := fakeUserns(conn); code != 0 {
			return code
		}
	}
	exe, _ := os.Executable()
	// The child waits for the gate (its end of a pipe) before it says
	// anything, as the real role's child does: its report must follow
	// the role's KindChild.
	gate, opened, err := os.Pipe()
	if err != nil {
		return fakeFail(conn, "gate: %v", err)
	}
	// With createContainer hooks, the stand-in init records the state
	// it is sent (KindState) at the first one's path, instead of running
	// it.
	record := "-"
	if len(c.CreateContainerHooks) > 0 {
		record = c.CreateContainerHooks[0].Path
	}
	cmd := exec.Command(exe, fakeInitArg, c.Process.Args[0], strconv.FormatBool(c.Process.Terminal), record)
	cmd.ExtraFiles = []*os.File{conn.File(), files[c.ExecFifoFD-4], gate}
	if err := cmd.Start(); err != nil {
		return fakeFail(conn, "fork: %v", err)
	}
	gate.Close()
	defer opened.Close()
	if err := conn.Send(control.Message{Kind: control.KindChild, Pid: cmd.Process.Pid}); err != nil {
		return 1
	}
	return 0
}

// fakeUserns stands for a role that made a user namespace: a child in a
// new one (a Go process cannot unshare its own), whose maps create is to
// write once told (KindUserns with its pid); they must be the test
// bundle's.
func fakeUserns(conn *control.Conn) int {
	holder := exec.Command("/bin/sleep", "1000")
	holder.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
	if err := holder.Start(); err != nil {
		return fakeFail(conn, "user namespace: %v", err)
	}
	defer holder.Wait()
	defer holder.Process.Kill()
	if err := conn.Send(control.Message{Kind: control.KindUserns, Pid: holder.Process.Pid}); err != nil {
		return 1
	}
	m, _, err := conn.Recv()
	if err != nil || m.Kind != control.KindMapped {
		return fakeFail(conn, "expected mapped: %v %q", err, m.Kind)
	}
	for _, f := range []string{"uid_map", "gid_map"} {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(holder.Process.Pid) + "/" + f)
		if got := strings.Join(strings.Fields(string(b)), " "); got != "0 100000 65536" {
			return fakeFail(conn, "%s is %q", f, got)
		}
	}
	return 0
}

// fakeInit reports created (or fails when its argument says so), then
// opens the FIFO for writing, which blocks until start opens it, writes
// its byte and waits to be killed.
func fakeInit() int {
	conn := control.FromFD(3)
	// The gate opens when the role closes its end, after its KindChild.
	gate := os.NewFile(5, "gate")
	_, _ = gate.Read(make([]byte, 1))
	gate.Close()
	if os.Args[2] == "fail-in-init" {
		return fakeFail(conn, "init asked to")
	}
	if record := os.Args[4]; record != "-" {
		m, _, err := conn.Recv()
		if err != nil || m.Kind != control.KindState {
			return fakeFail(conn, "expected the state: %v %q", err, m.Kind)
		}
		if err := os.WriteFile(record, m.State, 0o644); err != nil {
			return fakeFail(conn, "record: %v", err)
		}
	}
	var files []*os.File
	if os.Args[3] == "true" {
		ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
		if err != nil {
			return fakeFail(conn, "ptmx: %v", err)
		}
		files = append(files, ptmx)
	}
	if err := conn.Send(control.Message{Kind: control.KindCreated}, files...); err != nil {
		return 1
	}
	conn.Close()
	fifo, err := os.OpenFile("/proc/self/fd/4", os.O_WRONLY, 0)
	if err != nil {
		return 2
	}
	unix.Close(4)
	if os.Args[2] == "fail-at-start" {
		// As the init whose startContainer hook failed.
		_, _ = fifo.Write([]byte("!startContainer hook #0 (/hook): exit status 1: no\nGPU\x1b[2J"))
		return 1
	}
	if _, err := fifo.Write([]byte{0}); err != nil {
		return 3
	}
	fifo.Close()
	if os.Args[2] == "exit-at-start" {
		return 0
	}
	for {
		_ = unix.Pause()
	}
}

// reap reaps pid, this test process's child once the role is gone (create
// makes its caller a subreaper, as the shim is).
func reap(t *testing.T, pid int) {
	t.Helper()
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil && err != unix.ECHILD {
		t.Errorf("reap %d: %v", pid, err)
	}
}

func pidAlive(pid int) bool { return unix.Kill(pid, 0) == nil }

func readPidFile(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatalf("pid file %q", b)
	}
	return pid
}
