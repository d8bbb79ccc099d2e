package fetch

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/jail-sandbox/jail/images"
	"io"
	"io/fs"
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
	if err := s.record(out); err != nil {
		return nil, err
	}
	return out, nil
}

// open finds the images in path.
func (s store) open(path string) ([]source, func(), error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if st.IsDir() {
		if err := checkLayout(path); err != nil {
			return nil, nil, err
		}
		srcs, err := fromLayout(path)
		return srcs, nil, err
	}
	names, err := tarNames(path)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case names["oci-layout"]:
		dir, err := s.TempDir("archive-")
		if err != nil {
			return nil, nil, err
		}
		if err := extractLayoutArchive(path, dir.Root); err != nil {
			return nil, dir.Remove, err
		}
		srcs, err := fromLayout(dir.Path())
		return srcs, dir.Remove, err
	case names["manifest.json"]:
		srcs, err := fromDockerSave(path)
		return srcs, nil, err
	}
	return nil, nil, fmt.Errorf("%s is not an OCI layout, OCI archive or docker-save tarball", path)
}

// tarNames lists the top-level names in a tar archive, reading it through
// so that a truncated or corrupt archive is refused here. A sparse entry,
// which no image archive writer makes, is refused: it would expand to far
// more than the archive holds. Without one, what an import extracts from
// the archive is at most the archive's own size.
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
		if isSparse(hdr) {
			return nil, fmt.Errorf("%s: %q is a sparse entry, which image archives do not hold", path, hdr.Name)
		}
		names[strings.TrimPrefix(hdr.Name, "./")] = true
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: an empty archive", path)
	}
	return names, nil
}

// extractLayoutArchive unpacks an OCI archive's oci-layout, index.json and
// blobs, and nothing else, into root.
func extractLayoutArchive(path string, root *os.Root) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
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
		if hdr.Typeflag != tar.TypeReg && hdr.Typeflag != tar.TypeRegA || isSparse(hdr) {
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

// isSparse reports a GNU sparse entry, old style or PAX.
func isSparse(hdr *tar.Header) bool {
	if hdr.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// checkLayout refuses a layout directory that holds anything but
// directories and regular files: go-containerregistry reads it by path, and
// a symbolic link would have it read a file the image does not hold, a
// FIFO stall the import.
func checkLayout(dir string) error {
	// "dir/." follows dir itself when it is a link to the layout.
	return filepath.WalkDir(dir+string(filepath.Separator)+".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, filepath.Clean(p))
		if rel == "." || (d.IsDir() && (rel == "blobs" || strings.HasPrefix(rel, "blobs/"))) {
			return nil
		}
		if rel != "oci-layout" && rel != "index.json" && !strings.HasPrefix(rel, "blobs/") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil // not read
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: %s is not a regular file (an image layout holds no links, FIFOs or devices)", dir, rel)
		}
		return nil
	})
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
	var imageCost int64
	for i, l := range layers {
		diffID := cfg.RootFS.DiffIDs[i]
		start := time.Now()
		label := fmt.Sprintf("layer %d/%d %s", i+1, len(layers), images.Short(diffID.String()))
		size, cost, err := s.storeLayer(l, diffID, label, imageCost)
		if err != nil {
			return images.Image{}, fmt.Errorf("layer %s: %w", images.Short(diffID.String()), err)
		}
		if s.Progress != nil {
			fmt.Fprintf(s.Progress, "\r%s  %.1f MiB  done in %s\033[K\n", label, float64(size)/(1<<20), time.Since(start).Round(time.Millisecond))
		}
		rec.Layers = append(rec.Layers, diffID.String())
		rec.Size += size
		imageCost += cost
	}
	return rec, nil
}

var supportedLayers = map[types.MediaType]bool{
	types.DockerLayer: true, types.DockerUncompressedLayer: true,
	types.OCILayer: true, types.OCIUncompressedLayer: true, types.OCILayerZStd: true,
}

// storeLayer verifies a layer against both its digests and unpacks it into
// tmp/, pending until the import commits, unless the store or this import
// already has it. imageSoFar is what the image's layers below it cost (see
// Limits); it returns the layer's size (its uncompressed tar) and cost.
func (s store) storeLayer(l v1.Layer, diffID v1.Hash, label string, imageSoFar int64) (size, cost int64, err error) {
	if diffID.Algorithm != "sha256" || !images.ValidDiffID(diffID.String()) {
		return 0, 0, fmt.Errorf("unsupported diff ID %s", diffID)
	}
	m := &meter{lim: s.lim, max: min(s.lim.Layer, s.lim.Image-imageSoFar)}
	if p, ok := s.pending[diffID.String()]; ok {
		return p.size, p.cost, m.check(p.cost)
	}
	// A stored layer is used as it is, with its owners record, unless
	// (Own.SubIDs) no image names it: then nothing records its owners,
	// and this import unpacks its own copy, which replaces it (record).
	if s.Own.SubIDs == nil || s.named[diffID.String()] {
		if size, entries, ok := s.LayerSize(diffID.String()); ok {
			cost := size + entries*entryCost
			return size, cost, m.check(cost)
		}
	}
	mt, err := l.MediaType()
	if err != nil {
		return 0, 0, err
	}
	if !supportedLayers[mt] {
		return 0, 0, fmt.Errorf("unsupported media type %s", mt)
	}
	want, err := l.Digest()
	if err != nil {
		return 0, 0, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return 0, 0, fmt.Errorf("missing blob %s: %v", images.Short(want.String()), err)
	}
	defer rc.Close()

	tmp, err := s.TempDir("layer-")
	if err != nil {
		return 0, 0, err
	}
	kept := false
	defer func() {
		if !kept {
			tmp.Remove()
		}
	}()
	if err := tmp.Root.Chmod(".", 0o755); err != nil {
		return 0, 0, err
	}
	// One pass: the blob is hashed as it is read, decompressed, and the
	// content hashed as it is unpacked. Both digests are checked before
	// the layer gets its final name, so nothing unverified is ever used.
	// The blob, the decompressed stream and what is written are each held
	// to the bound as they pass (compression may add a little).
	blobHash, contentHash := sha256.New(), sha256.New()
	fetched := &countingReader{r: io.TeeReader(m.blob(rc), blobHash)}
	// A blob that is not what the manifest says is reported as such, even
	// when it also fails to decompress or unpack.
	blobMismatch := func() error {
		_, _ = io.Copy(io.Discard, fetched)
		if got := "sha256:" + hex.EncodeToString(blobHash.Sum(nil)); want.Algorithm == "sha256" && got != want.String() {
			return fmt.Errorf("digest mismatch: the blob is %s, the manifest says %s", images.Short(got), images.Short(want.String()))
		}
		return nil
	}
	fail := func(err error) (int64, int64, error) {
		if errors.Is(err, errTooBig) {
			return 0, 0, m.err()
		}
		if mismatch := blobMismatch(); mismatch != nil {
			return 0, 0, mismatch
		}
		return 0, 0, err
	}
	content, err := decompress(mt, fetched)
	if err != nil {
		return fail(err)
	}
	defer content.Close()
	counted := &countingReader{r: io.TeeReader(m.content(content), contentHash)}
	stop := s.showProgress(label, counted)
	subOwned, err := unpackLayer(counted, tmp.Root, s.Own, m)
	stop()
	if err != nil {
		return fail(err)
	}
	// Whatever the tar did not read still counts towards both digests.
	if _, err := io.Copy(io.Discard, counted); err != nil {
		return fail(fmt.Errorf("read layer: %w", err))
	}
	if err := blobMismatch(); err != nil {
		return fail(err)
	}
	h := contentHash
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != diffID.String() {
		return 0, 0, fmt.Errorf("digest mismatch: the layer's content is %s, the config says %s", images.Short(got), images.Short(diffID.String()))
	}
	if s.Own.Shift {
		// The layer's root directory reads as sandbox root's.
		if err := tmp.Root.Chown(".", s.Own.Base, s.Own.Base); err != nil {
			return 0, 0, err
		}
	}
	p := &pendingLayer{dir: tmp, size: m.stream, cost: m.cost()}
	if subOwned {
		owners := *s.Own.SubIDs
		p.owners = &owners
	}
	s.pending[diffID.String()] = p
	kept = true
	return m.stream, m.cost(), nil
}

// entryCost is what an entry costs besides its content (see Limits).
const entryCost = 4 << 10

// errTooBig stops an unpack that passed its bound; meter.err says which.
var errTooBig = errors.New("past the size bound")

// meter counts what one layer costs while it is unpacked and stops it at
// max, the smaller of the layer bound and what the image bound leaves.
type meter struct {
	lim Limits
	max int64
	// stream is the uncompressed tar read, written what unpacking wrote
	// (see Limits); over is the layer's count that passed max: past the
	// layer bound, the layer is too big, otherwise the image.
	stream, written, over int64
}

// cost is what the layer took.
func (m *meter) cost() int64 { return max(m.stream, m.written) }

// check charges a stored layer of size bytes.
func (m *meter) check(size int64) error {
	if size > m.max {
		m.over = size
		return m.err()
	}
	return nil
}

// write charges n bytes about to be written.
func (m *meter) write(n int64) error {
	if n < 0 || n > m.max-m.written {
		m.over = m.written + n
		return errTooBig
	}
	m.written += n
	return nil
}

// err says which bound a layer passed.
func (m *meter) err() error {
	if m.over > m.lim.Layer {
		return fmt.Errorf("exceeds the bound of %s per layer (--max-layer-size raises it)", human(m.lim.Layer))
	}
	return fmt.Errorf("the image exceeds the bound of %s per image (--max-size raises it)", human(m.lim.Image))
}

// content holds the layer's uncompressed stream, r, to the bound, counting
// it as m.stream.
func (m *meter) content(r io.Reader) io.Reader {
	return &meteredReader{r: r, m: m, limit: m.max, stream: true}
}

// blob holds a compressed blob to the bound, with room for what
// compression adds to incompressible data.
func (m *meter) blob(r io.Reader) io.Reader {
	return &meteredReader{r: r, m: m, limit: m.max + m.max/8 + 1<<20}
}

// meteredReader fails with errTooBig once more than limit bytes passed.
type meteredReader struct {
	r      io.Reader
	m      *meter
	limit  int64
	n      int64
	stream bool
}

func (r *meteredReader) Read(p []byte) (int, error) {
	if r.n > r.limit {
		return 0, errTooBig
	}
	p = p[:min(int64(len(p)), r.limit-r.n+1)]
	n, err := r.r.Read(p)
	r.n += int64(n)
	if r.stream {
		r.m.stream = r.n
	}
	if r.n > r.limit {
		r.m.over = r.n
		return n, errTooBig
	}
	return n, err
}

// human writes a size in binary units.
func human(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
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
