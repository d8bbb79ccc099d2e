package sandboxdir

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestValidName: a name is one path component of a safe alphabet, bounded;
// anything else is refused with the name quoted.
func TestValidName(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"A0", true},
		{"agent_1.work-tree", true},
		{strings.Repeat("x", 63), true},
		{strings.Repeat("x", 64), false},
		{"", false},
		{".", false},
		{"..", false},
		{".hidden", false},
		{"-flag", false},
		{"_a", false},
		{"a/b", false},
		{"../a", false},
		{"a b", false},
		{"a\x00b", false},
		{"a\n", false},
		{"ä", false},
	} {
		err := ValidName(c.name)
		if (err == nil) != c.ok {
			t.Errorf("ValidName(%q): %v, want ok %v", c.name, err, c.ok)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "sandbox name \"") {
			t.Errorf("ValidName(%q): %q does not name it", c.name, err)
		}
	}
}

func openStore(t *testing.T) (*Store, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "jail")
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, root
}

// TestStoreIsPrivate: the state directory and its sandboxes' directories
// are made 0700; a sandboxes/ directory others may enter is refused, and so
// is a sandbox entry that is a symbolic link (to another user's directory,
// say).
func TestStoreIsPrivate(t *testing.T) {
	s, root := openStore(t)
	sb, err := s.Create("one")
	if err != nil {
		t.Fatal(err)
	}
	sb.Close()
	for _, p := range []string{root, filepath.Join(root, "sandboxes"), filepath.Join(root, "sandboxes", "one")} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want 0700", p, st.Mode())
		}
	}

	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(root, "sandboxes", "planted")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open("planted"); err == nil {
		t.Error("a sandbox entry that is a symbolic link was opened")
	}

	if err := os.Chmod(filepath.Join(root, "sandboxes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if s2, err := Open(root); err == nil {
		s2.Close()
		t.Error("a sandboxes/ directory others may enter was accepted")
	}
}

// TestCreateOpenListRemove: a name is created once (ErrExists after), a
// missing one is ErrNotFound, List names the sandboxes only, files are
// written whole and read back, and Remove takes a dead sandbox away.
func TestCreateOpenListRemove(t *testing.T) {
	s, root := openStore(t)
	for _, name := range []string{"b", "a"} {
		sb, err := s.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		sb.Close()
	}
	if _, err := s.Create("a"); !errors.Is(err, ErrExists) {
		t.Errorf("a second create: %v, want ErrExists", err)
	}
	if _, err := s.Open("c"); !errors.Is(err, ErrNotFound) {
		t.Errorf("open of a missing one: %v, want ErrNotFound", err)
	}
	if err := os.WriteFile(filepath.Join(root, "sandboxes", ".stray"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	names, err := s.List()
	slices.Sort(names)
	if err != nil || !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("List: %q, %v", names, err)
	}

	sb, err := s.Open("a")
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	for _, content := range []string{`{"v":1}`, `{"v":2}`} {
		if err := sb.WriteFile(SpecFile, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := sb.ReadFile(SpecFile)
		if err != nil || string(got) != content {
			t.Errorf("ReadFile: %q, %v, want %q", got, err, content)
		}
	}
	if err := s.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(root, "sandboxes", "a")); !os.IsNotExist(err) {
		t.Errorf("after Remove: %v", err)
	}
	if err := s.Remove("a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a second Remove: %v, want ErrNotFound", err)
	}
}

// TestDeadHolderIsTold: while a process holds the sandbox's lock, the
// sandbox is live, a second holder and Remove are refused; once that
// process is SIGKILLed, the sandbox is dead and Remove takes it away. The
// lock is held by another process, as a monitor holds it.
func TestDeadHolderIsTold(t *testing.T) {
	s, _ := openStore(t)
	sb, err := s.Create("held")
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if live, err := sb.Live(); err != nil || live {
		t.Fatalf("before any holder: live %v, %v", live, err)
	}
	lock, err := sb.Hold()
	if err != nil {
		t.Fatal(err)
	}
	// The holder: a process given the lock's open file; this process lets
	// go of its own descriptor.
	holder := exec.Command("sleep", "1000")
	holder.ExtraFiles = []*os.File{lock}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	lock.Close()
	defer func() {
		_ = holder.Process.Kill()
		_ = holder.Wait()
	}()

	if live, err := sb.Live(); err != nil || !live {
		t.Errorf("with a holder: live %v, %v", live, err)
	}
	if f, err := sb.Hold(); !errors.Is(err, ErrLive) {
		if f != nil {
			f.Close()
		}
		t.Errorf("a second holder: %v, want ErrLive", err)
	}
	if err := s.Remove("held"); !errors.Is(err, ErrLive) {
		t.Errorf("Remove of a live sandbox: %v, want ErrLive", err)
	}

	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = holder.Wait()
	if live, err := sb.Live(); err != nil || live {
		t.Errorf("after its holder was killed: live %v, %v", live, err)
	}
	if err := s.Remove("held"); err != nil {
		t.Errorf("Remove of a dead sandbox: %v", err)
	}
}

// TestRoot: JAIL_STATE_DIR when set (absolute); else root's state is
// /run/jail, another user's under XDG_RUNTIME_DIR, which must be set and
// absolute.
func TestRoot(t *testing.T) {
	for _, c := range []struct {
		uid        int
		xdg, state string
		want       string
	}{
		{0, "/run/user/0", "", "/run/jail"},
		{1000, "/run/user/1000", "", "/run/user/1000/jail"},
		{1000, "", "", ""},
		{1000, "relative", "", ""},
		{1000, "", "/srv/state/", "/srv/state"},
		{0, "/run/user/0", "/srv/state", "/srv/state"},
		{1000, "/run/user/1000", "relative", ""},
	} {
		env := func(k string) string {
			return map[string]string{"XDG_RUNTIME_DIR": c.xdg, "JAIL_STATE_DIR": c.state}[k]
		}
		got, err := Root(c.uid, env)
		if got != c.want || (c.want == "") != (err != nil) {
			t.Errorf("Root(%d, %q, %q): %q, %v; want %q", c.uid, c.xdg, c.state, got, err, c.want)
		}
	}
}

// TestHoldOfASandboxRemovedMeanwhileIsNotFound: a sandbox whose directory
// its monitor removed after it was opened (a removal racing the monitor's
// own, as jail rm's wait for the lock can) is not found, not an error of
// its lock: the removal that meets it has nothing left to do.
func TestHoldOfASandboxRemovedMeanwhileIsNotFound(t *testing.T) {
	s, root := openStore(t)
	sb, err := s.Create("gone")
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	// What a monitor does at the end: the contents, then the directory.
	dir := filepath.Join(root, "sandboxes", "gone")
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		os.Remove(filepath.Join(dir, e.Name()))
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Hold(); !errors.Is(err, ErrNotFound) {
		t.Errorf("Hold of a removed sandbox: %v, want ErrNotFound", err)
	}
}
