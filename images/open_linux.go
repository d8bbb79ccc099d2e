package images

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/privdir"
)

// Bounds on the store's own files, which jail reads whole.
const (
	maxIndexSize = 64 << 20 // images.json
	// MaxImageFileSize bounds a file read out of an image on the host
	// side (its /etc/passwd and /etc/group).
	MaxImageFileSize = 4 << 20
)

// Opened is a store whose root directory was opened once and checked (see
// Store.Open): every later step works through descriptors of that very
// directory and of its layers/ and tmp/, never through the store's path
// again. A dir of -1 means the store does not exist yet (opened for
// reading).
type Opened struct {
	Store
	dir, layers, tmp int // O_PATH descriptors, -1 when absent
	euid             int // the caller, who must own the store
}

// Close releases the store's descriptors.
func (o *Opened) Close() {
	for _, fd := range []*int{&o.dir, &o.layers, &o.tmp} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

// Open opens the store for reading (a run, `jail image ls`). A store that
// does not exist reads as empty. The store's directory and every entry jail
// uses in it must be what jail made: not symbolic links, owned by the
// caller, not writable by others; as root, every directory above it too
// must be root's and not writable by others (sticky ones like /tmp
// excepted). A store failing that is refused, whatever it holds.
func (s Store) Open() (*Opened, error) {
	return s.open(false)
}

// Prepare opens the store for changing it, making what is missing: as
// root, the store and layers/ belong to group Base (the sandboxes' host
// gid), mode 0710 (storeDirMode), so that a sandbox's init can reach its
// layers and other users of the host cannot. Only directories Prepare
// makes get an owner and mode set; an existing directory is checked, and
// changed only to take from group Base the listing an earlier jail gave it
// (unlisted).
func (s Store) Prepare() (*Opened, error) {
	return s.open(true)
}

func (s Store) open(create bool) (*Opened, error) {
	o := &Opened{Store: s, dir: -1, layers: -1, tmp: -1, euid: os.Geteuid()}
	if s.Root == "" || len(s.Root) > 4000 {
		return nil, fmt.Errorf("image store %q: not a usable path", s.Root)
	}
	abs, err := filepath.Abs(s.Root)
	if err != nil {
		return nil, fmt.Errorf("image store %s: %v", s.Root, err)
	}
	o.Root = abs
	fail := func(err error) (*Opened, error) {
		o.Close()
		return nil, fmt.Errorf("image store %s: %w", o.Root, err)
	}
	created := false
	// Host root checks the directories above its store; a process that
	// is root only of the caller's user namespace (Own.SubIDs) is not.
	hostRoot := o.euid == 0 && s.Own.SubIDs == nil
	if o.dir, created, err = openStoreDir(abs, o.euid, hostRoot, create); err != nil {
		return fail(err)
	}
	if o.dir < 0 {
		return o, nil // no store yet
	}
	if created {
		if err := o.setOwner(o.dir, ".", storeDirMode); err != nil {
			return fail(err)
		}
	}
	if o.layers, err = o.subdir("layers", create, storeDirMode, created); err != nil {
		return fail(err)
	}
	if o.layers >= 0 && !created {
		// A store, now that it has layers/: no longer listable, if an
		// earlier jail made it so.
		if err := o.unlisted(o.dir, "."); err != nil {
			return fail(err)
		}
	}
	if create {
		if o.tmp, err = o.subdir("tmp", true, 0o700, true); err != nil {
			return fail(err)
		}
	}
	return o, nil
}

// openStoreDir opens the store's directory path (absolute and clean),
// making it when missing and create is set. The directory itself must not
// be a link, must be euid's, and writable by no one else. As host root, every
// directory above it must be root's, no link, and writable by no one else
// unless sticky (/tmp: only an entry's owner may rename it): so no one but
// root can change what path leads to, and the open below reaches the
// directory the checks saw.
func openStoreDir(path string, euid int, hostRoot, create bool) (fd int, created bool, err error) {
	if hostRoot {
		if err := checkAncestors(path, create); err != nil || path == "/" {
			if err == nil {
				err = errors.New("the root directory is no image store")
			}
			return -1, false, err
		}
	} else if create {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return -1, false, err
		}
	}
	fd, created, err = openDirAt(unix.AT_FDCWD, path, create, 0o750)
	if err != nil || fd < 0 {
		return -1, false, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, false, err
	}
	if err := checkDir(&st, euid, true); err != nil {
		unix.Close(fd)
		return -1, false, err
	}
	return fd, created, nil
}

// checkAncestors checks, from / down, the directories above path (see
// openStoreDir), making missing ones (root's, 0755) when create is set.
func checkAncestors(path string, create bool) error {
	for i := 0; i < len(path); {
		dir := path[:i]
		if i == 0 {
			dir = "/"
		}
		var st unix.Stat_t
		err := unix.Lstat(dir, &st)
		if errors.Is(err, unix.ENOENT) && create {
			if err = unix.Mkdir(dir, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				err = unix.Lstat(dir, &st)
			}
		}
		if errors.Is(err, unix.ENOENT) {
			return nil // the store is missing too: nothing to open
		}
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			return fmt.Errorf("%s: %w", dir, errSymlink)
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return fmt.Errorf("%s: %w", dir, errNotDir)
		}
		if err := checkDir(&st, 0, false); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		next := strings.IndexByte(path[i+1:], '/')
		if next < 0 {
			return nil
		}
		i += 1 + next
	}
	return nil
}

// pathErr names path in err, relative to the store when it is inside it
// and not at all when it is the store.
func pathErr(store, path string, err error) error {
	if err == nil {
		return nil
	}
	if rel, rerr := filepath.Rel(store, path); rerr == nil && rel == "." {
		return err
	} else if rerr == nil && !strings.HasPrefix(rel, "..") {
		path = rel
	}
	return fmt.Errorf("%s: %w", path, err)
}

var (
	errSymlink = errors.New("a symbolic link: jail follows none in its image store (give the real path)")
	errNotDir  = errors.New("not a directory")
)

// openDirAt opens the directory name in dirfd without following a link,
// making it (mode) when missing and create is set. It returns -1 and no
// error when it is missing and create is not set.
func openDirAt(dirfd int, name string, create bool, mode uint32) (fd int, created bool, err error) {
	for {
		fd, err = unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		switch {
		case err == nil:
			return fd, created, nil
		case errors.Is(err, unix.ENOENT) && create && !created:
			if err := unix.Mkdirat(dirfd, name, mode); err != nil && !errors.Is(err, unix.EEXIST) {
				return -1, false, err
			}
			created = true
			continue
		case errors.Is(err, unix.ENOENT):
			return -1, false, nil
		case errors.Is(err, unix.ENOTDIR):
			var st unix.Stat_t
			if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return -1, false, errSymlink
			}
			return -1, false, errNotDir
		}
		return -1, false, err
	}
}

// checkDir: a directory on the way to the store (last false) must be
// owner's and writable by no one else unless sticky; the store's own
// directories must be owner's and writable by no one else.
func checkDir(st *unix.Stat_t, owner int, last bool) error {
	if int(st.Uid) != owner {
		return fmt.Errorf("belongs to uid %d, not to uid %d: jail uses no image store that someone else could change", st.Uid, owner)
	}
	if st.Mode&0o022 != 0 && (last || st.Mode&unix.S_ISVTX == 0) {
		return fmt.Errorf("writable by others (mode %04o): jail uses no image store that someone else could change", st.Mode&0o7777)
	}
	return nil
}

// subdir opens one of the store's fixed directories (layers, tmp), making it
// when create is set; storeIsNew says the store was just made (then an
// existing store directory that holds other things but no layers/ is not
// taken for a store).
func (o *Opened) subdir(name string, create bool, mode uint32, storeIsNew bool) (int, error) {
	if create && name == "layers" && !storeIsNew {
		if err := o.looksLikeStore(); err != nil {
			return -1, err
		}
	}
	fd, made, err := openDirAt(o.dir, name, create, mode)
	if err != nil {
		return -1, pathErr("", name, err)
	}
	if fd < 0 {
		return -1, nil
	}
	if made {
		if err := o.setOwner(fd, name, mode); err != nil {
			unix.Close(fd)
			return -1, err
		}
	} else if mode == storeDirMode {
		if err := o.unlisted(fd, name); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := checkDir(&st, o.euid, true); err != nil {
		unix.Close(fd)
		return -1, pathErr("", name, err)
	}
	return fd, nil
}

// looksLikeStore refuses to make a store in an existing directory that
// holds anything but a store's entries: JAIL_IMAGE_STORE=/ must not make
// `jail image prune` empty /tmp.
func (o *Opened) looksLikeStore() error {
	var st unix.Stat_t
	if err := unix.Fstatat(o.dir, "layers", &st, unix.AT_SYMLINK_NOFOLLOW); err == nil || !errors.Is(err, unix.ENOENT) {
		return nil // there, or refused by subdir
	}
	d, err := unix.Openat(o.dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(d), o.Root)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		// layers: another jail opening the same new store made it
		// since the Fstatat above.
		if n != "layers" && n != "images.json" && n != "lock" && n != "tmp" && !strings.HasPrefix(n, ".images-") {
			return fmt.Errorf("holds %q and no layers/: not an image store (give an empty or new directory)", n)
		}
	}
	return nil
}

// storeDirMode is the mode of a store's directory and of its layers/: as
// root's, group Base may pass through them (the inits of sandboxes open
// their layers by path) but not list them. A sandbox on the host tree sees
// a store that no mask hides (one $JAIL_IMAGE_STORE put elsewhere, and a
// later run's environment does not name): as sandbox root it owns the
// layers' files, but it can only reach a layer whose name, the digest of
// its content, it already knows; images.json, which lists them, is
// root's alone.
const storeDirMode = 0o710

// unlisted makes an existing root store's directory (or its layers/)
// storeDirMode when an earlier jail made it listable to group Base (0750).
func (o *Opened) unlisted(fd int, name string) error {
	if !o.Own.Shift || o.euid != 0 {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return pathErr("", name, err)
	}
	if st.Uid != 0 || st.Mode&0o044 == 0 {
		return nil
	}
	dir, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return pathErr("", name, err)
	}
	defer unix.Close(dir)
	return pathErr("", name, unix.Fchmod(dir, st.Mode&0o7777&^0o044))
}

// setOwner gives a directory jail just made its owner and mode: as root
// (Own.Shift) group Base, so that sandboxes reach their layers.
func (o *Opened) setOwner(pathFD int, name string, mode uint32) error {
	if !o.Own.Shift {
		return nil
	}
	fd, err := unix.Openat(pathFD, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return pathErr("", name, err)
	}
	defer unix.Close(fd)
	gid := 0 // tmp/ (0700) is root's alone
	if mode == storeDirMode {
		gid = o.Own.Base // the store and layers/: the sandboxes reach them
	}
	if err := unix.Fchown(fd, 0, gid); err != nil {
		return pathErr("", name, err)
	}
	return pathErr("", name, unix.Fchmod(fd, mode))
}

// openFileAt opens name in dirfd for reading without following a link
// (how nil) or resolved as how says, without blocking (a FIFO opens at
// once), and refuses anything but a regular file of at most limit bytes.
// ENOENT and the like come back as they are.
func openFileAt(dirfd int, name string, limit int64, how *unix.OpenHow) (fd int, size int64, err error) {
	flags := unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
	if how != nil {
		how.Flags = uint64(flags)
		fd, err = unix.Openat2(dirfd, name, how)
	} else {
		fd, err = unix.Openat(dirfd, name, flags|unix.O_NOFOLLOW, 0)
		if errors.Is(err, unix.ELOOP) {
			err = errSymlink
		}
	}
	if err != nil {
		return -1, 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, 0, errors.New("not a regular file")
	}
	if st.Size > limit {
		unix.Close(fd)
		return -1, 0, fmt.Errorf("%d bytes: more than the %d jail reads", st.Size, limit)
	}
	return fd, st.Size, nil
}

// readFD reads fd (of size bytes when opened) to its end and closes it;
// past limit bytes (a file that grew meanwhile) it fails.
func readFD(fd int, size, limit int64) ([]byte, error) {
	defer unix.Close(fd)
	buf := make([]byte, 0, size+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, fmt.Errorf("grew past the %d bytes jail reads", limit)
		}
	}
}

// readIndex reads images.json, checking every layer it names.
func (o *Opened) readIndex() (map[string]Image, error) {
	all := map[string]Image{}
	if o.dir < 0 {
		return all, nil
	}
	fd, size, err := openFileAt(o.dir, "images.json", maxIndexSize, nil)
	if errors.Is(err, unix.ENOENT) {
		return all, nil
	}
	if err != nil {
		return nil, fmt.Errorf("image store %s: images.json: %w", o.Root, err)
	}
	data, err := readFD(fd, size, maxIndexSize)
	if err != nil {
		return nil, fmt.Errorf("image store %s: images.json: %w", o.Root, err)
	}
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, fmt.Errorf("image store %s: images.json: %w", o.Root, err)
	}
	for name, img := range all {
		if err := img.checkRecord(); err != nil {
			return nil, fmt.Errorf("image store %s: images.json: image %s: %w", o.Root, name, err)
		}
	}
	return all, nil
}

// checkRecord checks what of an image's record becomes a path or a
// decision: every layer a sha256 digest, every owners record one of its
// layers' and a possible mapping.
func (img Image) checkRecord() error {
	layers := make(map[string]bool, len(img.Layers))
	for _, l := range img.Layers {
		if !ValidDiffID(l) {
			return fmt.Errorf("names layer %q, which is not a sha256 digest", l)
		}
		layers[l] = true
	}
	for l, m := range img.Owners {
		if !layers[l] {
			return fmt.Errorf("records the owners of %q, which is none of its layers", l)
		}
		if !m.valid() {
			return fmt.Errorf("layer %s: owners stored under uids %d, gids %d, %d ids: not a mapping of subordinate ids", Short(l), m.UID, m.GID, m.Size)
		}
	}
	return nil
}

// ValidDiffID reports whether id is "sha256:" and 64 lowercase hex digits:
// the only layer names that become paths in the store.
func ValidDiffID(id string) bool {
	h, ok := strings.CutPrefix(id, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Update changes images.json under the store's lock, atomically.
func (o *Opened) Update(change func(map[string]Image) error) error {
	unlock, err := o.lock()
	if err != nil {
		return err
	}
	defer unlock()
	all, err := o.readIndex()
	if err != nil {
		return err
	}
	if err := change(all); err != nil {
		return err
	}
	return o.writeIndex(all)
}

// lock takes the store's lock (a regular file, not a link).
func (o *Opened) lock() (func(), error) {
	if o.dir < 0 || o.tmp < 0 {
		return nil, errors.New("image store: not opened for changes")
	}
	fd, err := unix.Openat(o.dir, "lock", unix.O_CREAT|unix.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.ELOOP) {
		err = errSymlink
	}
	if err != nil {
		return nil, fmt.Errorf("image store %s: lock: %w", o.Root, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("image store %s: lock: not a regular file", o.Root)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("image store %s: lock: %w", o.Root, err)
	}
	return func() { unix.Close(fd) }, nil
}

// writeIndex replaces images.json whole (privdir.WriteFile).
func (o *Opened) writeIndex(all map[string]Image) error {
	data, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	if err := privdir.WriteFile(o.dir, "images.json", ".images-", data, 0o600); err != nil {
		return fmt.Errorf("image store %s: images.json: %w", o.Root, err)
	}
	return nil
}

func randomName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// rootOf is an os.Root of the directory fd refers to (through its
// /proc/self/fd link, which names that very directory, not a path).
func rootOf(fd int) (*os.Root, error) {
	return os.OpenRoot("/proc/self/fd/" + strconv.Itoa(fd))
}

// Temp is a fresh directory in the store's tmp/, for work in progress: an
// import unpacks a layer there and CommitLayer moves it into place.
type Temp struct {
	// Root is the directory, for writing into it.
	Root *os.Root
	name string
	fd   int // O_PATH
	o    *Opened
}

// TempDir makes a new directory in tmp/ (mode 0700).
func (o *Opened) TempDir(prefix string) (*Temp, error) {
	if o.tmp < 0 {
		return nil, errors.New("image store: not opened for changes")
	}
	for {
		name := prefix + randomName()
		err := unix.Mkdirat(o.tmp, name, 0o700)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("image store %s: tmp: %w", o.Root, err)
		}
		t := &Temp{name: name, fd: -1, o: o}
		if t.fd, _, err = openDirAt(o.tmp, name, false, 0); err == nil && t.fd >= 0 {
			t.Root, err = rootOf(t.fd)
		}
		if err != nil || t.fd < 0 {
			t.Remove()
			return nil, fmt.Errorf("image store %s: tmp/%s: %v", o.Root, name, err)
		}
		return t, nil
	}
}

// Path names the directory for code that reads by path: the descriptor's
// /proc/self/fd link, which reaches this very directory while t is open.
func (t *Temp) Path() string { return "/proc/self/fd/" + strconv.Itoa(t.fd) }

// Remove deletes the directory and what it holds (a link's target stays).
func (t *Temp) Remove() {
	if t.Root != nil {
		t.Root.Close()
		t.Root = nil
	}
	if t.fd >= 0 {
		unix.Close(t.fd)
		t.fd = -1
	}
	if t.name == "" {
		return
	}
	_ = removeAllAt(t.o.tmp, t.name)
	t.name = ""
}

// CommitLayer gives the layer unpacked in t its final name. When the layer
// is already there (a concurrent import stored it first), existed is true
// and t is left to the caller to remove.
func (o *Opened) CommitLayer(t *Temp, diffID string) (existed bool, err error) {
	if !ValidDiffID(diffID) {
		return false, fmt.Errorf("unsupported diff ID %s", diffID)
	}
	final := strings.TrimPrefix(diffID, "sha256:")
	err = unix.Renameat2(o.tmp, t.name, o.layers, final, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) {
		// A filesystem without RENAME_NOREPLACE: a plain rename does not
		// replace a directory that has entries, and a layer has some.
		err = unix.Renameat(o.tmp, t.name, o.layers, final)
	}
	if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("image store %s: %w", o.Root, err)
	}
	t.Root.Close()
	t.Root = nil
	unix.Close(t.fd)
	t.fd, t.name = -1, ""
	return false, nil
}

// LayerSize reports whether the layer is stored, the size of its files
// and how many entries it has.
func (o *Opened) LayerSize(diffID string) (size, entries int64, ok bool) {
	if o.layers < 0 || !ValidDiffID(diffID) {
		return 0, 0, false
	}
	fd, _, err := openDirAt(o.layers, strings.TrimPrefix(diffID, "sha256:"), false, 0)
	if err != nil || fd < 0 {
		return 0, 0, false
	}
	defer unix.Close(fd)
	root, err := rootOf(fd)
	if err != nil {
		return 0, 0, false
	}
	defer root.Close()
	_ = fs.WalkDir(root.FS(), ".", func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		entries++
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				size += info.Size()
			}
		}
		return nil
	})
	return size, entries, true
}
