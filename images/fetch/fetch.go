// Package fetch brings images into the local store (package images): it
// imports OCI layouts, OCI archives and docker-save tarballs and pulls from
// registries, through go-containerregistry, and unpacks their layers.
//
// It is apart from the store so that only jail's tools program links the
// registry client, its decompressors and TLS stack: the jail binary, whose
// start every sandbox pays for, reads the store without them. Everything
// here parses untrusted input; invariants are those of package images (a
// layer exists under its final name only once complete and verified) and
// of unpackLayer (nothing is written outside the layer's directory).
package fetch

import "github.com/jail-sandbox/jail/images"

// store adds the fetching steps to an image store.
type store struct {
	images.Store
}

// Import stores every image in path: an OCI image layout directory, an OCI
// archive (a tar of such a layout), or a `docker save` tarball (all its
// images, with their tags). nameOverride names the image when path holds
// exactly one.
func Import(s images.Store, path, nameOverride string) ([]images.Image, error) {
	return store{s}.importPath(path, nameOverride)
}

// Pull fetches ref from its registry (anonymously, or with the credentials
// of ~/.docker/config.json or $REGISTRY_AUTH_FILE), choosing this
// platform's image from an index, and stores it like Import. Registries on
// loopback are spoken to over plain HTTP, others over HTTPS.
func Pull(s images.Store, ref string) (images.Image, error) {
	return store{s}.pull(ref)
}
