//go:build linux

// Package socketdir opens the directory of jail serve's unix socket for the
// server, which binds there, and for its clients, which connect there,
// checked against a socket swapped in by another user.
//
// A unix socket is reached by path, and whoever may rename entries of its
// directory, or of any directory above it, may move the server's socket
// away and bind their own: they then read the requests (environment,
// stdin) and forge the results. So the directory is opened once, one
// component at a time from /, never through a symbolic link, and each
// component is checked on its descriptor: the directory and everything
// above it must belong to users trusted here, the directory must not be
// writable by its group or others, and a directory above it only when it
// is sticky (as /tmp: others cannot rename what they do not own there,
// and what is below it is checked to be owned by a trusted user). From then
// on the socket is reached through the directory's descriptor
// (/proc/self/fd/N/NAME), never by its path again.
//
// It links only the standard library, as package client does.
package socketdir

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// oPath is O_PATH, which package syscall does not name (the same on every
// Linux architecture Go runs on): it opens a directory to walk and to
// fstat, without the right to read it.
const oPath = 0o10000000

// Policy says whom a directory may belong to.
type Policy struct {
	// Owners may own the directory itself; the directories above it may
	// belong to root or to them.
	Owners []int
	// Create makes the directory, and those missing above it, with mode
	// 0700, when missing.
	Create bool
}

// Dir is an open, checked directory.
type Dir struct {
	fd   int
	path string
}

// Open opens the directory at path, which must be absolute, and checks it
// and the directories above it against p.
func Open(path string, p Policy) (*Dir, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("socket directory %q: not an absolute path", path)
	}
	path = filepath.Clean(path)
	fd, err := syscall.Open("/", oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket directory %s: open /: %w", path, err)
	}
	walked := "/"
	var names []string
	if path != "/" {
		names = strings.Split(strings.TrimPrefix(path, "/"), "/")
	}
	for _, name := range names {
		// What is above is checked before what is below is trusted:
		// a directory others may change can hold anything.
		if err := check(fd, walked, p, false); err != nil {
			syscall.Close(fd)
			return nil, err
		}
		next := filepath.Join(walked, name)
		child, err := openDir(fd, name, next, p.Create)
		syscall.Close(fd)
		if err != nil {
			return nil, err
		}
		fd, walked = child, next
	}
	if err := check(fd, path, p, true); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return &Dir{fd: fd, path: path}, nil
}

// openDir opens the directory name in the directory parent, without
// following a symbolic link, making it first when create is set.
func openDir(parent int, name, path string, create bool) (int, error) {
	const flags = oPath | syscall.O_DIRECTORY | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	fd, err := syscall.Openat(parent, name, flags, 0)
	if err == syscall.ENOENT && create {
		if err = syscall.Mkdirat(parent, name, 0o700); err == nil || err == syscall.EEXIST {
			fd, err = syscall.Openat(parent, name, flags, 0)
		}
	}
	switch {
	case err == nil:
		return fd, nil
	case err == syscall.ENOTDIR || err == syscall.ELOOP:
		if st, lerr := lstatAt(parent, name); lerr == nil && st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			return -1, fmt.Errorf("socket directory: %s is a symbolic link: give the path it leads to, if its owner is to be trusted", path)
		}
		return -1, fmt.Errorf("socket directory: %s is not a directory", path)
	}
	return -1, fmt.Errorf("socket directory: %s: %w", path, err)
}

// check checks the open directory fd at path against p: last is the
// socket's own directory, otherwise one above it.
func check(fd int, path string, p Policy, last bool) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fmt.Errorf("socket directory: %s: %w", path, err)
	}
	owners := p.Owners
	if !last {
		owners = append([]int{0}, p.Owners...)
	}
	if !slices.Contains(owners, int(st.Uid)) {
		return fmt.Errorf("socket directory: %s belongs to uid %d, not to %s", path, st.Uid, who(owners))
	}
	mode := st.Mode & 0o7777
	if mode&0o022 != 0 && (last || mode&syscall.S_ISVTX == 0) {
		return fmt.Errorf("socket directory: %s is writable by others (mode %04o): give a directory only its owner may write", path, mode)
	}
	return nil
}

// who names the users in a message.
func who(uids []int) string {
	var names []string
	for _, u := range uids {
		if u == 0 {
			names = append(names, "root")
		} else {
			names = append(names, "uid "+strconv.Itoa(u))
		}
	}
	names = slices.Compact(names)
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// lstatAt is fstatat(parent, name, AT_SYMLINK_NOFOLLOW), which package
// syscall has no name for on every architecture.
func lstatAt(parent int, name string) (*syscall.Stat_t, error) {
	fd, err := syscall.Openat(parent, name, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Path is the directory's path as it was opened, for messages.
func (d *Dir) Path() string { return d.path }

// Via is a path that reaches name in the directory through its descriptor,
// for bind and connect, which take a path: the kernel resolves it to this
// very directory, whatever was renamed since.
func (d *Dir) Via(name string) (string, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return "", fmt.Errorf("socket name %q", name)
	}
	return "/proc/self/fd/" + strconv.Itoa(d.fd) + "/" + name, nil
}

// Lstat describes the entry name of the directory, not following a
// symbolic link.
func (d *Dir) Lstat(name string) (*syscall.Stat_t, error) {
	return lstatAt(d.fd, name)
}

// Remove removes the entry name (not a directory) of the directory.
func (d *Dir) Remove(name string) error {
	return syscall.Unlinkat(d.fd, name)
}

// Close closes the directory.
func (d *Dir) Close() error {
	if d.fd < 0 {
		return errors.New("socket directory: closed twice")
	}
	err := syscall.Close(d.fd)
	d.fd = -1
	return err
}

// IsSocket reports whether st describes a socket.
func IsSocket(st *syscall.Stat_t) bool { return st.Mode&syscall.S_IFMT == syscall.S_IFSOCK }
