// Package rootfs builds a sandbox's root filesystem inside the sandbox's own
// mount namespace, then pivots into it.
//
// Build runs in the init, as root of the sandbox's user namespace, after
// clone and before anything of the command exists. Its order is part of the
// security argument:
//
//  1. make every mount private, so nothing propagates back to the host;
//  2. take hold of every host object (the host tree, --rootfs, bind sources,
//     device nodes) by file descriptor and verify it is what the supervisor
//     checked, before anything is covered;
//  3. build the new root on a private staging tmpfs: every bind is a
//     detached clone whose attributes (read-only, nosuid, nodev) are set
//     before it is attached, and every target is resolved inside the new
//     root, so a symlink in a root filesystem can never redirect a mount;
//  4. mask host secrets and kernel interfaces, last, so nothing a user
//     mount adds can uncover them;
//  5. pivot_root into the new root and detach the old one.
//
// Nothing is ever mounted in, created in, or left behind on the host.
//
// This is the Go init's builder. The C init (internal/programs/init), which
// a full build runs, builds the same root in the same order from copies of
// this package's lists; TestCInitHasTheSameLists checks the copies, and the
// integration test TestInitsBuildTheSameSandbox the roots.
package rootfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/config"
)

// StepError says which step of building the root failed.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return e.Step + ": " + e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

func step(name string, err error) error {
	if err == nil {
		return nil
	}
	return &StepError{Step: name, Err: err}
}

// stageDir is where the staging tmpfs is mounted, in the sandbox's mount
// namespace only. Host objects below it are opened before it is covered.
const stageDir = "/tmp"

const (
	attrRO     = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	attrRW     = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	flagsFresh = unix.MS_NOSUID | unix.MS_NODEV
)

// builder carries the handles of one Build.
type builder struct {
	cfg      *config.Init
	root     *os.File // the new root, O_PATH
	maskFile string   // empty unreadable file on the stage
	maskDir  string   // empty read-only directory on the stage
	// skeleton holds mountpoints missing from a read-only tree, laid over
	// it as the top layer of an overlay; skeletonTops are the host tree's
	// top-level directories that need one.
	skeleton     string
	skeletonTops map[string]bool
}

// Build constructs the root filesystem described by cfg and makes it the
// process's root. It must run in a fresh mount namespace.
func Build(cfg *config.Init) error {
	// 1. Private propagation.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return step("make mounts private", err)
	}

	// 2. Host objects, by descriptor.
	var hostTree *os.File
	var lowers []*os.File
	var err error
	if cfg.Rootfs.HostTree {
		// Opened for reading: its entries are listed.
		hostTree, err = os.Open("/")
		if err != nil {
			return step("open host tree", err)
		}
	}
	for _, l := range cfg.Rootfs.Lowers {
		f, err := openVerified(l.Path, l.Dev, l.Ino)
		if err != nil {
			closeFiles(lowers...)
			return step("open root layer "+l.Path, err)
		}
		lowers = append(lowers, f)
	}
	sources := make([]*os.File, len(cfg.Mounts))
	for i, m := range cfg.Mounts {
		if m.FD >= 0 {
			sources[i] = os.NewFile(uintptr(m.FD), m.Source)
			continue
		}
		if sources[i], err = openVerified(m.Source, m.SourceDev, m.SourceIno); err != nil {
			return step("open mount source "+m.Source, err)
		}
	}
	devices, err := openDevices()
	if err != nil {
		return step("open host devices", err)
	}
	defer closeFiles(append(append(append(sources, devices...), lowers...), hostTree)...)

	// 3. The new root, on a private stage.
	b := &builder{cfg: cfg}
	if err := b.stage(hostTree, lowers); err != nil {
		return err
	}
	defer b.root.Close()
	if err := b.kernelFilesystems(devices); err != nil {
		return err
	}
	if err := b.scratch(); err != nil {
		return err
	}
	for i, m := range cfg.Mounts {
		if err := b.bindMount(sources[i], m); err != nil {
			return step("mount "+m.Destination, err)
		}
	}

	// 4. Masks, last.
	if err := b.masks(); err != nil {
		return err
	}
	if cfg.Rootfs.HostTree || cfg.Rootfs.ReadOnly {
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(int(b.root.Fd()), "", unix.AT_EMPTY_PATH, &attr); err != nil {
			return step("make root read-only", err)
		}
	}

	// 5. Pivot.
	return step("pivot_root", pivot(b.root))
}

// stage mounts the staging tmpfs and the new root on it.
func (b *builder) stage(hostTree *os.File, lowers []*os.File) error {
	opts := "mode=0700"
	if b.cfg.Limits.UpperSize > 0 {
		opts += ",size=" + strconv.FormatInt(b.cfg.Limits.UpperSize, 10)
	}
	if err := unix.Mount("jail-stage", stageDir, "tmpfs", flagsFresh, opts); err != nil {
		return step("mount staging tmpfs", err)
	}
	b.maskFile = filepath.Join(stageDir, "mask-file")
	b.maskDir = filepath.Join(stageDir, "mask-dir")
	b.skeleton = filepath.Join(stageDir, "skeleton")
	rootPath := filepath.Join(stageDir, "root")
	for _, d := range []string{rootPath, b.maskDir, b.skeleton} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return step("prepare stage", err)
		}
	}
	if err := os.Chmod(b.maskDir, 0o555); err != nil {
		return step("prepare stage", err)
	}
	if err := os.WriteFile(b.maskFile, nil, 0o000); err != nil {
		return step("prepare stage", err)
	}

	trees := lowers
	if hostTree != nil {
		trees = []*os.File{hostTree}
	}
	if err := b.planSkeleton(trees); err != nil {
		return step("prepare mountpoints", err)
	}

	if hostTree != nil {
		if err := unix.Mount("jail-root", rootPath, "tmpfs", flagsFresh, "mode=0755,size=1m"); err != nil {
			return step("mount root", err)
		}
	} else {
		upper, work := filepath.Join(stageDir, "upper"), filepath.Join(stageDir, "work")
		for _, d := range []string{upper, work} {
			if err := os.Mkdir(d, 0o755); err != nil {
				return step("prepare stage", err)
			}
		}
		// The lowers are named by descriptor: their host paths may lie
		// under the stage, which now covers them.
		lowerdir := b.skeleton
		for _, l := range lowers {
			lowerdir += fmt.Sprintf(":/proc/self/fd/%d", l.Fd())
		}
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,userxattr", lowerdir, upper, work)
		if err := unix.Mount("jail-root", rootPath, "overlay", flagsFresh, opts); err != nil {
			return step("mount overlay root", err)
		}
	}
	root, err := openDir(rootPath)
	if err != nil {
		return step("open new root", err)
	}
	b.root = root
	if hostTree != nil {
		return b.hostTopLevel(hostTree)
	}
	return nil
}

// hostTopLevel fills the root tmpfs with the host's top-level entries, each
// a read-only recursive bind, except those replaced or masked.
func (b *builder) hostTopLevel(hostTree *os.File) error {
	entries, err := hostTree.ReadDir(-1)
	if err != nil {
		return step("read host tree", err)
	}
	rootFD := int(b.root.Fd())
	for _, e := range entries {
		name := e.Name()
		if hostTopLevelReplaced[name] {
			if err := unix.Mkdirat(rootFD, name, 0o755); err != nil {
				return step("create /"+name, err)
			}
			continue
		}
		switch {
		case e.Type()&os.ModeSymlink != 0:
			target, err := readlinkat(int(hostTree.Fd()), name)
			if err != nil {
				return step("read /"+name, err)
			}
			if err := unix.Symlinkat(target, rootFD, name); err != nil {
				return step("create /"+name, err)
			}
		case e.IsDir():
			if err := unix.Mkdirat(rootFD, name, 0o755); err != nil {
				return step("create /"+name, err)
			}
			if b.skeletonTops[name] {
				if err := b.overlayHost(name); err != nil {
					return step("overlay /"+name, err)
				}
				continue
			}
			if err := b.bindHost(int(hostTree.Fd()), name, true); err != nil {
				return step("bind /"+name, err)
			}
		case e.Type().IsRegular():
			fd, err := unix.Openat(rootFD, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o444)
			if err != nil {
				return step("create /"+name, err)
			}
			unix.Close(fd)
			if err := b.bindHost(int(hostTree.Fd()), name, false); err != nil {
				return step("bind /"+name, err)
			}
		}
	}
	for _, name := range []string{"proc", "sys", "dev", "tmp", "run"} {
		if err := unix.Mkdirat(rootFD, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return step("create /"+name, err)
		}
	}
	return nil
}

// bindHost binds the host entry name (relative to the host root fd) onto the
// same name in the new root, read-only.
func (b *builder) bindHost(hostRoot int, name string, recursive bool) error {
	target, err := openInRoot(b.root, name)
	if err != nil {
		return err
	}
	defer target.Close()
	return attach(hostRoot, name, target, attrRO, recursive)
}

// overlayHost mounts a read-only overlay of the host's top-level directory
// name with its skeleton on top, so mountpoints the host lacks exist in the
// sandbox and nowhere else.
func (b *builder) overlayHost(name string) error {
	target, err := openInRoot(b.root, name)
	if err != nil {
		return err
	}
	defer target.Close()
	opts := fmt.Sprintf("lowerdir=%s:/%s", filepath.Join(b.skeleton, name), name)
	err = mountAt("jail-skeleton", target, "overlay", flagsFresh|unix.MS_RDONLY, opts)
	if errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("cannot add a mountpoint below /%s, which has mounts of its own beneath it", name)
	}
	return err
}

// planSkeleton finds the mountpoints that exist in none of trees (the host
// tree, or the root's layers) and creates them in the skeleton. A path that
// passes through a symlink is left to be resolved inside the new root.
func (b *builder) planSkeleton(trees []*os.File) error {
	b.skeletonTops = map[string]bool{}
	type mountpoint struct {
		path string
		dir  bool
	}
	var points []mountpoint
	if !b.cfg.Rootfs.HostTree {
		for _, d := range []string{"/proc", "/dev", "/sys", "/tmp", "/run"} {
			points = append(points, mountpoint{d, true})
		}
		if b.cfg.Rootfs.Home != "" {
			points = append(points, mountpoint{b.cfg.Rootfs.Home, true})
		}
	}
	for _, m := range b.cfg.Mounts {
		points = append(points, mountpoint{m.Destination, m.SourceIsDir})
	}
	for _, p := range points {
		rel := strings.TrimPrefix(filepath.Clean(p.path), "/")
		top, _, _ := strings.Cut(rel, "/")
		if b.cfg.Rootfs.HostTree && (hostTopLevelReplaced[top] || rel == top) {
			// Inside the root tmpfs or a fresh tmpfs: created directly.
			continue
		}
		present := false
		for _, tree := range trees {
			missing, err := isMissing(tree, rel)
			if err != nil {
				return fmt.Errorf("%s: %w", p.path, err)
			}
			present = present || !missing
		}
		created := false
		if !present {
			if err := createBelow(b.skeleton, strings.Split(rel, "/"), p.dir); err != nil {
				return fmt.Errorf("%s: %w", p.path, err)
			}
			created = true
		}
		if created && b.cfg.Rootfs.HostTree {
			b.skeletonTops[top] = true
		}
	}
	return nil
}

// isMissing walks rel below tree without following symlinks and reports
// whether a component is missing. A path through a symlink or a
// non-directory counts as present: it is resolved inside the new root.
func isMissing(tree *os.File, rel string) (bool, error) {
	comps := strings.Split(rel, "/")
	cur, err := unix.Dup(int(tree.Fd()))
	if err != nil {
		return false, err
	}
	defer func() { unix.Close(cur) }()
	for i, c := range comps {
		var st unix.Stat_t
		err := unix.Fstatat(cur, c, &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || i == len(comps)-1 {
			return false, nil
		}
		next, err := unix.Openat(cur, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return false, err
		}
		unix.Close(cur)
		cur = next
	}
	return false, nil
}

// createBelow creates the path comps below base: the components that exist
// in the tree become plain directories holding the missing rest.
func createBelow(base string, comps []string, dir bool) error {
	last := filepath.Join(append([]string{base}, comps...)...)
	if err := os.MkdirAll(filepath.Dir(last), 0o755); err != nil {
		return err
	}
	if dir {
		if err := os.Mkdir(last, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		return nil
	}
	f, err := os.OpenFile(last, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// kernelFilesystems mounts /proc, /dev and /sys, then sets the ipc limits
// through the new /proc.
func (b *builder) kernelFilesystems(devices []*os.File) error {
	proc, err := b.topDir("/proc")
	if err != nil {
		return step("create /proc", err)
	}
	// hidepid=invisible hides the processes the caller may not ptrace:
	// the non-dumpable init disappears from the command's /proc entirely.
	err = mountAt("proc", proc, "proc", flagsFresh|unix.MS_NOEXEC, "hidepid=invisible")
	proc.Close()
	if err != nil {
		return step("mount /proc", err)
	}

	dev, err := b.topDir("/dev")
	if err != nil {
		return step("create /dev", err)
	}
	err = mountAt("jail-dev", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k")
	dev.Close()
	if err != nil {
		return step("mount /dev", err)
	}
	devDir, err := b.topDir("/dev")
	if err != nil {
		return step("open /dev", err)
	}
	defer devDir.Close()
	for i, d := range hostDevices {
		target, err := createFile(devDir, d.name)
		if err != nil {
			return step("create /dev/"+d.name, err)
		}
		err = attach(int(devices[i].Fd()), "", target, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, false)
		target.Close()
		if err != nil {
			return step("bind /dev/"+d.name, err)
		}
	}
	for name, target := range devSymlinks {
		if err := unix.Symlinkat(target, int(devDir.Fd()), name); err != nil {
			return step("create /dev/"+name, err)
		}
	}
	for _, d := range []string{"pts", "shm", "mqueue"} {
		if err := unix.Mkdirat(int(devDir.Fd()), d, 0o755); err != nil {
			return step("create /dev/"+d, err)
		}
	}
	pts, err := b.dir("/dev/pts")
	if err != nil {
		return step("open /dev/pts", err)
	}
	err = mountAt("devpts", pts, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
	pts.Close()
	if err != nil {
		return step("mount /dev/pts", err)
	}
	if err := b.tmpfs("/dev/shm", "1777", b.cfg.Limits.ShmSize); err != nil {
		return err
	}

	sys, err := b.topDir("/sys")
	if err != nil {
		return step("create /sys", err)
	}
	err = mountAt("sysfs", sys, "sysfs", flagsFresh|unix.MS_NOEXEC|unix.MS_RDONLY, "")
	sys.Close()
	if err != nil {
		return step("mount /sys", err)
	}
	return b.ipcLimits()
}

// ipcLimits bounds the System V shared memory and message queues of the
// sandbox's own ipc namespace when the plan says (no cgroup charges them):
// shmmax in bytes, shmall in pages, msgmni in queues, through the fresh
// /proc (its sysctls are the writer's namespace's).
func (b *builder) ipcLimits() error {
	bytes := b.cfg.Limits.SysVShm
	if bytes <= 0 {
		return nil
	}
	for _, f := range []struct {
		path  string
		value int64
	}{{"/proc/sys/kernel/shmmax", bytes}, {"/proc/sys/kernel/shmall", bytes / int64(os.Getpagesize())},
		// Message queues: half as much again, in queues of the kernel's
		// default 16 KiB.
		{"/proc/sys/kernel/msgmnb", 16384}, {"/proc/sys/kernel/msgmni", max(1, bytes/2/16384)}} {
		fd, err := unix.Openat2(int(b.root.Fd()), f.path, &unix.OpenHow{Flags: unix.O_WRONLY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS})
		if err != nil {
			return step("ipc limits", fmt.Errorf("%s: %w", f.path, err))
		}
		_, err = unix.Write(fd, []byte(strconv.FormatInt(f.value, 10)+"\n"))
		unix.Close(fd)
		if err != nil {
			return step("ipc limits", fmt.Errorf("%s: %w", f.path, err))
		}
	}
	return nil
}

// scratch mounts the writable places: /tmp, /run, /var/tmp on the host tree,
// and the home directory.
func (b *builder) scratch() error {
	if err := b.tmpfs("/tmp", "1777", b.cfg.Limits.TmpSize); err != nil {
		return err
	}
	if err := b.tmpfs("/run", "0755", b.cfg.Limits.RunSize); err != nil {
		return err
	}
	if b.cfg.Rootfs.HostTree {
		if f, err := openInRoot(b.root, "/var/tmp"); err == nil {
			f.Close()
			if err := b.tmpfs("/var/tmp", "1777", b.cfg.Limits.TmpSize); err != nil {
				return err
			}
		}
	}
	if home := b.cfg.Rootfs.Home; home != "" {
		if b.cfg.Rootfs.ReadOnly {
			return b.mask(home)
		}
		return b.tmpfs(home, "0700", b.cfg.Limits.HomeSize)
	}
	return nil
}

// tmpfs mounts a fresh tmpfs at path with the octal mode and size (bytes,
// 0 for the kernel's default).
func (b *builder) tmpfs(path, mode string, size int64) error {
	open := b.dir
	if path == "/tmp" || path == "/run" {
		open = b.topDir
	}
	target, err := open(path)
	if err != nil {
		return step("create "+path, err)
	}
	defer target.Close()
	opts := "mode=" + mode
	if size > 0 {
		opts += ",size=" + strconv.FormatInt(size, 10)
	}
	return step("mount "+path, mountAt("tmpfs", target, "tmpfs", flagsFresh, opts))
}

// bindMount attaches one user mount (--workspace, --mount).
func (b *builder) bindMount(src *os.File, m config.Mount) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return err
	}
	var target *os.File
	var err error
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		target, err = b.dir(m.Destination)
	} else {
		target, err = b.file(m.Destination)
	}
	if err != nil {
		return fmt.Errorf("create mountpoint: %w", err)
	}
	defer target.Close()
	attrs := uint64(attrRO)
	if m.Writable {
		attrs = attrRW
	}
	if m.FD >= 0 {
		// Already a detached, id-mapped clone made by the supervisor.
		return unix.MoveMount(int(src.Fd()), "", int(target.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
	}
	return attach(int(src.Fd()), "", target, attrs, true)
}

// masks hides host secrets and kernel interfaces.
func (b *builder) masks() error {
	paths := append([]string{}, kernelMasked...)
	if b.cfg.Rootfs.HostTree {
		paths = append(paths, hostMasked...)
		for _, g := range hostMaskedGlobs {
			matches, _ := filepath.Glob(g)
			paths = append(paths, matches...)
		}
	}
	for _, p := range append(paths, b.cfg.Masks...) {
		if err := b.mask(p); err != nil {
			return err
		}
	}
	for _, p := range append(append([]string{}, procReadOnly...), b.cfg.ReadOnly...) {
		target, err := openInRoot(b.root, p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return step("open "+p, err)
		}
		err = attach(int(target.Fd()), "", target, attrRO|unix.MOUNT_ATTR_NOEXEC, true)
		target.Close()
		if err != nil {
			return step("make "+p+" read-only", err)
		}
	}
	return nil
}

// mask covers an existing path: a directory with the empty read-only
// directory, anything else with the empty unreadable file. A path that does
// not exist needs no mask.
func (b *builder) mask(path string) error {
	target, err := openInRoot(b.root, path)
	// Missing, or out of the init's reach (and so of the command's, which
	// has fewer privileges): nothing to hide.
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
		return nil
	}
	if err != nil {
		return step("mask "+path, err)
	}
	defer target.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(target.Fd()), &st); err != nil {
		return step("mask "+path, err)
	}
	src := b.maskFile
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		src = b.maskDir
	}
	return step("mask "+path, attach(unix.AT_FDCWD, src, target, attrRO|unix.MOUNT_ATTR_NOEXEC, false))
}

// topDir opens one of the top-level directories jail mounts kernel
// filesystems or scratch space on. It must be a real directory of the root:
// a root filesystem whose /dev or /proc is a symlink could otherwise steer
// those mounts (CVE-2026-41579), so it is refused.
func (b *builder) topDir(path string) (*os.File, error) {
	name := strings.TrimPrefix(path, "/")
	err := unix.Mkdirat(int(b.root.Fd()), name, 0o755)
	if err != nil && !errors.Is(err, unix.EEXIST) && !errors.Is(err, unix.EROFS) && !errors.Is(err, unix.EACCES) {
		return nil, err
	}
	fd, err := unix.Openat(int(b.root.Fd()), name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return nil, fmt.Errorf("%s in the root filesystem is not a directory (a symlink?): refused", path)
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// dir resolves path inside the new root, creating missing directories.
func (b *builder) dir(path string) (*os.File, error) {
	if f, err := openInRoot(b.root, path); err == nil {
		return f, nil
	}
	return pathrs.MkdirAllHandle(b.root, path, 0o755)
}

// openInRoot opens path as an O_PATH handle, resolving every component
// (symlinks and ".." included) as if root were "/": the kernel's
// RESOLVE_IN_ROOT never lets resolution leave it.
func openInRoot(root *os.File, path string) (*os.File, error) {
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	}
	for attempt := 0; ; attempt++ {
		fd, err := unix.Openat2(int(root.Fd()), path, &how)
		// EAGAIN: a concurrent rename made ".." resolution unsafe to
		// finish; the kernel asks to try again.
		if err == unix.EAGAIN && attempt < 16 {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "openat2", Path: path, Err: err}
		}
		return os.NewFile(uintptr(fd), path), nil
	}
}

// file resolves path inside the new root as a file to mount on, creating it
// (and its parents) if missing.
func (b *builder) file(path string) (*os.File, error) {
	if f, err := openInRoot(b.root, path); err == nil {
		return f, nil
	}
	parent, err := pathrs.MkdirAllHandle(b.root, filepath.Dir(path), 0o755)
	if err != nil {
		return nil, err
	}
	defer parent.Close()
	name := filepath.Base(path)
	fd, err := unix.Openat(int(parent.Fd()), name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, err
	}
	if err == nil {
		unix.Close(fd)
	}
	return openInRoot(parent, name)
}

// createFile creates the empty file name in dir, a directory of a
// filesystem this init just mounted, and returns an O_PATH handle of it to
// mount on. Nothing else can have written there, so no path resolution
// inside the root is needed (the lookups of file cost 0.1 ms each).
func createFile(dir *os.File, name string) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, err
	}
	unix.Close(fd)
	fd, err = unix.Openat(int(dir.Fd()), name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// attach clones the mount at (dirfd, path), sets attrs on the clone while it
// is still detached, and moves it onto target.
func attach(dirfd int, path string, target *os.File, attrs uint64, recursive bool) error {
	flags := unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC
	setFlags := unix.AT_EMPTY_PATH
	if path == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	if recursive {
		flags |= unix.AT_RECURSIVE
		setFlags |= unix.AT_RECURSIVE
	}
	tree, err := unix.OpenTree(dirfd, path, uint(flags))
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(tree)
	if attrs != 0 {
		attr := unix.MountAttr{Attr_set: attrs}
		if err := unix.MountSetattr(tree, "", uint(setFlags), &attr); err != nil {
			return fmt.Errorf("mount_setattr: %w", err)
		}
	}
	if err := unix.MoveMount(tree, "", int(target.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// mountAt mounts a fresh filesystem on the directory target refers to.
func mountAt(source string, target *os.File, fstype string, flags uintptr, data string) error {
	return unix.Mount(source, "/proc/self/fd/"+strconv.Itoa(int(target.Fd())), fstype, flags, data)
}

// pivot makes root the process's root and detaches the old one.
func pivot(root *os.File) error {
	if err := unix.Fchdir(int(root.Fd())); err != nil {
		return err
	}
	// pivot_root(".", ".") stacks the old root on top of the new one;
	// detaching "." then removes it without needing a directory for it.
	if err := unix.PivotRoot(".", "."); err != nil {
		return err
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	return unix.Chdir("/")
}

// hostDevice is a device node bound from the host's /dev. Its number is
// checked, so a swapped node (CVE-2025-31133) is refused.
type hostDevice struct {
	name         string
	major, minor uint32
}

var hostDevices = []hostDevice{
	{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7},
	{"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0},
}

var devSymlinks = map[string]string{
	"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
	"stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx", "core": "/proc/kcore",
}

func openDevices() ([]*os.File, error) {
	files := make([]*os.File, 0, len(hostDevices))
	for _, d := range hostDevices {
		path := "/dev/" + d.name
		fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			closeFiles(files...)
			return nil, err
		}
		f := os.NewFile(uintptr(fd), path)
		files = append(files, f)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			closeFiles(files...)
			return nil, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != d.major || unix.Minor(st.Rdev) != d.minor {
			closeFiles(files...)
			return nil, fmt.Errorf("%s is not the character device %d:%d", path, d.major, d.minor)
		}
	}
	return files, nil
}

// openVerified opens a canonical host path without following any symlink
// and checks it is the object the supervisor validated.
func openVerified(path string, dev, ino uint64) (*os.File, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if st.Dev != dev || st.Ino != ino {
		unix.Close(fd)
		return nil, fmt.Errorf("%s changed after it was checked", path)
	}
	return os.NewFile(uintptr(fd), path), nil
}

func openDir(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

func readlinkat(dirfd int, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

func closeFiles(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}
