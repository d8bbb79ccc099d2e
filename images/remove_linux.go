package images

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// removeAllAt removes name in the directory dirfd and, if it is a
// directory, everything below it, holding two descriptors whatever the
// tree's depth: os.Root.RemoveAll keeps one per level and fails with
// EMFILE below RLIMIT_NOFILE levels, which a layer's tree may pass (names
// of 4 KiB through links of its own). It follows no link, stays on the
// directory's filesystem, and climbs back through "..", checked to be the
// directory it came from, so a directory moved meanwhile stops it. A
// missing name is no error.
func removeAllAt(dirfd int, name string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	top, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	var topSt unix.Stat_t
	if err := unix.Fstat(top, &topSt); err != nil {
		unix.Close(top)
		return fmt.Errorf("remove %s: %w", name, err)
	}
	// path holds the names from top down to cur, and the stats of the
	// directories above cur (to check "..").
	type level struct {
		name string
		up   unix.Stat_t
	}
	var path []level
	cur := top
	defer func() { unix.Close(cur) }()
	buf := make([]byte, 32<<10)
	for {
		sub, err := emptyAllBut(cur, buf)
		if err != nil {
			return fmt.Errorf("remove %s: %w", name, err)
		}
		if sub != "" {
			child, err := unix.Openat(cur, sub, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("remove %s: %w", name, err)
			}
			var st, childSt unix.Stat_t
			if err := unix.Fstat(cur, &st); err == nil {
				err = unix.Fstat(child, &childSt)
			}
			if err != nil || childSt.Dev != topSt.Dev {
				unix.Close(child)
				if err == nil {
					err = errors.New("a mount point")
				}
				return fmt.Errorf("remove %s: %s: %w", name, sub, err)
			}
			path = append(path, level{name: sub, up: st})
			unix.Close(cur)
			cur = child
			continue
		}
		// cur is empty: climb to its parent and remove it there.
		if len(path) == 0 {
			break
		}
		last := path[len(path)-1]
		path = path[:len(path)-1]
		up, err := unix.Openat(cur, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("remove %s: %w", name, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(up, &st); err != nil || st.Dev != last.up.Dev || st.Ino != last.up.Ino {
			unix.Close(up)
			return fmt.Errorf("remove %s: a directory was moved while it was removed", name)
		}
		unix.Close(cur)
		cur = up
		if err := unix.Unlinkat(cur, last.name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove %s: %w", name, err)
		}
	}
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}

// emptyAllBut removes every entry of the directory dirfd that is not a
// directory, and returns the name of a directory among them, if any
// (which the caller empties and removes before calling it again).
func emptyAllBut(dirfd int, buf []byte) (string, error) {
	if _, err := unix.Seek(dirfd, 0, 0); err != nil {
		return "", err
	}
	for {
		n, err := unix.Getdents(dirfd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return "", err
		}
		if n == 0 {
			return "", nil
		}
		var names []string
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
		for _, e := range names {
			err := unix.Unlinkat(dirfd, e, 0)
			switch {
			case err == nil || errors.Is(err, unix.ENOENT):
			case errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM):
				var st unix.Stat_t
				if unix.Fstatat(dirfd, e, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
					return e, nil
				}
				return "", fmt.Errorf("%s: %w", e, err)
			default:
				return "", fmt.Errorf("%s: %w", e, err)
			}
		}
	}
}
