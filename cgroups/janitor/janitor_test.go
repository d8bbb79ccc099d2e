package janitor

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
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
	got := watch(strings.NewReader(in))
	want := []string{"/sys/fs/cgroup/cpu/jail/1-a", "/sys/fs/cgroup/memory/jail/1-a"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("left to remove %v, want %v", got, want)
	}
}

// TestWatchRemovesOnClose: a real cgroup the janitor was told about is gone
// once its supervisor lets it go, and one it was told is gone is not touched.
func TestWatchRemovesOnClose(t *testing.T) {
	parent := "/sys/fs/cgroup/memory/" + Parent
	if os.Geteuid() != 0 {
		t.Skip("needs root to make cgroups")
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err != nil {
		t.Skip("no cgroup v1 memory hierarchy")
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		t.Fatal(err)
	}
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
	defer os.Remove(kept)
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
	if err := w.Close(); err != nil {
		t.Fatalf("janitor: %v", err)
	}
	if _, err := os.Stat(watched); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", watched, err)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("%s was removed: %v", kept, err)
	}
}
