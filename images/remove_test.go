package images

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRemoveAllAtHoldsTwoDescriptors: a tree deeper than the descriptors
// the process may hold is removed whole, and a link in it is removed, not
// followed.
func TestRemoveAllAtHoldsTwoDescriptors(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "keep")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(dir, "tree")
	p := deep
	for i := 0; i < 600; i++ {
		p = filepath.Join(p, "d")
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(p, "f"), []byte("x"), 0o644)
	os.Symlink(filepath.Dir(outside), filepath.Join(deep, "d", "link"))
	os.Mkdir(filepath.Join(deep, "wide"), 0o755)
	for i := 0; i < 3000; i++ {
		os.WriteFile(filepath.Join(deep, "wide", strings.Repeat("n", 20)+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676))), nil, 0o644)
	}

	var old unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &old)
	low := old
	low.Cur = 128
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err == nil {
		err = removeAllAt(fd, "tree")
		unix.Close(fd)
	}
	unix.Setrlimit(unix.RLIMIT_NOFILE, &old)
	if err != nil {
		t.Fatalf("removeAllAt: %v", err)
	}
	if _, err := os.Lstat(deep); !os.IsNotExist(err) {
		t.Errorf("the tree is still there: %v", err)
	}
	if data, err := os.ReadFile(outside); err != nil || string(data) != "keep" {
		t.Errorf("the link's target lost its file: %q %v", data, err)
	}
}
