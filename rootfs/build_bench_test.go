package rootfs

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/namespaces"
)

// buildChildEnv marks the copy of the test binary that builds a root in
// fresh namespaces, as a sandbox's init does, and reports how long it took.
const buildChildEnv = "JAIL_ROOTFS_BENCH_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(buildChildEnv) != "" {
		buildChild()
		return
	}
	os.Exit(m.Run())
}

// buildChild reads a config on stdin, builds it, and prints the
// nanoseconds Build took (or the error, with status 1).
func buildChild() {
	var cfg config.Init
	if err := json.NewDecoder(os.Stdin).Decode(&cfg); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	t0 := time.Now()
	if err := Build(&cfg); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println(time.Since(t0).Nanoseconds())
	os.Exit(0)
}

// BenchmarkBuildHostTree: the default root, the host tree read-only with
// the scratch mounts, /proc, /dev and the masks, then pivot_root. The time
// reported as build-ms is Build's alone; ns/op includes starting the
// process that runs it.
func BenchmarkBuildHostTree(b *testing.B) {
	benchBuild(b, config.Rootfs{HostTree: true})
}

// BenchmarkBuildLayer: a directory as the overlay's lower layer (what
// --rootfs and a one-layer image give).
func BenchmarkBuildLayer(b *testing.B) {
	dir := filepath.Join(shareable(b), "layer")
	for _, d := range []string{"bin", "etc", "proc", "dev", "sys", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		b.Fatal(err)
	}
	benchBuild(b, config.Rootfs{Lowers: []config.Layer{{Path: dir, Dev: st.Dev, Ino: st.Ino}}})
}

// shareable is a temporary directory that the sandboxes' ids can enter.
func shareable(b *testing.B) string {
	dir, err := os.MkdirTemp("", "jail-rootfs-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	return dir
}

func benchBuild(b *testing.B, root config.Rootfs) {
	// The child runs as a sandbox's ids, which may not reach the go test
	// build directory: it runs from a copy.
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		b.Fatal(err)
	}
	exe := filepath.Join(shareable(b), "rootfs.test")
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		b.Fatal(err)
	}
	id, err := namespaces.ForCaller(nil, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	cfg := config.Init{Rootfs: root, Limits: config.Limits{TmpSize: 64 << 20, RunSize: 16 << 20, ShmSize: 64 << 20, UpperSize: 64 << 20, HomeSize: 64 << 20}}
	cfg.Rootfs.Home = "/root"
	in, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(exe)
		cmd.Env = []string{buildChildEnv + "=1"}
		cmd.Stdin = strings.NewReader(string(in))
		cmd.SysProcAttr = id.SysProcAttr()
		out, err := cmd.Output()
		ns, perr := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		if err != nil || perr != nil {
			b.Fatalf("build: %v: %s", err, out)
		}
		total += time.Duration(ns)
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "build-ms")
}
