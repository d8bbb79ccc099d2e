// Package privdir finds and opens the directories whose content jail
// trusts as its own (its helper programs, user profiles, compiled
// filters): directories that nobody but root and the user they belong to
// can change, however the environment names them. It reads the files in
// them that jail trusts (ReadFile: a regular file of a trusted owner that
// no one else may write, bounded, never through a link or a FIFO), and the
// password database (Passwd), which says where a user's directories are
// whatever $HOME says, read once for all that one task asks of it.
//
// A directory is private to uid when it, and every directory above it up
// to /, is owned by root or uid and writable by neither its group nor
// others. A root-owned directory with the sticky bit (/tmp) may be
// writable by all above the last component: there, nobody but root and an
// entry's owner may rename or remove the entry. Symbolic links on the way
// are resolved first and the directories they lead to are what is
// checked. Nothing here trusts a path twice: Open and MkdirAll return the
// directory's descriptor, checked to be the directory whose path was
// checked, and callers work through it.
package privdir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrNotPrivate is wrapped by the errors about a directory someone other
// than root and the user could change.
var ErrNotPrivate = errors.New("not private")

// notPrivate says why a directory is not private.
type notPrivate struct{ path, why string }

func (e *notPrivate) Error() string { return e.path + ": " + e.why }
func (e *notPrivate) Unwrap() error { return ErrNotPrivate }

// Check returns path with its symbolic links resolved once every
// directory on it, path included, is private to uid (see the package
// comment). path must be absolute and exist.
func Check(path string, uid int) (string, error) {
	resolved, _, err := check(path, uid)
	return resolved, err
}

// check is Check that also returns the stat of path's directory.
func check(path string, uid int) (string, unix.Stat_t, error) {
	if !filepath.IsAbs(path) {
		return "", unix.Stat_t{}, fmt.Errorf("%s: not an absolute path", path)
	}
	path = filepath.Clean(path)
	st, link, err := walk(path, uid, false)
	if link {
		// Resolved once: the directories the links lead to are what
		// must be private, and so must each link be: a link that
		// another user owns (in a sticky /tmp, say) is theirs to point
		// elsewhere after the check, at another of uid's directories.
		resolved, rerr := resolveOwnLinks(path, uid)
		if rerr != nil {
			return "", unix.Stat_t{}, rerr
		}
		path = resolved
		st, _, err = walk(path, uid, true)
	}
	return path, st, err
}

// resolveOwnLinks resolves the symbolic links of path (absolute, clean)
// as the kernel would, refusing any that neither root nor uid owns.
func resolveOwnLinks(path string, uid int) (string, error) {
	done, rest := "/", strings.TrimPrefix(path, "/")
	for links := 0; rest != ""; {
		name, after, _ := strings.Cut(rest, "/")
		rest = after
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			done = filepath.Dir(done)
			continue
		}
		next := filepath.Join(done, name)
		var st unix.Stat_t
		if err := unix.Lstat(next, &st); err != nil {
			return "", &os.PathError{Op: "lstat", Path: next, Err: err}
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			done = next
			continue
		}
		if st.Uid != 0 && int(st.Uid) != uid {
			return "", &notPrivate{next, fmt.Sprintf("a symbolic link owned by uid %d, neither root nor uid %d", st.Uid, uid)}
		}
		if links++; links > 40 {
			return "", &os.PathError{Op: "resolve", Path: path, Err: unix.ELOOP}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		// The target takes the link's place, relative to the link's
		// directory (done) unless absolute; ".." is taken step by step
		// above, never cleaned away past a link.
		if strings.HasPrefix(target, "/") {
			done = "/"
		}
		rest = strings.TrimPrefix(target, "/") + "/" + rest
	}
	return done, nil
}

// walk checks every directory of path from / down and returns the last
// one's stat. It stops at a symbolic link and says so, or refuses it when
// noLinks.
func walk(path string, uid int, noLinks bool) (unix.Stat_t, bool, error) {
	var st unix.Stat_t
	prefix := "/"
	rest := strings.TrimPrefix(path, "/")
	for {
		if err := unix.Lstat(prefix, &st); err != nil {
			return st, false, &os.PathError{Op: "lstat", Path: prefix, Err: err}
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if noLinks {
				return st, false, fmt.Errorf("%s: a symbolic link appeared while it was checked", prefix)
			}
			return st, true, nil
		}
		last := rest == ""
		if err := trusted(prefix, &st, uid, last); err != nil {
			return st, false, err
		}
		if last {
			return st, false, nil
		}
		name, after, _ := strings.Cut(rest, "/")
		prefix, rest = filepath.Join(prefix, name), after
	}
}

// trusted checks that only root and uid can change the directory st
// describes; one above the last may also be a root-owned sticky directory.
func trusted(path string, st *unix.Stat_t, uid int, last bool) error {
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s: not a directory", path)
	}
	if st.Uid != 0 && int(st.Uid) != uid {
		return &notPrivate{path, fmt.Sprintf("owned by uid %d, neither root nor uid %d", st.Uid, uid)}
	}
	if st.Mode&0o022 != 0 && (last || st.Uid != 0 || st.Mode&unix.S_ISVTX == 0) {
		return &notPrivate{path, fmt.Sprintf("writable by group or others (mode %#o)", st.Mode&0o7777)}
	}
	return nil
}

// Open checks path (Check) and opens its directory with flags (O_PATH, or
// O_RDONLY to list it; O_DIRECTORY, O_NOFOLLOW and O_CLOEXEC are added),
// making sure what it opened is the directory it checked.
func Open(path string, uid int, flags int) (*os.File, error) {
	resolved, st, err := check(path, uid)
	if err != nil {
		return nil, err
	}
	return openChecked(resolved, &st, uid, flags)
}

func openChecked(path string, st *unix.Stat_t, uid int, flags int) (*os.File, error) {
	fd, err := unix.Open(path, flags|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var got unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if got.Dev != st.Dev || got.Ino != st.Ino {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: replaced while it was checked", path)
	}
	if err := trusted(path, &got, uid, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// MkdirAll makes the directories of path that are missing, with perm, and
// opens path as Open does. Each directory on the way, made here or not,
// must be private to uid; base, a directory above path, must exist
// already (a home, /run/user/UID): MkdirAll makes only what lies below it.
func MkdirAll(base, path string, uid int, perm uint32, flags int) (*os.File, error) {
	base, path = filepath.Clean(base), filepath.Clean(path)
	rel, err := filepath.Rel(base, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return nil, fmt.Errorf("%s: not below %s", path, base)
	}
	dir, st, err := check(base, uid)
	if err != nil {
		return nil, err
	}
	if rel != "." {
		for _, name := range strings.Split(rel, "/") {
			dir = filepath.Join(dir, name)
			err := unix.Lstat(dir, &st)
			if err == unix.ENOENT {
				if err := unix.Mkdir(dir, perm); err != nil && err != unix.EEXIST {
					return nil, &os.PathError{Op: "mkdir", Path: dir, Err: err}
				}
				err = unix.Lstat(dir, &st)
			}
			if err != nil {
				return nil, &os.PathError{Op: "lstat", Path: dir, Err: err}
			}
			if err := trusted(dir, &st, uid, true); err != nil {
				return nil, err
			}
		}
	}
	return openChecked(dir, &st, uid, flags)
}

// maxPasswd bounds how much of /etc/passwd is read.
const maxPasswd = 16 << 20

// Passwd is the password database (/etc/passwd) as one task (a sandbox's
// start) sees it: read and parsed the first time it is asked, and answered
// from that parse after, so that all that follows from accounts (the
// directories of a home, root's profiles, a user's subordinate ids, the
// homes a sandbox must not see) costs one read. The zero value is ready,
// and it may be asked from several goroutines; a nil *Passwd reads the
// database anew each time it is asked.
type Passwd struct {
	once     sync.Once
	accounts []Account
	err      error
}

// Account is one entry of the password database.
type Account struct {
	Name string
	UID  int
	// uid is the uid as written: Lookup takes only an entry that writes
	// it as the number is written.
	uid string
	// Home and Shell are as written (a home may be relative, or empty).
	Home, Shell string
}

// Accounts returns the database's entries, in their order, or why it
// could not be read.
func (p *Passwd) Accounts() ([]Account, error) {
	if p == nil {
		return readPasswd()
	}
	p.once.Do(func() { p.accounts, p.err = readPasswd() })
	return p.accounts, p.err
}

// Lookup returns the first named entry of uid.
func (p *Passwd) Lookup(uid int) (Account, error) {
	accounts, err := p.Accounts()
	id := strconv.Itoa(uid)
	for _, a := range accounts {
		if a.uid == id && a.Name != "" {
			return a, nil
		}
	}
	if err != nil {
		return Account{}, err
	}
	return Account{}, fmt.Errorf("uid %d: no entry in /etc/passwd", uid)
}

// HomeOf returns the home directory of uid in the password database,
// whatever $HOME says.
func (p *Passwd) HomeOf(uid int) (string, error) {
	a, err := p.Lookup(uid)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(a.Home) {
		return "", fmt.Errorf("uid %d: home %q is not an absolute path", uid, a.Home)
	}
	return filepath.Clean(a.Home), nil
}

// readPasswd reads /etc/passwd, a regular file, without blocking and at
// most maxPasswd bytes of it, and parses its entries
// (name:password:UID:GID:gecos:home:shell; a line starting with # is none).
func readPasswd() ([]Account, error) {
	f, err := os.OpenFile("/etc/passwd", os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, errors.New("/etc/passwd: not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPasswd))
	if err != nil {
		return nil, fmt.Errorf("/etc/passwd: %w", err)
	}
	var accounts []Account
	for line := range strings.Lines(string(data)) {
		fields := strings.Split(strings.TrimSuffix(line, "\n"), ":")
		if len(fields) < 7 || strings.HasPrefix(line, "#") {
			continue
		}
		uid, err := strconv.Atoi(fields[2])
		if err != nil {
			continue
		}
		accounts = append(accounts, Account{Name: fields[0], UID: uid, uid: fields[2], Home: fields[5], Shell: fields[6]})
	}
	return accounts, nil
}

// ReadFile reads file in dir (an open directory) when it is a regular file
// that one of owners owns and that group and others cannot write, of at
// most max bytes: opened without following a link, without blocking (a
// FIFO is refused, not waited on), and read through that descriptor.
func ReadFile(dir *os.File, file string, max int64, owners ...int) ([]byte, error) {
	fd, err := unix.Openat(int(dir.Fd()), file, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), file)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	owned := false
	for _, o := range owners {
		owned = owned || int(st.Uid) == o
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, errors.New("not a regular file")
	case !owned:
		return nil, fmt.Errorf("owned by uid %d, not by %s", st.Uid, strings.Trim(fmt.Sprint(owners), "[]"))
	case st.Mode&0o022 != 0:
		return nil, fmt.Errorf("writable by group or others (mode %#o)", st.Mode&0o7777)
	case st.Size > max:
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return data, nil
}

// WriteFile puts data in the directory dirfd as file, whole or not at all:
// the data is written to a file with no name (O_TMPFILE), given mode perm
// whatever the umask, and only then linked in, as file when there is none
// and otherwise under a fresh name (tmpPrefix, then random hex) renamed
// over file. A reader sees the old file or all of the new one, and a
// writer killed at any moment leaves no partial file: the kernel frees an
// unnamed one. Only a kill between the link and the rename of a
// replacement can leave a (complete) temporary name. On a file system
// without O_TMPFILE the data is written under the fresh name instead.
func WriteFile(dirfd int, file, tmpPrefix string, data []byte, perm uint32) error {
	fd, err := unix.Openat(dirfd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) {
		return writeFileNamed(dirfd, file, tmpPrefix, data, perm)
	}
	if err != nil {
		return err
	}
	w := os.NewFile(uintptr(fd), file)
	defer w.Close()
	if _, err := w.Write(data); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, perm); err != nil {
		return err
	}
	err = linkUnnamed(fd, dirfd, file)
	if !errors.Is(err, unix.EEXIST) {
		return err
	}
	tmp, err := freshName(tmpPrefix)
	if err != nil {
		return err
	}
	if err := linkUnnamed(fd, dirfd, tmp); err != nil {
		return err
	}
	if err := unix.Renameat(dirfd, tmp, dirfd, file); err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return err
	}
	return nil
}

// linkUnnamed gives the O_TMPFILE file fd the name name in dirfd. Linking
// a descriptor itself (AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH on older
// kernels; its /proc/self/fd link names the same file for anyone.
func linkUnnamed(fd, dirfd int, name string) error {
	err := unix.Linkat(fd, "", dirfd, name, unix.AT_EMPTY_PATH)
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOENT) {
		err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), dirfd, name, unix.AT_SYMLINK_FOLLOW)
	}
	return err
}

func freshName(prefix string) (string, error) {
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", err
	}
	return prefix + hex.EncodeToString(nonce[:]), nil
}

// writeFileNamed is WriteFile where O_TMPFILE is missing: the data goes to
// a fresh name that no other opener knows and is renamed over file; on
// failure nothing is left.
func writeFileNamed(dirfd int, file, tmpPrefix string, data []byte, perm uint32) error {
	tmp, err := freshName(tmpPrefix)
	if err != nil {
		return err
	}
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	w := os.NewFile(uintptr(fd), tmp)
	_, err = w.Write(data)
	if err == nil {
		err = unix.Fchmod(fd, perm)
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dirfd, tmp, dirfd, file)
	}
	if err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
	}
	return err
}
