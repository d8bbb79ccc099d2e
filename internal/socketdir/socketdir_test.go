//go:build linux

package socketdir

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenChecksEveryComponent: the directory and every directory above it
// are checked as the policy says, none may be a symbolic link, and a
// missing one is made 0700 when asked.
func TestOpenChecksEveryComponent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give directories to other users")
	}
	const other = 65534
	me := os.Geteuid() // root: the server's and the client's user here
	// t.TempDir's parents are root's and not writable by others.
	base := t.TempDir()
	mk := func(path string, mode os.FileMode, uid int) string {
		t.Helper()
		if err := os.MkdirAll(path, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, uid, uid); err != nil {
			t.Fatal(err)
		}
		return path
	}
	link := func(target, path string) string {
		t.Helper()
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	mine := Policy{Owners: []int{me}}
	theirs := Policy{Owners: []int{other}}
	for _, c := range []struct {
		name   string
		path   string
		policy Policy
		err    string // "" when accepted
	}{
		{"the owner's, 0700", mk(filepath.Join(base, "a"), 0o700, me), mine, ""},
		{"the owner's, 0755", mk(filepath.Join(base, "b"), 0o755, me), mine, ""},
		{"writable by its group", mk(filepath.Join(base, "c"), 0o770, me), mine, "writable by others (mode 0770)"},
		{"writable by all", mk(filepath.Join(base, "d"), 0o777, me), mine, "writable by others (mode 0777)"},
		{"sticky and writable by all", mk(filepath.Join(base, "e"), os.ModeSticky|0o777, me), mine, "writable by others (mode 1777)"},
		{"another user's", mk(filepath.Join(base, "f"), 0o700, other), mine, "belongs to uid 65534, not to root"},
		{"below a sticky one writable by all, as /tmp", mk(filepath.Join(mk(filepath.Join(base, "g"), os.ModeSticky|0o777, me), "x"), 0o700, me), mine, ""},
		{"below one writable by all", mk(filepath.Join(mk(filepath.Join(base, "h"), 0o777, me), "x"), 0o700, me), mine, "h is writable by others"},
		{"below another user's", mk(filepath.Join(mk(filepath.Join(base, "i"), 0o755, other), "x"), 0o700, me), mine, "i belongs to uid 65534"},
		{"a user's own below root's", mk(filepath.Join(base, "j"), 0o700, other), theirs, ""},
		{"root's, for another user", mk(filepath.Join(base, "k"), 0o700, me), theirs, "belongs to uid 0, not to uid 65534"},
		{"a symbolic link to the owner's", link(filepath.Join(base, "a"), filepath.Join(base, "l")), mine, "l is a symbolic link"},
		{"below a symbolic link", filepath.Join(link(base, filepath.Join(base, "m")), "a"), mine, "m is a symbolic link"},
		{"a file", filepath.Join(base, "a", "file"), mine, "is not a directory"},
		{"missing", filepath.Join(base, "n", "o"), mine, "no such file"},
		{"relative", "relative/dir", mine, "not an absolute path"},
	} {
		if c.name == "a file" {
			os.WriteFile(c.path, nil, 0o600)
		}
		t.Run(c.name, func(t *testing.T) {
			d, err := Open(c.path, c.policy)
			if c.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				d.Close()
				return
			}
			if err == nil {
				d.Close()
				t.Fatalf("accepted; want %q", c.err)
			}
			if !strings.Contains(err.Error(), c.err) {
				t.Fatalf("%v; want %q", err, c.err)
			}
		})
	}
}

// TestOpenMakesWhatIsMissing: with Create, the missing directories are
// made 0700, and the socket bound through Via lands in the very directory
// checked, even once its path leads elsewhere.
func TestOpenMakesWhatIsMissing(t *testing.T) {
	base := t.TempDir()
	path := filepath.Join(base, "new", "dir")
	d, err := Open(path, Policy{Owners: []int{os.Geteuid()}, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, p := range []string{filepath.Join(base, "new"), path} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o700 || !st.IsDir() {
			t.Errorf("%s: %v %v, want a directory 0700", p, st.Mode(), err)
		}
	}
	// The checked directory moved away, another in its place: the
	// socket goes where the check was.
	if err := os.Rename(path, path+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o777); err != nil {
		t.Fatal(err)
	}
	via, err := d.Via("s.sock")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", via)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := os.Lstat(filepath.Join(path+".moved", "s.sock")); err != nil {
		t.Errorf("the socket is not in the directory checked: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(path, "s.sock")); err == nil {
		t.Errorf("the socket went to the directory now at the path")
	}
	st, err := d.Lstat("s.sock")
	if err != nil || !IsSocket(st) {
		t.Errorf("Lstat: %v %v", st, err)
	}
	for _, bad := range []string{"", ".", "..", "a/b"} {
		if _, err := d.Via(bad); err == nil {
			t.Errorf("Via(%q) accepted", bad)
		}
	}
}
