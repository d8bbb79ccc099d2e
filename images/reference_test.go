package images

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
)

// referenceCorpus holds references of every shape, good and bad.
var referenceCorpus = []string{
	"busybox", "busybox:1.36", "library/busybox", "docker.io/busybox", "docker.io/library/busybox:latest",
	"index.docker.io/busybox", "bars/bb:2", "docker.io/bars/bb:2", "ghcr.io/owner/repo:v1.2.3",
	"localhost/img", "localhost:5000/img:tag", "127.0.0.1:5000/a/b/c:d", "[::1]:5000/img", "my.registry:443/x",
	"busybox@sha256:" + strings.Repeat("a", 64), "busybox:1@sha256:" + strings.Repeat("0", 64),
	"ghcr.io/o/r:t@sha512:" + strings.Repeat("f", 128), "img@sha384:" + strings.Repeat("1", 96),
	"img@sha256:" + strings.Repeat("A", 64), "img@sha256:" + strings.Repeat("a", 63), "img@md5:abc",
	"img@@sha256:" + strings.Repeat("a", 64), "img@", "@sha256:" + strings.Repeat("a", 64),
	"", ":", "img:", "img:bad tag", "Upper/case", "busybox:" + strings.Repeat("t", 128), "busybox:" + strings.Repeat("t", 129),
	strings.Repeat("r", 255), strings.Repeat("r", 256), "http://docker.io/busybox", "https://x/y",
	"a..b", "a/b/", "/a", "a//b", "reg.io/", "reg.io:/a", "reg io/a", "ré.io/a", "é", "img:ta\u00e9g",
	"localhost", "localhost:5000", "a:b:c", "a:b/c:d", "a/b:c/d", "x.y:z/w", "x.y:99999999/w", "user@host/img",
	"-a", "a-", "_", ".", "..", "a/./b", "docker.io", "docker.io/", "index.docker.io/library/x",
}

// TestNormalizeAgreesWithGoContainerRegistry: the store is keyed by the
// names go-containerregistry gives (import and pull use it); Normalize
// must give the same name, or refuse, for every reference.
func TestNormalizeAgreesWithGoContainerRegistry(t *testing.T) {
	for _, ref := range referenceCorpus {
		compare(t, ref)
	}
}

func FuzzNormalize(f *testing.F) {
	for _, ref := range referenceCorpus {
		f.Add(ref)
	}
	f.Fuzz(func(t *testing.T, ref string) { compare(t, ref) })
}

func compare(t *testing.T, ref string) {
	t.Helper()
	got, err := Normalize(ref)
	r, werr := name.ParseReference(ref)
	switch {
	case (err == nil) != (werr == nil):
		t.Errorf("%q: Normalize %q, %v; go-containerregistry %v", ref, got, err, werr)
	case err == nil && got != r.Name():
		t.Errorf("%q: Normalize %q, go-containerregistry %q", ref, got, r.Name())
	}
}
