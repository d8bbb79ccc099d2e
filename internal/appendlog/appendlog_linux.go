// Package appendlog is a log file that several processes append to at
// once, rotated by size: what the audit log (internal/audit) and a
// persistent sandbox's output log (internal/sandboxlog) are built on.
//
// Invariants:
//   - Each Append is one write(2) on a descriptor opened O_APPEND. On
//     Linux a write to a regular file on a local filesystem (ext4, xfs,
//     btrfs, tmpfs) holds the inode's lock for the whole write, so two
//     writers' appends never interleave, whatever processes they are in;
//     a writer that gets a short write reports it as an error. (NFS and
//     other network filesystems do not keep this promise.)
//   - NAME is rotated to NAME.1 (replacing the old one: one old file is
//     kept) before an append that would take a non-empty NAME past the
//     bound, so each file holds at most max(bound, one append) bytes.
//   - Appends and rotations are serialised by an flock (exclusive) on
//     NAME.lock beside the log, taken for the check of the size, the
//     rotation and the write: so the bound holds with any number of
//     writers, no append lands in a file already rotated away (twice:
//     lost), and every appender sees a rotation made by another process:
//     before each append it compares the inode it holds with NAME's and
//     reopens NAME when they differ. The lock costs appenders little:
//     the kernel serialises writes to one file anyway.
//   - Everything is reached from the directory's descriptor by openat,
//     never following a symbolic link and never opening a FIFO or a
//     device: the files must be regular files of the caller that no one
//     else may write.
package appendlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Suffixes of the files beside a log NAME.
const (
	// OldSuffix names the rotated file: NAME.1.
	OldSuffix = ".1"
	// LockSuffix names the lock file: NAME.lock.
	LockSuffix = ".lock"
)

// File is an open log. Its methods may be called from several
// goroutines; appends from one File are serialised, appends from
// different Files (in one process or several) run at once.
type File struct {
	mu    sync.Mutex
	dir   *os.File // the log's directory; may be O_PATH
	name  string
	bound int64
	lock  *os.File // NAME.lock, flocked around each append
	f     *os.File // NAME as it was when last (re)opened; nil when closed
	dev   uint64
	ino   uint64
}

// Open opens (making it, 0600, when missing) the log name in dir, to be
// rotated once it would pass bound bytes (bound > 0). dir stays the
// caller's: File does not close it, and it must stay open while File is
// used.
func Open(dir *os.File, name string, bound int64) (*File, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return nil, fmt.Errorf("log name %q: not one path component", name)
	}
	if bound <= 0 {
		return nil, fmt.Errorf("log %s: bound %d: must be positive", name, bound)
	}
	lock, err := openRegular(dir, name+LockSuffix, unix.O_RDWR|unix.O_CREAT)
	if err != nil {
		return nil, err
	}
	l := &File{dir: dir, name: name, bound: bound, lock: lock}
	if err := l.flock(unix.LOCK_SH); err != nil {
		lock.Close()
		return nil, err
	}
	err = l.reopen()
	if uerr := l.flock(unix.LOCK_UN); err == nil {
		err = uerr
	}
	if err != nil {
		lock.Close()
		if l.f != nil {
			l.f.Close()
		}
		return nil, err
	}
	return l, nil
}

// openRegular opens name in dir with flags (O_NOFOLLOW, O_NONBLOCK,
// O_NOCTTY, O_CLOEXEC added; mode 0600 when it is made) and checks it is
// a regular file of the caller that neither group nor others may write.
// O_NONBLOCK keeps a FIFO planted there from blocking the open; a regular
// file ignores it.
func openRegular(dir *os.File, name string, flags int) (*os.File, error) {
	path := filepath.Join(dir.Name(), name)
	fd, err := unix.Openat(int(dir.Fd()), name, flags|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if err == unix.ELOOP {
			return nil, fmt.Errorf("%s: a symbolic link, not a file", path)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		err = fmt.Errorf("%s: not a regular file", path)
	case int(st.Uid) != os.Geteuid():
		err = fmt.Errorf("%s: owned by uid %d, not by uid %d", path, st.Uid, os.Geteuid())
	case st.Mode&0o022 != 0:
		err = fmt.Errorf("%s: writable by group or others (mode %04o)", path, st.Mode&0o7777)
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

func (l *File) flock(how int) error {
	for {
		err := unix.Flock(int(l.lock.Fd()), how)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: flock: %w", l.lock.Name(), err)
		}
		return nil
	}
}

// reopen opens NAME anew (making it when missing), in place of the file
// held. The caller holds the lock.
func (l *File) reopen() error {
	f, err := openRegular(l.dir, l.name, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return &os.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	if l.f != nil {
		l.f.Close()
	}
	l.f, l.dev, l.ino = f, st.Dev, st.Ino
	return nil
}

// current makes sure the file held is NAME's, reopening it when NAME was
// rotated away (or removed), and returns its size. The caller holds the
// lock.
func (l *File) current() (int64, error) {
	var st unix.Stat_t
	err := unix.Fstatat(int(l.dir.Fd()), l.name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err != nil && err != unix.ENOENT {
		return 0, &os.PathError{Op: "stat", Path: filepath.Join(l.dir.Name(), l.name), Err: err}
	}
	if err == unix.ENOENT || st.Dev != l.dev || st.Ino != l.ino {
		if err := l.reopen(); err != nil {
			return 0, err
		}
	}
	if err := unix.Fstat(int(l.f.Fd()), &st); err != nil {
		return 0, &os.PathError{Op: "fstat", Path: l.f.Name(), Err: err}
	}
	return st.Size, nil
}

// Append writes p at the end of the log with one write(2), rotating the
// log first when p would take it past its bound. p should be at most a
// few tens of KiB: one append is what one file may exceed the bound by.
func (l *File) Append(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return fmt.Errorf("%s: closed", filepath.Join(l.dir.Name(), l.name))
	}
	if err := l.flock(unix.LOCK_EX); err != nil {
		return err
	}
	err := l.appendLocked(p)
	if uerr := l.flock(unix.LOCK_UN); err == nil {
		err = uerr
	}
	return err
}

func (l *File) appendLocked(p []byte) error {
	size, err := l.current()
	if err != nil {
		return err
	}
	if l.full(size, len(p)) {
		if err := l.rotate(); err != nil {
			return err
		}
	}
	n, err := unix.Write(int(l.f.Fd()), p)
	if err != nil {
		return &os.PathError{Op: "write", Path: l.f.Name(), Err: err}
	}
	if n != len(p) {
		return fmt.Errorf("%s: short write (%d of %d bytes)", l.f.Name(), n, len(p))
	}
	return nil
}

// full says whether an append of n bytes must rotate a log of size bytes
// first.
func (l *File) full(size int64, n int) bool {
	return size > 0 && size+int64(n) > l.bound
}

// rotate renames NAME to NAME.1 and opens a new NAME. The caller holds
// the lock.
func (l *File) rotate() error {
	dirfd := int(l.dir.Fd())
	if err := unix.Renameat(dirfd, l.name, dirfd, l.name+OldSuffix); err != nil {
		return fmt.Errorf("%s: rotate: %w", filepath.Join(l.dir.Name(), l.name), err)
	}
	return l.reopen()
}

// Close closes the log. Appends after it fail.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("log: closed twice")
	}
	err := l.f.Close()
	if lerr := l.lock.Close(); err == nil {
		err = lerr
	}
	l.f = nil
	return err
}

// OpenKept opens the files a log keeps, NAME.1 and NAME, for reading, at
// one moment: under the lock, so that no rotation falls between the two
// opens. A file that does not exist is returned as nil.
func OpenKept(dir *os.File, name string) (old, cur *os.File, err error) {
	lock, err := openRegular(dir, name+LockSuffix, unix.O_RDONLY)
	switch {
	case errors.Is(err, unix.ENOENT):
		// Never written to by Open: no one rotates it.
	case err != nil:
		return nil, nil, err
	default:
		defer lock.Close()
		if err := unix.Flock(int(lock.Fd()), unix.LOCK_SH); err != nil {
			return nil, nil, fmt.Errorf("%s: flock: %w", lock.Name(), err)
		}
	}
	old, err = openRegular(dir, name+OldSuffix, unix.O_RDONLY)
	if errors.Is(err, unix.ENOENT) {
		old, err = nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	cur, err = openRegular(dir, name, unix.O_RDONLY)
	if errors.Is(err, unix.ENOENT) {
		cur, err = nil, nil
	}
	if err != nil {
		if old != nil {
			old.Close()
		}
		return nil, nil, err
	}
	return old, cur, nil
}
