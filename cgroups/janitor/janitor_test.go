package janitor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/cgroups/cgroupfile"
	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/internal/spawn"
)

// The test binary is the janitor program of the tests that start one.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == Arg {
		Main(os.Args[1:])
	}
	os.Exit(m.Run())
}

// TestWatchKeepsWhatIsNotForgotten: a watching janitor removes, at the end,
// the directories it was told about and not told are gone, and never one
// outside jail's parent cgroups.
func TestWatchKeepsWhatIsNotForgotten(t *testing.T) {
	in := strings.Join([]string{
		"+/sys/fs/cgroup/memory/jail/1-a",
		"+/sys/fs/cgroup/cpu/jail/1-a",
		"+/sys/fs/cgroup/jail/2-b",
		"-/sys/fs/cgroup/jail/2-b",
		"+/sys/fs/cgroup/memory/other/3-c",
		"+/etc",
		"+/sys/fs/cgroup/memory/jail/../../x",
		"x",
		"",
	}, "\n")
	left, seen := watch(strings.NewReader(in))
	want := []string{"/sys/fs/cgroup/cpu/jail/1-a", "/sys/fs/cgroup/memory/jail/1-a"}
	if !reflect.DeepEqual(left, want) {
		t.Errorf("left to remove %v, want %v", left, want)
	}
	want = []string{"/sys/fs/cgroup/cpu/jail/1-a", "/sys/fs/cgroup/jail/2-b", "/sys/fs/cgroup/memory/jail/1-a"}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("told about %v, want %v", seen, want)
	}
}

// TestWatchRemovesOnClose: a real cgroup the janitor was told about is gone
// once its supervisor lets it go, and one it was told is gone is not touched
// (it is held, as its supervisor would); an old orphan beside them is swept.
func TestWatchRemovesOnClose(t *testing.T) {
	parent := v1ParentOrSkip(t, "memory")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	w, err := StartWatch(self)
	if err != nil {
		t.Fatal(err)
	}
	watched := filepath.Join(parent, "janitor-test-watched")
	kept := filepath.Join(parent, "janitor-test-kept")
	orphan := filepath.Join(parent, "janitor-test-orphan")
	defer os.Remove(kept)
	defer os.Remove(orphan)
	for _, d := range []string{watched, kept} {
		if err := w.Add([]string{d}); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Forget([]string{kept}); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * SweepAge)
	if err := os.Mkdir(orphan, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{kept, orphan} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	hold, err := Hold(kept)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	markUnswept(t, parent)
	if err := w.Close(); err != nil {
		t.Fatalf("janitor: %v", err)
	}
	for _, gone := range []string{watched, orphan} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", gone, err)
		}
	}
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("%s was removed: %v", kept, err)
	}
}

// TestSweep: a sweep removes a sandbox cgroup beside its own that is empty,
// older than SweepAge and held by no supervisor, and nothing else: not one
// a supervisor holds, not a young one (a supervisor may be between making
// and holding it), not one with a process in it (which it leaves running),
// not one whose name is not a sandbox's.
func TestSweep(t *testing.T) {
	parent := v1ParentOrSkip(t, "pids")
	old := time.Now().Add(-2 * SweepAge)
	name := fmt.Sprintf("sweep-test-%d", os.Getpid())
	dirs := map[string]string{}
	for _, c := range []string{"orphan", "held", "young", "busy", "dotted"} {
		dir := filepath.Join(parent, name+"-"+c)
		if c == "dotted" {
			dir = filepath.Join(parent, name+".dotted")
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(dir) })
		if c != "young" {
			if err := os.Chtimes(dir, old, old); err != nil {
				t.Fatal(err)
			}
		}
		dirs[c] = dir
	}
	held, err := Hold(dirs["held"])
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
	if err := os.WriteFile(filepath.Join(dirs["busy"], "cgroup.procs"), []byte(fmt.Sprint(sleeper.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}

	Sweep([]string{parent}, time.Now())

	for c, dir := range dirs {
		_, err := os.Stat(dir)
		if gone := os.IsNotExist(err); gone != (c == "orphan") {
			t.Errorf("%s: gone %v (%v)", c, gone, err)
		}
	}
	if err := syscall.Kill(sleeper.Process.Pid, 0); err != nil {
		t.Errorf("the process in a busy cgroup: %v", err)
	}
	// A supervisor that lets go leaves the cgroup to the next sweep.
	held.Close()
	Sweep([]string{parent}, time.Now())
	if _, err := os.Stat(dirs["held"]); !os.IsNotExist(err) {
		t.Errorf("a cgroup let go of is still there: %v", err)
	}
}

// TestSweepIsDueOncePerAge: a janitor sweeps a parent only if none did in
// the last SweepAge, and marks it when it does, whatever reads it between.
func TestSweepIsDueOncePerAge(t *testing.T) {
	// A cgroup directory of this test's own, held so that no sweep takes
	// it, rather than jail's parent, which the janitors of other tests
	// mark meanwhile.
	dir := filepath.Join(v1ParentOrSkip(t, "pids"), fmt.Sprintf("due-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(dir)
	held, err := Hold(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	markUnswept(t, dir)
	if !sweepDue(dir, time.Now()) {
		t.Fatal("a parent not swept for two minutes is not due")
	}
	if _, err := os.ReadDir(dir); err != nil {
		t.Fatal(err)
	}
	if sweepDue(dir, time.Now()) {
		t.Error("a parent just swept is due again")
	}
	if !sweepDue(dir, time.Now().Add(SweepAge)) {
		t.Error("a parent swept SweepAge ago is not due")
	}
}

// markUnswept makes parent look as if no janitor swept it for two
// SweepAges. Call it after making what a sweep should find: a janitor of
// another test that sweeps meanwhile then finds it too.
func markUnswept(t *testing.T, parent string) {
	t.Helper()
	old := time.Now().Add(-2 * SweepAge)
	if err := os.Chtimes(parent, old, old); err != nil {
		t.Fatal(err)
	}
}

// sandboxParentOrSkip makes jail's parent, as root, in the v2 hierarchy or
// else in the v1 pids one, or skips the test.
func sandboxParentOrSkip(t *testing.T) string {
	t.Helper()
	var st unix.Statfs_t
	if os.Geteuid() == 0 && unix.Statfs(mountpoint, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		parent := filepath.Join(mountpoint, Parent)
		if err := os.MkdirAll(parent, 0o755); err != nil {
			t.Fatal(err)
		}
		return parent
	}
	return v1ParentOrSkip(t, "pids")
}

// v1ParentOrSkip makes jail's parent in the v1 hierarchy of controller, as
// root, or skips the test.
func v1ParentOrSkip(t *testing.T, controller string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make cgroups")
	}
	root := filepath.Join(mountpoint, controller)
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		t.Skipf("no cgroup v1 %s hierarchy", controller)
	}
	parent := filepath.Join(root, Parent)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	return parent
}

// TestKillSignalsOnlyTheCgroupsProcesses: of the pids a janitor read from
// cgroup.procs, it kills only those whose process is in the cgroup when it
// signals: a pid that another process outside has taken since (here: an
// outside process's pid among those read) is never signalled. (On v2 this
// is the way of kernels before cgroup.kill, 5.14.)
func TestKillSignalsOnlyTheCgroupsProcesses(t *testing.T) {
	dir := filepath.Join(sandboxParentOrSkip(t), fmt.Sprintf("kill-test-%d", os.Getpid()))
	inside, outside := oneInsideOneOut(t, dir)

	killMembers(dir, []int{outside.Process.Pid, inside.Process.Pid, os.Getpid()})

	if err := inside.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the process in the cgroup: %v, want killed", err)
	}
	if err := syscall.Kill(outside.Process.Pid, 0); err != nil {
		t.Errorf("the process outside the cgroup: %v", err)
	}
	var ws syscall.WaitStatus
	if pid, _ := syscall.Wait4(outside.Process.Pid, &ws, syscall.WNOHANG, nil); pid != 0 {
		t.Errorf("the process outside the cgroup ended: %v", ws)
	}
}

// TestRemoveKillsOnlyWhatIsInTheCgroup: Remove, and each janitor program
// once let go, kills the processes in a sandbox cgroup (through
// cgroup.kill where the kernel has it, pidfds otherwise) and removes it; a
// process outside is not touched.
func TestRemoveKillsOnlyWhatIsInTheCgroup(t *testing.T) {
	parent := sandboxParentOrSkip(t)
	_, err := os.Stat(filepath.Join(parent, "cgroup.kill"))
	t.Logf("cgroup.kill: %v", err == nil)
	removers := []struct {
		name   string
		remove func(dir string) error
	}{{"Remove", func(dir string) error { return Remove([]string{dir}) }}}
	for _, j := range janitorPrograms(t) {
		removers = append(removers, struct {
			name   string
			remove func(dir string) error
		}{j.name + " janitor", func(dir string) error {
			release, wait, err := startJanitor(j.path, dir)
			if err != nil {
				return err
			}
			release.Close()
			return wait()
		}})
	}
	for _, r := range removers {
		t.Run(r.name, func(t *testing.T) {
			dir := filepath.Join(parent, fmt.Sprintf("remove-test-%d", os.Getpid()))
			inside, outside := oneInsideOneOut(t, dir)

			if err := r.remove(dir); err != nil {
				t.Fatal(err)
			}

			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s is still there: %v", dir, err)
			}
			if err := inside.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
				t.Errorf("the process in the cgroup: %v, want killed", err)
			}
			var ws syscall.WaitStatus
			if pid, _ := syscall.Wait4(outside.Process.Pid, &ws, syscall.WNOHANG, nil); pid != 0 {
				t.Errorf("the process outside the cgroup ended: %v", ws)
			}
		})
	}
}

// oneInsideOneOut makes the cgroup dir, removed when the test ends, and
// starts two processes that run until then: inside in the cgroup, outside
// not.
func oneInsideOneOut(t *testing.T, dir string) (inside, outside *exec.Cmd) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	inside, outside = exec.Command("sleep", "60"), exec.Command("sleep", "60")
	for _, c := range []*exec.Cmd{inside, outside} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(inside.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	return inside, outside
}

// janitorPrograms are the janitors to run as processes: this test binary
// (Main) and the C helper program.
func janitorPrograms(t *testing.T) []struct{ name, path string } {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := []struct{ name, path string }{{"go", self}}
	p, err := programs.Open(programs.Helper)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return append(out, struct{ name, path string }{"c", p.Path})
}

// TestJanitorsSpareAProcessPassingThrough: on v1 a supervisor's or a
// forker's thread passes through a sandbox's cgroup to fork its init, and
// cgroup.procs lists the whole process then. A janitor (this package's and
// the C program) that finds the cgroup busy kills what is in it, but never
// such a process (here: this test's), and removes the cgroup once the
// thread has left.
func TestJanitorsSpareAProcessPassingThrough(t *testing.T) {
	parent := v1ParentOrSkip(t, "pids")
	for _, j := range janitorPrograms(t) {
		t.Run(j.name, func(t *testing.T) {
			dir := filepath.Join(parent, fmt.Sprintf("pass-test-%d-%s", os.Getpid(), j.name))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Remove(dir) })
			leave := threadInto(t, dir)
			release, wait, err := startJanitor(j.path, dir)
			if err != nil {
				leave()
				t.Fatal(err)
			}
			release.Close()
			// Time enough for the janitor to find the cgroup busy and
			// kill what it lists, a few times over (it retries every 5
			// ms for five seconds).
			time.Sleep(200 * time.Millisecond)
			leave()
			if err := wait(); err != nil {
				t.Errorf("janitor: %v", err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s is still there: %v", dir, err)
			}
		})
	}
}

// startJanitor starts the janitor program at path for dir, as Start does,
// and returns a wait that reports how it ended.
func startJanitor(path, dir string) (release *os.File, wait func() error, err error) {
	w, pid, err := launch(path, []string{dir})
	if err != nil {
		return nil, nil, err
	}
	return w, func() error { _, err := spawn.Wait(pid); return err }, nil
}

// threadInto moves a thread of this process, never its leader, into the v1
// cgroup dir; leave moves it out to dir's parent again. The thread ends with
// its goroutine, having been elsewhere.
func threadInto(t *testing.T, dir string) (leave func()) {
	t.Helper()
	entered := make(chan error, 1)
	out := make(chan struct{})
	left := make(chan struct{})
	var start func()
	start = func() {
		go func() {
			runtime.LockOSThread()
			if unix.Gettid() == unix.Getpid() {
				// The leader: another thread, while this one is taken.
				start()
				<-left
				return
			}
			err := cgroupfile.Write(filepath.Join(dir, "tasks"), "0")
			entered <- err
			if err == nil {
				<-out
				err = cgroupfile.Write(filepath.Join(filepath.Dir(dir), "tasks"), "0")
				if err != nil {
					t.Errorf("leave %s: %v", dir, err)
				}
			}
			close(left)
		}()
	}
	start()
	if err := <-entered; err != nil {
		t.Fatalf("enter %s: %v", dir, err)
	}
	return func() {
		close(out)
		<-left
	}
}
