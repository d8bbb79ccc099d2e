package profiles

import (
	"os"
	"path/filepath"
	"testing"
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
