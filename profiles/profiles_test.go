package profiles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStoreFiles: the first directory's file of a name wins, files that
// are not NAME.yaml with a valid name are left out, an unreadable file
// says why, and a missing directory holds nothing.
func TestStoreFiles(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	write := func(dir, file, body string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(first, "mine.yaml", "first", 0o644)
	write(second, "mine.yaml", "second", 0o644)
	write(second, "theirs.yaml", "theirs", 0o644)
	write(second, "Bad.yaml", "x", 0o644)
	write(second, "notes.txt", "x", 0o644)
	write(first, "secret.yaml", "x", 0o000)
	files := Store{Dirs: []string{first, filepath.Join(first, "missing"), second}}.Files()
	if len(files) != 3 {
		t.Errorf("files: %v; want mine, theirs and secret", files)
	}
	if f := files["mine"]; string(f.Data) != "first" || f.Path != filepath.Join(first, "mine.yaml") {
		t.Errorf("mine: %+v; want the first directory's", f)
	}
	if f := files["theirs"]; string(f.Data) != "theirs" {
		t.Errorf("theirs: %+v", f)
	}
	if f := files["secret"]; os.Geteuid() != 0 && (f.Err == "" || f.Data != nil) {
		t.Errorf("an unreadable file: %+v; want its error", f)
	}
	s := Store{Dirs: []string{first, second}}
	if !s.Overrides("theirs") || s.Overrides("default") {
		t.Errorf("Overrides: theirs %v, default %v", s.Overrides("theirs"), s.Overrides("default"))
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"default": true, "my-profile.2": true, "a_b": true, "9": true,
		"": false, "-x": false, "Upper": false, "../etc": false, "a/b": false,
		string(make([]byte, 65)): false,
	} {
		if ValidName(name) != want {
			t.Errorf("ValidName(%q) = %v", name, !want)
		}
	}
}

func TestBuiltins(t *testing.T) {
	names := BuiltinNames()
	if len(names) != 3 || names[0] != "build" || names[1] != "default" || names[2] != "strict" {
		t.Errorf("BuiltinNames: %v", names)
	}
	if data, ok := BuiltinFile("default"); !ok || len(data) == 0 {
		t.Errorf("BuiltinFile(default): %d bytes, %v", len(data), ok)
	}
	if _, ok := BuiltinFile("nosuch"); ok {
		t.Errorf("BuiltinFile(nosuch) found one")
	}
}

// TestStoreRefusesWhatOthersCouldChange: a profile file is read only when
// nobody but root and the caller could have written it, and only from its
// own directory: a file or directory that group or others may write, a
// file or directory of another user, a symbolic link (even to a good
// file), a FIFO and an oversized file each come with why, never their
// content.
func TestStoreRefusesWhatOthersCouldChange(t *testing.T) {
	good := filepath.Join(t.TempDir(), "good")
	open := filepath.Join(t.TempDir(), "open")
	for _, d := range []string{good, open} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(open, 0o777)
	write := func(path string, mode os.FileMode) {
		if err := os.WriteFile(path, []byte("version: 1\n"), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(path, mode)
	}
	write(filepath.Join(good, "mine.yaml"), 0o644)
	write(filepath.Join(good, "shared.yaml"), 0o664)
	write(filepath.Join(good, "anyone.yaml"), 0o646)
	write(filepath.Join(open, "planted.yaml"), 0o644)
	if err := os.Symlink(filepath.Join(good, "mine.yaml"), filepath.Join(good, "linked.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(good, "fifo.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(good, "huge.yaml"), make([]byte, MaxFileSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"mine":    "",
		"shared":  "writable by group or others",
		"anyone":  "writable by group or others",
		"planted": open + ": writable by group or others",
		"linked":  "a symbolic link",
		"fifo":    "not a regular file",
		"huge":    "larger than",
	}
	if os.Geteuid() == 0 {
		foreign := filepath.Join(t.TempDir(), "foreign")
		if err := os.Mkdir(foreign, 0o755); err != nil {
			t.Fatal(err)
		}
		write(filepath.Join(foreign, "theirs.yaml"), 0o644)
		os.Chown(foreign, 4242, 4242)
		write(filepath.Join(good, "given.yaml"), 0o644)
		os.Chown(filepath.Join(good, "given.yaml"), 4242, 4242)
		want["theirs"] = foreign + ": owned by uid 4242"
		want["given"] = "owned by uid 4242"
		files := Store{Dirs: []string{good, open, foreign}}.Files()
		check(t, files, want)
		return
	}
	check(t, Store{Dirs: []string{good, open}}.Files(), want)
}

func check(t *testing.T, files Files, want map[string]string) {
	t.Helper()
	if len(files) != len(want) {
		t.Errorf("files: %d; want %d", len(files), len(want))
	}
	for name, why := range want {
		f := files[name]
		switch {
		case why == "" && (f.Err != "" || string(f.Data) != "version: 1\n"):
			t.Errorf("%s: %d bytes, error %q; want read", name, len(f.Data), f.Err)
		case why != "" && (f.Data != nil || !strings.Contains(f.Err, why)):
			t.Errorf("%s: %d bytes read, error %q; want refused: %q", name, len(f.Data), f.Err, why)
		}
	}
}

// TestRootStoreIgnoresTheEnvironment: root's profiles come from root's home
// in the password database and /etc/jail/profiles, never from a $HOME or
// $XDG_CONFIG_HOME that sudo -E kept from another user (row 35).
func TestRootStoreIgnoresTheEnvironment(t *testing.T) {
	other := t.TempDir()
	t.Setenv("HOME", other)
	t.Setenv("XDG_CONFIG_HOME", other)
	dirs := DefaultStore(nil).Dirs
	if os.Geteuid() != 0 {
		if len(dirs) != 2 || dirs[0] != filepath.Join(other, "jail", "profiles") {
			t.Errorf("an ordinary user's store: %v; want $XDG_CONFIG_HOME's first", dirs)
		}
		return
	}
	if strings.Join(dirs, " ") != "/root/.config/jail/profiles /etc/jail/profiles" {
		t.Errorf("root's store: %v", dirs)
	}
}
