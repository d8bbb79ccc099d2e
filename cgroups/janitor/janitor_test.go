package janitor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
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
