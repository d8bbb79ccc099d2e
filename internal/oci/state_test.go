package oci

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestValidID(t *testing.T) {
	for _, id := range []string{"a", "abc-1", "A.b+c_d-e", "0", strings.Repeat("x", 255)} {
		if err := ValidID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, id := range []string{"", ".", "..", "-a", "_a", "a/b", "../x", "a b", "a\x00", "é", strings.Repeat("x", 256)} {
		if err := ValidID(id); err == nil {
			t.Errorf("%q accepted", id)
		}
	}
}

func TestStoreLifecycle(t *testing.T) {
	root := filepath.Join(t.TempDir(), "state")
	if _, err := OpenStore(root, false); !errors.Is(err, ErrNotExist) {
		t.Fatalf("missing root, not creating: %v", err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatal("a read made the root")
	}
	s, err := OpenStore(root, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if info, _ := os.Stat(root); info.Mode().Perm() != 0o700 {
		t.Errorf("root mode %v", info.Mode())
	}
	c, err := s.Create("box")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create("box"); err == nil || err.Error() != "container with id exists: box" {
		t.Errorf("second create: %v", err)
	}
	if _, err := c.ReadState(); !errors.Is(err, ErrNotExist) {
		t.Errorf("no state yet: %v", err)
	}
	old := unix.Umask(0o077)
	fifo, err := c.MakeFifo()
	unix.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	fifo.Close()
	info, err := os.Stat(filepath.Join(root, "box", fifoFile))
	if err != nil || info.Mode()&os.ModeNamedPipe == 0 || info.Mode().Perm() != fifoMode {
		t.Errorf("fifo %v %v", info.Mode(), err)
	}
	if !c.HasFifo() {
		t.Error("no fifo seen")
	}
	want := &State{ID: "box", Bundle: "/b", Pid: 42, StartTime: 7, Annotations: map[string]string{"a": "b"}, Cgroup: &Cgroup{Paths: []string{"/x"}}}
	if err := c.WriteState(want); err != nil {
		t.Fatal(err)
	}
	got, err := c.ReadState()
	if err != nil || got.Pid != 42 || got.StartTime != 7 || got.Annotations["a"] != "b" || got.Cgroup.Paths[0] != "/x" {
		t.Fatalf("read back %+v %v", got, err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "box"))
	if len(entries) != 2 {
		t.Errorf("state directory holds %d entries (a temporary file left?)", len(entries))
	}
	ids, err := s.List()
	if err != nil || len(ids) != 1 || ids[0] != "box" {
		t.Errorf("list %v %v", ids, err)
	}
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open("box"); !errors.Is(err, ErrNotExist) {
		t.Errorf("after remove: %v", err)
	}
	if _, err := s.Open("../state"); err == nil || errors.Is(err, ErrNotExist) {
		t.Errorf("bad id: %v", err)
	}
}

func TestStoreRefusesARootOthersMayWrite(t *testing.T) {
	root := t.TempDir()
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(root, true); err == nil || !strings.Contains(err.Error(), "only you may write") {
		t.Errorf("world-writable root: %v", err)
	}
}

// TestStateNamingAnotherContainerIsRefused: a state.json moved from one
// container's directory to another's is not believed.
func TestStateNamingAnotherContainerIsRefused(t *testing.T) {
	_, c := newStoredContainer(t, "a")
	if err := c.WriteState(&State{ID: "b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadState(); err == nil {
		t.Error("accepted")
	}
}

func TestLockIsExclusive(t *testing.T) {
	_, c := newStoredContainer(t, "a")
	other, err := os.Open(c.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != unix.EWOULDBLOCK {
		t.Errorf("a second lock: %v", err)
	}
}

func TestParseProcStat(t *testing.T) {
	// A command name may hold spaces and parentheses.
	line := "1234 (a) (b c) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 200 18446744073709551615\n"
	st, err := parseProcStat([]byte(line))
	if err != nil || st.State != 'S' || st.Ppid != 1 || st.StartTime != 987654 {
		t.Errorf("%+v %v", st, err)
	}
	for _, bad := range []string{"", "1 (a S 1", "1 (a) S x 2", "1 (a) S 1 2 3"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestOpenProcessNeverNamesAnotherProcess: a pid whose start time is not
// the one recorded (reused), or whose process is a zombie, reads as gone.
func TestOpenProcessNeverNamesAnotherProcess(t *testing.T) {
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	st, err := readProcStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	pidfd, err := openProcess(pid, st.StartTime)
	if err != nil || pidfd == nil {
		t.Fatalf("the process itself: %v %v", pidfd, err)
	}
	if other, err := openProcess(pid, st.StartTime+1); err != nil || other != nil {
		t.Errorf("another start time: %v %v", other, err)
	}
	if err := signalPidfd(pidfd, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(pidfd); err != nil {
		t.Fatal(err)
	}
	if !exited(pidfd) {
		t.Error("not seen exited")
	}
	// A zombie, not reaped yet.
	if z, err := openProcess(pid, st.StartTime); err != nil || z != nil {
		t.Errorf("zombie: %v %v", z, err)
	}
	pidfd.Close()
	_ = cmd.Wait()
	if gone, err := openProcess(pid, st.StartTime); err != nil || gone != nil {
		t.Errorf("reaped: %v %v", gone, err)
	}
}

// TestOpenProcessOfAThreadIsNoProcess: a recorded pid that now names a
// thread, not a process (pidfd_open's EINVAL; before Linux 6.9 also what
// a process just released gives), reads as gone, not as an error: state
// and delete of such a container must go on.
func TestOpenProcessOfAThreadIsNoProcess(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	if tid == os.Getpid() {
		done := make(chan int)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			done <- unix.Gettid()
		}()
		tid = <-done
	}
	st, err := readProcStat(tid)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := openProcess(tid, st.StartTime); err != nil || p != nil {
		t.Errorf("a thread: %v %v", p, err)
	}
}

func TestParseSignal(t *testing.T) {
	cases := map[string]syscall.Signal{
		"9": syscall.SIGKILL, "SIGKILL": syscall.SIGKILL, "KILL": syscall.SIGKILL, "kill": syscall.SIGKILL,
		"TERM": syscall.SIGTERM, "SIGHUP": syscall.SIGHUP, "15": syscall.SIGTERM, "64": 64, "SIGWINCH": syscall.SIGWINCH,
	}
	for in, want := range cases {
		if got, err := ParseSignal(in); err != nil || got != want {
			t.Errorf("%q: %v %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "65", "-1", "SIGFOO", "SIG", "9x"} {
		if _, err := ParseSignal(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestCgroupPath(t *testing.T) {
	cases := []struct {
		path    string
		systemd bool
		want    string // "" : refused
	}{
		{"", false, "/jail-oci/box"},
		{"/default/box", false, "/default/box"},
		{"/kubepods/burstable/pod1/../pod2/c", false, "/kubepods/burstable/pod2/c"},
		{"/../../x", false, "/x"},
		{"/", false, ""},
		{"/..", false, ""},
		{"relative/path", false, "/jail-oci/relative/path"},
		{"../up", false, ""},
		{"a/../../up", false, ""},
		{"system.slice:docker:box", false, ""},
		{"a\x00b", false, ""},
		{"system.slice:containerd:box", true, "/system.slice/containerd-box.scope"},
		{"kubepods-burstable-pod1.slice:cri-containerd:abc", true, "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-abc.scope"},
		{":prefix:box", true, "/system.slice/prefix-box.scope"},
		{"-.slice:p:box", true, "/p-box.scope"},
		{"machine.slice::sub.slice", true, "/machine.slice/sub.slice"},
		{"", true, "/system.slice/jail-oci-box.scope"},
		{"/a/b", true, ""},
		{"a:b", true, ""},
		{"bad-.slice:p:n", true, ""},
		{"x.slice:p:../n", true, ""},
		{"x.slice:p:", true, ""},
		{"notaslice:p:n", true, ""},
	}
	for _, c := range cases {
		got, err := CgroupPath(c.path, "box", c.systemd)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("%q (systemd %v): %q accepted", c.path, c.systemd, got)
		case c.want != "" && (err != nil || got != c.want):
			t.Errorf("%q (systemd %v): %q %v; want %q", c.path, c.systemd, got, err, c.want)
		}
	}
}

// TestAReusedPidIsNeverSignalled: a state whose pid is now another
// process's (its start time differs) reads as stopped, and kill does not
// reach that process.
func TestAReusedPidIsNeverSignalled(t *testing.T) {
	root := t.TempDir()
	s, err := OpenStore(root, true)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Create("box")
	if err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sleep", "1000")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Wait()
	defer other.Process.Kill()
	st, err := readProcStat(other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteState(&State{ID: "box", Pid: other.Process.Pid, StartTime: st.StartTime - 1}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	s.Close()
	rt := &Runtime{Root: root, Log: &Logger{}}
	if got, err := rt.StateOf("box"); err != nil || got.Status != "stopped" || got.Pid != 0 {
		t.Errorf("state %+v %v", got, err)
	}
	if err := rt.Kill("box", syscall.SIGKILL, false); err == nil || err.Error() != "container not running" {
		t.Errorf("kill: %v", err)
	}
	if err := rt.Delete("box", false); err != nil {
		t.Errorf("delete: %v", err)
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the other process was signalled: %v", err)
	}
}

// TestAStateDirectoryThatIsALinkIsRefused: an ID whose entry in the root
// is a symbolic link (to another container's, or anywhere) is not
// followed.
func TestAStateDirectoryThatIsALinkIsRefused(t *testing.T) {
	root := t.TempDir()
	elsewhere := t.TempDir()
	if err := os.WriteFile(filepath.Join(elsewhere, stateFile), []byte(`{"id":"evil","pid":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(root, "evil")); err != nil {
		t.Fatal(err)
	}
	rt := &Runtime{Root: root, Log: &Logger{}}
	if _, err := rt.StateOf("evil"); err == nil {
		t.Error("followed")
	}
	if err := rt.Kill("evil", syscall.SIGCONT, false); err == nil {
		t.Error("kill followed the link")
	}
	if err := rt.Delete("evil", true); err == nil {
		t.Error("delete --force followed the link")
	}
	if _, err := os.Stat(filepath.Join(elsewhere, stateFile)); err != nil {
		t.Errorf("the link's target was changed: %v", err)
	}
}

// TestAnExecFifoReplacedIsNotOpened: start opens exec.fifo only if it is
// a FIFO, never through a link.
func TestAnExecFifoReplacedIsNotOpened(t *testing.T) {
	_, c := newStoredContainer(t, "box")
	target := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(target, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(c.Path(), fifoFile)); err != nil {
		t.Fatal(err)
	}
	if c.HasFifo() {
		t.Error("a link is taken for the FIFO")
	}
	if f, err := c.OpenFifo(); err == nil {
		f.Close()
		t.Error("opened through a link")
	}
	os.Remove(filepath.Join(c.Path(), fifoFile))
	if err := os.WriteFile(filepath.Join(c.Path(), fifoFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if f, err := c.OpenFifo(); err == nil {
		f.Close()
		t.Error("opened a regular file")
	}
}

// newStoredContainer makes a store in a directory of the test's and the
// state directory of container id in it, both closed when the test ends.
func newStoredContainer(t *testing.T, id string) (*Store, *Container) {
	t.Helper()
	s, err := OpenStore(t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := s.Create(id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return s, c
}
