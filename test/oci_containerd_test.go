package test

import (
	"archive/tar"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// containerd for real (Debian's containerd, its ctr and its runc shim),
// with jail oci as the shim's runtime (ctr's --runc-binary, which is the
// shim's BinaryName): a containerd of the test's own (its root, state,
// sockets, the shim's runc root and ctr's FIFOs in a directory of the
// test; the CRI plugin off unless a test asks for it, oci_cri_test.go), a
// busybox image imported from an OCI archive made here, and the calls a
// user makes.

// containerdNamespace names everything the ctr tests make in containerd:
// its cgroups are below /jail-test in each hierarchy.
const containerdNamespace = "jail-test"

type containerd struct {
	t         *testing.T
	dir       string
	address   string
	runtime   string // jail-runc, a link to the jail under test
	runcRoot  string // the shim's runc root: jail oci's states, one directory per namespace
	fifoDir   string // ctr's FIFOs
	namespace string // ctr's namespace
}

// containerdHostDirs are the directories outside its own root and state
// that containerd 1.6 and its runc shim make whatever they are told: the
// shims' sockets (a fixed directory), and the defaults of ctr's FIFOs, of
// the shim's runc root and of the opt plugin, which the tests point
// elsewhere. A test removes those it made (once empty) and fails on
// anything it left in the others.
var containerdHostDirs = []string{"/run/containerd/s", "/run/containerd/fifo", "/run/containerd/runc", "/run/containerd", "/opt/containerd"}

// startContainerd starts a containerd of the test's own; cri, when not
// nil, gives the CRI plugin's configuration (the plugin is off otherwise).
func startContainerd(t *testing.T, cri func(c *containerd) string) *containerd {
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
	c := &containerd{t: t, dir: dir, address: filepath.Join(dir, "containerd.sock"), runtime: filepath.Join(dir, "jail-runc"),
		runcRoot: filepath.Join(dir, "runc"), fifoDir: filepath.Join(dir, "fifo"), namespace: containerdNamespace}
	if err := os.Symlink(jailBin, c.runtime); err != nil {
		t.Fatal(err)
	}
	disabled, criConfig := `disabled_plugins = ["io.containerd.grpc.v1.cri"]`, ""
	if cri != nil {
		disabled, criConfig = "", cri(c)
	}
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
%s
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
%s`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), disabled, c.address, c.address+".ttrpc", filepath.Join(dir, "opt"), criConfig)
	configPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	hostDirs := map[string][]string{} // what was there: nil for a directory that was not
	for _, d := range containerdHostDirs {
		if entries, err := os.ReadDir(d); err == nil {
			hostDirs[d] = []string{}
			for _, e := range entries {
				hostDirs[d] = append(hostDirs[d], e.Name())
			}
		}
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
		for _, ns := range []string{containerdNamespace, criNamespace} {
			c.namespace = ns
			for _, id := range strings.Fields(c.ctr("containers", "list", "--quiet").stdout) {
				c.ctr("task", "kill", "--all", "--signal", "SIGKILL", id)
				c.ctr("task", "delete", "--force", id)
				c.ctr("containers", "delete", id)
			}
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
		for _, hierarchy := range cgroupHierarchies() {
			_ = os.Remove(filepath.Join(hierarchy, containerdNamespace))
		}
		for _, d := range containerdHostDirs {
			before, existed := hostDirs[d]
			if !existed {
				_ = os.Remove(d) // only once empty: another containerd may be using it
				continue
			}
			entries, _ := os.ReadDir(d)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if left := minus(names, before); len(left) > 0 {
				t.Errorf("containerd left %v in %s", left, d)
			}
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

// runtimeFlags are ctr run's flags for jail oci: the shim's BinaryName and
// runc root, and the FIFOs in the test's directory.
func (c *containerd) runtimeFlags() []string {
	return []string{"--runc-binary=" + c.runtime, "--runc-root=" + c.runcRoot, "--fifo-dir=" + c.fifoDir}
}

// states lists jail oci's states in the shim's runc root for namespace.
func (c *containerd) states(namespace string) []string {
	entries, _ := os.ReadDir(filepath.Join(c.runcRoot, namespace))
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// cgroupV2 reports whether /sys/fs/cgroup is one cgroup2 hierarchy.
func cgroupV2() bool {
	var st syscall.Statfs_t
	return syscall.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == 0x63677270
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

// ctr runs ctr against this containerd, in c.namespace.
func (c *containerd) ctr(args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", c.address, "--namespace", c.namespace}, args...)...)
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

// importBusybox imports a busybox image made here as ref, its command
// cmd, into c.namespace.
func (c *containerd) importBusybox(ref string, cmd ...string) {
	c.t.Helper()
	entries := busyboxEntries(c.t)
	for _, a := range []string{"hostname", "sleep", "tty"} {
		entries = append(entries, entry{name: "bin/" + a, typ: tar.TypeSymlink, link: "busybox"})
	}
	img := image(c.t, cmd, []string{"PATH=/bin"}, layerOf(c.t, entries))
	dir, err := os.MkdirTemp(c.dir, "image-")
	if err != nil {
		c.t.Fatal(err)
	}
	p, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": "jail",
	})); err != nil {
		c.t.Fatal(err)
	}
	archive := filepath.Join(dir, "image.tar")
	tarDir(c.t, filepath.Join(dir, "layout"), archive)
	if r := c.ctr("image", "import", archive); r.code != 0 {
		c.t.Fatalf("ctr image import: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

// TestContainerdRunsJailOCI: with jail oci as its runtime, containerd
// runs a container (its output and exit status right), a detached one
// that is exec'd into (the exec's output and status its own) and killed,
// and one on a terminal; each is deleted, and nothing of it is left.
func TestContainerdRunsJailOCI(t *testing.T) {
	checkNoLeaks(t)
	c := startContainerd(t, nil)
	const ref = "localhost/busybox:jail"
	c.importBusybox(ref, "sh")
	run := append([]string{"run"}, c.runtimeFlags()...)

	// ctr gives no host name: the container's uts namespace keeps the
	// host's, as with runc.
	host, _ := os.Hostname()
	r := c.ctr(append(run, "--rm", ref, "once", "sh", "-c", "echo hello from $(hostname); exit 3")...)
	if r.code != 3 || r.stdout != "hello from "+host+"\n" {
		t.Errorf("ctr run: exit %d, stdout %q, stderr %q; want 3 and the greeting", r.code, r.stdout, r.stderr)
	}

	if r := c.ctr(append(run, "--detach", ref, "long", "sleep", "1000")...); r.code != 0 {
		t.Fatalf("ctr run --detach: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = c.ctr("task", "exec", "--fifo-dir", c.fifoDir, "--exec-id", "e1", "long", "sh", "-c", "echo exec in $(hostname); exit 2")
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
	c.onTerminal(t, "ctr run --tty", append(append(run, "--rm", "--tty"), ref, "tty",
		"sh", "-c", "tty; echo rea''dy; read line; echo \"got $line\"; exit 4"), 4)

	// ctr task exec --tty into a running container, likewise.
	if r := c.ctr(append(run, "--detach", ref, "long2", "sleep", "1000")...); r.code != 0 {
		t.Fatalf("ctr run --detach: %d %s %s", r.code, r.stdout, r.stderr)
	}
	c.onTerminal(t, "ctr task exec --tty", []string{"task", "exec", "--fifo-dir", c.fifoDir, "--tty", "--exec-id", "t1", "long2",
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
	if states := c.states(containerdNamespace); len(states) != 0 {
		t.Errorf("jail oci states left: %v", states)
	}
}

// containerProcesses are the processes of the container whose init is
// pid: the members of its cgroup (in the pids hierarchy, or the one
// cgroup2 hierarchy), read once.
func containerProcesses(t *testing.T, pid int) (cgroupDir string, pids []int) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatalf("the container's cgroup: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(line, ":", 3)
		switch {
		case len(f) == 3 && f[1] == "pids":
			cgroupDir = filepath.Join("/sys/fs/cgroup/pids", f[2])
		case len(f) == 3 && f[0] == "0" && f[1] == "" && cgroupDir == "" && cgroupV2():
			cgroupDir = filepath.Join("/sys/fs/cgroup", f[2])
		}
	}
	if cgroupDir == "" {
		t.Fatalf("no pids cgroup in %q", data)
	}
	procs, err := os.ReadFile(filepath.Join(cgroupDir, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(procs)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return cgroupDir, pids
}

// taskPid is the pid ctr task list gives the task id.
func (c *containerd) taskPid(id string) int {
	c.t.Helper()
	for _, line := range strings.Split(c.ctr("task", "list").stdout, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == id {
			if pid, err := strconv.Atoi(f[1]); err == nil && pid > 0 {
				return pid
			}
		}
	}
	c.t.Fatalf("no pid for task %s in ctr task list", id)
	return 0
}

// alive says whether pid is a process that has not ended (a zombie has).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// expectContainerGone checks that none of pids runs, that the cgroup
// directory is gone and that jail oci has no state left in namespace.
func (c *containerd) expectContainerGone(namespace, cgroupDir string, pids []int) {
	c.t.Helper()
	waitFor(c.t, 20*time.Second, "the container's processes ended", func() bool {
		for _, p := range pids {
			if alive(p) {
				return false
			}
		}
		return true
	})
	waitFor(c.t, 20*time.Second, "the container's cgroup removed", func() bool {
		_, err := os.Stat(cgroupDir)
		return os.IsNotExist(err)
	})
	// jail oci's delete removes the state after the cgroup.
	waitFor(c.t, 20*time.Second, "jail oci's state removed", func() bool {
		return len(c.states(namespace)) == 0
	})
}

// TestContainerdCleansUpAfterAKilledShim: when the shim of a running jail
// container is SIGKILLed, containerd's own cleanup (it runs the shim
// binary's delete, which runs jail-runc delete --force with the
// container's options) kills the container's processes and removes its
// cgroup and jail oci's state; what containerd still records of the task
// and container, a user removes with ctr as after any other exit.
func TestContainerdCleansUpAfterAKilledShim(t *testing.T) {
	checkNoLeaks(t)
	c := startContainerd(t, nil)
	const ref = "localhost/busybox:jail"
	c.importBusybox(ref, "sh")
	run := append([]string{"run"}, c.runtimeFlags()...)
	if r := c.ctr(append(run, "--detach", ref, "orphan", "sh", "-c", "sleep 1000 & sleep 1000; exit 0")...); r.code != 0 {
		t.Fatalf("ctr run --detach: %d %s %s", r.code, r.stdout, r.stderr)
	}
	pid := c.taskPid("orphan")
	waitFor(t, 20*time.Second, "the container's two processes", func() bool {
		_, pids := containerProcesses(t, pid)
		return len(pids) == 3
	})
	cgroupDir, pids := containerProcesses(t, pid)
	if !strings.Contains(cgroupDir, "/"+containerdNamespace+"/orphan") {
		t.Errorf("the container's cgroup is %s, not below /%s", cgroupDir, containerdNamespace)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var shim int
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			shim, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", shim)); !strings.HasPrefix(string(comm), "containerd-shim") {
		t.Fatalf("the container's parent %d is %q, not the shim", shim, comm)
	}
	// The shim's socket, which it cannot remove once killed, nor does
	// containerd 1.6's cleanup (a shim started for the same ID later
	// would): the test removes it, as the user would.
	address, err := os.ReadFile(filepath.Join(c.dir, "state", "io.containerd.runtime.v2.task", containerdNamespace, "orphan", "address"))
	if err != nil {
		t.Fatal(err)
	}
	socket, ok := strings.CutPrefix(strings.TrimSpace(string(address)), "unix://")
	if !ok || filepath.Dir(socket) != "/run/containerd/s" {
		t.Fatalf("the shim's address is %q", address)
	}
	if err := syscall.Kill(shim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.expectContainerGone(containerdNamespace, cgroupDir, pids)
	if err := os.Remove(socket); err != nil {
		t.Errorf("the killed shim's socket: %v", err)
	}
	// What containerd keeps of it is the user's to remove.
	c.ctr("task", "delete", "orphan")
	if r := c.ctr("containers", "delete", "orphan"); r.code != 0 {
		t.Errorf("ctr containers delete: %d %s", r.code, r.stderr)
	}
	if left := strings.TrimSpace(c.ctr("containers", "list", "--quiet").stdout); left != "" {
		t.Errorf("containers left: %s", left)
	}
}

// TestContainerdKillAllEndsEveryProcess: ctr task kill --all reaches
// every process of a jail container (its init, a child of it and a
// process exec'd into it), and deleting the task leaves nothing.
func TestContainerdKillAllEndsEveryProcess(t *testing.T) {
	checkNoLeaks(t)
	c := startContainerd(t, nil)
	const ref = "localhost/busybox:jail"
	c.importBusybox(ref, "sh")
	run := append([]string{"run"}, c.runtimeFlags()...)
	// The init ignores SIGTERM: only kill --all's signal to each process
	// ends the others, not the end of the pid namespace's init.
	if r := c.ctr(append(run, "--detach", ref, "many", "sh", "-c", "trap '' TERM; sleep 1000 & while :; do sleep 1000; done")...); r.code != 0 {
		t.Fatalf("ctr run --detach: %d %s %s", r.code, r.stdout, r.stderr)
	}
	pid := c.taskPid("many")
	execDone := make(chan result, 1)
	go func() {
		execDone <- c.ctr("task", "exec", "--fifo-dir", c.fifoDir, "--exec-id", "e1", "many", "sleep", "1000")
	}()
	waitFor(t, 20*time.Second, "the container's four processes", func() bool {
		_, pids := containerProcesses(t, pid)
		return len(pids) == 4
	})
	cgroupDir, pids := containerProcesses(t, pid)
	if r := c.ctr("task", "kill", "--all", "--signal", "SIGTERM", "many"); r.code != 0 {
		t.Fatalf("ctr task kill --all: %d %s", r.code, r.stderr)
	}
	// SIGTERM ends the sleeps, not the init, which ignores it.
	waitFor(t, 20*time.Second, "the exec'd process ended", func() bool {
		select {
		case r := <-execDone:
			execDone <- r
			return true
		default:
			return false
		}
	})
	if r := c.ctr("task", "kill", "--all", "--signal", "SIGKILL", "many"); r.code != 0 {
		t.Fatalf("ctr task kill --all: %d %s", r.code, r.stderr)
	}
	waitFor(t, 20*time.Second, "the task stopped", func() bool {
		return strings.Contains(c.ctr("task", "list").stdout, "STOPPED")
	})
	if r := c.ctr("task", "delete", "many"); r.code != 0 {
		t.Errorf("ctr task delete: %d %s", r.code, r.stderr)
	}
	c.expectContainerGone(containerdNamespace, cgroupDir, pids)
	if r := c.ctr("containers", "delete", "many"); r.code != 0 {
		t.Errorf("ctr containers delete: %d %s", r.code, r.stderr)
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
