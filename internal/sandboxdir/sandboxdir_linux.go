// Package sandboxdir is the state directory of persistent sandboxes
// (docs/persistent.md): $XDG_RUNTIME_DIR/jail, or /run/jail for root, with
// one directory per sandbox under sandboxes/.
//
// Invariants: the state directory and every directory above it are
// checked as jail serve's socket directory is (package socketdir: owned by
// the caller or root, writable by no one else), opened once, and
// everything below is reached from that descriptor by openat with no
// symbolic link followed. A sandbox's name is always exactly one path
// component (ValidName). A sandbox's monitor holds an exclusive flock on
// its directory's lock file for its whole life, so that a sandbox whose
// holder died, even by SIGKILL, is told by the lock being free, never by a
// pid that the kernel may have given to another process.
package sandboxdir

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/socketdir"
)

// Names of the files of a sandbox's directory.
const (
	// LockFile is held (flock LOCK_EX) by the sandbox's monitor while it
	// lives.
	LockFile = "lock"
	// SpecFile is the resolved spec the sandbox was made from.
	SpecFile = "spec.json"
)

var (
	// ErrExists: a sandbox of that name exists already.
	ErrExists = errors.New("a sandbox of that name exists")
	// ErrNotFound: there is no sandbox of that name.
	ErrNotFound = errors.New("no such sandbox")
	// ErrLive: the sandbox's monitor runs (its lock is held).
	ErrLive = errors.New("the sandbox's monitor is running")
)

// ValidName checks a sandbox's name as a flag is checked: a letter or a
// digit, then at most 62 of letters, digits, '_', '.', '-'. Such a name is
// one path component, never "." or "..".
func ValidName(name string) error {
	// By hand, not a package-level regexp: compiling one costs every
	// start of jail a quarter of a millisecond.
	ok := len(name) >= 1 && len(name) <= 63
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		alnum := ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		ok = alnum || (i > 0 && (c == '_' || c == '.' || c == '-'))
	}
	if !ok {
		return fmt.Errorf("sandbox name %s: want a letter or digit, then at most 62 letters, digits, '_', '.' or '-'", strconv.Quote(name))
	}
	return nil
}

// Root is where the state directory of the user uid is: $JAIL_STATE_DIR
// when set (an absolute path), else /run/jail for root and
// $XDG_RUNTIME_DIR/jail for anyone else (getenv reads the environment).
func Root(uid int, getenv func(string) string) (string, error) {
	if dir := getenv("JAIL_STATE_DIR"); dir != "" {
		if !filepath.IsAbs(dir) {
			return "", errors.New("state directory: JAIL_STATE_DIR must be an absolute path")
		}
		return filepath.Clean(dir), nil
	}
	if uid == 0 {
		return "/run/jail", nil
	}
	dir := getenv("XDG_RUNTIME_DIR")
	if dir == "" || !filepath.IsAbs(dir) {
		return "", errors.New("state directory: set XDG_RUNTIME_DIR (or JAIL_STATE_DIR) to an absolute path")
	}
	return filepath.Join(dir, "jail"), nil
}

// Store is an open state directory: its sandboxes/ directory.
type Store struct {
	dir  *os.File // sandboxes/, O_PATH
	path string
}

// Open opens (making what is missing, 0700) the state directory at root
// and its sandboxes/ directory, checked for the caller.
func Open(root string) (*Store, error) {
	d, err := socketdir.Open(root, socketdir.Policy{Owners: []int{os.Getuid()}, Create: true})
	if err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	defer d.Close()
	via, err := d.Via("sandboxes")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(d.Path(), "sandboxes")
	if err := unix.Mkdir(via, 0o700); err != nil && err != unix.EEXIST {
		return nil, fmt.Errorf("state directory: %s: %w", path, err)
	}
	fd, err := unix.Open(via, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("state directory: %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	if err := checkPrivate(fd, path); err != nil {
		f.Close()
		return nil, err
	}
	return &Store{dir: f, path: path}, nil
}

// checkPrivate checks that the directory fd belongs to the caller and that
// no one else may enter it.
func checkPrivate(fd int, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("state directory: %s: %w", path, err)
	}
	if int(st.Uid) != os.Getuid() || st.Mode&0o077 != 0 || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("state directory: %s must be a directory of uid %d with mode 0700 (it is uid %d, mode %04o)", path, os.Getuid(), st.Uid, st.Mode&0o7777)
	}
	return nil
}

// Close closes the store.
func (s *Store) Close() error { return s.dir.Close() }

// Sandbox is the open directory of one sandbox.
type Sandbox struct {
	Name string
	dir  *os.File // O_PATH
}

// Create makes the directory of a new sandbox (ErrExists if the name is
// taken: mkdir is what decides between two creators).
func (s *Store) Create(name string) (*Sandbox, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if err := unix.Mkdirat(int(s.dir.Fd()), name, 0o700); err != nil {
		if err == unix.EEXIST {
			return nil, fmt.Errorf("sandbox %s: %w", name, ErrExists)
		}
		return nil, fmt.Errorf("sandbox %s: %w", name, err)
	}
	return s.Open(name)
}

// Open opens the directory of the sandbox name.
func (s *Store) Open(name string) (*Sandbox, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	fd, err := unix.Openat(int(s.dir.Fd()), name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ENOENT {
			return nil, fmt.Errorf("sandbox %s: %w", name, ErrNotFound)
		}
		return nil, fmt.Errorf("sandbox %s: %w", name, err)
	}
	path := filepath.Join(s.path, name)
	if err := checkPrivate(fd, path); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &Sandbox{Name: name, dir: os.NewFile(uintptr(fd), path)}, nil
}

// List returns the names of the sandboxes in the store; entries that are
// no sandbox's (a name jail would refuse) are left out.
func (s *Store) List() ([]string, error) {
	fd, err := unix.Openat(int(s.dir.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("state directory: %s: %w", s.path, err)
	}
	f := os.NewFile(uintptr(fd), s.path)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("state directory: %s: %w", s.path, err)
	}
	var out []string
	for _, n := range names {
		if ValidName(n) == nil {
			out = append(out, n)
		}
	}
	return out, nil
}

// Close closes the sandbox's directory.
func (sb *Sandbox) Close() error { return sb.dir.Close() }

// Adopt is the sandbox name whose directory dir is, inherited from the
// process that opened it (a holder's).
func Adopt(name string, dir *os.File) *Sandbox { return &Sandbox{Name: name, dir: dir} }

// Dir is the sandbox's directory (O_PATH), for openat and for a process
// that takes it over (its monitor).
func (sb *Sandbox) Dir() *os.File { return sb.dir }

// Dir is the directory holding the sandboxes' directories.
func (s *Store) Dir() *os.File { return s.dir }

// OpenFile opens the file name of the sandbox's directory, never through a
// symbolic link.
func (sb *Sandbox) OpenFile(name string, flags int, mode uint32) (*os.File, error) {
	return sb.openFile(name, flags, mode)
}

func (sb *Sandbox) openFile(name string, flags int, mode uint32) (*os.File, error) {
	fd, err := unix.Openat(int(sb.dir.Fd()), name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), filepath.Join(sb.dir.Name(), name)), nil
}

// Hold takes the sandbox's lock for its monitor, which keeps the returned
// file open for its whole life (and passes it across its exec); ErrLive if
// another holds it.
func (sb *Sandbox) Hold() (*os.File, error) {
	f, err := sb.openFile(LockFile, unix.O_RDWR|unix.O_CREAT, 0o600)
	if err == unix.ENOENT {
		// The directory itself is gone (its monitor removed it after
		// the sandbox was opened): no sandbox any more.
		return nil, fmt.Errorf("sandbox %s: %w", sb.Name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: lock: %w", sb.Name, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, fmt.Errorf("sandbox %s: %w", sb.Name, ErrLive)
		}
		return nil, fmt.Errorf("sandbox %s: lock: %w", sb.Name, err)
	}
	return f, nil
}

// Live reports whether the sandbox's monitor runs: whether its lock is
// held. A sandbox whose lock was never taken (its creator died before) is
// not live.
func (sb *Sandbox) Live() (bool, error) {
	f, err := sb.openFile(LockFile, unix.O_RDONLY, 0)
	if err == unix.ENOENT {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sandbox %s: lock: %w", sb.Name, err)
	}
	defer f.Close()
	switch err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err {
	case nil:
		return false, nil // closing f lets it go
	case unix.EWOULDBLOCK:
		return true, nil
	default:
		return false, fmt.Errorf("sandbox %s: lock: %w", sb.Name, err)
	}
}

// WriteFile replaces the file name of the sandbox's directory with data,
// atomically (a reader sees the old content or the new, whole), 0600.
func (sb *Sandbox) WriteFile(name string, data []byte) error {
	tmp := "." + name + ".tmp"
	_ = unix.Unlinkat(int(sb.dir.Fd()), tmp, 0)
	f, err := sb.openFile(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("sandbox %s: %s: %w", sb.Name, name, err)
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = unix.Renameat(int(sb.dir.Fd()), tmp, int(sb.dir.Fd()), name)
	}
	if werr != nil {
		_ = unix.Unlinkat(int(sb.dir.Fd()), tmp, 0)
		return fmt.Errorf("sandbox %s: %s: %w", sb.Name, name, werr)
	}
	return nil
}

// ReadFile returns the content of the file name of the sandbox's
// directory, which must be a regular file.
func (sb *Sandbox) ReadFile(name string) ([]byte, error) {
	f, err := sb.openFile(name, unix.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %s: %w", sb.Name, name, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("sandbox %s: %s: not a regular file", sb.Name, name)
	}
	data, err := readAll(f)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %s: %w", sb.Name, name, err)
	}
	return data, nil
}

// maxFile bounds what ReadFile reads: a spec is small.
const maxFile = 1 << 20

func readAll(f *os.File) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFile {
		return nil, fmt.Errorf("larger than %d bytes", maxFile)
	}
	return data, nil
}

// RemoveHeld removes the sandbox directory dir, name in parent, whose
// lock the caller holds (a holder that made it and failed): its files
// through dir, then the directory.
func RemoveHeld(parent, dir *os.File, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if err := removeContents(dir); err != nil {
		return err
	}
	return unix.Unlinkat(int(parent.Fd()), name, unix.AT_REMOVEDIR)
}

// removeContents removes every file of the sandbox directory dir through
// its descriptor, its lock last (until then the sandbox looks alive, not
// dead and to be removed by someone else), and what is gone already (a
// monitor removing the same files) is no error.
func removeContents(dir *os.File) error {
	fd, err := unix.Openat(int(dir.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(fd), dir.Name())
	defer d.Close()
	entries, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, e := range append(slices.DeleteFunc(entries, func(e string) bool { return e == LockFile }), LockFile) {
		if err := unix.Unlinkat(fd, e, 0); err != nil && err != unix.ENOENT {
			return fmt.Errorf("remove %s: %w", e, err)
		}
	}
	return nil
}

// Remove removes the directory of the sandbox name, whose monitor must be
// gone (ErrLive otherwise): its lock is taken for the removal, so that two
// removals, or a removal and a monitor, never meet. The directory holds
// only files jail writes; a subdirectory in it is an error.
func (s *Store) Remove(name string) error {
	sb, err := s.Open(name)
	if err != nil {
		return err
	}
	defer sb.Close()
	lock, err := sb.Hold()
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := removeContents(sb.dir); err != nil {
		return fmt.Errorf("sandbox %s: %w", name, err)
	}
	if err := unix.Unlinkat(int(s.dir.Fd()), name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
		return fmt.Errorf("sandbox %s: %w", name, err)
	}
	return nil
}
