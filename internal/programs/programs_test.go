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
	p, err := Open(Stage)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	stdin, release, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: p.Path, Args: []string{janitor.Arg}, Stdin: stdin}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	defer func() {
		release.Close()
		_ = cmd.Wait()
	}()
	comm := ""
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
		if comm = strings.TrimSpace(string(b)); err == nil && comm == "jail-janitor" {
			return
		}
	}
	t.Errorf("the janitor's name is %q", comm)
}
