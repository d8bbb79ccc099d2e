package images

import (
	"fmt"
	"runtime"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Pull fetches ref from its registry (anonymously, or with the credentials
// of ~/.docker/config.json or $REGISTRY_AUTH_FILE), choosing this
// platform's image from an index, and stores it like Import. Registries on
// loopback are spoken to over plain HTTP, others over HTTPS.
func (s Store) Pull(ref string) (Image, error) {
	if err := s.prepare(); err != nil {
		return Image{}, err
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return Image{}, fmt.Errorf("%q is not an image reference", ref)
	}
	platform := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	desc, err := remote.Get(r, remote.WithAuthFromKeychain(authn.DefaultKeychain), remote.WithPlatform(platform))
	if err != nil {
		return Image{}, fmt.Errorf("pull: %v", err)
	}
	img, err := desc.Image()
	if err != nil {
		return Image{}, fmt.Errorf("pull: %v", err)
	}
	rec, err := s.store(img)
	if err != nil {
		return Image{}, err
	}
	rec.Name = r.Name()
	err = s.update(func(all map[string]Image) error {
		all[rec.Name] = rec
		return nil
	})
	return rec, err
}
