package programs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jail-sandbox/jail/cgroups/janitor"
)

// TestCachedCopy: the copy is written once, read-only, in a directory only
// its owner can write; a file that is not the copy jail wrote is never run;
// copies of other versions go once unused for long, and stay while in use.
func TestCachedCopy(t *testing.T) {
	version := Version(Stage)
	if version == "" {
		t.Skip("no embedded programs (go generate ./internal/programs)")
	}
	dir := filepath.Join(t.TempDir(), "jail")
	stale := filepath.Join(dir, ".stage-0000000000000000")
	inUse := filepath.Join(dir, ".stage-1111111111111111")
	if err := os.MkdirAll(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{stale, inUse} {
		if err := os.WriteFile(f, []byte("old"), 0o555); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * staleCopy)
	if err := os.Chtimes(stale, long, long); err != nil {
		t.Fatal(err)
	}
	path, err := cachedCopy(dir, Stage, version)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o555 {
		t.Fatalf("copy: %v %v", st, err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the long-unused copy of another version stayed: %v", err)
	}
	if _, err := os.Stat(inUse); err != nil {
		t.Errorf("the copy another version is using went: %v", err)
	}
	// Used again, the copy is marked as in use, not written again.
	if err := os.Chtimes(path, long, long); err != nil {
		t.Fatal(err)
	}
	if again, err := cachedCopy(dir, Stage, version); err != nil || again != path {
		t.Fatalf("second call: %q %v", again, err)
	}
	if st2, err := os.Stat(path); err != nil || !os.SameFile(st, st2) || time.Since(st2.ModTime()) > time.Minute {
		t.Errorf("second call: the copy was written again or not marked as used: %v", err)
	}
	// Replaced by something else of another size: refused, not run.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o555); err != nil {
		t.Fatal(err)
	}
	if _, err := cachedCopy(dir, Stage, version); err == nil {
		t.Error("a file that is not jail's copy was accepted")
	}
	// Nor a symlink to the real thing.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/self/exe", path); err != nil {
		t.Fatal(err)
	}
	if _, err := cachedCopy(dir, Stage, version); err == nil {
		t.Error("a symlink was accepted as jail's copy")
	}
	// A directory others may write is not used.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := cachedCopy(dir, Stage, version); err == nil {
		t.Error("a world-writable directory was used")
	}
}

// TestStageNamesItself: ps and top show what a stage is (here the janitor,
// which waits for its stdin to close), not the name of the file it was run
// from.
func TestStageNamesItself(t *testing.T) {
	if Version(Stage) == "" {
		t.Skip("no embedded programs (go generate ./internal/programs)")
	}
	cmd, release, _ := startJanitor(t, Stage)
	defer func() {
		release.Close()
		_ = cmd.Wait()
	}()
	if comm := nameOf(cmd.Process.Pid, "jail-janitor"); comm != "jail-janitor" {
		t.Errorf("the janitor's name is %q", comm)
	}
}

// startJanitor starts program name as a janitor of dirs. It runs until
// release is closed; the caller waits for it.
func startJanitor(t *testing.T, name string, dirs ...string) (cmd *exec.Cmd, release *os.File, stderr *strings.Builder) {
	t.Helper()
	p, err := Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	stdin, release, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stderr = &strings.Builder{}
	cmd = &exec.Cmd{Path: p.Path, Args: append([]string{janitor.Arg}, dirs...), Stdin: stdin, Stderr: stderr}
	if err := cmd.Start(); err != nil {
		release.Close()
		t.Fatal(err)
	}
	return cmd, release, stderr
}

// nameOf returns the process's name once it is want, or what it is after
// five seconds.
func nameOf(pid int, want string) string {
	comm := ""
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if comm = strings.TrimSpace(string(b)); err == nil && comm == want {
			break
		}
	}
	return comm
}

// TestJanitorProgram: the janitor program waits for its supervisor to let it
// go, then kills what is left in each sandbox cgroup it was given and
// removes it, and never touches a directory that is not a sandbox cgroup
// (the same rules as cgroups/janitor's), whatever its arguments say. Then
// it sweeps, as the Go janitor does: an old sandbox cgroup beside its own
// that nobody holds is removed, a held one is kept. It names itself as the
// stage program's janitor does.
func TestJanitorProgram(t *testing.T) {
	if Version(Janitor) == "" {
		t.Skip("no embedded programs (go generate ./internal/programs)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to make cgroups")
	}
	parent := "/sys/fs/cgroup/pids/" + janitor.Parent
	if _, err := os.Stat("/sys/fs/cgroup/pids/cgroup.procs"); err != nil {
		t.Skip("no cgroup v1 pids hierarchy")
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("programs-test-%d", os.Getpid())
	sandbox := filepath.Join(parent, name)          // with a process in it
	empty := filepath.Join(parent, name+"-empty")   // nothing in it
	nested := filepath.Join(parent, name+"-x", "y") // its parent is not jail's
	dotted := filepath.Join(parent, name+".z")      // not a sandbox's name
	orphan := filepath.Join(parent, name+"-orphan") // old, held by nobody
	held := filepath.Join(parent, name+"-held")     // old, held
	for _, d := range []string{sandbox, empty, nested, dotted, orphan, held} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, d := range []string{sandbox, empty, nested, filepath.Dir(nested), dotted, orphan, held} {
			_ = os.Remove(d)
		}
	})
	old := time.Now().Add(-2 * janitor.SweepAge)
	for _, d := range []string{dotted, orphan, held} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	hold, err := janitor.Hold(held)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	// Not swept for two minutes: the janitor sweeps at most once a minute.
	if err := os.Chtimes(parent, old, old); err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
	if err := os.WriteFile(filepath.Join(sandbox, "cgroup.procs"), []byte(fmt.Sprint(sleeper.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}

	cmd, release, stderr := startJanitor(t, Janitor, sandbox, empty, nested, dotted, sandbox+"/../"+filepath.Base(dotted), "/etc", parent)
	if comm := nameOf(cmd.Process.Pid, "jail-janitor"); comm != "jail-janitor" {
		t.Errorf("the janitor's name is %q", comm)
	}
	// Time enough for a janitor that does not wait to do its work.
	time.Sleep(50 * time.Millisecond)
	if _, err := os.Stat(sandbox); err != nil {
		t.Fatalf("the janitor did not wait for its supervisor: %v", err)
	}
	release.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("janitor: %v; stderr %q", err, stderr.String())
	}
	for _, gone := range []string{sandbox, empty, orphan} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", gone, err)
		}
	}
	for _, kept := range []string{nested, dotted, held} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("%s was removed: %v", kept, err)
		}
	}
	if err := sleeper.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the process in the sandbox cgroup: %v, want killed", err)
	}
}
