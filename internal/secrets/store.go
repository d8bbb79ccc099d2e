//go:build linux

package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/jail-sandbox/jail/internal/privdir"
	"golang.org/x/sys/unix"
)

// definitionsFile is the name of the definitions file in a Store's Dir.
const definitionsFile = "secrets.json"

// maxDefinitionsSize bounds the definitions file.
const maxDefinitionsSize = 1 << 20

// DefaultDir is the directory of uid's definitions: $XDG_CONFIG_HOME/jail,
// else $HOME/.config/jail, else the home of uid in the password database
// followed by .config/jail; root follows the same rule. A relative
// $XDG_CONFIG_HOME or $HOME is ignored, as the XDG specification says.
// Following the environment is safe for root too: a Store uses the
// directory only when nobody but root and the caller can change it or any
// directory above it, and reads a definitions file only when the caller
// owns it, so a directory another user named (sudo -E) is refused.
func DefaultDir(uid int, getenv func(string) string) (string, error) {
	if x := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "jail"), nil
	}
	if h := getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".config", "jail"), nil
	}
	home, err := (*privdir.Passwd)(nil).HomeOf(uid)
	if err != nil {
		return "", fmt.Errorf("secrets: no configuration directory ($XDG_CONFIG_HOME and $HOME unset): %w", err)
	}
	return filepath.Join(home, ".config", "jail"), nil
}

// DefaultStore is the store of the calling user (its effective uid) in
// DefaultDir, as the CLI and jail serve use it; getenv is the caller's
// environment (os.Getenv).
func DefaultStore(getenv func(string) string) (Store, error) {
	uid := os.Geteuid()
	dir, err := DefaultDir(uid, getenv)
	if err != nil {
		return Store{}, err
	}
	return Store{Dir: dir, UID: uid}, nil
}

// Store is the definitions of one user: the file secrets.json in Dir, which
// must be private to UID (see the package comment). Its methods may be
// called from several goroutines and processes at once.
type Store struct {
	// Dir is the directory of the definitions file (DefaultDir).
	Dir string
	// UID is the caller: the owner the directory and the file must have.
	UID int
}

// List returns the definitions, sorted by name: none when the directory or
// the file does not exist yet.
func (s Store) List() ([]Definition, error) {
	dir, err := s.open(false)
	if err != nil || dir == nil {
		return nil, err
	}
	defer dir.Close()
	return s.read(dir)
}

// Lookup returns the source of name, or an error wrapping ErrUnknown.
func (s Store) Lookup(name string) (Source, error) {
	if !ValidName(name) {
		return Source{}, fmt.Errorf("secret %q: not a valid name ([A-Za-z_][A-Za-z0-9_]*, at most 128)", name)
	}
	defs, err := s.List()
	if err != nil {
		return Source{}, err
	}
	for _, d := range defs {
		if d.Name == name {
			return d.Source, nil
		}
	}
	return Source{}, fmt.Errorf("secret %s: %w", name, ErrUnknown)
}

// Add defines name as coming from src. A name already defined is refused
// (remove it first), and so is a file source that Resolve would refuse
// now (missing, not the caller's, readable by others); its content is
// not read. On error nothing changes.
func (s Store) Add(name string, src Source) error {
	if !ValidName(name) {
		return fmt.Errorf("secret %q: not a valid name ([A-Za-z_][A-Za-z0-9_]*, at most 128)", name)
	}
	if err := src.Validate(); err != nil {
		return fmt.Errorf("secret %s: %w", name, err)
	}
	if src.File != "" {
		f, err := openValueFile(src.File, s.UID)
		if err != nil {
			return fmt.Errorf("secret %s: %w", name, err)
		}
		f.Close()
	}
	return s.update(func(defs []Definition) ([]Definition, error) {
		if slices.ContainsFunc(defs, func(d Definition) bool { return d.Name == name }) {
			return nil, fmt.Errorf("secret %s: already defined (jail secret rm it first)", name)
		}
		return append(defs, Definition{Name: name, Source: src}), nil
	})
}

// Remove deletes the definition of name, or returns an error wrapping
// ErrUnknown.
func (s Store) Remove(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("secret %q: not a valid name ([A-Za-z_][A-Za-z0-9_]*, at most 128)", name)
	}
	return s.update(func(defs []Definition) ([]Definition, error) {
		i := slices.IndexFunc(defs, func(d Definition) bool { return d.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("secret %s: %w", name, ErrUnknown)
		}
		return slices.Delete(defs, i, i+1), nil
	})
}

// update reads the definitions, changes them with change and writes them
// back, holding the directory's lock throughout.
func (s Store) update(change func([]Definition) ([]Definition, error)) error {
	dir, err := s.open(true)
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := unix.Flock(int(dir.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("secrets: lock %s: %w", s.Dir, err)
	}
	defs, err := s.read(dir)
	if err != nil {
		return err
	}
	if defs, err = change(defs); err != nil {
		return err
	}
	slices.SortFunc(defs, func(a, b Definition) int { return strings.Compare(a.Name, b.Name) })
	data, err := json.MarshalIndent(file{Version: 1, Secrets: defs}, "", "  ")
	if err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	if err := privdir.WriteFile(int(dir.Fd()), definitionsFile, "."+definitionsFile+".", append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("secrets: write %s: %w", filepath.Join(s.Dir, definitionsFile), err)
	}
	return nil
}

// file is the definitions file's format.
type file struct {
	Version int          `json:"version"`
	Secrets []Definition `json:"secrets"`
}

// open opens the store's directory, checked private to the caller (package
// privdir) and owned by it. create makes the directories that are
// missing, 0700; without it a missing directory is (nil, nil).
func (s Store) open(create bool) (*os.File, error) {
	if !filepath.IsAbs(s.Dir) {
		return nil, fmt.Errorf("secrets: directory %q is not an absolute path", s.Dir)
	}
	dir := filepath.Clean(s.Dir)
	var f *os.File
	var err error
	if create {
		f, err = privdir.MkdirAll(existingAncestor(dir), dir, s.UID, 0o700, unix.O_RDONLY)
	} else {
		f, err = privdir.Open(dir, s.UID, unix.O_RDONLY)
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("secrets: directory %s: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("secrets: directory %s: %w", dir, err)
	}
	if int(st.Uid) != s.UID {
		f.Close()
		return nil, fmt.Errorf("secrets: directory %s: owned by uid %d, not by uid %d", dir, st.Uid, s.UID)
	}
	return f, nil
}

// existingAncestor is the deepest directory of path (path included) that
// exists: what privdir.MkdirAll starts from.
func existingAncestor(path string) string {
	for {
		if _, err := os.Lstat(path); err == nil || path == "/" {
			return path
		}
		path = filepath.Dir(path)
	}
}

// read reads and checks the definitions file of dir: a regular file owned
// by the caller that its group and others can neither read nor write.
// A missing file is no definitions.
func (s Store) read(dir *os.File) ([]Definition, error) {
	path := filepath.Join(s.Dir, definitionsFile)
	fd, err := unix.Openat(int(dir.Fd()), definitionsFile, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secrets: open %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if err := checkPrivateFile(fd, s.UID, maxDefinitionsSize); err != nil {
		return nil, fmt.Errorf("secrets: %s: %w", path, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxDefinitionsSize+1))
	if err != nil {
		return nil, fmt.Errorf("secrets: read %s: %w", path, err)
	}
	if len(data) > maxDefinitionsSize {
		return nil, fmt.Errorf("secrets: %s: larger than %d bytes", path, maxDefinitionsSize)
	}
	var defs file
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&defs); err != nil {
		return nil, fmt.Errorf("secrets: %s: %w", path, err)
	}
	if defs.Version != 1 {
		return nil, fmt.Errorf("secrets: %s: version %d, not 1", path, defs.Version)
	}
	seen := map[string]bool{}
	for _, d := range defs.Secrets {
		if !ValidName(d.Name) || seen[d.Name] {
			return nil, fmt.Errorf("secrets: %s: name %q invalid or defined twice", path, d.Name)
		}
		seen[d.Name] = true
		if err := d.Source.Validate(); err != nil {
			return nil, fmt.Errorf("secrets: %s: secret %s: %w", path, d.Name, err)
		}
	}
	return defs.Secrets, nil
}

// checkPrivateFile checks that fd is a regular file owned by uid, that its
// group and others can neither read nor write, and of at most max bytes.
func checkPrivateFile(fd int, uid int, max int64) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return errors.New("not a regular file")
	case int(st.Uid) != uid:
		return fmt.Errorf("owned by uid %d, not by uid %d", st.Uid, uid)
	case st.Mode&0o077 != 0:
		return fmt.Errorf("its group or others have access (mode %#o; chmod 600 it)", st.Mode&0o7777)
	case st.Size > max:
		return fmt.Errorf("larger than %d bytes", max)
	}
	return nil
}
