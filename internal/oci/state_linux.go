package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/seccomp/filter"
)

// File names in a container's state directory.
const (
	stateFile = "state.json"
	// cgroupFile records, from the moment create makes the container's
	// cgroup until it writes the state, the cgroup, so that delete
	// --force of a create ended in between (the shim's cleanup) removes
	// it and ends what it holds (the init, a hook).
	cgroupFile = "cgroup.json"
	fifoFile   = "exec.fifo"
)

// fifoMode is the exec FIFO's mode. Only its owner (the runtime) reads it;
// anyone may open it for writing, as runc's (0622): the container's
// process, whatever its ids, reopens it for writing through the
// descriptor it was handed (never by path: the state directory is 0700,
// and the root private), and a write only starts the container early,
// which whoever holds that descriptor can do anyway.
const fifoMode = 0o622

// maxState bounds a state.json read: annotations make most of it, and a
// bundle's config.json is at most MaxConfig.
const maxState = MaxConfig + 64<<10

// ErrNotExist: no container has that ID (runc's words, which containerd
// looks for).
var ErrNotExist = errors.New("container does not exist")

// State is what jail keeps of a container (state.json).
type State struct {
	ID     string `json:"id"`
	Bundle string `json:"bundle"`
	// Rootfs is the root's canonical host path.
	Rootfs string `json:"rootfs"`
	// Pid is the container's process, which StartTime (clock ticks after
	// boot, /proc/PID/stat's field 22) identifies.
	Pid         int               `json:"pid"`
	StartTime   uint64            `json:"start_time"`
	Created     time.Time         `json:"created"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Cgroup      *Cgroup           `json:"cgroup,omitempty"`
	Owner       int               `json:"owner"`
	// Hooks are the bundle's, run at start (poststart) and delete
	// (poststop).
	Hooks *specs.Hooks `json:"hooks,omitempty"`
	// Process is the bundle's as created: what an exec starts from.
	// Changes to config.json afterwards change nothing.
	Process *specs.Process `json:"process,omitempty"`
	// Seccomp and ProfileSeccomp are the filters create compiled (the
	// bundle's, and the jail profile's its annotation named), which every
	// process exec starts gets as the container's process did: neither
	// the policy nor the profile's file is read again.
	Seccomp        filter.Filter `json:"seccomp"`
	ProfileSeccomp filter.Filter `json:"profile_seccomp"`
}

// Store is the root of the containers' states (--root).
type Store struct {
	Path string
	dir  *os.File // O_PATH
}

// DefaultRoot is --root's default: /run/jail-oci as root, else
// $XDG_RUNTIME_DIR/jail-oci.
func DefaultRoot() (string, error) {
	if os.Geteuid() == 0 {
		return "/run/jail-oci", nil
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return filepath.Join(d, "jail-oci"), nil
	}
	return "", errors.New("no --root given, and $XDG_RUNTIME_DIR is not set")
}

// OpenStore opens the state root, made (0700) if missing when create is
// set (otherwise a missing root is ErrNotExist: reading a state changes
// nothing). It must be a directory of the caller's that no one else may
// write.
func OpenStore(root string, create bool) (*Store, error) {
	if root == "" {
		var err error
		if root, err = DefaultRoot(); err != nil {
			return nil, err
		}
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("root %s: %w", root, err)
	}
	if create {
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return nil, fmt.Errorf("root %s: %w", abs, err)
		}
	}
	fd, err := unix.Open(abs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) && !create {
		return nil, ErrNotExist
	}
	if err != nil {
		return nil, fmt.Errorf("root %s: %w", abs, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("root %s: %w", abs, err)
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("root %s: not a directory of yours that only you may write", abs)
	}
	return &Store{Path: abs, dir: os.NewFile(uintptr(fd), abs)}, nil
}

// Close releases the root.
func (s *Store) Close() error { return s.dir.Close() }

// maxID bounds an ID: it names a directory (NAME_MAX).
const maxID = 255

// ValidID checks a container ID: [A-Za-z0-9][A-Za-z0-9_.+-]*, at most 255
// bytes, so that it is one plain directory name.
func ValidID(id string) error {
	if id == "" {
		return errors.New("container id cannot be empty")
	}
	if len(id) > maxID {
		return fmt.Errorf("invalid id format: longer than %d bytes", maxID)
	}
	for i, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if i > 0 {
			ok = ok || r == '_' || r == '.' || r == '+' || r == '-'
		}
		if !ok {
			return fmt.Errorf("invalid id format: %q", id)
		}
	}
	return nil
}

// Container is one container's state directory, locked (flock) from its
// opening to Close.
type Container struct {
	ID    string
	store *Store
	dir   *os.File
}

// Create makes the state directory of a new container and locks it.
func (s *Store) Create(id string) (*Container, error) {
	if err := ValidID(id); err != nil {
		return nil, err
	}
	err := unix.Mkdirat(int(s.dir.Fd()), id, 0o700)
	if errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("container with id exists: %s", id)
	}
	if err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	c, err := s.open(id)
	if err != nil {
		_ = unix.Unlinkat(int(s.dir.Fd()), id, unix.AT_REMOVEDIR)
		return nil, err
	}
	return c, nil
}

// Open opens and locks an existing container's state directory; ErrNotExist
// when there is none.
func (s *Store) Open(id string) (*Container, error) {
	if err := ValidID(id); err != nil {
		return nil, err
	}
	return s.open(id)
}

func (s *Store) open(id string) (*Container, error) {
	fd, err := unix.Openat(int(s.dir.Fd()), id, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, ErrNotExist
	}
	if err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	if err := flock(fd); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("state directory: lock: %w", err)
	}
	// Removed while this waited for the lock: gone.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Nlink == 0 {
		unix.Close(fd)
		return nil, ErrNotExist
	}
	return &Container{ID: id, store: s, dir: os.NewFile(uintptr(fd), id)}, nil
}

func flock(fd int) error {
	for {
		err := unix.Flock(fd, unix.LOCK_EX)
		if err != unix.EINTR {
			return err
		}
	}
}

// List returns the IDs of the containers in the store.
func (s *Store) List() ([]string, error) {
	fd, err := unix.Openat(int(s.dir.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), s.Path)
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && ValidID(e.Name()) == nil {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// Close unlocks the directory.
func (c *Container) Close() error { return c.dir.Close() }

// Path is the state directory's path.
func (c *Container) Path() string { return filepath.Join(c.store.Path, c.ID) }

// ReadState reads state.json; ErrNotExist when there is none (a create
// that failed before writing it).
func (c *Container) ReadState() (*State, error) {
	fd, err := unix.Openat(int(c.dir.Fd()), stateFile, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, ErrNotExist
	}
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	f := os.NewFile(uintptr(fd), stateFile)
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxState+1))
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	if len(data) > maxState {
		return nil, errors.New("state: too large")
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	if st.ID != c.ID {
		return nil, fmt.Errorf("state: names container %q", st.ID)
	}
	return &st, nil
}

// WriteState writes state.json whole: a temporary file renamed over it.
func (c *Container) WriteState(st *State) error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	if err := writeFileAt(int(c.dir.Fd()), stateFile, data, 0o600); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	return nil
}

// writeFileAt writes name in dir whole: a temporary file, synced, renamed
// over it.
func writeFileAt(dir int, name string, data []byte, mode uint32) error {
	var tmp string
	var fd int
	for i := 0; ; i++ {
		tmp = "." + name + ".tmp-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(i)
		var err error
		fd, err = unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EEXIST) || i == 100 {
			return err
		}
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err := f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dir, tmp, dir, name)
	}
	if err != nil {
		_ = unix.Unlinkat(dir, tmp, 0)
	}
	return err
}

// WriteFileAtomic writes path whole (a temporary file in its directory
// renamed over it): the pid file, which the shim reads once create exits.
func WriteFileAtomic(path string, data []byte, mode uint32) error {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return writeFileAt(fd, name, data, mode)
}

// MakeFifo makes the exec FIFO (fifoMode, whatever the umask) and returns
// an O_PATH descriptor of it, for the role.
func (c *Container) MakeFifo() (*os.File, error) {
	dir := int(c.dir.Fd())
	if err := unix.Mkfifoat(dir, fifoFile, fifoMode); err != nil {
		return nil, fmt.Errorf("exec fifo: %w", err)
	}
	fd, err := unix.Openat(dir, fifoFile, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("exec fifo: %w", err)
	}
	// Through the descriptor: the name could be another file by now.
	if err := unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), fifoMode, 0); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("exec fifo: %w", err)
	}
	return os.NewFile(uintptr(fd), fifoFile), nil
}

// HasFifo reports whether the exec FIFO is still there (not started).
func (c *Container) HasFifo() bool {
	var st unix.Stat_t
	err := unix.Fstatat(int(c.dir.Fd()), fifoFile, &st, unix.AT_SYMLINK_NOFOLLOW)
	return err == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO
}

// OpenFifo opens the exec FIFO for reading, without blocking (a reader
// that is there lets the container's open for writing return).
func (c *Container) OpenFifo() (*os.File, error) {
	fd, err := unix.Openat(int(c.dir.Fd()), fifoFile, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("exec fifo: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		unix.Close(fd)
		return nil, errors.New("exec fifo: not a FIFO")
	}
	return os.NewFile(uintptr(fd), fifoFile), nil
}

// RemoveFifo removes the exec FIFO.
func (c *Container) RemoveFifo() error {
	err := unix.Unlinkat(int(c.dir.Fd()), fifoFile, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// Remove removes the state directory and what it holds, then unlocks it.
func (c *Container) Remove() error {
	dir := int(c.dir.Fd())
	listing, err := unix.Openat(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		f := os.NewFile(uintptr(listing), c.ID)
		entries, _ := f.ReadDir(-1)
		f.Close()
		for _, e := range entries {
			_ = unix.Unlinkat(dir, e.Name(), 0)
		}
	}
	err = unix.Unlinkat(int(c.store.dir.Fd()), c.ID, unix.AT_REMOVEDIR)
	c.Close()
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove state directory: %w", err)
	}
	return nil
}

// WriteCgroup records the cgroup a create made before the state exists
// (cgroupFile).
func (c *Container) WriteCgroup(cg *Cgroup) error {
	data, err := json.Marshal(cg)
	if err != nil {
		return fmt.Errorf("cgroup record: %w", err)
	}
	if err := writeFileAt(int(c.dir.Fd()), cgroupFile, data, 0o600); err != nil {
		return fmt.Errorf("cgroup record: %w", err)
	}
	return nil
}

// ReadCgroup returns the cgroup WriteCgroup recorded, or nil when there is
// none.
func (c *Container) ReadCgroup() (*Cgroup, error) {
	fd, err := unix.Openat(int(c.dir.Fd()), cgroupFile, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cgroup record: %w", err)
	}
	f := os.NewFile(uintptr(fd), cgroupFile)
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxState+1))
	if err != nil {
		return nil, fmt.Errorf("cgroup record: %w", err)
	}
	if len(data) > maxState {
		return nil, errors.New("cgroup record: too large")
	}
	var cg Cgroup
	if err := json.Unmarshal(data, &cg); err != nil {
		return nil, fmt.Errorf("cgroup record: %w", err)
	}
	return &cg, nil
}
