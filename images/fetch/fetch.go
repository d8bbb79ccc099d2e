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
	// image of it is complete (commit), so that a refused import leaves
	// no layer behind.
	pending map[string]*pendingLayer
}

type pendingLayer struct {
	dir        *images.Temp
	size, cost int64
}

// commit gives every pending layer its final name.
func (s store) commit() error {
	for id, p := range s.pending {
		if _, err := s.CommitLayer(p.dir, id); err != nil {
			return err
		}
		// (When a concurrent import stored the layer first, this copy
		// goes with close.)
	}
	return nil
}

// close removes what commit did not take, and closes the store.
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
	return store{Opened: o, lim: lim, pending: map[string]*pendingLayer{}}, nil
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
// platform's image from an index, and stores it like Import. Registries on
// loopback are spoken to over plain HTTP, others over HTTPS.
func Pull(s images.Store, ref string, lim Limits) (images.Image, error) {
	st, err := open(s, lim)
	if err != nil {
		return images.Image{}, err
	}
	defer st.close()
	return st.pull(ref)
}
