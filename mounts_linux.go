// This file holds the mount-source policy: how a host path the caller
// asks to show a sandbox (a --mount or --workspace source) is checked and
// opened once (checkMount, openHostSource, hostSource), which of jail's own
// directories none may show (jailStateDirs), and how a writable source is
// made to be written as its owner as root: the owner's path check
// (ownersPath) and the id-mapped clones of the opened sources
// (shareWritableMounts, idmapMounts); and, as root, how every other source
// reaches the init as a clone of the descriptor checked (cloneMounts).

package jail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/privdir"
	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/namespaces"
	"github.com/jail-sandbox/jail/rootfs"
	"github.com/jail-sandbox/jail/seccomp"
)

// checkMount opens the source of one bind mount, which validate checked
// (see openHostSource); the caller closes the source.
func checkMount(m Mount, callerHome string, jailDirs []string) (config.Mount, *hostSource, error) {
	src, err := openHostSource(m.Source, callerHome, jailDirs)
	if err != nil {
		return config.Mount{}, nil, err
	}
	return config.Mount{
		Source: src.path, SourceDev: src.stat.Dev, SourceIno: src.stat.Ino, SourceIsDir: src.isDir(),
		SourceUID: int(src.stat.Uid), SourceGID: int(src.stat.Gid),
		Destination: filepath.Clean(m.Destination), Writable: m.Writable, FD: -1,
	}, src, nil
}

// hostSource is a host path a sandbox is to see (a mount source, a root
// layer), opened once: what was checked is what the descriptor holds, and
// everything after the check goes through the descriptor or is verified
// against its device and inode (the init, which cannot use a descriptor of
// the host's mount namespace, reopens the path without following any
// symlink and refuses another inode).
type hostSource struct {
	file *os.File // O_PATH
	// path is the canonical path, which the kernel gives the opened
	// object too; written is the absolute path as the caller wrote it.
	path, written string
	stat          unix.Stat_t
}

func (s *hostSource) isDir() bool { return s.stat.Mode&unix.S_IFMT == unix.S_IFDIR }

func (s *hostSource) close() {
	if s != nil && s.file != nil {
		s.file.Close()
		s.file = nil
	}
}

// openHostSource resolves path's symlinks, checks the mount-source policy
// on the path as written and as resolved, and opens the resolved path
// with O_PATH, following no symlink on the way. A path changed between
// the resolution and the open (a component swapped for a symlink, a
// directory renamed or exchanged) is refused: the kernel's name of the
// opened object must be the path the policy passed.
func openHostSource(path, callerHome string, jailDirs []string) (*hostSource, error) {
	if len(path) > 4095 {
		return nil, fmt.Errorf("path is longer than 4095 bytes")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	// Checked as written and as resolved: a link may hide either way.
	if err := rootfs.CheckMountSource(abs, callerHome, jailDirs...); err != nil {
		return nil, fmt.Errorf("refused: %v", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("no such file or directory")
		}
		return nil, err
	}
	if err := rootfs.CheckMountSource(real, callerHome, jailDirs...); err != nil {
		return nil, fmt.Errorf("refused: %v", err)
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, real, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("refused: %s changed while it was checked (a symlink appeared in it)", real)
	}
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	src := &hostSource{file: os.NewFile(uintptr(fd), real), path: real, written: abs}
	named, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil || named != real {
		src.close()
		return nil, fmt.Errorf("refused: %s changed while it was checked (now %q)", real, named)
	}
	if err := unix.Fstat(fd, &src.stat); err != nil {
		src.close()
		return nil, fmt.Errorf("stat: %w", err)
	}
	return src, nil
}

// jailStateDirs are the directories of jail's own state, configuration and
// stores, wherever this or another environment of the caller may put them
// (a copy written under one XDG_RUNTIME_DIR is still there when jail runs
// under another): none of them, nor a directory holding one, may be shown
// to a sandbox. store is the image store in use; users is asked for the
// caller's home.
func jailStateDirs(store string, users *privdir.Passwd) []string {
	paths := resolver{}
	dirs := append([]string{"/run/jail", "/var/lib/jail", "/var/cache/jail", "/etc/jail", "/var/log/jail",
		seccomp.CacheDir(users), store, os.Getenv("JAIL_IMAGE_STORE"), os.Getenv("JAIL_STATE_DIR")}, programs.Dirs(users)...)
	if audit := os.Getenv("JAIL_AUDIT_LOG"); filepath.IsAbs(audit) {
		dirs = append(dirs, filepath.Dir(audit))
	}
	for _, env := range []string{"XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"} {
		if d := os.Getenv(env); filepath.IsAbs(d) {
			dirs = append(dirs, filepath.Join(d, "jail"))
		}
	}
	homes := []string{os.Getenv("HOME")}
	if home, err := users.HomeOf(os.Getuid()); err == nil {
		homes = append(homes, home)
	}
	for _, h := range homes {
		if filepath.IsAbs(h) && filepath.Clean(h) != "/" {
			dirs = append(dirs, filepath.Join(h, ".cache", "jail"), filepath.Join(h, ".config", "jail"), filepath.Join(h, ".local", "share", "jail"), filepath.Join(h, ".local", "state", "jail"))
			// The credential stores of a home reached through a symlink
			// (/home -> var/home), where the policy, which compares the
			// home as $HOME names it, would not see them.
			if real := paths.canonical(h); real != filepath.Clean(h) {
				for _, name := range rootfs.CredentialNames() {
					dirs = append(dirs, filepath.Join(real, name))
				}
			}
		}
	}
	dirs = append(dirs, fmt.Sprintf("/run/user/%d/jail", os.Getuid()))
	var out []string
	seen := map[string]bool{}
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			continue
		}
		for _, form := range []string{filepath.Clean(d), paths.canonical(d)} {
			if !seen[form] {
				seen[form] = true
				out = append(out, form)
			}
		}
	}
	return out
}

// shareWritableMounts makes what the sandbox writes in a writable mount
// belong to the mounted directory's owner on the host. Rootless, the sandbox
// user already is the caller. As root, each writable mount becomes an
// id-mapped clone (owner <-> sandbox user) of the source opened at check
// time. Where the kernel cannot id-map the filesystem (tmpfs before Linux
// 6.3), the sandbox user is mapped onto the owner instead, if all writable
// mounts have the same unprivileged one. The sandbox never writes as host
// root: a writable source owned by uid or gid 0 is refused.
func (p *plan) shareWritableMounts(sources []*hostSource) error {
	if p.Identity.Rootless {
		return nil
	}
	var writable []int
	for i, m := range p.Config.Mounts {
		if !m.Writable {
			continue
		}
		// m and sources[i] are the same mount.
		if m.SourceUID == 0 || m.SourceGID == 0 {
			return invalid(mountFlag(m), "owned by host root (%d:%d): what a sandbox writes there would be root's on the host; "+
				"give it to an unprivileged owner first (chown), or mount it read-only", m.SourceUID, m.SourceGID)
		}
		if err := ownersPath(sources[i]); err != nil {
			return invalid(mountFlag(m), "%v: the sandbox would write as its owner (uid %d) where someone else led it; "+
				"name the directory by a path only root and its owner control", err, m.SourceUID)
		}
		writable = append(writable, i)
	}
	if len(writable) == 0 {
		return nil
	}
	err := p.idmapMounts(writable, sources)
	if err == nil || !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EOPNOTSUPP) {
		return err
	}
	first := p.Config.Mounts[writable[0]]
	for _, i := range writable {
		if m := p.Config.Mounts[i]; m.SourceUID != first.SourceUID || m.SourceGID != first.SourceGID {
			return invalid(mountFlag(m), "this kernel cannot id-map its filesystem, and writable mounts with different owners cannot share one sandbox user")
		}
	}
	if mapErr := p.Identity.MapUserOnto(first.SourceUID, first.SourceGID); mapErr != nil {
		return invalid(mountFlag(first), "this kernel cannot id-map its filesystem (%v), and %v", err, mapErr)
	}
	return nil
}

// ownersPath checks that the way to a writable source, as root was asked
// to take it, is in the hands of root and the source's owner only: every
// symbolic link crossed is theirs, and every directory above the source is
// theirs and writable by nobody else (a root-owned sticky one, such as
// /tmp, may be: there nobody can rename another's entry). Otherwise a
// third user could lead root's id-mapped mount, which acts as the owner,
// into the owner's directory (a symlink of their own in a path root was
// given, or a directory renamed into one they can write).
func ownersPath(src *hostSource) error {
	owner := src.stat.Uid
	theirs := func(uid uint32) bool { return uid == 0 || uid == owner }
	// The path as written, resolved by hand, to see every link on it.
	resolved, rest := "/", strings.Split(strings.TrimPrefix(src.written, "/"), "/")
	for links := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		if name == "" || name == "." {
			continue
		}
		next := filepath.Join(resolved, name)
		var st unix.Stat_t
		if err := unix.Lstat(next, &st); err != nil {
			return fmt.Errorf("lstat %s: %w", next, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			resolved = next
			continue
		}
		if !theirs(st.Uid) {
			return fmt.Errorf("the symbolic link %s belongs to uid %d", next, st.Uid)
		}
		if links++; links > 40 {
			return fmt.Errorf("%s: too many levels of symbolic links", src.written)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return err
		}
		if filepath.IsAbs(target) {
			resolved = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	// Every directory above the source, as opened.
	for dir := filepath.Dir(src.path); ; dir = filepath.Dir(dir) {
		var st unix.Stat_t
		if err := unix.Lstat(dir, &st); err != nil {
			return fmt.Errorf("lstat %s: %w", dir, err)
		}
		if !theirs(st.Uid) {
			return fmt.Errorf("%s belongs to uid %d", dir, st.Uid)
		}
		if st.Mode&0o022 != 0 && (st.Uid != 0 || st.Mode&unix.S_ISVTX == 0) {
			return fmt.Errorf("%s is writable by others (mode %#o)", dir, st.Mode&0o7777)
		}
		if dir == "/" {
			return nil
		}
	}
}

// mountFlag names a mount as the caller wrote it, for errors.
func mountFlag(m config.Mount) string {
	if m.Destination == "/workspace" {
		return "--workspace " + m.Source
	}
	return "--mount " + m.Source
}

// idmapMounts replaces the writable mounts by id-mapped detached clones of
// their opened sources, passed to the init as files. On failure none is
// kept.
func (p *plan) idmapMounts(writable []int, sources []*hostSource) (err error) {
	hostUID, _ := p.Identity.HostUID(p.Config.Process.UID)
	hostGID, _ := p.Identity.HostGID(p.Config.Process.GID)
	kept := len(p.Files)
	defer func() {
		if err != nil {
			for _, f := range p.Files[kept:] {
				f.Close()
			}
			p.Files = p.Files[:kept]
			for _, i := range writable {
				p.Config.Mounts[i].FD = -1
			}
		}
	}()
	namespaces := map[[2]int]*os.File{}
	defer func() {
		for _, ns := range namespaces {
			ns.Close()
		}
	}()
	for _, i := range writable {
		m := &p.Config.Mounts[i]
		owner := [2]int{m.SourceUID, m.SourceGID}
		ns := namespaces[owner]
		if ns == nil {
			if ns, err = mappingUserns(owner, hostUID, hostGID); err != nil {
				return invalid(mountFlag(*m), "%v", err)
			}
			namespaces[owner] = ns
		}
		// The clone is of the descriptor checked, never of the path.
		tree, err := unix.OpenTree(int(sources[i].file.Fd()), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
		if err != nil {
			return invalid(mountFlag(*m), "clone mount: %w", err)
		}
		p.Files = append(p.Files, os.NewFile(uintptr(tree), m.Source))
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(ns.Fd()), Propagation: privateClone}
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
			return invalid(mountFlag(*m), "id-mapped mount: %w", err)
		}
		m.FD = 3 + len(p.Files) // fd 3 is the control socket
	}
	return nil
}

// cloneMounts passes, as root, every mount the init would otherwise reopen
// by path as a detached clone of the source opened at check time, its
// attributes set here: the init, in the sandbox's user namespace, has no
// right to search a directory of host root's such as /root or a 0700
// temporary directory on the way, and a path read twice is a path trusted
// twice. Rootless, the caller cannot clone a mount of the host's
// namespace, and the init, as the caller, walks the path as the caller
// would; it reopens it without following a symlink and checks the inode.
func (p *plan) cloneMounts(sources []*hostSource) (err error) {
	if p.Identity.Rootless {
		return nil
	}
	kept := len(p.Files)
	var cloned []int
	defer func() {
		if err != nil {
			for _, f := range p.Files[kept:] {
				f.Close()
			}
			p.Files = p.Files[:kept]
			for _, i := range cloned {
				p.Config.Mounts[i].FD = -1
			}
		}
	}()
	for i := range p.Config.Mounts {
		m := &p.Config.Mounts[i]
		if m.FD >= 0 {
			continue // an id-mapped clone already
		}
		// Recursive, as a bind of the path would be: what is mounted
		// below the source shows too, read-only with it.
		tree, err := unix.OpenTree(int(sources[i].file.Fd()), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
		if err != nil {
			return invalid(mountFlag(*m), "clone mount: %w", err)
		}
		p.Files = append(p.Files, os.NewFile(uintptr(tree), m.Source))
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Propagation: privateClone}
		if !m.Writable {
			attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
		}
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
			return invalid(mountFlag(*m), "set mount attributes: %w", err)
		}
		m.FD = 3 + len(p.Files) // fd 3 is the control socket
		cloned = append(cloned, i)
	}
	return nil
}

// cloneLayer passes, as root, a root layer the caller named (--rootfs) as
// a detached read-only clone of the directory opened at check time, for
// the reasons of cloneMounts. Overlayfs reads no mount below a layer, so
// the clone is of the directory's own mount only.
func (p *plan) cloneLayer(layer *config.Layer, src *hostSource) error {
	if p.Identity.Rootless {
		return nil
	}
	tree, err := unix.OpenTree(int(src.file.Fd()), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("clone mount: %w", err)
	}
	f := os.NewFile(uintptr(tree), src.path)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Propagation: privateClone}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		f.Close()
		return fmt.Errorf("set mount attributes: %w", err)
	}
	p.Files = append(p.Files, f)
	layer.FD = 3 + len(p.Files) // fd 3 is the control socket
	return nil
}

// privateClone is the propagation of every clone jail makes of a host
// mount for a sandbox. A clone of a shared mount (systemd shares them all)
// joins its peer group: what the init mounts on it (a nested mount, a
// mask) would propagate back onto the host and stay there, and what the
// host mounts below the source later (writable, say) would reach the
// sandbox. The init's own namespace is private for the same reason.
const privateClone = unix.MS_PRIVATE

// mappingUserns makes the user namespace that shows files of owner as the
// sandbox user's host ids.
func mappingUserns(owner [2]int, hostUID, hostGID int) (*os.File, error) {
	return namespaces.MappingUserns(
		[]syscall.SysProcIDMap{{ContainerID: owner[0], HostID: hostUID, Size: 1}},
		[]syscall.SysProcIDMap{{ContainerID: owner[1], HostID: hostGID, Size: 1}})
}
