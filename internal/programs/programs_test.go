package programs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/cgroups/janitor"
	"github.com/jail-sandbox/jail/internal/privdir"
)

// TestCachedCopy: the copy is written once, read-only, and what runs is
// the descriptor whose bytes were compared with the embedded program's;
// copies of other versions, and of the programs earlier versions had
// (init, janitor, stage), go once unused for long, and stay while in use;
// other files stay.
func TestCachedCopy(t *testing.T) {
	version := Version(Helper)
	dir, dirFile := privateTestDir(t)
	stale := []string{filepath.Join(dir, ".helper-0000000000000000"), filepath.Join(dir, ".stage-0000000000000000"),
		filepath.Join(dir, ".init-0000000000000000"), filepath.Join(dir, ".janitor-0000000000000000")}
	kept := []string{filepath.Join(dir, ".helper-1111111111111111"), filepath.Join(dir, ".stage-1111111111111111"),
		filepath.Join(dir, ".tools-0000000000000000"), filepath.Join(dir, "stage-0000000000000000")}
	for _, f := range append(append([]string{}, stale...), kept...) {
		if err := os.WriteFile(f, []byte("old"), 0o555); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * staleCopy)
	for _, f := range append(append([]string{}, stale...), kept[2:]...) {
		if err := os.Chtimes(f, long, long); err != nil {
			t.Fatal(err)
		}
	}
	f, err := cachedCopy(dirFile, Helper, version)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	path := filepath.Join(dir, ".helper-"+version)
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o555 {
		t.Fatalf("copy: %v %v", st, err)
	}
	for _, f := range stale {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("the long-unused copy %s stayed: %v", filepath.Base(f), err)
		}
	}
	for _, f := range kept {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s went: %v", filepath.Base(f), err)
		}
	}
	// Used again, the copy is marked as in use, not written again.
	if err := os.Chtimes(path, long, long); err != nil {
		t.Fatal(err)
	}
	f, err = cachedCopy(dirFile, Helper, version)
	if err != nil {
		t.Fatalf("second call: %v", err)
	}
	f.Close()
	if st2, err := os.Stat(path); err != nil || !os.SameFile(st, st2) || time.Since(st2.ModTime()) > time.Minute {
		t.Errorf("second call: the copy was written again or not marked as used: %v", err)
	}
}

// privateTestDir makes a directory for copies, private to this user, and
// opens it as a Source does.
func privateTestDir(t *testing.T) (string, *os.File) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "jail")
	if err := os.Mkdir(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	f, err := privdir.Open(dir, os.Geteuid(), unix.O_PATH)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return dir, f
}

// TestReplacedCopyNeverRuns: whatever stands where the copy should be (a
// script planted in its place, of its size and mode, written in place or
// renamed over it; a link to it or from elsewhere; a FIFO; a symbolic
// link; a directory) is never what the descriptor holds: the copy is
// written anew and compared again, or refused. And once opened, the
// program runs from its descriptor: replacing the file afterwards changes
// nothing (row 33).
func TestReplacedCopyNeverRuns(t *testing.T) {
	version := Version(Helper)
	want := []byte(helperBinary)
	marker := filepath.Join(t.TempDir(), "marker")
	// A script padded to the program's size: what only the size, owner
	// and mode of a copy would not tell from the program.
	header := "#!/bin/sh\ntouch " + marker + "\n"
	script := []byte(header + strings.Repeat("#", len(want)-len(header)))
	dir, dirFile := privateTestDir(t)
	path := filepath.Join(dir, ".helper-"+version)
	plant := map[string]func() error{
		"written in place": func() error {
			if err := os.Chmod(path, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(path, script, 0o755); err != nil {
				return err
			}
			return os.Chmod(path, 0o555)
		},
		"renamed over it": func() error {
			tmp := path + ".new"
			if err := os.WriteFile(tmp, script, 0o555); err != nil {
				return err
			}
			return os.Rename(tmp, path)
		},
		"a hard link from elsewhere": func() error {
			return os.Link(path, filepath.Join(filepath.Dir(dir), "elsewhere"))
		},
		"a symbolic link": func() error {
			os.Remove(path)
			return os.Symlink("/proc/self/exe", path)
		},
		"a FIFO": func() error {
			os.Remove(path)
			return unix.Mkfifo(path, 0o555)
		},
		"writable": func() error { return os.Chmod(path, 0o755) },
	}
	for what, f := range plant {
		c, err := cachedCopy(dirFile, Helper, version)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		c, err = cachedCopy(dirFile, Helper, version)
		if err != nil {
			t.Errorf("%s: %v; want the copy written anew", what, err)
			continue
		}
		got := make([]byte, len(want)+1)
		n, _ := unix.Pread(int(c.Fd()), got, 0)
		c.Close()
		if !bytes.Equal(got[:n], want) {
			t.Errorf("%s: the descriptor holds %d bytes that are not the program's", what, n)
		}
		os.Remove(filepath.Join(filepath.Dir(dir), "elsewhere"))
	}
	// A directory in its place cannot be renamed over: refused.
	os.Remove(path)
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if c, err := cachedCopy(dirFile, Helper, version); err == nil {
		c.Close()
		t.Error("a directory in the copy's place was accepted")
	}
	os.Remove(path)

	// Opened, then replaced by the script: what starts is the program.
	c, err := cachedCopy(dirFile, Helper, version)
	if err != nil {
		t.Fatal(err)
	}
	p := &Program{Path: fmt.Sprintf("/proc/self/fd/%d", c.Fd()), file: c}
	defer p.Close()
	if err := plant["renamed over it"](); err != nil {
		t.Fatal(err)
	}
	stdin, release, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: p.Path, Args: []string{janitor.Arg}, Stdin: stdin}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if comm := nameOf(cmd.Process.Pid, "jail-janitor"); comm != "jail-janitor" {
		t.Errorf("what started from the descriptor is %q, not the janitor", comm)
	}
	release.Close()
	_ = cmd.Wait()
	if _, err := os.Stat(marker); err == nil {
		t.Error("the planted script ran")
	}
}

// TestCopyDirIsPrivate: the programs' directory follows from the uid, not
// the environment, and is not used when others could write it or a
// directory above it.
func TestCopyDirIsPrivate(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	uid := os.Geteuid()
	base, dir := location(uid, nil)
	switch {
	case uid == 0 && (base != "/run" || dir != "/run/jail"):
		t.Errorf("root's programs: %s under %s", dir, base)
	case uid != 0 && strings.HasPrefix(dir, os.TempDir()):
		t.Errorf("the programs' directory %s follows the environment", dir)
	}
	found := false
	for _, d := range Dirs(nil) {
		found = found || d == dir
	}
	if !found {
		t.Errorf("Dirs %v does not list the directory in use, %s", Dirs(nil), dir)
	}
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	// A copy in the directory at path, made below base, as Source.Open
	// makes it.
	copyIn := func(base, path, name, version string) (*os.File, error) {
		dir, err := openDir(base, path)
		if err != nil {
			return nil, err
		}
		defer dir.Close()
		return cachedCopy(dir, name, version)
	}
	if f, err := copyIn(home, filepath.Join(home, ".cache/jail"), Helper, Version(Helper)); err != nil {
		t.Errorf("a private home: %v", err)
	} else {
		f.Close()
	}
	if err := os.Chmod(filepath.Join(home, ".cache"), 0o777); err != nil {
		t.Fatal(err)
	}
	if f, err := copyIn(home, filepath.Join(home, ".cache/jail"), Helper, Version(Helper)); err == nil {
		f.Close()
		t.Error("a copy under a world-writable directory was used")
	}
}

// TestHelperNamesItself: ps and top show what the helper runs as (here the
// janitor, which waits for its stdin to close), not the name of the file it
// was run from.
func TestHelperNamesItself(t *testing.T) {
	cmd, release, _ := startJanitor(t, Helper)
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
// Go janitor does.
func TestJanitorProgram(t *testing.T) {
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

	cmd, release, stderr := startJanitor(t, Helper, sandbox, empty, nested, dotted, sandbox+"/../"+filepath.Base(dotted), "/etc", parent)
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

// BenchmarkOpen is what opening a program costs: the helper once per
// Source, which a `jail run` asks twice (init and janitor: "sandbox"), the
// tools once per command that needs them. Copies are compared with the
// embedded programs each time they are opened.
func BenchmarkOpen(b *testing.B) {
	b.Run("sandbox", func(b *testing.B) {
		for b.Loop() {
			src := NewSource(nil)
			for range 2 {
				p, err := src.Open(Helper)
				if err != nil {
					b.Fatal(err)
				}
				p.Close()
			}
			src.Close()
		}
	})
	if Version(Tools) == "" {
		b.Skip("no tools program (go generate ./internal/programs)")
	}
	b.Run(Tools, func(b *testing.B) {
		for b.Loop() {
			p, err := Open(Tools)
			if err != nil {
				b.Fatal(err)
			}
			p.Close()
		}
	})
}

// TestSourceOpenAfterCloseFails: once a Source is closed, Open fails with
// errSourceClosed for every program, whether or not the helper was opened
// before: it neither falls back to a memfd nor uses the descriptor Close
// released (which failed with "bad file descriptor").
func TestSourceOpenAfterCloseFails(t *testing.T) {
	if Version(Helper) == "" {
		t.Skip("no helper program (go generate ./internal/programs)")
	}
	for _, tc := range []struct {
		name       string
		openBefore bool
	}{
		{"helper never opened", false},
		{"helper opened before Close", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := NewSource(nil)
			if tc.openBefore {
				p, err := src.Open(Helper)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
			}
			src.Close()
			for _, name := range []string{Helper, Tools} {
				p, err := src.Open(name)
				if !errors.Is(err, errSourceClosed) {
					if p != nil {
						p.Close()
					}
					t.Errorf("Open(%s) after Close: %v; want %v", name, err, errSourceClosed)
				}
			}
		})
	}
}
