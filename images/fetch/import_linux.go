package fetch

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/jail-sandbox/jail/images"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"
)

// refAnnotation names an image in an OCI index.
const refAnnotation = "org.opencontainers.image.ref.name"

// source is one image found in an import path.
type source struct {
	name string // "" when the archive does not name it
	img  v1.Image
}

// importPath is Import.
func (s store) importPath(path, nameOverride string) ([]images.Image, error) {
	if err := s.Prepare(); err != nil {
		return nil, err
	}
	sources, cleanup, err := s.open(path)
	if cleanup != nil {
		defer cleanup()
	}
	if err != nil {
		return nil, err
	}
	if nameOverride != "" {
		if len(sources) != 1 {
			return nil, fmt.Errorf("--name: %s holds %d images", path, len(sources))
		}
		sources[0].name = nameOverride
	}
	// Everything is read and verified before the index changes.
	var out []images.Image
	for _, src := range sources {
		if src.name == "" {
			return nil, fmt.Errorf("%s does not name its image; give --name NAME[:TAG]", path)
		}
		n, err := images.Normalize(src.name)
		if err != nil {
			return nil, err
		}
		img, err := s.store(src.img)
		if err != nil {
			return nil, err
		}
		img.Name = n
		out = append(out, img)
	}
	err = s.Update(func(all map[string]images.Image) error {
		for _, img := range out {
			all[img.Name] = img
		}
		return nil
	})
	return out, err
}

// open finds the images in path.
func (s store) open(path string) ([]source, func(), error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if st.IsDir() {
		srcs, err := fromLayout(path)
		return srcs, nil, err
	}
	names, err := tarNames(path)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case names["oci-layout"]:
		dir, err := os.MkdirTemp(filepath.Join(s.Root, "tmp"), "archive-")
		if err != nil {
			return nil, nil, err
		}
		cleanup := func() { os.RemoveAll(dir) }
		if err := extractLayoutArchive(path, dir); err != nil {
			return nil, cleanup, err
		}
		srcs, err := fromLayout(dir)
		return srcs, cleanup, err
	case names["manifest.json"]:
		srcs, err := fromDockerSave(path)
		return srcs, nil, err
	}
	return nil, nil, fmt.Errorf("%s is not an OCI layout, OCI archive or docker-save tarball", path)
}

// tarNames lists the top-level names in a tar archive, reading it through
// so that a truncated or corrupt archive is refused here.
func tarNames(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not a readable tar archive: %v", path, err)
		}
		names[strings.TrimPrefix(hdr.Name, "./")] = true
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: an empty archive", path)
	}
	return names, nil
}

// extractLayoutArchive unpacks an OCI archive's oci-layout, index.json and
// blobs, and nothing else, into dir.
func extractLayoutArchive(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		rel, ok := cleanName(hdr.Name)
		if !ok || hdr.Typeflag == tar.TypeDir {
			continue
		}
		if hdr.Typeflag != tar.TypeReg && hdr.Typeflag != tar.TypeRegA {
			return fmt.Errorf("%s: unexpected entry %q in an OCI archive", path, hdr.Name)
		}
		if rel != "oci-layout" && rel != "index.json" && !strings.HasPrefix(rel, "blobs/") {
			continue
		}
		if err := root.MkdirAll(filepath.Dir(rel), 0o700); err != nil {
			return err
		}
		out, err := root.OpenFile(rel, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("%s: %s: %v", path, hdr.Name, err)
		}
		_, err = io.Copy(out, tr)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}

func fromLayout(dir string) ([]source, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: not an OCI image layout: %v", dir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", dir, err)
	}
	return fromIndex(idx, "")
}

// fromIndex collects the images of an index, choosing this platform's
// manifest from nested indexes.
func fromIndex(idx v1.ImageIndex, inherited string) ([]source, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []source
	for _, d := range m.Manifests {
		refName := d.Annotations[refAnnotation]
		if refName == "" {
			refName = inherited
		}
		switch {
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			img, err := platformImage(child)
			if err != nil {
				return nil, err
			}
			out = append(out, source{name: refName, img: img})
		case d.MediaType.IsImage():
			if d.Platform != nil && !matchesPlatform(d.Platform) {
				continue
			}
			img, err := idx.Image(d.Digest)
			if err != nil {
				return nil, err
			}
			out = append(out, source{name: refName, img: img})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no image for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	return out, nil
}

func matchesPlatform(p *v1.Platform) bool {
	return p.OS == runtime.GOOS && p.Architecture == runtime.GOARCH
}

// platformImage picks this machine's image from a multi-platform index.
func platformImage(idx v1.ImageIndex) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && matchesPlatform(d.Platform) && d.MediaType.IsImage() {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("the image index has no %s/%s image", runtime.GOOS, runtime.GOARCH)
}

// fromDockerSave reads every tagged image of a `docker save` tarball.
func fromDockerSave(path string) ([]source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var manifest []struct {
		RepoTags []string
	}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err != nil {
			return nil, fmt.Errorf("%s: no manifest.json", path)
		}
		if strings.TrimPrefix(hdr.Name, "./") == "manifest.json" {
			if err := json.NewDecoder(io.LimitReader(tr, 16<<20)).Decode(&manifest); err != nil {
				return nil, fmt.Errorf("%s: manifest.json: %v", path, err)
			}
			break
		}
	}
	var out []source
	for _, m := range manifest {
		if len(m.RepoTags) == 0 && len(manifest) == 1 {
			img, err := tarball.ImageFromPath(path, nil)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", path, err)
			}
			out = append(out, source{img: img})
		}
		for _, t := range m.RepoTags {
			tag, err := name.NewTag(t)
			if err != nil {
				return nil, fmt.Errorf("%s: tag %q: %v", path, t, err)
			}
			img, err := tarball.ImageFromPath(path, &tag)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %v", path, t, err)
			}
			out = append(out, source{name: t, img: img})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: the archive holds no image", path)
	}
	return out, nil
}

// store unpacks img's layers (each once) and returns its record.
func (s store) store(img v1.Image) (images.Image, error) {
	digest, err := img.Digest()
	if err != nil {
		return images.Image{}, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return images.Image{}, fmt.Errorf("image config: %v", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return images.Image{}, fmt.Errorf("image layers: %v", err)
	}
	if len(layers) != len(cfg.RootFS.DiffIDs) {
		return images.Image{}, fmt.Errorf("the image has %d layers but its config lists %d", len(layers), len(cfg.RootFS.DiffIDs))
	}
	rec := images.Image{
		Digest: digest.String(), Created: time.Now().UTC().Truncate(time.Second),
		Config: images.Config{
			Env: cfg.Config.Env, Entrypoint: cfg.Config.Entrypoint, Cmd: cfg.Config.Cmd,
			WorkingDir: cfg.Config.WorkingDir, User: cfg.Config.User,
		},
	}
	for i, l := range layers {
		diffID := cfg.RootFS.DiffIDs[i]
		start := time.Now()
		label := fmt.Sprintf("layer %d/%d %s", i+1, len(layers), images.Short(diffID.String()))
		size, err := s.storeLayer(l, diffID, label)
		if err != nil {
			return images.Image{}, fmt.Errorf("layer %s: %w", images.Short(diffID.String()), err)
		}
		if s.Progress != nil {
			fmt.Fprintf(s.Progress, "\r%s  %.1f MiB  done in %s\033[K\n", label, float64(size)/(1<<20), time.Since(start).Round(time.Millisecond))
		}
		rec.Layers = append(rec.Layers, diffID.String())
		rec.Size += size
	}
	return rec, nil
}

var supportedLayers = map[types.MediaType]bool{
	types.DockerLayer: true, types.DockerUncompressedLayer: true,
	types.OCILayer: true, types.OCIUncompressedLayer: true, types.OCILayerZStd: true,
}

// storeLayer verifies a layer against both its digests and unpacks it into
// its directory, unless an earlier import already did.
func (s store) storeLayer(l v1.Layer, diffID v1.Hash, label string) (int64, error) {
	if diffID.Algorithm != "sha256" || len(diffID.Hex) != 64 {
		return 0, fmt.Errorf("unsupported diff ID %s", diffID)
	}
	final := s.LayerDir(diffID.String())
	if st, err := os.Stat(final); err == nil && st.IsDir() {
		return dirSize(final), nil
	}
	mt, err := l.MediaType()
	if err != nil {
		return 0, err
	}
	if !supportedLayers[mt] {
		return 0, fmt.Errorf("unsupported media type %s", mt)
	}
	want, err := l.Digest()
	if err != nil {
		return 0, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return 0, fmt.Errorf("missing blob %s: %v", images.Short(want.String()), err)
	}
	defer rc.Close()

	tmp, err := os.MkdirTemp(filepath.Join(s.Root, "tmp"), "layer-")
	if err != nil {
		return 0, err
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return 0, err
	}
	// One pass: the blob is hashed as it is read, decompressed, and the
	// content hashed as it is unpacked. Both digests are checked before
	// the layer gets its final name, so nothing unverified is ever used.
	blobHash, contentHash := sha256.New(), sha256.New()
	fetched := &countingReader{r: io.TeeReader(rc, blobHash)}
	// A blob that is not what the manifest says is reported as such, even
	// when it also fails to decompress or unpack.
	blobMismatch := func() error {
		_, _ = io.Copy(io.Discard, fetched)
		if got := "sha256:" + hex.EncodeToString(blobHash.Sum(nil)); want.Algorithm == "sha256" && got != want.String() {
			return fmt.Errorf("digest mismatch: the blob is %s, the manifest says %s", images.Short(got), images.Short(want.String()))
		}
		return nil
	}
	content, err := decompress(mt, fetched)
	if err != nil {
		if mismatch := blobMismatch(); mismatch != nil {
			return 0, mismatch
		}
		return 0, err
	}
	defer content.Close()
	counted := &countingReader{r: io.TeeReader(content, contentHash)}
	stop := s.showProgress(label, counted)
	err = unpackLayer(counted, tmp, s.Own)
	stop()
	if err != nil {
		if mismatch := blobMismatch(); mismatch != nil {
			return 0, mismatch
		}
		return 0, err
	}
	// Whatever the tar did not read still counts towards both digests.
	if _, err := io.Copy(io.Discard, counted); err != nil {
		return 0, fmt.Errorf("read layer: %v", err)
	}
	if err := blobMismatch(); err != nil {
		return 0, err
	}
	h := contentHash
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != diffID.String() {
		return 0, fmt.Errorf("digest mismatch: the layer's content is %s, the config says %s", images.Short(got), images.Short(diffID.String()))
	}
	if s.Own.Shift {
		// The layer's root directory reads as sandbox root's.
		if err := os.Chown(tmp, s.Own.Base, s.Own.Base); err != nil {
			return 0, err
		}
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, statErr := os.Stat(final); statErr == nil {
			return dirSize(final), nil // a concurrent import finished first
		}
		return 0, err
	}
	keep = true
	return counted.n.Load(), nil
}

// decompress opens a layer blob's content according to its media type.
func decompress(mt types.MediaType, r io.Reader) (io.ReadCloser, error) {
	switch mt {
	case types.DockerUncompressedLayer, types.OCIUncompressedLayer:
		return io.NopCloser(r), nil
	case types.OCILayerZStd:
		d, err := zstd.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("zstd: %v", err)
		}
		return d.IOReadCloser(), nil
	default:
		g, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("gzip: %v", err)
		}
		return g, nil
	}
}

// countingReader counts bytes as they pass; the progress line reads the
// count from another goroutine.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// showProgress rewrites one terminal line with the bytes counted so far,
// five times a second, until the returned function is called.
func (s store) showProgress(label string, c *countingReader) (stop func()) {
	if s.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			fmt.Fprintf(s.Progress, "\r%s  %.1f MiB\033[K", label, float64(c.n.Load())/(1<<20))
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

func dirSize(dir string) int64 {
	var total int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			total += info.Size()
		}
		return nil
	})
	return total
}
