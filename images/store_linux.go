// Package images is jail's local image store: OCI and Docker images
// imported from layout directories and archives, their layers unpacked once
// each and shared by every image that has them.
//
// Layout under the store's root (/var/lib/jail for root,
// $XDG_DATA_HOME/jail or ~/.local/share/jail otherwise):
//
//	layers/<diffid hex>/   one unpacked layer, named by its uncompressed digest
//	images.json            name -> manifest digest, layers, config, and how
//	                       the owners of layers with several are stored
//	tmp/                   work in progress; never used by a run
//	lock                   serialises changes to images.json
//
// Invariants: a layer directory exists under its final name only once it is
// complete and its content matched its digest (written in tmp/, renamed
// into place); images.json is replaced atomically; a failed or interrupted
// import leaves nothing a later run could use.
//
// The store's path may come from the environment of a less trusted user
// (JAIL_IMAGE_STORE kept through sudo), so it is opened once (Store.Open,
// Store.Prepare) and checked: no symbolic link, the caller's own, writable
// by no one else, and as root every directory above it root's and writable
// by no one else (unless sticky). All later steps go through that
// descriptor, and no removal follows a link or leaves the store's
// filesystem (removeAllAt); a layer id becomes a path only once it is a
// sha256 digest. What is read out of an image on the host side is bounded
// and cannot block (readImageFile). Root's store and its layers/ are mode
// 0710, group the sandboxes' host gid: a sandbox's init reaches the layers
// it is given by name, and no sandbox lists them.
//
// Owners (Ownership): root's store shifts them into the sandboxes' host
// range; a rootless caller with subordinate ids stores them as its sandboxes
// map them, from a user namespace mapped the same way, and images.json
// records that mapping for each such layer (Image.Owners), which a run must
// have (CheckOwners); otherwise every file is the caller's.
package images

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/namespaces"
)

// Image is one stored image.
type Image struct {
	// Name is the normalised reference, e.g. docker.io/library/busybox:latest.
	Name string `json:"name"`
	// Digest is the manifest's digest.
	Digest string `json:"digest"`
	// Layers are diff IDs, bottom layer first.
	Layers []string `json:"layers"`
	Config Config   `json:"config"`
	// Size is the unpacked size in bytes.
	Size    int64     `json:"size"`
	Created time.Time `json:"imported"`
	// Owners names the layers whose files have owners besides sandbox
	// root, stored by a rootless caller with subordinate ids: diff ID ->
	// the mapping they were stored under (see Ownership.SubIDs). A layer
	// not named here has every file the caller's (rootless; stores made
	// before subordinate ids had no such record, and mean that) or its
	// owners shifted (root's store).
	Owners map[string]IDMapping `json:"owners,omitempty"`
}

// IDMapping is how a rootless caller's sandboxes map their ids 1..Size:
// onto host uids UID..UID+Size-1 and gids GID..GID+Size-1 (id 0 is the
// caller). A layer stored under it has files owned by host ids in those
// ranges, which read as their own ids inside only where a sandbox maps
// them the same way.
type IDMapping struct {
	UID  int `json:"uid"`
	GID  int `json:"gid"`
	Size int `json:"size"`
}

// valid reports whether m can be a subordinate mapping at all.
func (m IDMapping) valid() bool {
	return m.UID > 0 && m.GID > 0 && m.Size >= 1 && m.Size < namespaces.HostRangeSize
}

// CheckOwners refuses to run img in a sandbox of identity id when one of
// its layers keeps owners among subordinate ids that id does not map as
// they were mapped when it was stored: its files would show unmapped
// owners (nobody) and directories only their owner may enter would be
// closed to everyone. It costs no system call.
func (img Image) CheckOwners(id namespaces.Identity) error {
	for _, l := range img.Layers {
		m, ok := img.Owners[l]
		if !ok {
			continue
		}
		what := fmt.Sprintf("layer %s keeps files owned by your subordinate ids (uids %d-%d, gids %d-%d)",
			Short(l), m.UID, m.UID+m.Size-1, m.GID, m.GID+m.Size-1)
		if !id.Rootless {
			return fmt.Errorf("%s, which root's sandboxes do not map", what)
		}
		cur, ok := id.SubIDMapping()
		if !ok {
			return fmt.Errorf("%s, which this sandbox cannot map (%s); with them back, run it or remove it (jail image rm)", what, namespaces.SubIDsDetail())
		}
		if cur.UID != m.UID || cur.GID != m.GID || cur.Size < m.Size {
			return fmt.Errorf("%s, and this sandbox maps ids 1-%d onto uids %d-, gids %d- instead: import it again once the old range is removed (as root, or with the old range back: jail image rm)",
				what, cur.Size, cur.UID, cur.GID)
		}
	}
	return nil
}

// Config is what of an image's configuration a run uses.
type Config struct {
	Env        []string `json:"env,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	WorkingDir string   `json:"working_dir,omitempty"`
	User       string   `json:"user,omitempty"`
}

// Ownership says how the owners recorded in a layer become owners on disk.
// There are three ways: Shift (root), SubIDs (a rootless caller with
// subordinate ids), and neither (a rootless caller with only its own id).
type Ownership struct {
	// Shift, when true, stores a file owned by id N as host id Base+N
	// (jail run as root: the sandbox maps its ids 0..Size-1 there, so the
	// file reads as owned by N inside). When false and SubIDs is nil
	// (rootless), every file belongs to the caller, the one id the sandbox
	// has.
	Shift bool
	Base  int
	Size  int
	// SubIDs, when set, is the mapping of a rootless caller with
	// subordinate ids, and the store is changed by a process that is root
	// of a user namespace mapped as the caller's sandboxes are (0 onto the
	// caller, 1..Size onto the subordinate ids: namespaces.UserNSAttr).
	// A file owned by N keeps N there (host id SubIDs.UID+N-1, or the
	// caller for 0); an owner above Size becomes nobody (65534) as in
	// root's store, and where the range is too small to hold nobody the
	// layer is refused. Such a layer is recorded in Image.Owners.
	SubIDs *IDMapping
}

// Nobody is the id an owner outside the sandbox's ids becomes.
const Nobody = 65534

// Store is an image store rooted at Root.
type Store struct {
	Root string
	// Own is how layer owners are stored (see Ownership).
	Own Ownership
	// Progress, when set, receives one line per layer as it is stored.
	Progress io.Writer
}

// CallerStore is the caller's store (see DefaultStore): as root, layers are
// stored with their owners shifted into the range sandboxes map their ids
// onto.
func CallerStore() Store {
	own := Ownership{}
	if os.Geteuid() == 0 {
		own = Ownership{Shift: true, Base: namespaces.HostRangeStart, Size: namespaces.HostRangeSize}
	}
	return DefaultStore(own)
}

// MappedStore is the caller's store for a process started in a user
// namespace mapped with the caller's subordinate ids (see Ownership.SubIDs),
// which it reads from its own maps.
func MappedStore() (Store, error) {
	m, err := namespaces.OwnSubIDMapping()
	if err != nil {
		return Store{}, err
	}
	return DefaultStore(Ownership{SubIDs: &IDMapping{UID: m.UID, GID: m.GID, Size: m.Size}}), nil
}

// DefaultStore is the caller's store: $JAIL_IMAGE_STORE when set, else
// /var/lib/jail for root and $XDG_DATA_HOME/jail for others.
//
// With own.SubIDs, the caller is root of its own user namespace but its
// store is the rootless one.
func DefaultStore(own Ownership) Store {
	if dir := os.Getenv("JAIL_IMAGE_STORE"); dir != "" {
		return Store{Root: dir, Own: own}
	}
	if os.Geteuid() == 0 && own.SubIDs == nil {
		return Store{Root: "/var/lib/jail", Own: own}
	}
	dir := os.Getenv("XDG_DATA_HOME")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".local", "share")
	}
	return Store{Root: filepath.Join(dir, "jail"), Own: own}
}

// Layer is a layer's directory as a run uses it: its path and what it is
// (the init opens the path and checks it is still this directory).
type Layer struct {
	Path     string
	Dev, Ino uint64
}

// ErrNotStored: the store holds no image of that name (the errors of
// Lookup wrap it).
var ErrNotStored = errors.New("not in the store")

// Lookup finds an image by reference (either form).
func (o *Opened) Lookup(ref string) (Image, error) {
	n, err := Normalize(ref)
	if err != nil {
		return Image{}, err
	}
	all, err := o.readIndex()
	if err != nil {
		return Image{}, err
	}
	img, ok := all[n]
	if !ok {
		return Image{}, fmt.Errorf("%w (jail image import or pull)", ErrNotStored)
	}
	return img, nil
}

// Layers returns the directories of img's layers, bottom layer first.
func (o *Opened) Layers(img Image) ([]Layer, error) {
	out := make([]Layer, 0, len(img.Layers))
	for _, l := range img.Layers {
		hexID := strings.TrimPrefix(l, "sha256:")
		var st unix.Stat_t
		err := errors.New("missing")
		if o.layers >= 0 && ValidDiffID(l) {
			err = unix.Fstatat(o.layers, hexID, &st, unix.AT_SYMLINK_NOFOLLOW)
		}
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return nil, fmt.Errorf("layer %s is missing from the store", Short(l))
		}
		out = append(out, Layer{Path: filepath.Join(o.Root, "layers", hexID), Dev: uint64(st.Dev), Ino: st.Ino})
	}
	return out, nil
}

// List returns the stored images, by name.
func (o *Opened) List() ([]Image, error) {
	all, err := o.readIndex()
	if err != nil {
		return nil, err
	}
	out := make([]Image, 0, len(all))
	for _, img := range all {
		out = append(out, img)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove deletes an image's name (Prune then removes its layers).
func (o *Opened) Remove(ref string) error {
	n, err := Normalize(ref)
	if err != nil {
		return err
	}
	return o.Update(func(all map[string]Image) error {
		if _, ok := all[n]; !ok {
			return errors.New("not in the store")
		}
		delete(all, n)
		return nil
	})
}

// Prune removes layers no image uses, and leftovers of interrupted imports.
// It works through the descriptors of layers/ and tmp/ and removes no
// link's target.
func (o *Opened) Prune() (int, error) {
	unlock, err := o.lock()
	if err != nil {
		return 0, err
	}
	defer unlock()
	all, err := o.readIndex()
	if err != nil {
		return 0, err
	}
	used := map[string]bool{}
	for _, img := range all {
		for _, l := range img.Layers {
			used[strings.TrimPrefix(l, "sha256:")] = true
		}
	}
	removed := 0
	for _, d := range []struct {
		fd   int
		keep map[string]bool
	}{{o.layers, used}, {o.tmp, nil}} {
		n, err := removeEntries(d.fd, d.keep)
		if err != nil {
			return removed, fmt.Errorf("image store %s: %w%s", o.Root, err, o.removeHint(err))
		}
		if d.fd == o.layers {
			removed = n
		}
	}
	return removed, nil
}

// removeHint explains a removal refused for want of permission by a
// rootless caller outside its user namespace: the layer has files of
// subordinate ids, which only a process mapped onto them may remove (jail
// image rm and prune do it in one when the caller has them).
func (o *Opened) removeHint(err error) string {
	switch {
	case o.Own.Shift || !errors.Is(err, fs.ErrPermission):
		return ""
	case o.Own.SubIDs != nil:
		return " (files owned by ids your subordinate ranges no longer hold: only root can remove them)"
	}
	return fmt.Sprintf(" (files owned by subordinate ids, which jail removes in a user namespace that maps them; here %s)", namespaces.SubIDsDetail())
}

// RemoveLayer removes a stored layer that no image names, under the
// store's lock (from Update's change): an import replaces such a layer,
// whose owners no record tells, with its own copy.
func (o *Opened) RemoveLayer(diffID string) error {
	if o.layers < 0 || !ValidDiffID(diffID) {
		return fmt.Errorf("unsupported diff ID %s", diffID)
	}
	if err := removeAllAt(o.layers, strings.TrimPrefix(diffID, "sha256:")); err != nil {
		return fmt.Errorf("image store %s: %w%s", o.Root, err, o.removeHint(err))
	}
	return nil
}

// removeEntries removes every entry of the directory dirfd but those in
// keep.
func removeEntries(dirfd int, keep map[string]bool) (int, error) {
	root, err := rootOf(dirfd)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	d, err := root.Open(".")
	if err != nil {
		return 0, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, n := range names {
		if keep[n] {
			continue
		}
		if err := removeAllAt(dirfd, n); err != nil {
			return removed, err
		}
		removed++
	}
	return removed, nil
}

// The same, for one step each: the store is opened for it and closed.

// Lookup finds an image by reference (either form).
func (s Store) Lookup(ref string) (Image, error) {
	o, err := s.Open()
	if err != nil {
		return Image{}, err
	}
	defer o.Close()
	return o.Lookup(ref)
}

// List returns the stored images, by name.
func (s Store) List() ([]Image, error) {
	o, err := s.Open()
	if err != nil {
		return nil, err
	}
	defer o.Close()
	return o.List()
}

// RemoveImage is `jail image rm`: the image's name goes (Remove), then
// the layers no image uses any more and what interrupted imports left
// (Prune), through one opening of the store. Its errors say which step
// failed ("image REF: ...", "image rm: ...").
func (s Store) RemoveImage(ref string) error {
	o, err := s.Prepare()
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	defer o.Close()
	if err := o.Remove(ref); err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	if _, err := o.Prune(); err != nil {
		return fmt.Errorf("image rm: %w", err)
	}
	return nil
}

// Prune removes layers no image uses, and leftovers of interrupted imports.
func (s Store) Prune() (int, error) {
	o, err := s.Prepare()
	if err != nil {
		return 0, err
	}
	defer o.Close()
	return o.Prune()
}

func Short(digest string) string {
	d := strings.TrimPrefix(digest, "sha256:")
	if len(d) > 12 {
		d = d[:12]
	}
	return d
}

// ResolveUser turns an image's USER (name or number, with an optional
// group) into "UID:GID", reading the image's /etc/passwd and /etc/group
// (see readImageFile).
func (o *Opened) ResolveUser(img Image, user string) (string, error) {
	u, g, hasGroup := strings.Cut(user, ":")
	uid, gid := u, ""
	if !isNumber(u) {
		f, err := o.lookupEntry(img, "etc/passwd", u)
		if err != nil {
			return "", err
		}
		if len(f) < 4 || !isNumber(f[2]) || !isNumber(f[3]) {
			return "", fmt.Errorf("user %q: its line in the image's /etc/passwd has no numeric uid and gid", u)
		}
		uid, gid = f[2], f[3]
	} else {
		gid = uid
	}
	if hasGroup {
		gid = g
		if !isNumber(g) {
			f, err := o.lookupEntry(img, "etc/group", g)
			if err != nil {
				return "", err
			}
			if len(f) < 3 || !isNumber(f[2]) {
				return "", fmt.Errorf("group %q: its line in the image's /etc/group has no numeric gid", g)
			}
			gid = f[2]
		}
	}
	return uid + ":" + gid, nil
}

// lookupEntry returns the colon-separated fields of name's line in file, as
// the image shows it (the topmost layer that has the file).
func (o *Opened) lookupEntry(img Image, file, name string) ([]string, error) {
	data, err := o.readImageFile(img, file)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Split(line, ":"); f[0] == name {
			return f, nil
		}
	}
	return nil, fmt.Errorf("user or group %q: not found in the image's /%s", name, file)
}

// readImageFile reads a file out of an image on the host side, where the
// image's content must neither reach the host's files nor stall or swell
// jail: the file is resolved inside its layer's directory (a link to
// /etc/shadow or ../../../etc/passwd names the layer's own file), opened
// without blocking, and only a regular file of at most MaxImageFileSize
// bytes is read. It comes from the topmost layer that has it; a whiteout
// there means the image has none.
func (o *Opened) readImageFile(img Image, file string) ([]byte, error) {
	for i := len(img.Layers) - 1; i >= 0 && o.layers >= 0; i-- {
		l := img.Layers[i]
		if !ValidDiffID(l) {
			break
		}
		layer, _, err := openDirAt(o.layers, strings.TrimPrefix(l, "sha256:"), false, 0)
		if err != nil || layer < 0 {
			return nil, fmt.Errorf("layer %s is missing from the store", Short(l))
		}
		fd, size, err := openFileAt(layer, file, MaxImageFileSize, &unix.OpenHow{
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
		})
		unix.Close(layer)
		switch {
		case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
			continue // not in this layer
		case errors.Is(err, unix.ENXIO):
			// A whiteout (a 0:0 device, which no driver opens): removed.
			return nil, fmt.Errorf("the image has no /%s", file)
		case err != nil:
			return nil, fmt.Errorf("the image's /%s: %w", file, err)
		}
		data, err := readFD(fd, size, MaxImageFileSize)
		if err != nil {
			return nil, fmt.Errorf("the image's /%s: %w", file, err)
		}
		return data, nil
	}
	return nil, fmt.Errorf("the image has no /%s", file)
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
