// Package fetch brings images into the local store (package images): it
// imports OCI layouts, OCI archives and docker-save tarballs and pulls from
// registries, through go-containerregistry, and unpacks their layers.
//
// It is apart from the store so that only jail's tools program links the
// registry client, its decompressors and TLS stack: the jail binary, whose
// start every sandbox pays for, reads the store without them. Everything
// here parses untrusted input; invariants are those of package images (a
// layer exists under its final name only once complete and verified), of
// unpackLayer (nothing is written outside the layer's directory) and of
// Limits (no import writes more than its bounds, however small the archive,
// and a refused one leaves nothing behind).
package fetch

import (
	"errors"
	"fmt"

	"github.com/jail-sandbox/jail/images"
)

// Limits bound what an import or pull may write into the store. A layer
// costs the larger of its uncompressed tar stream and what unpacking it
// writes: file contents (a sparse entry at its full size, holes included)
// and 4 KiB per entry (a filesystem block, what a small file or directory
// takes; it also bounds how many inodes an import uses). A compressed layer
// counts after decompression.
type Limits struct {
	// Layer bounds one layer; Image all the layers of one image (those
	// already in the store included).
	Layer, Image int64
}

// DefaultLimits hold the largest images in common use (CUDA and ML
// images unpack to 10-20 GiB, with single layers of several GiB).
var DefaultLimits = Limits{Layer: 16 << 30, Image: 32 << 30}

// store adds the fetching steps to an opened image store.
type store struct {
	*images.Opened
	lim Limits
	// pending are the layers this import unpacked, in tmp/ until every
	// image of it is complete (record), so that a refused import leaves
	// no layer behind.
	pending map[string]*pendingLayer
	// named holds, with Own.SubIDs, the layers images.json named when
	// the import began (see storeLayer).
	named map[string]bool
}

type pendingLayer struct {
	dir        *images.Temp
	size, cost int64
	// owners is the mapping the layer's owners were stored under, when
	// some are not sandbox root (Own.SubIDs).
	owners *images.IDMapping
}

// record gives every pending layer its final name and adds imgs to
// images.json, both under the store's lock: no prune or other import
// comes between, so every layer an image names is there, with the owners
// record of the copy that stays. A layer a concurrent import stored first
// is kept, with its record (this copy goes with close). With Own.SubIDs a
// stored layer that no image names (left by an interrupted import) has
// owners nothing records: this import's copy replaces it. imgs get their
// Owners.
func (s store) record(imgs []images.Image) error {
	return s.Update(func(all map[string]images.Image) error {
		stored := map[string]*images.IDMapping{} // layers images.json names
		for _, img := range all {
			for _, l := range img.Layers {
				if m, ok := img.Owners[l]; ok {
					stored[l] = &m
				} else if _, ok := stored[l]; !ok {
					stored[l] = nil
				}
			}
		}
		final := map[string]*images.IDMapping{}
		for id, p := range s.pending {
			existed, err := s.CommitLayer(p.dir, id)
			if err != nil {
				return err
			}
			if existed {
				if m, named := stored[id]; named || s.Own.SubIDs == nil {
					final[id] = m
					continue
				}
				if err := s.RemoveLayer(id); err != nil {
					return fmt.Errorf("layer %s, left by an interrupted import: %w", images.Short(id), err)
				}
				if existed, err = s.CommitLayer(p.dir, id); err == nil && existed {
					err = errors.New("stored again meanwhile")
				}
				if err != nil {
					return fmt.Errorf("layer %s: %w", images.Short(id), err)
				}
			}
			final[id] = p.owners
		}
		for i := range imgs {
			imgs[i].Owners = nil
			for _, l := range imgs[i].Layers {
				m, ok := final[l]
				if !ok {
					// Stored before this import: a prune may have
					// removed it since.
					if m, ok = stored[l]; !ok && s.Own.SubIDs != nil {
						return fmt.Errorf("layer %s was removed while this import ran (jail image prune?): import again", images.Short(l))
					}
				}
				if m != nil {
					if imgs[i].Owners == nil {
						imgs[i].Owners = map[string]images.IDMapping{}
					}
					imgs[i].Owners[l] = *m
				}
			}
			if _, err := s.Layers(imgs[i]); err != nil {
				return fmt.Errorf("%w (removed while this import ran? import again)", err)
			}
			all[imgs[i].Name] = imgs[i]
		}
		return nil
	})
}

// close removes what record did not take, and closes the store.
func (s store) close() {
	for _, p := range s.pending {
		p.dir.Remove()
	}
	s.Close()
}

func open(s images.Store, lim Limits) (store, error) {
	if lim.Layer <= 0 || lim.Image <= 0 {
		return store{}, fmt.Errorf("size bounds must be positive")
	}
	o, err := s.Prepare()
	if err != nil {
		return store{}, err
	}
	st := store{Opened: o, lim: lim, pending: map[string]*pendingLayer{}}
	if s.Own.SubIDs != nil {
		imgs, err := o.List()
		if err != nil {
			o.Close()
			return store{}, err
		}
		st.named = map[string]bool{}
		for _, img := range imgs {
			for _, l := range img.Layers {
				st.named[l] = true
			}
		}
	}
	return st, nil
}

// Import stores every image in path: an OCI image layout directory, an OCI
// archive (a tar of such a layout), or a `docker save` tarball (all its
// images, with their tags). nameOverride names the image when path holds
// exactly one.
func Import(s images.Store, path, nameOverride string, lim Limits) ([]images.Image, error) {
	st, err := open(s, lim)
	if err != nil {
		return nil, err
	}
	defer st.close()
	return st.importPath(path, nameOverride)
}

// Pull fetches ref from its registry (anonymously, or with the credentials
// of ~/.docker/config.json or $REGISTRY_AUTH_FILE), choosing this
// platform's image from an index, and stores it like Import. Registries
// are spoken to over HTTPS; go-containerregistry falls back to plain HTTP
// for loopback names and addresses (localhost:PORT, *.localhost,
// 127.0.0.1, ::1) and for RFC 1918 address literals, its policy, kept
// here.
func Pull(s images.Store, ref string, lim Limits) (images.Image, error) {
	st, err := open(s, lim)
	if err != nil {
		return images.Image{}, err
	}
	defer st.close()
	return st.pull(ref)
}
