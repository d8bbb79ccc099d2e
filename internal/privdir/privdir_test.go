package privdir

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCheck: a directory is private when it and every directory above it
// can be changed only by root and the user; a root-owned sticky directory
// (/tmp) may sit above it; symbolic links are followed and their targets
// checked.
func TestCheck(t *testing.T) {
	uid := os.Geteuid()
	base := t.TempDir() // under /tmp: root-owned and sticky
	mk := func(rel string, mode os.FileMode) string {
		dir := filepath.Join(base, rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	private := mk("private/jail", 0o711)
	groupWritable := mk("group/jail", 0o775)
	underWritable := mk("open/jail", 0o755)
	os.Chmod(filepath.Dir(underWritable), 0o777)
	underSticky := mk("sticky/jail", 0o700)
	unix.Chmod(filepath.Dir(underSticky), 0o1777)
	link := filepath.Join(base, "link")
	if err := os.Symlink(private, link); err != nil {
		t.Fatal(err)
	}
	badLink := filepath.Join(base, "badlink")
	if err := os.Symlink(underWritable, badLink); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path     string
		want     string // "" for private
		resolved string
	}{
		{private, "", private},
		{link, "", private},
		{groupWritable, "writable by group or others", ""},
		{underWritable, "writable by group or others", ""},
		{badLink, "writable by group or others", ""},
		{filepath.Join(base, "missing"), "no such file", ""},
		{"relative/dir", "not an absolute path", ""},
	}
	if uid == 0 {
		// A sticky directory above is trusted only when root owns it; the
		// user's own sticky directory holds what others may rename.
		foreignSticky := mk("foreign-sticky/jail", 0o700)
		parent := filepath.Dir(foreignSticky)
		unix.Chmod(parent, 0o1777)
		os.Chown(parent, 4242, 4242)
		foreign := mk("foreign/jail", 0o700)
		os.Chown(foreign, 4242, 4242)
		cases = append(cases,
			struct{ path, want, resolved string }{underSticky, "", underSticky},
			struct{ path, want, resolved string }{foreignSticky, "owned by uid 4242", ""},
			struct{ path, want, resolved string }{foreign, "owned by uid 4242", ""},
		)
	}
	for _, c := range cases {
		got, err := Check(c.path, uid)
		switch {
		case c.want == "" && (err != nil || got != c.resolved):
			t.Errorf("%s: %q, %v; want private, %s", c.path, got, err, c.resolved)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v; want an error saying %q", c.path, err, c.want)
		}
		if c.want == "" {
			f, err := Open(c.path, uid, unix.O_PATH)
			if err != nil {
				t.Errorf("Open %s: %v", c.path, err)
				continue
			}
			var a, b unix.Stat_t
			unix.Fstat(int(f.Fd()), &a)
			unix.Stat(c.resolved, &b)
			if a.Ino != b.Ino {
				t.Errorf("Open %s opened another directory", c.path)
			}
			f.Close()
		}
	}
	if uid == 0 {
		// Root's own directories may not belong to anyone else.
		if _, err := Check(private, 4242); err != nil {
			t.Errorf("a root-owned directory is not private for uid 4242: %v", err)
		}
		other := mk("other/jail", 0o700)
		os.Chown(other, 4242, 4242)
		if _, err := Check(other, 0); !errors.Is(err, ErrNotPrivate) {
			t.Errorf("uid 4242's directory is private for root: %v", err)
		}
	}
}

// TestMkdirAll: what is missing below the base is made with the mode
// given; a directory on the way that others can write is refused, made
// here or not.
func TestMkdirAll(t *testing.T) {
	uid := os.Geteuid()
	base := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := MkdirAll(base, filepath.Join(base, ".cache/jail"), uid, 0o711, unix.O_PATH)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, d := range []string{".cache", ".cache/jail"} {
		st, err := os.Stat(filepath.Join(base, d))
		if err != nil || st.Mode().Perm() != 0o711 {
			t.Errorf("%s: %v %v; want mode 0711", d, st.Mode(), err)
		}
	}
	if err := os.Chmod(filepath.Join(base, ".cache"), 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := MkdirAll(base, filepath.Join(base, ".cache/jail"), uid, 0o711, unix.O_PATH); !errors.Is(err, ErrNotPrivate) {
		t.Errorf("a world-writable .cache: %v; want refused", err)
	}
	if _, err := MkdirAll(base, "/etc", uid, 0o711, unix.O_PATH); err == nil {
		t.Errorf("a path outside the base was accepted")
	}
}

func TestHomeOf(t *testing.T) {
	for _, users := range []*Passwd{nil, new(Passwd)} {
		if home, err := users.HomeOf(0); err != nil || home != "/root" {
			t.Errorf("HomeOf(0) = %q, %v", home, err)
		}
		if home, err := users.HomeOf(0x7ffffff0); err == nil {
			t.Errorf("an unknown uid has home %q", home)
		}
	}
}

// TestWriteFile: the file is replaced whole, with the mode asked whatever
// the umask, and a write that cannot be put in place leaves nothing.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	for _, data := range []string{"first", "second, longer"} {
		if err := WriteFile(int(f.Fd()), "file", ".tmp-", []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "file"))
		st, _ := os.Stat(filepath.Join(dir, "file"))
		if err != nil || string(got) != data || st.Mode().Perm() != 0o644 {
			t.Errorf("%q, mode %v, %v; want %q, mode 0644", got, st.Mode(), err, data)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "taken"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "taken", "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(int(f.Fd()), "taken", ".tmp-", []byte("x"), 0o644); err == nil {
		t.Error("a file was renamed over a directory")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("left in the directory: %v; want only file and taken", entries)
	}
}

// TestWriteFileKilledLeavesNothingPartial: a writer SIGKILLed at any
// moment of WriteFile leaves no temporary file and no partial one, only
// files whole (a writer of a cache, killed with its command, must not
// leave litter in the user's cache). The writer is this test binary,
// writing new 8 MiB files one after another until it is killed.
func TestWriteFileKilledLeavesNothingPartial(t *testing.T) {
	const size = 8 << 20
	if dir := os.Getenv("PRIVDIR_TEST_WRITER_DIR"); dir != "" {
		f, err := os.Open(dir)
		if err != nil {
			os.Exit(2)
		}
		data := bytes.Repeat([]byte{'x'}, size)
		for i := 0; ; i++ {
			if err := WriteFile(int(f.Fd()), "entry-"+strconv.Itoa(i), ".tmp-", data, 0o644); err != nil {
				os.Exit(3)
			}
		}
	}
	dir := t.TempDir()
	for round := 0; round < 20; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWriteFileKilledLeavesNothingPartial$")
		cmd.Env = append(os.Environ(), "PRIVDIR_TEST_WRITER_DIR="+dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(5+round*3) * time.Millisecond)
		cmd.Process.Kill()
		if err := cmd.Wait(); err != nil && !strings.Contains(err.Error(), "killed") {
			t.Fatalf("writer: %v", err)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(e.Name(), "entry-") || info.Size() != size {
				t.Fatalf("round %d: left %s of %d bytes", round, e.Name(), info.Size())
			}
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
