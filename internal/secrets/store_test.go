package secrets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// privateTemp is a temporary directory private to the test's user, as
// t.TempDir is not always (its mode follows the umask).
func privateTemp(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

func oneLine(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.ContainsAny(err.Error(), "\n\r") {
		t.Errorf("error is not one line: %q", err)
	}
}

func TestValidNameAcceptsEnvironmentVariableNamesOnly(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{"GITHUB_TOKEN", true},
		{"_x", true},
		{"a1", true},
		{strings.Repeat("A", 128), true},
		{strings.Repeat("A", 129), false},
		{"", false},
		{"1A", false},
		{"A-B", false},
		{"A=B", false},
		{"A B", false},
		{"A\n", false},
		{"../x", false},
		{"É", false},
	}
	for _, c := range cases {
		if got := ValidName(c.name); got != c.ok {
			t.Errorf("ValidName(%q) = %v, want %v", c.name, got, c.ok)
		}
	}
}

func TestSourceValidateWantsExactlyOneWellFormedSource(t *testing.T) {
	cases := []struct {
		src Source
		ok  bool
	}{
		{Source{File: "/a/b"}, true},
		{Source{Env: "GH_TOKEN"}, true},
		{Source{Command: "pass show x"}, true},
		{Source{}, false},
		{Source{File: "/a", Env: "B"}, false},
		{Source{Env: "B", Command: "c"}, false},
		{Source{File: "rel/path"}, false},
		{Source{File: "/a/../b"}, false},
		{Source{File: "/a\x00b"}, false},
		{Source{File: "/" + strings.Repeat("a", 5000)}, false},
		{Source{Env: "A-B"}, false},
		{Source{Command: "a\x00b"}, false},
		{Source{Command: strings.Repeat("a", 5000)}, false},
	}
	for _, c := range cases {
		err := c.src.Validate()
		if (err == nil) != c.ok {
			t.Errorf("%+v: Validate = %v, want ok=%v", c.src, err, c.ok)
		}
		oneLine(t, err)
	}
}

func TestDefaultDirFollowsXDGThenHomeThenPasswd(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"XDG_CONFIG_HOME": "/x/cfg", "HOME": "/h"}, "/x/cfg/jail"},
		{map[string]string{"XDG_CONFIG_HOME": "relative", "HOME": "/h"}, "/h/.config/jail"},
		{map[string]string{"HOME": "/h"}, "/h/.config/jail"},
		{map[string]string{"HOME": "h"}, "/root/.config/jail"}, // uid 0's home in /etc/passwd
		{map[string]string{}, "/root/.config/jail"},
	}
	for _, c := range cases {
		got, err := DefaultDir(0, func(k string) string { return c.env[k] })
		if err != nil || got != c.want {
			t.Errorf("DefaultDir(0, %v) = %q, %v; want %q", c.env, got, err, c.want)
		}
	}
}

func TestStoreAddListLookupRemove(t *testing.T) {
	base := privateTemp(t)
	s := Store{Dir: filepath.Join(base, "cfg", "jail"), UID: os.Geteuid()}
	if defs, err := s.List(); err != nil || len(defs) != 0 {
		t.Fatalf("List of a missing directory = %v, %v; want none", defs, err)
	}
	valueFile := filepath.Join(base, "token")
	if err := os.WriteFile(valueFile, []byte("v"), 0o600); err != nil {
		t.Fatal(err)
	}
	adds := []Definition{
		{"ZED", Source{Command: "pass show zed"}},
		{"A_FILE", Source{File: valueFile}},
		{"B_ENV", Source{Env: "SOME_VAR"}},
	}
	for _, d := range adds {
		if err := s.Add(d.Name, d.Source); err != nil {
			t.Fatalf("Add %s: %v", d.Name, err)
		}
	}
	defs, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(defs); got != "[A_FILE file "+valueFile+" B_ENV env SOME_VAR ZED command pass show zed]" {
		t.Errorf("List = %s", got)
	}
	if src, err := s.Lookup("B_ENV"); err != nil || src != (Source{Env: "SOME_VAR"}) {
		t.Errorf("Lookup B_ENV = %+v, %v", src, err)
	}
	if _, err := s.Lookup("NOPE"); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "NOPE") {
		t.Errorf("Lookup NOPE = %v; want ErrUnknown naming it", err)
	}
	if err := s.Add("ZED", Source{Env: "X"}); err == nil || !strings.Contains(err.Error(), "already defined") {
		t.Errorf("Add of a defined name = %v; want refused", err)
	}
	if err := s.Remove("B_ENV"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("B_ENV"); !errors.Is(err, ErrUnknown) {
		t.Errorf("second Remove = %v; want ErrUnknown", err)
	}
	if defs, _ := s.List(); len(defs) != 2 {
		t.Errorf("after Remove: %v", defs)
	}

	// The directory made is 0700, the file 0600, and no temporary file
	// is left beside it.
	for path, want := range map[string]os.FileMode{s.Dir: 0o700, filepath.Join(s.Dir, definitionsFile): 0o600} {
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %v", path, st.Mode(), err, want)
		}
	}
	entries, _ := os.ReadDir(s.Dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %v; want secrets.json alone", entries)
	}
}

func TestStoreAddRefusesBadInputAndChangesNothing(t *testing.T) {
	base := privateTemp(t)
	s := Store{Dir: filepath.Join(base, "jail"), UID: os.Geteuid()}
	open := filepath.Join(base, "open")
	if err := os.WriteFile(open, []byte("v"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		src  Source
		want string
	}{
		{"1BAD", Source{Env: "X"}, "not a valid name"},
		{"OK", Source{}, "exactly one source"},
		{"OK", Source{File: filepath.Join(base, "missing")}, "no such file"},
		{"OK", Source{File: open}, "its group or others have access"},
		{"OK", Source{File: base}, "not a regular file"},
		{"OK", Source{Env: "A;B"}, "not a variable name"},
	}
	for _, c := range cases {
		err := s.Add(c.name, c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Add(%q, %+v) = %v; want %q", c.name, c.src, err, c.want)
		}
		oneLine(t, err)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Errorf("refused adds made %s (%v)", s.Dir, err)
	}
}

// TestStoreRefusesDefinitionsOthersCanReadOrChange: a definitions file its
// group or others may read or write, one of another owner, a link, or a
// directory others may change is refused with one line naming it.
func TestStoreRefusesDefinitionsOthersCanReadOrChange(t *testing.T) {
	root := os.Geteuid() == 0
	cases := []struct {
		name   string
		root   bool // needs root (chown)
		spoil  func(t *testing.T, dir string)
		reason string
	}{
		{"world-readable file", false, chmod(definitionsFile, 0o604), "its group or others have access"},
		{"group-readable file", false, chmod(definitionsFile, 0o640), "its group or others have access"},
		{"group-writable file", false, chmod(definitionsFile, 0o620), "its group or others have access"},
		{"file of another owner", true, chown(definitionsFile, 4242), "owned by uid 4242"},
		{"symbolic link", false, func(t *testing.T, dir string) {
			target := filepath.Join(filepath.Dir(dir), "elsewhere.json")
			if err := os.Rename(filepath.Join(dir, definitionsFile), target); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, filepath.Join(dir, definitionsFile)); err != nil {
				t.Fatal(err)
			}
		}, "too many levels of symbolic links"},
		{"world-writable directory", false, chmod(".", 0o777), "writable by group or others"},
		{"group-writable directory", false, chmod(".", 0o770), "writable by group or others"},
		{"directory of another owner", true, chown(".", 4242), "owned by uid 4242"},
		{"parent others can change", false, chmod("..", 0o777), "writable by group or others"},
		{"malformed file", false, func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, definitionsFile), []byte(`{"version":1,"secrets":[{"name":"X","file":"/a","env":"B"}]}`), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "exactly one source"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.root && !root {
				t.Skip("needs root to chown")
			}
			base := privateTemp(t)
			s := Store{Dir: filepath.Join(base, "jail"), UID: os.Geteuid()}
			if err := s.Add("A", Source{Env: "B"}); err != nil {
				t.Fatal(err)
			}
			c.spoil(t, s.Dir)
			_, err := s.List()
			if err == nil || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("List = %v; want refused: %s", err, c.reason)
			}
			oneLine(t, err)
			if err := s.Add("C", Source{Env: "D"}); err == nil {
				t.Errorf("Add succeeded on a store List refuses")
			}
			if _, err := Resolve([]string{"A"}, Options{Store: s, Getenv: func(string) string { return "v" }}); err == nil {
				t.Errorf("Resolve succeeded on a store List refuses")
			}
		})
	}
}

func chmod(name string, mode os.FileMode) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.Chmod(filepath.Join(dir, name), mode); err != nil {
			t.Fatal(err)
		}
	}
}

func chown(name string, uid int) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.Lchown(filepath.Join(dir, name), uid, uid); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStoreConcurrentAddsLoseNothing: adds from many goroutines at once
// (each its own read-modify-write) all land.
func TestStoreConcurrentAddsLoseNothing(t *testing.T) {
	s := Store{Dir: filepath.Join(privateTemp(t), "jail"), UID: os.Geteuid()}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if err := s.Add(fmt.Sprintf("S%d", i), Source{Env: "X"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if defs, err := s.List(); err != nil || len(defs) != 16 {
		t.Errorf("List = %d definitions, %v; want 16", len(defs), err)
	}
}
