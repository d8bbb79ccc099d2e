// Package images is jail's local image store: OCI and Docker images
// imported from layout directories and archives, their layers unpacked once
// each and shared by every image that has them.
//
// Layout under the store's root (/var/lib/jail for root,
// $XDG_DATA_HOME/jail or ~/.local/share/jail otherwise):
//
//	layers/<diffid hex>/   one unpacked layer, named by its uncompressed digest
//	images.json            name -> manifest digest, layers, config
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
// by no one else, and as root the same for every directory above it. All
// later steps go through that descriptor; a layer id becomes a path only
// once it is a sha256 digest. What is read out of an image on the host side
// is bounded and cannot block (readImageFile).
package images

import (
	"errors"
	"fmt"
	"io"
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
type Ownership struct {
	// Shift, when true, stores a file owned by id N as host id Base+N
	// (jail run as root: the sandbox maps its ids 0..Size-1 there, so the
	// file reads as owned by N inside). When false (rootless), every file
	// belongs to the caller, the one id the sandbox has.
	Shift bool
	Base  int
	Size  int
}

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

// DefaultStore is the caller's store: $JAIL_IMAGE_STORE when set, else
// /var/lib/jail for root and $XDG_DATA_HOME/jail for others.
func DefaultStore(own Ownership) Store {
	if dir := os.Getenv("JAIL_IMAGE_STORE"); dir != "" {
		return Store{Root: dir, Own: own}
	}
	if os.Geteuid() == 0 {
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
		return Image{}, errors.New("not in the store (jail image import or pull)")
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

// Remove deletes an image's name, and the layers no other image uses.
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
			return removed, fmt.Errorf("image store %s: %w", o.Root, err)
		}
		if d.fd == o.layers {
			removed = n
		}
	}
	return removed, nil
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
		if err := root.RemoveAll(n); err != nil {
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

// Remove deletes an image's name (Prune then removes its layers).
func (s Store) Remove(ref string) error {
	o, err := s.Prepare()
	if err != nil {
		return err
	}
	defer o.Close()
	return o.Remove(ref)
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

// Update changes images.json under the store's lock, atomically.
func (s Store) Update(change func(map[string]Image) error) error {
	o, err := s.Prepare()
	if err != nil {
		return err
	}
	defer o.Close()
	return o.Update(change)
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
