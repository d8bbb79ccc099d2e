// Command ctrbench measures `ctr run` with jail oci as containerd's
// runtime beside the same with runc and crun: what a container costs to
// start, run /bin/true and be removed through containerd's runc shim, the
// path a kubelet's pods take. Contenders alternate round by round, in an
// order that turns, so that machine noise falls on each alike.
//
// It starts a containerd of its own (root, state and sockets in a
// directory of its own, the CRI plugin off) in a private mount namespace
// where the empty cgroup v2 hierarchy of a hybrid host is unmounted (crun
// 1.8 refuses hybrid layouts; nothing changes on the host), imports a
// busybox image made here, and times
//
//	ctr run --rm --runc-binary RUNTIME IMAGE ID true
//
// As root:
//
//	go run ./test/ctrbench -jail bin/jail [-n 40] [-json bin/bench-ctr.json]
//
// Whatever it makes (containers, its containerd, cgroups under
// jail-bench, runtime states under /run/containerd/runc/jail-bench, its
// directory) is removed at the end.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// namespace is containerd's namespace for everything the bench makes: the
// containers' cgroups are /jail-bench/ID in each hierarchy.
const namespace = "jail-bench"

const imageRef = "jail.test/ctrbench/busybox:latest"

type contender struct {
	Name    string          `json:"name"`
	Path    string          `json:"path"`
	Samples []time.Duration `json:"samples_ns"`
}

func main() {
	jail := flag.String("jail", "bin/jail", "the jail binary (run as jail-runc)")
	rounds := flag.Int("n", 40, "timed rounds; each runs every contender once")
	warmup := flag.Int("warmup", 3, "untimed rounds first")
	jsonOut := flag.String("json", "", "write the samples and medians to this file")
	flag.Parse()
	if *rounds < 1 || *warmup < 0 {
		fmt.Fprintln(os.Stderr, "ctrbench: -n must be at least 1 and -warmup not negative")
		os.Exit(2)
	}
	if err := run(*jail, *rounds, *warmup, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "ctrbench:", err)
		os.Exit(1)
	}
}

func run(jail string, rounds, warmup int, jsonOut string) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root: containerd runs as root")
	}
	for _, p := range []string{"containerd", "ctr", "containerd-shim-runc-v2", "unshare"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("%s is not installed (apt-get install containerd util-linux)", p)
		}
	}
	jailPath, err := filepath.Abs(jail)
	if err != nil {
		return err
	}
	if _, err := os.Stat(jailPath); err != nil {
		return fmt.Errorf("%s: %w (make build first)", jail, err)
	}
	dir, err := os.MkdirTemp("", "jail-ctrbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	jailRunc := filepath.Join(dir, "jail-runc")
	if err := os.Symlink(jailPath, jailRunc); err != nil {
		return err
	}
	contenders := []*contender{{Name: "jail", Path: jailRunc}}
	for _, name := range []string{"runc", "crun"} {
		if p, err := exec.LookPath(name); err == nil {
			contenders = append(contenders, &contender{Name: name, Path: p})
		} else {
			fmt.Fprintf(os.Stderr, "ctrbench: %s is not installed: left out\n", name)
		}
	}

	d, err := startContainerd(dir)
	if err != nil {
		return err
	}
	defer d.stop()
	archive := filepath.Join(dir, "busybox.tar")
	if err := writeBusyboxArchive(filepath.Join(dir, "layout"), archive); err != nil {
		return fmt.Errorf("busybox image: %w", err)
	}
	if out, err := d.ctr("image", "import", archive); err != nil {
		return fmt.Errorf("ctr image import: %v: %s", err, out)
	}

	n := 0
	for round := 0; round < warmup+rounds; round++ {
		for i := range contenders {
			c := contenders[(round+i)%len(contenders)]
			n++
			id := fmt.Sprintf("%s-%d", c.Name, n)
			start := time.Now()
			out, err := d.ctr("run", "--rm", "--runc-binary", c.Path, imageRef, id, "true")
			took := time.Since(start)
			if err != nil {
				return fmt.Errorf("%s: ctr run: %v: %s", c.Name, err, out)
			}
			if round >= warmup {
				c.Samples = append(c.Samples, took)
			}
		}
	}
	report(os.Stdout, contenders, rounds)
	if jsonOut != "" {
		data, err := json.MarshalIndent(map[string]any{"rounds": rounds, "contenders": contenders}, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(jsonOut, append(data, '\n'), 0o644)
	}
	return nil
}

func report(w io.Writer, cs []*contender, rounds int) {
	medians := map[string]time.Duration{}
	fmt.Fprintf(w, "ctr run --rm IMAGE ID true, through containerd's runc shim, %d rounds:\n\n", rounds)
	fmt.Fprintln(w, "| runtime | median | p10 | p90 | jail / this |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, c := range cs {
		medians[c.Name] = quantile(c.Samples, 0.5)
	}
	for _, c := range cs {
		ratio := float64(medians["jail"]) / float64(medians[c.Name])
		fmt.Fprintf(w, "| %s | %.1f ms | %.1f ms | %.1f ms | %.2f |\n", c.Name, ms(medians[c.Name]),
			ms(quantile(c.Samples, 0.1)), ms(quantile(c.Samples, 0.9)), ratio)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func quantile(samples []time.Duration, q float64) time.Duration {
	s := append([]time.Duration(nil), samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(q*float64(len(s)-1)+0.5)]
}

type daemon struct {
	dir, address string
	cmd          *exec.Cmd
	hadRunDirs   map[string]bool
}

// containerdDirs are the directories below /run/containerd that ctr and
// the shim make whatever containerd's state directory is.
var containerdDirs = []string{"/run/containerd/fifo", "/run/containerd/s", "/run/containerd/runc", "/run/containerd"}

func startContainerd(dir string) (*daemon, error) {
	d := &daemon{dir: dir, address: filepath.Join(dir, "containerd.sock"), hadRunDirs: map[string]bool{}}
	for _, p := range containerdDirs {
		if _, err := os.Stat(p); err == nil {
			d.hadRunDirs[p] = true
		}
	}
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), d.address, d.address+".ttrpc")
	configPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	// A mount namespace of containerd's (and its shims'): the hybrid
	// host's cgroup2 unmounted there, and the images' mounts gone with it.
	script := `if [ "$(stat -f -c %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ]; then umount /sys/fs/cgroup/unified; fi; exec containerd --config "$1"`
	d.cmd = exec.Command("unshare", "--mount", "--propagation", "slave", "sh", "-c", script, "sh", configPath)
	d.cmd.Stdout, d.cmd.Stderr = log, log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if out, err := d.ctr("version"); err == nil && strings.Contains(out, "Server:") {
			return d, nil
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
			d.stop()
			return nil, fmt.Errorf("containerd did not answer within 30 s:\n%s", b)
		}
	}
}

func (d *daemon) ctr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", d.address, "--namespace", namespace}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// stop removes what is left of the containers, stops containerd and
// removes what it made outside its directory.
func (d *daemon) stop() {
	if out, err := d.ctr("containers", "list", "--quiet"); err == nil {
		for _, id := range strings.Fields(out) {
			_, _ = d.ctr("task", "kill", "--all", "--signal", "SIGKILL", id)
			_, _ = d.ctr("task", "delete", "--force", id)
			_, _ = d.ctr("containers", "delete", id)
		}
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	_ = os.RemoveAll(filepath.Join("/run/containerd/runc", namespace))
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range append(hierarchies, "/sys/fs/cgroup") {
		_ = os.Remove(filepath.Join(h, namespace))
	}
	for _, p := range containerdDirs {
		if !d.hadRunDirs[p] {
			_ = os.Remove(p) // only when empty
		}
	}
}

// writeBusyboxArchive writes an OCI image archive of busybox-static (sh and
// true linked to it) for ctr image import.
func writeBusyboxArchive(layoutDir, archive string) error {
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		return errors.New("busybox is not installed (apt-get install busybox-static)")
	}
	data, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	for _, h := range []*tar.Header{
		{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data))},
		{Name: "bin/sh", Typeflag: tar.TypeSymlink, Linkname: "busybox"},
		{Name: "bin/true", Typeflag: tar.TypeSymlink, Linkname: "busybox"},
		{Name: "proc/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "dev/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "sys/", Typeflag: tar.TypeDir, Mode: 0o755},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Name == "bin/busybox" {
			if _, err := tw.Write(data); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerBytes := layerTar.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerBytes)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = runtime.GOARCH, "linux"
	cfg.Config = v1.Config{Cmd: []string{"true"}, Env: []string{"PATH=/bin"}}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	p, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name": imageRef, "org.opencontainers.image.ref.name": "latest",
	})); err != nil {
		return err
	}
	return tarDir(layoutDir, archive)
}

// tarDir writes the files below dir into a tar archive.
func tarDir(dir, archive string) error {
	f, err := os.Create(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		h.Name = filepath.ToSlash(rel)
		if e.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if e.Type().IsRegular() {
			src, err := os.Open(path)
			if err != nil {
				return err
			}
			defer src.Close()
			_, err = io.Copy(tw, src)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
