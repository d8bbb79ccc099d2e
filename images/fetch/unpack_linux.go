package fetch

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/images"
)

// unpackState is what one unpack remembers: seen holds the names it
// created and dirs the directories known to exist. A layer starts empty, so
// a name needs removing only if the tar wrote it before, and a directory
// creating only once.
type unpackState struct {
	seen map[string]bool
	dirs map[string]bool
	// subOwned: an entry got an owner besides sandbox root (own.SubIDs).
	subOwned bool
}

// unpackLayer extracts a layer tar into root. Every path is resolved
// through os.Root, so no entry, whatever its name, link target or the
// symlinks laid before it, can create or change anything outside root.
// Whiteouts become overlayfs whiteouts (a 0:0 character device), opaque
// directories get the user.overlay.opaque xattr that overlayfs reads in a
// user namespace. Every entry is charged to m before anything of it is
// written (a regular file at its full size: a sparse entry's holes are
// written out as zeros), so a layer stops at its bound, not after.
//
// Owners are applied as own says (images.Ownership, owner); with
// own.SubIDs, subOwned reports whether an entry got an owner besides
// sandbox root, which the store must then record.
func unpackLayer(r io.Reader, root *os.Root, own images.Ownership, m *meter) (subOwned bool, err error) {
	st := &unpackState{seen: map[string]bool{}, dirs: map[string]bool{".": true}}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return st.subOwned, nil
		}
		if err != nil {
			return false, fmt.Errorf("layer tar: %w", err)
		}
		size := int64(entryCost)
		if hdr.Typeflag == tar.TypeReg || hdr.Typeflag == tar.TypeRegA {
			size += hdr.Size
		}
		if err := m.write(size); err != nil {
			return false, err
		}
		rel, ok := cleanName(hdr.Name)
		if !ok {
			continue // the root itself
		}
		if len(rel) > maxName {
			// No program could name it in one path (PATH_MAX), and
			// making its parents costs time in the square of its
			// length.
			return false, fmt.Errorf("layer entry %.64q...: a name longer than %d bytes", hdr.Name, maxName)
		}
		if err := unpackEntry(root, tr, hdr, rel, own, st, m); err != nil {
			return false, fmt.Errorf("layer entry %q: %w", hdr.Name, err)
		}
	}
}

// maxName bounds an entry's name, as the kernel bounds a path (PATH_MAX,
// with its NUL).
const maxName = 4095

// cleanName makes a tar name relative to the layer root: "/a/../b", "./b"
// and "../../b" all become "b". It reports false for the root itself.
func cleanName(name string) (string, bool) {
	rel := strings.TrimPrefix(path.Clean("/"+name), "/")
	return rel, rel != ""
}

func unpackEntry(root *os.Root, r io.Reader, hdr *tar.Header, rel string, own images.Ownership, st *unpackState, m *meter) error {
	dir, base := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	if !st.dirs[dir] {
		// The parents no entry named are made here: each costs what an
		// entry does, charged before it is made (one entry of a 1 MiB
		// name would otherwise make half a million directories).
		missing := int64(0)
		for d := dir; d != "." && !st.dirs[d]; d = path.Dir(d) {
			missing++
		}
		if err := m.write(missing * entryCost); err != nil {
			return err
		}
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for d := dir; d != "." && !st.dirs[d]; d = path.Dir(d) {
			st.dirs[d] = true
		}
	}
	// Whiteouts: ".wh..wh..opq" makes the directory opaque; ".wh.NAME"
	// deletes NAME of the layers below.
	if base == ".wh..wh..opq" {
		err := withDir(root, dir, func(fd int) error {
			return unix.Fsetxattr(fd, "user.overlay.opaque", []byte("y"), 0)
		})
		if errors.Is(err, unix.EOPNOTSUPP) {
			return errors.New("the image store's filesystem cannot record an opaque directory (no user xattrs; tmpfs has them from Linux 6.6): set JAIL_IMAGE_STORE to a directory on ext4, xfs or btrfs")
		}
		return err
	}
	if name, ok := strings.CutPrefix(base, ".wh."); ok {
		if name == "" || name == "." || name == ".." {
			return errors.New("malformed whiteout")
		}
		if st.seen[path.Join(dir, name)] {
			_ = root.RemoveAll(path.Join(dir, name))
		}
		return withDir(root, dir, func(fd int) error {
			return unix.Mknodat(fd, name, unix.S_IFCHR|0o000, 0)
		})
	}

	// A later entry replaces an earlier one of the same name, except that
	// a directory stays a directory.
	if hdr.Typeflag != tar.TypeDir && st.seen[rel] {
		if err := root.RemoveAll(rel); err != nil {
			return err
		}
		delete(st.dirs, rel)
	}
	st.seen[rel] = true
	mode := hdr.FileInfo().Mode().Perm() | hdr.FileInfo().Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)
	if !own.Shift && mode&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
		// Rootless, a set-id bit is dropped. With only the caller's id it
		// would only ever grant the caller's own identity. With
		// subordinate ids it would grant one of them to whoever runs the
		// file on the host, outside any namespace: the caller can reach
		// those ids anyway (newuidmap), but no file jail writes may hand
		// out a host identity (issue 22, item 2).
		mode &^= fs.ModeSetuid | fs.ModeSetgid
	}
	uid, gid, err := owner(hdr, own)
	if err != nil {
		return err
	}
	if own.SubIDs != nil && (uid != 0 || gid != 0) {
		st.subOwned = true
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if !st.dirs[rel] {
			if err := root.MkdirAll(rel, 0o755); err != nil {
				return err
			}
			st.dirs[rel] = true
		}
	case tar.TypeReg, tar.TypeRegA:
		// Owner, mode and times go through the open descriptor: no
		// second lookup of the name.
		f, err := root.OpenFile(rel, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, r)
		if err == nil && (own.Shift || own.SubIDs != nil) {
			err = f.Chown(uid, gid)
		}
		if err == nil {
			err = f.Chmod(mode)
		}
		if err == nil {
			err = futimens(f, hdr.ModTime)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	case tar.TypeSymlink:
		// The target is stored as written; nothing here follows it, and
		// in the sandbox it resolves inside the sandbox's root.
		if err := root.Symlink(hdr.Linkname, rel); err != nil {
			return err
		}
		return chown(root, rel, uid, gid, own)
	case tar.TypeLink:
		target, ok := cleanName(hdr.Linkname)
		if !ok {
			return errors.New("hard link to the layer root")
		}
		// os.Root resolves both names inside the layer: a link can only
		// join files of this layer.
		return root.Link(target, rel)
	case tar.TypeFifo:
		if err := withDir(root, dir, func(fd int) error {
			return unix.Mknodat(fd, base, unix.S_IFIFO|0o600, 0)
		}); err != nil {
			return err
		}
	case tar.TypeChar, tar.TypeBlock:
		// A sandbox's overlay is mounted in its user namespace, where
		// device nodes do not work; jail's /dev provides what is needed.
		return nil
	default:
		return nil // pax headers and the like carry no file
	}
	if err := chown(root, rel, uid, gid, own); err != nil {
		return err
	}
	// After chown, which clears setuid bits.
	if err := root.Chmod(rel, mode); err != nil {
		return err
	}
	return root.Chtimes(rel, hdr.ModTime, hdr.ModTime)
}

// futimens sets a file's access and modification times through its
// descriptor (utimensat with a NULL path, which every kernel supports).
func futimens(f *os.File, t time.Time) error {
	ts := [2]unix.Timespec{unix.NsecToTimespec(t.UnixNano()), unix.NsecToTimespec(t.UnixNano())}
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, f.Fd(), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return &os.PathError{Op: "futimens", Path: f.Name(), Err: errno}
	}
	return nil
}

// withDir runs f with a descriptor of dir, resolved inside root.
func withDir(root *os.Root, dir string, f func(fd int) error) error {
	d, err := root.OpenFile(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	return f(int(d.Fd()))
}

// owner is the owner an entry gets on disk, as own says: the caller's
// (rootless with one id: nothing is changed), Base+N (root's store), or N
// itself, in the caller's user namespace (subordinate ids). An owner the
// sandbox has no id for becomes nobody, as in root's store; where the
// subordinate range is too small to hold nobody, the entry is refused.
func owner(hdr *tar.Header, own images.Ownership) (uid, gid int, err error) {
	switch {
	case own.Shift:
		return hostID(hdr.Uid, own), hostID(hdr.Gid, own), nil
	case own.SubIDs != nil:
		if uid, err = keptID(hdr.Uid, own.SubIDs.Size); err == nil {
			gid, err = keptID(hdr.Gid, own.SubIDs.Size)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("owner %d:%d: %w", hdr.Uid, hdr.Gid, err)
		}
		return uid, gid, nil
	}
	return 0, 0, nil
}

// keptID is id in a user namespace that maps ids 0..size.
func keptID(id, size int) (int, error) {
	if id >= 0 && id <= size {
		return id, nil
	}
	if images.Nobody <= size {
		return images.Nobody, nil
	}
	return 0, fmt.Errorf("above the %d ids your subordinate range gives sandboxes, which is too small to hold nobody (%d) in its place: ask for 65536 ids in /etc/subuid and /etc/subgid", size, images.Nobody)
}

func hostID(id int, own images.Ownership) int {
	if id < 0 || id >= own.Size {
		id = images.Nobody // outside the range the sandbox maps
	}
	return own.Base + id
}

// chown gives an entry its owner (see owner), not following a link.
func chown(root *os.Root, rel string, uid, gid int, own images.Ownership) error {
	if !own.Shift && own.SubIDs == nil {
		return nil
	}
	return root.Lchown(rel, uid, gid)
}
