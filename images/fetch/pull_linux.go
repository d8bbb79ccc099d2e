package fetch

import (
	"fmt"
	"github.com/jail-sandbox/jail/images"
	"runtime"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// pull is Pull.
func (s store) pull(ref string) (images.Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return images.Image{}, fmt.Errorf("%q is not an image reference", ref)
	}
	platform := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	desc, err := remote.Get(r, remote.WithAuthFromKeychain(authn.DefaultKeychain), remote.WithPlatform(platform))
	if err != nil {
		return images.Image{}, fmt.Errorf("pull: %v", err)
	}
	img, err := desc.Image()
	if err != nil {
		return images.Image{}, fmt.Errorf("pull: %v", err)
	}
	rec, err := s.store(img)
	if err != nil {
		return images.Image{}, err
	}
	rec.Name = r.Name()
	recs := []images.Image{rec}
	if err := s.record(recs); err != nil {
		return images.Image{}, err
	}
	return recs[0], nil
}
