package test

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"
)

// entry is one file of a test layer.
type entry struct {
	name, body, link string
	typ              byte
	mode             int64
	uid, gid         int
}

func layerOf(t *testing.T, entries []entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
			if typ == tar.TypeDir {
				mode = 0o755
			}
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Mode: mode, Linkname: e.link, Uid: e.uid, Gid: e.gid, ModTime: time.Unix(1700000000, 0)}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			io.WriteString(tw, e.body)
		}
	}
	tw.Close()
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// busyboxEntries is a minimal root filesystem.
func busyboxEntries(t *testing.T) []entry {
	data, err := os.ReadFile(filepath.Join(rootfsDir, "bin", "busybox"))
	if err != nil {
		t.Fatal(err)
	}
	es := []entry{{name: "bin/", typ: tar.TypeDir}, {name: "bin/busybox", body: string(data), mode: 0o755}, {name: "etc/", typ: tar.TypeDir},
		{name: "etc/passwd", body: "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n"},
		{name: "etc/group", body: "root:x:0:\napp:x:1000:\n"}}
	for _, a := range []string{"sh", "ls", "cat", "id", "echo", "stat", "touch"} {
		es = append(es, entry{name: "bin/" + a, typ: tar.TypeSymlink, link: "busybox"})
	}
	return es
}

func image(t *testing.T, cmd []string, env []string, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := img.ConfigFile()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Cmd, cfg.Config.Env = cmd, env
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func writeLayout(t *testing.T, dir, ref string, img v1.Image) {
	t.Helper()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		t.Fatal(err)
	}
	// Everything readable by the rootless user.
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil {
			os.Chmod(p, info.Mode()|0o755)
		}
		return nil
	})
}

// tarDir archives a directory (an OCI archive of a layout).
func tarDir(t *testing.T, dir, out string) {
	t.Helper()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	defer tw.Close()
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		rel, _ := filepath.Rel(dir, p)
		if err != nil || rel == "." || info.IsDir() {
			return err
		}
		hdr, _ := tar.FileInfoHeader(info, "")
		hdr.Name = rel
		tw.WriteHeader(hdr)
		data, _ := os.ReadFile(p)
		tw.Write(data)
		return nil
	})
	os.Chmod(out, 0o644)
}

// storeDir is the path of a fresh image store for mode m, in a directory of
// its user's own (as root, jail refuses a store whose parents another user
// could change).
func storeDir(t *testing.T, m mode) string {
	owner := rootless
	if !m.rootless {
		owner = nil
	}
	return filepath.Join(sharedTempDir(t, owner), "store")
}

// withStore runs jail in mode m against a fresh image store.
func withStore(t *testing.T, m mode) func(args ...string) result {
	return withStoreAt(t, m, storeDir(t, m))
}

// withStoreAt runs jail in mode m against the image store at store.
func withStoreAt(t *testing.T, m mode, store string) func(args ...string) result {
	return func(args ...string) result {
		t.Helper()
		return runCmd(t, storeCommand(m, store, args...))
	}
}

// storeCommand is command, for the image store at store.
func storeCommand(m mode, store string, args ...string) *exec.Cmd {
	cmd := command(m, args...)
	cmd.Env = append(cmd.Env, "JAIL_IMAGE_STORE="+store)
	return cmd
}

func TestImageImportAndRun(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		jailS := withStore(t, m)
		dir := sharedTempDir(t, rootless)
		base := layerOf(t, busyboxEntries(t))
		img := image(t, []string{"/bin/sh", "-c", "echo hello from $IMG"}, []string{"PATH=/bin", "IMG=the-image"}, base)

		writeLayout(t, filepath.Join(dir, "layout"), "localhost/bb:1", img)
		tarDir(t, filepath.Join(dir, "layout"), filepath.Join(dir, "oci.tar"))
		other := image(t, []string{"/bin/echo", "second"}, nil, base)
		tagA, _ := name.NewTag("example.org/a:1")
		tagB, _ := name.NewTag("example.org/b:2")
		if err := tarball.MultiWriteToFile(filepath.Join(dir, "docker.tar"), map[name.Tag]v1.Image{tagA: img, tagB: other}); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(dir, "docker.tar"), 0o644)

		for _, c := range []struct{ args []string }{
			{[]string{"image", "import", filepath.Join(dir, "layout")}},
			{[]string{"image", "import", filepath.Join(dir, "oci.tar"), "--name", "localhost/from-archive:7"}},
			{[]string{"image", "import", filepath.Join(dir, "docker.tar")}},
		} {
			if r := jailS(c.args...); r.code != 0 {
				t.Fatalf("%v: exit %d: %s", c.args, r.code, r.stderr)
			}
		}
		ls := jailS("image", "ls").stdout
		for _, want := range []string{"localhost/bb:1", "localhost/from-archive:7", "example.org/a:1", "example.org/b:2"} {
			if !strings.Contains(ls, want) {
				t.Errorf("image ls lacks %s:\n%s", want, ls)
			}
		}
		for _, ref := range []string{"localhost/bb:1", "localhost/from-archive:7", "example.org/a:1"} {
			if r := jailS("run", "--image", ref); r.stdout != "hello from the-image\n" {
				t.Errorf("run --image %s: exit %d, %q, %q", ref, r.code, r.stdout, r.stderr)
			}
		}
		if r := jailS("run", "--image", "example.org/b:2"); r.stdout != "second\n" {
			t.Errorf("docker-save second image: %q %q", r.stdout, r.stderr)
		}
		// The writable layer is private; --read-only has none.
		if r := jailS("run", "--image", "localhost/bb:1", "--", "sh", "-c", "echo x > /new && cat /new"); r.stdout != "x\n" {
			t.Errorf("writable layer: %q %q", r.stdout, r.stderr)
		}
		if r := jailS("run", "--image", "localhost/bb:1", "--read-only", "--", "sh", "-c", "echo x > /new"); r.code == 0 {
			t.Errorf("--read-only image root was writable")
		}
		// Importing again is a no-op that keeps working.
		if r := jailS("image", "import", filepath.Join(dir, "layout")); r.code != 0 {
			t.Errorf("second import: %s", r.stderr)
		}
		if r := jailS("image", "rm", "localhost/bb:1"); r.code != 0 {
			t.Errorf("rm: %s", r.stderr)
		}
		if r := jailS("run", "--pull", "never", "--image", "localhost/bb:1", "--", "true"); r.code != 125 || !strings.HasPrefix(r.stderr, "jail: image localhost/bb:1: not in the store") {
			t.Errorf("run of a removed image: %d %q", r.code, r.stderr)
		}
	})
}

func TestImageLayersWhiteoutsAndOwners(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		jailS := withStore(t, m)
		dir := sharedTempDir(t, rootless)
		l1 := layerOf(t, append(busyboxEntries(t),
			entry{name: "data/", typ: tar.TypeDir},
			entry{name: "data/gone", body: "deleted above\n"},
			entry{name: "data/kept", body: "kept\n"},
			entry{name: "opaque/", typ: tar.TypeDir},
			entry{name: "opaque/old", body: "hidden by the opaque dir\n"},
			entry{name: "owned", body: "app's\n", uid: 1000, gid: 1000},
			entry{name: "hard", typ: tar.TypeLink, link: "data/kept"},
			entry{name: "soft", typ: tar.TypeSymlink, link: "/data/kept"},
			entry{name: "suid", body: "#!/bin/sh\n", mode: 0o4755},
			entry{name: "dev-null", typ: tar.TypeChar},
		))
		l2 := layerOf(t, []entry{
			{name: "data/.wh.gone", body: ""},
			{name: "opaque/.wh..wh..opq", body: ""},
			{name: "opaque/new", body: "new\n"},
		})
		writeLayout(t, filepath.Join(dir, "layout"), "localhost/layers:1", image(t, nil, []string{"PATH=/bin"}, l1, l2))
		r := jailS("image", "import", filepath.Join(dir, "layout"))
		if !userXattrs(t, dir) {
			// tmpfs before Linux 6.6 (the VM's /tmp): a clear refusal.
			if r.code != 125 || !strings.Contains(r.stderr, "cannot record an opaque directory") {
				t.Errorf("import where opaque directories cannot be recorded: %d %q", r.code, r.stderr)
			}
			return
		}
		if r.code != 0 {
			t.Fatalf("import: %s", r.stderr)
		}
		script := `ls /data; echo --; ls /opaque; echo --; cat /hard /soft; stat -c '%u:%g' /owned; stat -c '%a' /suid; ls /dev-null 2>&1 | head -1`
		r = jailS("run", "--image", "localhost/layers:1", "--", "sh", "-c", script)
		parts := strings.Split(r.stdout, "--\n")
		if len(parts) != 3 || parts[0] != "kept\n" || parts[1] != "new\n" {
			t.Fatalf("whiteouts: %q (stderr %q)", r.stdout, r.stderr)
		}
		rest := strings.Split(strings.TrimSpace(parts[2]), "\n")
		owner, suid := "1000:1000", "4755"
		if m.rootless {
			owner, suid = "0:0", "755" // every file is the caller's; setuid dropped
		}
		if len(rest) < 5 || rest[0] != "kept" || rest[1] != "kept" || rest[2] != owner || rest[3] != suid || !strings.Contains(rest[4], "No such file") {
			t.Errorf("links, owners, modes, devices: %q; want kept, kept, %s, %s, no device", rest, owner, suid)
		}
	})
}

// TestHostileImages: nothing a layer says can write outside its layer, a
// lying digest is refused, and a refused import leaves the store as it was.
func TestHostileImages(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		jailS := withStore(t, m)
		dir := sharedTempDir(t, rootless)
		outside := filepath.Join(dir, "outside")
		os.MkdirAll(outside, 0o777)
		cases := map[string][]entry{
			"symlink then write through it": {
				{name: "esc", typ: tar.TypeSymlink, link: outside},
				{name: "esc/pwned", body: "x"},
			},
			"relative symlink climbing out": {
				{name: "up", typ: tar.TypeSymlink, link: "../../../../../../../../" + outside},
				{name: "up/pwned", body: "x"},
			},
			"hard link to a host file": {
				{name: "shadow", typ: tar.TypeLink, link: "/etc/shadow"},
			},
		}
		for what, entries := range cases {
			writeLayout(t, filepath.Join(dir, what), "localhost/hostile:1", image(t, nil, nil, layerOf(t, entries)))
			r := jailS("image", "import", filepath.Join(dir, what))
			if r.code != 125 || !strings.HasPrefix(r.stderr, "jail: image ") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%s: exit %d, stderr %q; want a one-line refusal", what, r.code, r.stderr)
			}
		}
		// Names that merely look like escapes land inside the layer.
		names := []entry{{name: "../../../../../opt/jail-escape-test", body: "x"}, {name: "/etc/absolute", body: "y"}, {name: "a/../../b", body: "z"}}
		writeLayout(t, filepath.Join(dir, "names"), "localhost/names:1", image(t, nil, nil, layerOf(t, append(busyboxEntries(t), names...))))
		if r := jailS("image", "import", filepath.Join(dir, "names")); r.code != 0 {
			t.Errorf("names: %s", r.stderr)
		}
		if _, err := os.Stat("/opt/jail-escape-test"); err == nil {
			os.Remove("/opt/jail-escape-test")
			t.Errorf("a layer wrote /opt/jail-escape-test on the host")
		}
		if r := jailS("run", "--image", "localhost/names:1", "--", "/bin/cat", "/opt/jail-escape-test", "/etc/absolute", "/b"); r.stdout != "xyz" {
			t.Errorf("cleaned names inside the image: %q %q", r.stdout, r.stderr)
		}
		if entries, _ := os.ReadDir(outside); len(entries) != 0 {
			t.Errorf("files appeared outside the store: %v", entries)
		}
	})
}

func TestImageBadInput(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		jailS := withStore(t, m)
		dir := sharedTempDir(t, rootless)
		os.WriteFile(filepath.Join(dir, "garbage.tar"), bytes.Repeat([]byte("not a tar "), 100), 0o644)
		// A layout whose layer blob was replaced: the digest lies.
		good := image(t, nil, nil, layerOf(t, busyboxEntries(t)))
		writeLayout(t, filepath.Join(dir, "lying"), "localhost/lying:1", good)
		layers, _ := good.Layers()
		d, _ := layers[0].Digest()
		blob := filepath.Join(dir, "lying", "blobs", "sha256", d.Hex)
		os.WriteFile(blob, []byte("something else entirely"), 0o644)
		// A layout with a blob missing.
		writeLayout(t, filepath.Join(dir, "missing"), "localhost/missing:1", good)
		os.Remove(filepath.Join(dir, "missing", "blobs", "sha256", d.Hex))
		// A layer of a media type no runtime unpacks.
		foreign, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layerOf(t, busyboxEntries(t)), MediaType: "application/vnd.example.unknown"})
		if err != nil {
			t.Fatal(err)
		}
		writeLayout(t, filepath.Join(dir, "foreign"), "localhost/foreign:1", foreign)
		// A truncated archive.
		writeLayout(t, filepath.Join(dir, "full"), "localhost/full:1", good)
		tarDir(t, filepath.Join(dir, "full"), filepath.Join(dir, "full.tar"))
		data, _ := os.ReadFile(filepath.Join(dir, "full.tar"))
		os.WriteFile(filepath.Join(dir, "truncated.tar"), data[:len(data)/2], 0o644)

		for _, c := range []struct{ args []string }{
			{[]string{"image", "import", filepath.Join(dir, "garbage.tar")}},
			{[]string{"image", "import", filepath.Join(dir, "lying")}},
			{[]string{"image", "import", filepath.Join(dir, "missing")}},
			{[]string{"image", "import", filepath.Join(dir, "foreign")}},
			{[]string{"image", "import", filepath.Join(dir, "truncated.tar")}},
			{[]string{"image", "import", filepath.Join(dir, "no-such")}},
			{[]string{"run", "--pull", "never", "--image", "localhost/never-imported:1", "--", "true"}},
			{[]string{"run", "--image", "Not A Reference", "--", "true"}},
		} {
			r := jailS(c.args...)
			if r.code != 125 || !strings.HasPrefix(r.stderr, "jail: image ") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%v: exit %d, stderr %q; want 125 and one `jail: image` line", c.args[len(c.args)-1], r.code, r.stderr)
			}
		}
		// Nothing half-made remains: no layer, no image.
		if ls := jailS("image", "ls").stdout; strings.TrimSpace(ls) != "" {
			t.Errorf("failed imports left images: %s", ls)
		}
	})
}

// TestImagePull pulls from a registry this test serves on loopback: an
// index of two platforms, of which jail must take this machine's.
func TestImagePull(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	base := layerOf(t, busyboxEntries(t))
	amd := image(t, []string{"/bin/echo", "this is amd64"}, nil, base)
	arm := image(t, []string{"/bin/echo", "this is arm64"}, nil, base)
	armCfg, _ := arm.ConfigFile()
	armCfg.Architecture = "arm64"
	arm, _ = mutate.ConfigFile(arm, armCfg)
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
	)
	ref, err := name.ParseReference(host + "/multi:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	forEachMode(t, func(t *testing.T, m mode) {
		jailS := withStore(t, m)
		if r := jailS("image", "pull", host+"/multi:1", "--quiet"); r.code != 0 {
			t.Fatalf("pull: %d %s", r.code, r.stderr)
		}
		if r := jailS("run", "--image", host+"/multi:1"); r.stdout != "this is amd64\n" {
			t.Errorf("pulled image ran %q (stderr %q)", r.stdout, r.stderr)
		}
		if r := jailS("image", "pull", host+"/absent:1"); r.code != 125 || !strings.HasPrefix(r.stderr, "jail: image ") {
			t.Errorf("pull of a missing image: %d %q", r.code, r.stderr)
		}
	})
}

// TestImagePullWithCredentials: a registry that wants a password gets the
// one in the caller's Docker config ($DOCKER_CONFIG/config.json), and
// without it the pull fails cleanly.
func TestImagePullWithCredentials(t *testing.T) {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, pass, ok := r.BasicAuth(); !ok || user != "agent" || pass != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="jail-test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ref, _ := name.ParseReference(host + "/private:1")
	img := image(t, []string{"/bin/echo", "private image"}, nil, layerOf(t, busyboxEntries(t)))
	if err := remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: "agent", Password: "s3cret"})); err != nil {
		t.Fatal(err)
	}
	forEachMode(t, func(t *testing.T, m mode) {
		store := storeDir(t, m)
		config := sharedTempDir(t, rootless)
		auth := base64.StdEncoding.EncodeToString([]byte("agent:s3cret"))
		os.WriteFile(filepath.Join(config, "config.json"), []byte(`{"auths": {"`+host+`": {"auth": "`+auth+`"}}}`), 0o644)
		run := func(withConfig bool, args ...string) result {
			cmd := command(m, args...)
			cmd.Env = append(cmd.Env, "JAIL_IMAGE_STORE="+store)
			if withConfig {
				cmd.Env = append(cmd.Env, "DOCKER_CONFIG="+config)
			}
			return runCmd(t, cmd)
		}
		if r := run(false, "image", "pull", host+"/private:1"); r.code != 125 || !strings.HasPrefix(r.stderr, "jail: image ") {
			t.Errorf("pull without credentials: %d %q", r.code, r.stderr)
		}
		if r := run(true, "image", "pull", host+"/private:1", "--quiet"); r.code != 0 {
			t.Fatalf("pull with credentials: %d %q", r.code, r.stderr)
		}
		if r := run(false, "run", "--image", host+"/private:1"); r.stdout != "private image\n" {
			t.Errorf("run: %q %q", r.stdout, r.stderr)
		}
		// Podman's $REGISTRY_AUTH_FILE works as well.
		cmd := command(m, "image", "pull", host+"/private:1", "--quiet")
		cmd.Env = append(cmd.Env, "JAIL_IMAGE_STORE="+store+"-2", "REGISTRY_AUTH_FILE="+filepath.Join(config, "config.json"))
		if r := runCmd(t, cmd); r.code != 0 {
			t.Errorf("pull with $REGISTRY_AUTH_FILE: %d %q", r.code, r.stderr)
		}
	})
}

// userXattrs reports whether dir's filesystem stores user.* xattrs.
func userXattrs(t *testing.T, dir string) bool {
	f, err := os.CreateTemp(dir, "xattr-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	return unix.Fsetxattr(int(f.Fd()), "user.jail-test", []byte("1"), 0) == nil
}
