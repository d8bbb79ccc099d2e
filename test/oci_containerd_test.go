package test

import (
	"archive/tar"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// containerd for real (Debian's containerd, its ctr and its runc shim),
// with jail oci as the shim's runtime (ctr's --runc-binary, which is the
// shim's BinaryName): a containerd of the test's own (its root, state and
// sockets in a directory of the test; the CRI plugin off), a busybox image
// imported from an OCI archive made here, and the calls a user makes.

// containerdNamespace names everything containerd makes for the tests:
// its cgroups are below /jail-test in each hierarchy, and jail oci's
// states under /run/containerd/runc/jail-test.
const containerdNamespace = "jail-test"

type containerd struct {
	t       *testing.T
	dir     string
	address string
	runtime string // jail-runc
}

func startContainerd(t *testing.T) *containerd {
	t.Helper()
	for _, p := range []string{"containerd", "ctr", "containerd-shim-runc-v2"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed (apt-get install containerd)", p)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("containerd runs as root")
	}
	dir := sharedTempDir(t, nil)
	c := &containerd{t: t, dir: dir, address: filepath.Join(dir, "containerd.sock"), runtime: filepath.Join(dir, "jail-runc")}
	if err := os.Symlink(jailBin, c.runtime); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.address, c.address+".ttrpc")
	configPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	daemon := exec.Command("containerd", "--config", configPath)
	daemon.Stdout, daemon.Stderr = log, log
	daemon.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// What the tests left, then containerd, then what it made
		// outside its directory.
		for _, id := range strings.Fields(c.ctr("containers", "list", "--quiet").stdout) {
			c.ctr("task", "kill", "--all", "--signal", "SIGKILL", id)
			c.ctr("task", "delete", "--force", id)
			c.ctr("containers", "delete", id)
		}
		_ = daemon.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- daemon.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-daemon.Process.Pid, syscall.SIGKILL)
			<-done
		}
		log.Close()
		_ = os.RemoveAll(filepath.Join("/run/containerd/runc", containerdNamespace))
		for _, hierarchy := range cgroupHierarchies() {
			_ = os.Remove(filepath.Join(hierarchy, containerdNamespace))
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
			t.Logf("containerd's log:\n%s", tail(string(b), 4000))
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if r := c.ctr("version"); r.code == 0 && strings.Contains(r.stdout, "Server:") {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
			t.Fatalf("containerd did not answer within 30 s:\n%s", tail(string(b), 4000))
		}
	}
	return c
}

// cgroupHierarchies are the directories a cgroup of the tests' may be in.
func cgroupHierarchies() []string {
	out := []string{"/sys/fs/cgroup"}
	matches, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, m := range matches {
		if st, err := os.Stat(m); err == nil && st.IsDir() {
			out = append(out, m)
		}
	}
	return out
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// ctr runs ctr against this containerd, in the tests' namespace.
func (c *containerd) ctr(args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", c.address, "--namespace", containerdNamespace}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second // a shim holding the pipes does not hold the test
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("ctr %s: %v", strings.Join(args, " "), err)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// importBusybox imports a busybox image made here as ref.
func (c *containerd) importBusybox(ref string) {
	c.t.Helper()
	entries := busyboxEntries(c.t)
	for _, a := range []string{"hostname", "sleep", "tty"} {
		entries = append(entries, entry{name: "bin/" + a, typ: tar.TypeSymlink, link: "busybox"})
	}
	img := image(c.t, []string{"sh"}, []string{"PATH=/bin"}, layerOf(c.t, entries))
	dir := filepath.Join(c.dir, "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": "jail",
	})); err != nil {
		c.t.Fatal(err)
	}
	archive := filepath.Join(c.dir, "busybox.tar")
	tarDir(c.t, dir, archive)
	if r := c.ctr("image", "import", archive); r.code != 0 {
		c.t.Fatalf("ctr image import: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

// TestContainerdRunsJailOCI: with jail oci as its runtime, containerd
// runs a container (its output and exit status right), a detached one
// that is exec'd into (the exec's output and status its own) and killed,
// and one on a terminal; each is deleted, and nothing of it is left.
func TestContainerdRunsJailOCI(t *testing.T) {
	skipOnCgroupV2(t)
	checkNoLeaks(t)
	c := startContainerd(t)
	const ref = "localhost/busybox:jail"
	c.importBusybox(ref)
	runtime := "--runc-binary=" + c.runtime

	// ctr gives no host name: the container's uts namespace keeps the
	// host's, as with runc.
	host, _ := os.Hostname()
	r := c.ctr("run", "--rm", runtime, ref, "once", "sh", "-c", "echo hello from $(hostname); exit 3")
	if r.code != 3 || r.stdout != "hello from "+host+"\n" {
		t.Errorf("ctr run: exit %d, stdout %q, stderr %q; want 3 and the greeting", r.code, r.stdout, r.stderr)
	}

	if r := c.ctr("run", "--detach", runtime, ref, "long", "sleep", "1000"); r.code != 0 {
		t.Fatalf("ctr run --detach: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = c.ctr("task", "exec", "--exec-id", "e1", "long", "sh", "-c", "echo exec in $(hostname); exit 2")
	if r.code != 2 || r.stdout != "exec in "+host+"\n" {
		t.Errorf("ctr task exec: exit %d, stdout %q, stderr %q; want 2 and its line", r.code, r.stdout, r.stderr)
	}
	if r := c.ctr("task", "ps", "long"); r.code != 0 || len(strings.Fields(r.stdout)) < 3 {
		t.Errorf("ctr task ps: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := c.ctr("task", "kill", "--signal", "SIGKILL", "long"); r.code != 0 {
		t.Errorf("ctr task kill: %d %s", r.code, r.stderr)
	}
	waitFor(t, 20*time.Second, "the killed task stopped", func() bool {
		return strings.Contains(c.ctr("task", "list").stdout, "STOPPED")
	})
	if r := c.ctr("task", "delete", "long"); r.code != 0 {
		t.Errorf("ctr task delete: %d %s", r.code, r.stderr)
	}
	if r := c.ctr("containers", "delete", "long"); r.code != 0 {
		t.Errorf("ctr containers delete: %d %s", r.code, r.stderr)
	}

	// A terminal: ctr's own stdin must be one (the test plays the user
	// on a pseudo-terminal). What is typed reaches the container's
	// process, what it writes comes back, and its status is ctr's.
	c.onTerminal(t, "ctr run --tty", []string{"run", "--rm", "--tty", runtime, ref, "tty",
		"sh", "-c", "tty; echo rea''dy; read line; echo \"got $line\"; exit 4"}, 4)

	// ctr task exec --tty into a running container, likewise.
	if r := c.ctr("run", "--detach", runtime, ref, "long2", "sleep", "1000"); r.code != 0 {
		t.Fatalf("ctr run --detach: %d %s %s", r.code, r.stdout, r.stderr)
	}
	c.onTerminal(t, "ctr task exec --tty", []string{"task", "exec", "--tty", "--exec-id", "t1", "long2",
		"sh", "-c", "tty; echo rea''dy; read line; echo \"got $line\"; exit 6"}, 6)
	if r := c.ctr("task", "kill", "--signal", "SIGKILL", "long2"); r.code != 0 {
		t.Errorf("ctr task kill: %d %s", r.code, r.stderr)
	}
	waitFor(t, 20*time.Second, "the killed task stopped", func() bool {
		return strings.Contains(c.ctr("task", "list").stdout, "STOPPED")
	})
	if r := c.ctr("task", "delete", "long2"); r.code != 0 {
		t.Errorf("ctr task delete: %d %s", r.code, r.stderr)
	}
	if r := c.ctr("containers", "delete", "long2"); r.code != 0 {
		t.Errorf("ctr containers delete: %d %s", r.code, r.stderr)
	}
	if left := strings.TrimSpace(c.ctr("containers", "list", "--quiet").stdout); left != "" {
		t.Errorf("containers left: %s", left)
	}
	if states, _ := os.ReadDir(filepath.Join("/run/containerd/runc", containerdNamespace)); len(states) != 0 {
		t.Errorf("jail oci states left: %v", states)
	}
}

// onTerminal runs ctr with args on a pseudo-terminal of the test's, whose
// process prints its terminal's name and "ready", reads a line and
// prints it back ("got LINE") before it exits with want: the line typed
// must reach it, its output come back, and its status be ctr's.
func (c *containerd) onTerminal(t *testing.T, what string, args []string, want int) {
	t.Helper()
	master, slave := openTerminal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", c.address, "--namespace", containerdNamespace}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	slave.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	defer func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	scr := watch(master)
	scr.waitFor(t, "ready")
	if _, err := master.WriteString("typed-line\r"); err != nil {
		t.Fatalf("%s: write to the terminal: %v", what, err)
	}
	scr.waitFor(t, "got typed-line")
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("%s: ctr did not exit after the container's process did; screen:\n%s", what, scr.buf.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != want || !strings.Contains(scr.buf.String(), "/dev/pts/") {
		t.Errorf("%s: exit %d (want %d); screen:\n%s", what, code, want, scr.buf.String())
	}
}
