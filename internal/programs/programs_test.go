package programs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCachedCopy: the copy is written once, read-only, in a directory only
// its owner can write; a file that is not the copy jail wrote is never run;
// copies of other versions go.
func TestCachedCopy(t *testing.T) {
	version := Version(Stage)
	if version == "" {
		t.Skip("no embedded programs (go generate ./internal/programs)")
	}
	dir := filepath.Join(t.TempDir(), "jail")
	stale := filepath.Join(dir, ".stage-0000000000000000")
	if err := os.MkdirAll(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("old"), 0o555); err != nil {
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
		t.Errorf("the copy of another version stayed: %v", err)
	}
	if again, err := cachedCopy(dir, Stage, version); err != nil || again != path {
		t.Errorf("second call: %q %v", again, err)
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
	// A directory others may write is not used.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := cachedCopy(dir, Stage, version); err == nil {
		t.Error("a world-writable directory was used")
	}
}
