package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// pythonImageCache keeps the Debian-based Python image between runs:
// building it takes debootstrap (tens of seconds, and the Debian mirror).
const pythonImageCache = "/var/cache/jail-test/python-bookworm-oci-v2.tar"

// pythonImage returns an OCI archive of a Debian bookworm minbase system
// with python3-minimal, building it the first time.
func pythonImage(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(pythonImageCache); err == nil {
		return pythonImageCache
	}
	if os.Geteuid() != 0 {
		t.Skip("building the Python image needs root (debootstrap)")
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Fatalf("debootstrap is needed to build the Python image: %v", err)
	}
	work, err := os.MkdirTemp(filepath.Dir(pythonImageCache), "build-")
	if err != nil {
		if err := os.MkdirAll(filepath.Dir(pythonImageCache), 0o755); err != nil {
			t.Fatal(err)
		}
		if work, err = os.MkdirTemp(filepath.Dir(pythonImageCache), "build-"); err != nil {
			t.Fatal(err)
		}
	}
	defer os.RemoveAll(work)
	root := filepath.Join(work, "root")
	// The mirror is the machine's own (its apt sources), or else
	// debootstrap's default: no host is named here.
	args := []string{"--variant=minbase", "--include=python3-minimal", "bookworm", root}
	if mirror := debianMirror("bookworm"); mirror != "" {
		args = append(args, mirror)
	}
	out, err := exec.Command("debootstrap", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("debootstrap: %v\n%s", err, out[max(0, len(out)-2000):])
	}
	layer := filepath.Join(work, "layer.tar")
	// GNU tar keeps the numeric owners and modes of every file.
	if out, err := exec.Command("tar", "--numeric-owner", "-C", root, "-cf", layer, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	// OCI media types throughout, so other OCI tools (umoci, in make
	// bench) read the same layout.
	l, err := tarball.LayerFromFile(layer, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, l)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := img.ConfigFile()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Cmd = []string{"python3", "-c", "print('hello from python')"}
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	writeLayout(t, filepath.Join(work, "layout"), "localhost/python:bookworm", img)
	tarDir(t, filepath.Join(work, "layout"), pythonImageCache+".tmp")
	if err := os.Rename(pythonImageCache+".tmp", pythonImageCache); err != nil {
		t.Fatal(err)
	}
	return pythonImageCache
}

// debianMirror is the URI of the Debian archive that this machine's apt
// sources name for suite ("" when none does): deb822 .sources files
// (Types: deb, URIs:, Suites:) or one-line "deb URI SUITE ..." entries.
func debianMirror(suite string) string {
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	for _, f := range files {
		data, _ := os.ReadFile(f)
		for _, stanza := range strings.Split(string(data), "\n\n") {
			fields := map[string]string{}
			for _, line := range strings.Split(stanza, "\n") {
				if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
					fields[strings.TrimSpace(k)] = strings.TrimSpace(v)
				}
			}
			uris := strings.Fields(fields["URIs"])
			if len(uris) > 0 && slices.Contains(strings.Fields(fields["Types"]), "deb") && slices.Contains(strings.Fields(fields["Suites"]), suite) {
				return uris[0]
			}
		}
	}
	lists, _ := filepath.Glob("/etc/apt/sources.list.d/*.list")
	for _, f := range append([]string{"/etc/apt/sources.list"}, lists...) {
		data, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(data), "\n") {
			if w := strings.Fields(line); len(w) >= 3 && w[0] == "deb" && !strings.HasPrefix(w[1], "[") && w[2] == suite {
				return w[1]
			}
		}
	}
	return ""
}

func TestPythonImageEndToEnd(t *testing.T) {
	if os.Getenv("JAIL_TEST_BINARIES") != "" {
		t.Skip("the Python image is tested on the host; in the VM it would take minutes")
	}
	archive := pythonImage(t)
	forEachMode(t, func(t *testing.T, m mode) {
		jailS := withStore(t, m)
		if r := jailS("image", "import", archive, "--quiet"); r.code != 0 {
			t.Fatalf("import: %d %s", r.code, r.stderr)
		}
		if r := jailS("run", "--image", "localhost/python:bookworm"); r.stdout != "hello from python\n" {
			t.Errorf("default command: %q %q", r.stdout, r.stderr)
		}
		script := `import os, sys; print(os.getuid(), sys.version_info[:2], open("/etc/debian_version").read()[:2], "usr" in os.listdir("/"))`
		r := jailS("run", "--image", "localhost/python:bookworm", "--", "python3", "-c", script)
		if r.stdout != "0 (3, 11) 12 True\n" {
			t.Errorf("python in the image: %q %q", r.stdout, r.stderr)
		}
		// Files keep their owners: root's files read as root's inside.
		if r := jailS("run", "--image", "localhost/python:bookworm", "--", "stat", "-c", "%u %a", "/usr/bin/python3.11", "/etc/shadow"); !strings.HasPrefix(r.stdout, "0 755\n") {
			t.Errorf("owners: %q %q", r.stdout, r.stderr)
		}
	})
}

// TestInterruptedImportLeavesNothingUsable: jail killed in the middle of
// unpacking leaves no image and no layer a run could use; prune clears the
// remains.
func TestInterruptedImportLeavesNothingUsable(t *testing.T) {
	if os.Getenv("JAIL_TEST_BINARIES") != "" {
		t.Skip("uses the Python image, tested on the host")
	}
	archive := pythonImage(t)
	forEachMode(t, func(t *testing.T, m mode) {
		store := storeDir(t, m)
		cmd := command(m, "image", "import", archive, "--quiet")
		cmd.Env = append(cmd.Env, "JAIL_IMAGE_STORE="+store)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill it once unpacking has begun (the layer's temporary
		// directory exists), well before it can finish.
		unpacking := false
		for i := 0; i < 1000 && !unpacking; i++ {
			tmp, _ := os.ReadDir(filepath.Join(store, "tmp"))
			for _, e := range tmp {
				unpacking = unpacking || strings.HasPrefix(e.Name(), "layer-")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if !unpacking {
			t.Fatal("the import never started unpacking")
		}
		time.Sleep(100 * time.Millisecond) // some files written, far from done
		cmd.Process.Kill()
		cmd.Wait()
		jailS := func(args ...string) result {
			c := command(m, args...)
			c.Env = append(c.Env, "JAIL_IMAGE_STORE="+store)
			return runCmd(t, c)
		}
		if layers, _ := os.ReadDir(filepath.Join(store, "layers")); len(layers) != 0 {
			t.Errorf("a killed import left layers under their final names: %v", layers)
		}
		if r := jailS("run", "--pull", "never", "--image", "localhost/python:bookworm", "--", "true"); r.code != 125 {
			t.Errorf("run of a half-imported image: exit %d %q", r.code, r.stderr)
		}
		if r := jailS("image", "prune"); r.code != 0 {
			t.Errorf("prune: %s", r.stderr)
		}
		if tmp, _ := os.ReadDir(filepath.Join(store, "tmp")); len(tmp) != 0 {
			t.Errorf("prune left %v", tmp)
		}
	})
}
