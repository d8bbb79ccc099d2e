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
package images

import (
	"encoding/json"
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

// LayerDir is where a layer is unpacked.
func (s Store) LayerDir(diffID string) string {
	return filepath.Join(s.Root, "layers", strings.TrimPrefix(diffID, "sha256:"))
}

// Lookup finds an image by reference (either form).
func (s Store) Lookup(ref string) (Image, error) {
	n, err := Normalize(ref)
	if err != nil {
		return Image{}, err
	}
	all, err := s.readIndex()
	if err != nil {
		return Image{}, err
	}
	img, ok := all[n]
	if !ok {
		return Image{}, errors.New("not in the store (jail image import or pull)")
	}
	for _, l := range img.Layers {
		if _, err := os.Stat(s.LayerDir(l)); err != nil {
			return Image{}, fmt.Errorf("layer %s is missing from the store", Short(l))
		}
	}
	return img, nil
}

// List returns the stored images, by name.
func (s Store) List() ([]Image, error) {
	all, err := s.readIndex()
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
func (s Store) Remove(ref string) error {
	n, err := Normalize(ref)
	if err != nil {
		return err
	}
	return s.Update(func(all map[string]Image) error {
		if _, ok := all[n]; !ok {
			return errors.New("not in the store")
		}
		delete(all, n)
		return nil
	})
}

// Prune removes layers no image uses, and leftovers of interrupted imports.
func (s Store) Prune() (int, error) {
	removed := 0
	err := s.Update(func(all map[string]Image) error {
		used := map[string]bool{}
		for _, img := range all {
			for _, l := range img.Layers {
				used[strings.TrimPrefix(l, "sha256:")] = true
			}
		}
		entries, _ := os.ReadDir(filepath.Join(s.Root, "layers"))
		for _, e := range entries {
			if !used[e.Name()] {
				if err := os.RemoveAll(filepath.Join(s.Root, "layers", e.Name())); err != nil {
					return err
				}
				removed++
			}
		}
		return os.RemoveAll(filepath.Join(s.Root, "tmp"))
	})
	return removed, err
}

func (s Store) readIndex() (map[string]Image, error) {
	all := map[string]Image{}
	data, err := os.ReadFile(filepath.Join(s.Root, "images.json"))
	if errors.Is(err, os.ErrNotExist) {
		return all, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, fmt.Errorf("image store %s: images.json: %w", s.Root, err)
	}
	return all, nil
}

// prepare creates the store's directories. As root they belong to group
// Base, the sandboxes' host gid, mode 0750: a sandbox's init (which runs as
// the sandbox's root) can reach its layers, other users of the host cannot.
func (s Store) Prepare() error {
	for _, d := range []string{s.Root, filepath.Join(s.Root, "layers")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return err
		}
		if s.Own.Shift {
			if err := os.Chown(d, 0, s.Own.Base); err != nil {
				return err
			}
			if err := os.Chmod(d, 0o750); err != nil {
				return err
			}
		}
	}
	return os.MkdirAll(filepath.Join(s.Root, "tmp"), 0o700)
}

// update changes images.json under the store's lock, atomically.
func (s Store) Update(change func(map[string]Image) error) error {
	if err := s.Prepare(); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(s.Root, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	all, err := s.readIndex()
	if err != nil {
		return err
	}
	if err := change(all); err != nil {
		return err
	}
	data, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.Root, ".images-*.json")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return werr
	}
	return os.Rename(tmp.Name(), filepath.Join(s.Root, "images.json"))
}

func Short(digest string) string {
	d := strings.TrimPrefix(digest, "sha256:")
	if len(d) > 12 {
		d = d[:12]
	}
	return d
}

// ResolveUser turns an image's USER (name or number, with an optional
// group) into "UID:GID", reading the image's /etc/passwd and /etc/group.
func (s Store) ResolveUser(img Image, user string) (string, error) {
	u, g, hasGroup := strings.Cut(user, ":")
	uid, err := s.lookupID(img, "etc/passwd", u, 2)
	if err != nil {
		return "", err
	}
	gid := ""
	if hasGroup {
		if gid, err = s.lookupID(img, "etc/group", g, 2); err != nil {
			return "", err
		}
	} else if isNumber(u) {
		gid = uid
	} else if gid, err = s.lookupField(img, "etc/passwd", u, 3); err != nil {
		return "", err
	}
	return uid + ":" + gid, nil
}

func (s Store) lookupID(img Image, file, nameOrID string, field int) (string, error) {
	if isNumber(nameOrID) {
		return nameOrID, nil
	}
	return s.lookupField(img, file, nameOrID, field)
}

// lookupField finds name's line in file (the topmost layer having the file)
// and returns field (0-based, colon-separated).
func (s Store) lookupField(img Image, file, name string, field int) (string, error) {
	for i := len(img.Layers) - 1; i >= 0; i-- {
		root, err := os.OpenRoot(s.LayerDir(img.Layers[i]))
		if err != nil {
			continue
		}
		data, err := root.ReadFile(file)
		root.Close()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Split(line, ":")
			if len(f) > field && f[0] == name && isNumber(f[field]) {
				return f[field], nil
			}
		}
		break
	}
	return "", fmt.Errorf("user %q: not found in the image's /%s", name, file)
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
