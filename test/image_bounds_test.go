package test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/jail-sandbox/jail/internal/tartest"
)

// imageWithConfig is image with its config changed by edit.
func imageWithConfig(t *testing.T, edit func(*v1.Config), layers ...v1.Layer) v1.Image {
	t.Helper()
	img := image(t, nil, []string{"PATH=/bin"}, layers...)
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	edit(&cfg.Config)
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	return img
}

// layerFromBytes is a layer whose blob is data as given (a tar, or a gzip
// of one).
func layerFromBytes(t *testing.T, data []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// busyboxWithout is busyboxEntries without the named files.
func busyboxWithout(t *testing.T, names ...string) []entry {
	var out []entry
	for _, e := range busyboxEntries(t) {
		drop := false
		for _, n := range names {
			drop = drop || e.name == n
		}
		if !drop {
			out = append(out, e)
		}
	}
	return out
}

// layerPath finds the stored directory of img's top layer.
func layerPath(t *testing.T, store string, img v1.Image) string {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	ids := cfg.RootFS.DiffIDs
	return filepath.Join(store, "layers", ids[len(ids)-1].Hex)
}

// TestHostileImageFilesDoNotStallJail (SECURITY-LESSONS row 29): what jail
// reads out of an image before the sandbox starts (the /etc/passwd and
// /etc/group that turn the image's User into ids) cannot hang it, swell
// it, or reach the host's files. A FIFO at /etc/passwd once held `jail run
// --timeout 2s` for ten minutes; a 1 GiB sparse one gave jail a 2 GB
// resident set.
func TestHostileImageFilesDoNotStallJail(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		store := storeDir(t, m)
		jailS := withStoreAt(t, m, store)
		dir := sharedTempDir(t, rootless)
		// A host file an image's link might aim at: were it read, the
		// user would get uid 4242.
		hostPasswd := filepath.Join(dir, "host-passwd")
		os.WriteFile(hostPasswd, []byte("someone:x:4242:4242::/:/bin/sh\n"), 0o644)
		someone := func(c *v1.Config) { c.User = "someone" }
		images := map[string]v1.Image{
			"fifo": imageWithConfig(t, someone, layerOf(t, append(busyboxWithout(t, "etc/passwd"),
				entry{name: "etc/passwd", typ: tar.TypeFifo}))),
			"big": imageWithConfig(t, someone, layerOf(t, append(busyboxWithout(t, "etc/passwd"),
				entry{name: "etc/passwd", body: "someone:x:1234:1234::/:/bin/sh\n"}))),
			"link-to-host": imageWithConfig(t, someone, layerOf(t, append(busyboxWithout(t, "etc/passwd"),
				entry{name: "etc/passwd", typ: tar.TypeSymlink, link: hostPasswd}))),
			"link-climbing-out": imageWithConfig(t, someone, layerOf(t, append(busyboxWithout(t, "etc/passwd"),
				entry{name: "etc/passwd", typ: tar.TypeSymlink, link: "../../../../../../../../.." + hostPasswd}))),
			"link-to-shadow": imageWithConfig(t, func(c *v1.Config) { c.User = "root" }, layerOf(t, append(busyboxWithout(t, "etc/passwd"),
				entry{name: "etc/passwd", typ: tar.TypeSymlink, link: "/etc/shadow"}))),
			// A link inside the image resolves as it would in the sandbox.
			"link-inside": imageWithConfig(t, someone, layerOf(t, append(busyboxWithout(t, "etc/passwd"),
				entry{name: "etc/passwd.real", body: "someone:x:1234:1234::/:/bin/sh\n"},
				entry{name: "etc/passwd", typ: tar.TypeSymlink, link: "/etc/passwd.real"}))),
		}
		for what, img := range images {
			writeLayout(t, filepath.Join(dir, what), "localhost/"+what+":1", img)
			if r := jailS("image", "import", filepath.Join(dir, what), "--quiet"); r.code != 0 {
				t.Fatalf("import %s: %d %q", what, r.code, r.stderr)
			}
		}
		// 1 GiB of /etc/passwd, sparse: after the import, as a layer
		// could hold it.
		if err := os.Truncate(filepath.Join(layerPath(t, store, images["big"]), "etc", "passwd"), 1<<30); err != nil {
			t.Fatal(err)
		}

		for _, c := range []struct{ what, want string }{
			{"fifo", "not a regular file"},
			{"big", "more than the 4194304 jail reads"},
			{"link-to-host", "the image has no /etc/passwd"},
			{"link-climbing-out", "/etc/passwd"},
			{"link-to-shadow", "the image has no /etc/passwd"},
		} {
			t.Run(c.what, func(t *testing.T) {
				cmd := storeCommand(m, store, "run", "--timeout", "3s", "--image", "localhost/"+c.what+":1", "--", "id", "-u")
				r, rss := runMeasured(t, cmd) // a hang fails here, not a timing
				if r.code != 125 || !strings.HasPrefix(r.stderr, "jail: image localhost/"+c.what+":1: ") || !strings.Contains(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 {
					t.Errorf("exit %d, stdout %q, stderr %q; want 125 and one `jail:` line saying %q", r.code, r.stdout, r.stderr, c.want)
				}
				if rss > 128<<20 {
					t.Errorf("jail's resident set reached %d MiB: it read what it refused", rss>>20)
				}
			})
		}
		if r := jailS("run", "--image", "localhost/link-inside:1", "--", "id", "-u"); r.code != 0 || r.stdout != "1234\n" {
			t.Errorf("a link inside the image: exit %d, %q %q; want uid 1234", r.code, r.stdout, r.stderr)
		}

		// Through the API: the run is refused at once (it once held the
		// server's lock while blocked), and the server answers meanwhile.
		t.Run("serve", func(t *testing.T) {
			socket := filepath.Join(sharedTempDir(t, map[bool]*account{true: rootless}[m.rootless]), "jail.sock")
			serve := storeCommand(m, store, "serve", "--socket", socket, "--pool", "1")
			if err := serve.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				serve.Process.Signal(syscall.SIGTERM)
				done := make(chan error, 1)
				go func() { done <- serve.Wait() }()
				select {
				case <-done:
				case <-time.After(60 * time.Second): // a hang, not a timing
					serve.Process.Kill()
					<-done
					t.Errorf("jail serve did not stop on SIGTERM")
				}
			}()
			curl := func(method, path, body string) (int, string) {
				t.Helper()
				// -m: a hang fails the test instead of holding it.
				args := []string{"-s", "-m", "60", "--unix-socket", socket, "-X", method, "-w", "\n%{http_code}"}
				if body != "" {
					args = append(args, "--data-binary", body)
				}
				out, _ := exec.Command("curl", append(args, "http://jail"+path)...).Output()
				text := strings.TrimSpace(string(out))
				i := strings.LastIndex(text, "\n")
				code, _ := strconv.Atoi(text[i+1:])
				return code, text[:max(i, 0)]
			}
			for i := 0; ; i++ {
				if code, _ := curl("GET", "/v1/health", ""); code == 200 {
					break
				}
				if i == 1500 {
					t.Fatal("jail serve does not answer")
				}
				time.Sleep(20 * time.Millisecond)
			}
			for _, what := range []string{"fifo", "big"} {
				code, body := curl("POST", "/v1/run", `{"image":"localhost/`+what+`:1","cmd":"id","timeout_s":3}`)
				if code != 400 || !strings.Contains(body, "/etc/passwd") {
					t.Errorf("POST /v1/run of the %s image: %d %s; want 400 naming /etc/passwd", what, code, body)
				}
				if code, body := curl("GET", "/v1/health", ""); code != 200 {
					t.Errorf("health after the %s image: %d %s", what, code, body)
				}
			}
		})
	})
}

// runMeasured runs cmd and returns, beside its result, the peak resident
// set of it and its descendants, in bytes.
func runMeasured(t *testing.T, cmd *exec.Cmd) (result, int64) {
	t.Helper()
	// Measured by jailprobe, a small process: what the test binary
	// measured of its own child included the test binary's own
	// high-water mark, which a child inherits at its exec.
	cmd.Args = append([]string{"jailprobe", "maxrss"}, cmd.Args...)
	cmd.Path = filepath.Join(probeDir, "jailprobe")
	r := runCmd(t, cmd)
	var rss int64
	if i := strings.LastIndex(r.stderr, "jailprobe: maxrss "); i >= 0 {
		kib, _ := strconv.ParseInt(strings.TrimSpace(r.stderr[i+len("jailprobe: maxrss "):]), 10, 64)
		rss = kib << 10
		r.stderr = r.stderr[:i]
	}
	return r, rss
}

// TestImageWorkingDirIsCheckedAsWorkdir: an image's WorkingDir goes
// through the check --workdir does (a working directory in /proc could be
// outside the root).
func TestImageWorkingDirIsCheckedAsWorkdir(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		jailS := withStore(t, m)
		dir := sharedTempDir(t, rootless)
		for i, wd := range []string{"/proc/1/root/", "/proc/self/fd/3", "/sys", "relative/dir"} {
			ref := fmt.Sprintf("localhost/wd:%d", i)
			img := imageWithConfig(t, func(c *v1.Config) { c.WorkingDir = wd }, layerOf(t, busyboxEntries(t)))
			writeLayout(t, filepath.Join(dir, strconv.Itoa(i)), ref, img)
			if r := jailS("image", "import", filepath.Join(dir, strconv.Itoa(i)), "--quiet"); r.code != 0 {
				t.Fatalf("import: %q", r.stderr)
			}
			r := jailS("run", "--image", ref, "--", "true")
			if r.code != 125 || !strings.HasPrefix(r.stderr, "jail: image "+ref+": the image's working directory: ") {
				t.Errorf("WorkingDir %q: exit %d, %q; want a refusal", wd, r.code, r.stderr)
			}
		}
		img := imageWithConfig(t, func(c *v1.Config) { c.WorkingDir = "/etc/" }, layerOf(t, busyboxEntries(t)))
		writeLayout(t, filepath.Join(dir, "good"), "localhost/wd:good", img)
		jailS("image", "import", filepath.Join(dir, "good"), "--quiet")
		if r := jailS("run", "--image", "localhost/wd:good", "--", "sh", "-c", "echo $PWD"); r.stdout != "/etc\n" {
			t.Errorf("a good WorkingDir: %d %q %q", r.code, r.stdout, r.stderr)
		}
	})
}

// gzipOf compresses data.
func gzipOf(t *testing.T, data []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(data)
	zw.Close()
	return buf.Bytes()
}

// zerosTar is a tar of one file of n zero bytes, then trailing zeros of
// trailing bytes after the archive's end.
func zerosTar(t *testing.T, n, trailing int64) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: n})
	io.CopyN(tw, zeroReader{}, n)
	tw.Close()
	io.CopyN(&buf, zeroReader{}, trailing)
	return buf.Bytes()
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// smallFiles is a layer of n files of size bytes each under dir.
func smallFiles(dir string, n, size int) []entry {
	body := strings.Repeat("x", size)
	es := []entry{{name: dir + "/", typ: tar.TypeDir}}
	for i := 0; i < n; i++ {
		es = append(es, entry{name: fmt.Sprintf("%s/f%05d", dir, i), body: body})
	}
	return es
}

// storeListing describes every file of a store (dirState) and images.json's
// content, to compare before and after.
func storeListing(t *testing.T, store string) string {
	t.Helper()
	index, _ := os.ReadFile(filepath.Join(store, "images.json"))
	return dirState(t, store) + "\n" + string(index)
}

// TestImageImportSizeBounds (SECURITY-LESSONS row 30): an import writes no
// more than its bounds, however small the archive: a PAX sparse entry
// counts at the size it expands to, a gzip bomb after decompression, many
// small files with what each entry takes; past a bound the import fails
// with one `jail: image import … exceeds …` line and leaves the store as
// it was (no layer, no temporary directory, no index entry). Pulls too.
func TestImageImportSizeBounds(t *testing.T) {
	skipEmulatedKernelAgnostic(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	bombImage := image(t, nil, nil, layerFromBytes(t, gzipOf(t, zerosTar(t, 96<<20, 0))))
	ref, err := name.ParseReference(host + "/bomb:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, bombImage); err != nil {
		t.Fatal(err)
	}

	forEachMode(t, func(t *testing.T, m mode) {
		store := storeDir(t, m)
		jailS := withStoreAt(t, m, store)
		dir := sharedTempDir(t, rootless)
		writeLayout(t, filepath.Join(dir, "good"), "localhost/good:1", image(t, nil, nil, layerOf(t, busyboxEntries(t))))
		if r := jailS("image", "import", filepath.Join(dir, "good"), "--quiet"); r.code != 0 {
			t.Fatalf("import: %q", r.stderr)
		}

		cases := []struct {
			what  string
			img   v1.Image
			flags []string
			bound string // which bound the refusal names
			asTar bool   // imported as an OCI archive rather than a layout
		}{
			// The archive: a few KiB, one sparse entry of 2 GiB.
			{what: "sparse entry", img: image(t, nil, nil, layerFromBytes(t, tartest.Sparse("big", 2<<30))), flags: []string{"--max-layer-size", "1G"}, bound: "per layer", asTar: true},
			// 96 MiB of zeros in a file, in a ~100 KiB gzip blob.
			{what: "gzip bomb", img: bombImage, flags: []string{"--max-layer-size", "64M"}, bound: "per layer"},
			// The same zeros after the tar's end: nothing written, but
			// the decompressed stream still counts.
			{what: "gzip bomb after the tar", img: image(t, nil, nil, layerFromBytes(t, gzipOf(t, zerosTar(t, 0, 96<<20)))), flags: []string{"--max-layer-size", "64M"}, bound: "per layer"},
			// Two layers of 300 small files (1.2 MiB each, counting
			// 4 KiB an entry): each fits, together they pass the
			// image's bound.
			{what: "many small files", img: image(t, nil, nil, layerOf(t, smallFiles("a", 300, 100)), layerOf(t, smallFiles("b", 300, 100))), flags: []string{"--max-size", "2M"}, bound: "per image"},
		}
		for _, c := range cases {
			t.Run(strings.ReplaceAll(c.what, " ", "-"), func(t *testing.T) {
				before := storeListing(t, store)
				path := filepath.Join(dir, strings.ReplaceAll(c.what, " ", "-"))
				writeLayout(t, path, "localhost/bomb:1", c.img)
				if c.asTar {
					tarDir(t, path, path+".tar")
					path += ".tar"
				}
				r := jailS(append([]string{"image", "import", path}, c.flags...)...)
				if r.code != 125 || !strings.HasPrefix(r.stderr, "jail: image import ") || !strings.Contains(r.stderr, "exceeds the bound of") ||
					!strings.Contains(r.stderr, c.bound) || strings.Count(r.stderr, "\n") != 1 {
					t.Errorf("exit %d, stderr %q; want 125 and one `jail: image import … exceeds the bound of … %s` line", r.code, r.stderr, c.bound)
				}
				if after := storeListing(t, store); after != before {
					t.Errorf("a refused import changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
				}
			})
		}
		t.Run("pull", func(t *testing.T) {
			before := storeListing(t, store)
			r := jailS("image", "pull", host+"/bomb:1", "--max-layer-size", "64M", "--quiet")
			if r.code != 125 || !strings.HasPrefix(r.stderr, "jail: image pull ") || !strings.Contains(r.stderr, "exceeds the bound of 64 MiB per layer") {
				t.Errorf("pull of a bomb: exit %d, stderr %q", r.code, r.stderr)
			}
			if after := storeListing(t, store); after != before {
				t.Errorf("a refused pull changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
		// Within the bounds the same images import.
		if r := jailS("image", "pull", host+"/bomb:1", "--quiet"); r.code != 0 {
			t.Errorf("pull within the default bounds: %d %q", r.code, r.stderr)
		}
		for _, bad := range []string{"0", "-1", "lots", "1X"} {
			if r := jailS("image", "import", filepath.Join(dir, "good"), "--max-size", bad); r.code != 125 || !strings.Contains(r.stderr, "is not a size") {
				t.Errorf("--max-size %s: %d %q", bad, r.code, r.stderr)
			}
		}
	})
}

// dirState describes a directory and what it holds (names, types, modes,
// owners, sizes), to show that it was left alone.
func dirState(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			lines = append(lines, p+": "+err.Error())
			return nil
		}
		if info, err := d.Info(); err == nil {
			st := info.Sys().(*syscall.Stat_t)
			lines = append(lines, fmt.Sprintf("%s %v %d:%d %d", strings.TrimPrefix(p, dir), info.Mode(), st.Uid, st.Gid, info.Size()))
		}
		return nil
	})
	return strings.Join(lines, "\n")
}

// TestImageStoreRefusesLinksAndOthersDirectories (SECURITY-LESSONS row
// 34): a store reached through a symbolic link (itself, or its layers/,
// tmp/, lock or images.json), one another user owns or could change, an
// existing directory that is not a store, or an images.json naming a layer
// "../../x" is refused with one `jail:` line, and the directory it aimed
// at keeps its files, owner and mode. (With JAIL_IMAGE_STORE kept through
// sudo, `ln -s /some/dir $STORE/layers; jail image prune` once deleted the
// directory's files and re-owned it root:2000000000 0750.)
func TestImageStoreRefusesLinksAndOthersDirectories(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		dir := sharedTempDir(t, rootless)
		layout := filepath.Join(dir, "layout")
		writeLayout(t, layout, "localhost/good:1", image(t, []string{"/bin/true"}, nil, layerOf(t, busyboxEntries(t))))
		asUser := func(p string) {
			if os.Geteuid() == 0 {
				os.Lchown(p, rootless.uid, rootless.gid)
			}
		}
		// victim is a directory with files, the rootless user's (who
		// could lose them, as could anyone when root follows the link).
		victim := func() string {
			v := filepath.Join(sharedTempDir(t, rootless), "victim")
			os.Mkdir(v, 0o755)
			os.WriteFile(filepath.Join(v, "keep"), []byte("mine\n"), 0o644)
			os.Mkdir(filepath.Join(v, "sub"), 0o700)
			os.WriteFile(filepath.Join(v, "sub", "keep"), []byte("mine too\n"), 0o600)
			for _, p := range []string{v, filepath.Join(v, "keep"), filepath.Join(v, "sub"), filepath.Join(v, "sub", "keep")} {
				asUser(p)
			}
			return v
		}
		// goodStore is a store holding localhost/good:1.
		goodStore := func(t *testing.T) string {
			store := storeDir(t, m)
			cmd := storeCommand(m, store, "image", "import", layout, "--quiet")
			if r := runCmd(t, cmd); r.code != 0 {
				t.Fatalf("import: %q", r.stderr)
			}
			return store
		}
		replaceWithLink := func(t *testing.T, store, name, target string) {
			p := filepath.Join(store, name)
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			asUser(p)
		}
		all := []string{"ls", "prune", "import", "run", "rm"}
		cases := []struct {
			what     string
			rootOnly bool
			userOnly bool
			// setup returns the store's path and the victim that must
			// stay as it is.
			setup func(t *testing.T) (store, victim string)
			// refused are the commands that must fail (see all).
			refused []string
		}{
			{what: "the store is a link", refused: all, setup: func(t *testing.T) (string, string) {
				v := victim()
				store := filepath.Join(filepath.Dir(storeDir(t, m)), "linked-store")
				os.Symlink(v, store)
				asUser(store)
				return store, v
			}},
			{what: "layers is a link", refused: all, setup: func(t *testing.T) (string, string) {
				store, v := goodStore(t), victim()
				replaceWithLink(t, store, "layers", v)
				return store, v
			}},
			{what: "layers is a relative link", refused: all, setup: func(t *testing.T) (string, string) {
				store, v := goodStore(t), victim()
				os.Rename(v, filepath.Join(store, "elsewhere"))
				replaceWithLink(t, store, "layers", "elsewhere")
				return store, filepath.Join(store, "elsewhere")
			}},
			{what: "tmp is a link", refused: []string{"prune", "import", "rm"}, setup: func(t *testing.T) (string, string) {
				store, v := goodStore(t), victim()
				replaceWithLink(t, store, "tmp", v)
				return store, v
			}},
			{what: "lock is a link", refused: []string{"prune", "import", "rm"}, setup: func(t *testing.T) (string, string) {
				store, v := goodStore(t), victim()
				replaceWithLink(t, store, "lock", filepath.Join(v, "keep"))
				return store, v
			}},
			{what: "images.json is a link", refused: all, setup: func(t *testing.T) (string, string) {
				store, v := goodStore(t), victim()
				data, _ := os.ReadFile(filepath.Join(store, "images.json"))
				os.WriteFile(filepath.Join(v, "keep"), data, 0o644)
				replaceWithLink(t, store, "images.json", filepath.Join(v, "keep"))
				return store, v
			}},
			{what: "a layer id climbs out", refused: all, setup: func(t *testing.T) (string, string) {
				store, v := goodStore(t), victim()
				os.Rename(v, filepath.Join(filepath.Dir(store), "victim"))
				index := filepath.Join(store, "images.json")
				data, _ := os.ReadFile(index)
				tampered := regexpLayer.ReplaceAll(data, []byte(`"sha256:../../victim"`))
				if bytes.Equal(tampered, data) {
					t.Fatalf("no layer in %s", data)
				}
				os.WriteFile(index, tampered, 0o600)
				return store, filepath.Join(filepath.Dir(store), "victim")
			}},
			{what: "an existing directory that is not a store", rootOnly: true, refused: []string{"prune", "import", "rm"}, setup: func(t *testing.T) (string, string) {
				d := filepath.Join(sharedTempDir(t, nil), "not-a-store")
				os.Mkdir(d, 0o755)
				os.WriteFile(filepath.Join(d, "keep"), []byte("mine\n"), 0o644)
				return d, d
			}},
			{what: "the store is another user's", rootOnly: true, refused: all, setup: func(t *testing.T) (string, string) {
				v := filepath.Join(sharedTempDir(t, nil), "others")
				os.Rename(victim(), v)
				return v, v
			}},
			{what: "the store is root's", userOnly: true, refused: all, setup: func(t *testing.T) (string, string) {
				store := filepath.Join(sharedTempDir(t, nil), "store")
				cmd := storeCommand(asRoot, store, "image", "import", layout, "--quiet")
				if r := runCmd(t, cmd); r.code != 0 {
					t.Fatalf("import as root: %q", r.stderr)
				}
				os.Chmod(store, 0o755)
				os.Chmod(filepath.Join(store, "layers"), 0o755)
				return store, store
			}},
			{what: "a parent others can write", rootOnly: true, refused: all, setup: func(t *testing.T) (string, string) {
				store := goodStore(t)
				os.Chmod(filepath.Dir(store), 0o777)
				return store, store
			}},
			{what: "the store is group-writable", refused: all, setup: func(t *testing.T) (string, string) {
				store := goodStore(t)
				os.Chmod(store, 0o770)
				return store, store
			}},
		}
		for _, c := range cases {
			if (c.rootOnly && m.rootless) || (c.userOnly && (!m.rootless || os.Geteuid() != 0)) {
				continue
			}
			t.Run(strings.ReplaceAll(c.what, " ", "-"), func(t *testing.T) {
				store, v := c.setup(t)
				before := dirState(t, v)
				for _, what := range c.refused {
					args := map[string][]string{
						"ls":     {"image", "ls"},
						"prune":  {"image", "prune"},
						"import": {"image", "import", layout, "--quiet"},
						"run":    {"run", "--image", "localhost/good:1", "--", "/bin/ls", "/"},
						"rm":     {"image", "rm", "localhost/good:1"},
					}[what]
					cmd := storeCommand(m, store, args...)
					r := runCmd(t, cmd)
					if r.code != 125 || !strings.HasPrefix(r.stderr, "jail: ") || strings.Count(r.stderr, "\n") != 1 {
						t.Errorf("%s: exit %d, stdout %q, stderr %q; want 125 and one `jail:` line", what, r.code, r.stdout, r.stderr)
					}
				}
				if after := dirState(t, v); after != before {
					t.Errorf("%s changed:\nbefore:\n%s\nafter:\n%s", v, before, after)
				}
			})
		}
	})
}

var regexpLayer = regexp.MustCompile(`"sha256:[0-9a-f]{64}"`)
