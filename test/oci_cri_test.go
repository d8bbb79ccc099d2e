package test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// containerd's CRI plugin with jail oci as a runtime handler, driven by
// crictl (cri-tools) as a kubelet drives it: a pod sandbox on the host's
// network (no CNI), a container in it, an exec, its logs, stop and
// removal. The containerd is the test's own (oci_containerd_test.go), its
// CRI configured with a handler "jail" whose runc shim runs jail-runc, and
// a sandbox ("pause") image made here and imported, so nothing is pulled.

const (
	crictlModule  = "sigs.k8s.io/cri-tools"
	crictlVersion = "v1.37.0"
	// criNamespace is the containerd namespace of everything CRI makes.
	criNamespace = "k8s.io"
	// criCgroupParent is the pod's cgroup parent (cgroupfs form): its
	// sandbox's and containers' cgroups are below it in each hierarchy.
	criCgroupParent = "/jail-cri-test"
	criPauseImage   = "localhost/jail-pause:test"
	criImage        = "localhost/busybox:jail"
)

// buildCrictl returns crictl: $JAIL_TEST_CRICTL, or one built from the
// module cache (fetched through the Go module proxy, checked against the
// checksum database as any module) into the repository's bin/crictl/
// VERSION, once per toolchain, as test/ocisuite builds runtime-tools.
// The test is skipped when it cannot be had.
func buildCrictl(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("JAIL_TEST_CRICTL"); p != "" {
		return p
	}
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false", "GOTOOLCHAIN=local", "CGO_ENABLED=0")
	goVersion, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Skipf("crictl: no go command to build it: %v", err)
	}
	dir, err := filepath.Abs(filepath.Join("..", "bin", "crictl", crictlVersion))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "crictl")
	stamp := fmt.Sprintf("%s@%s %s/%s %s\n", crictlModule, crictlVersion, runtime.GOOS, runtime.GOARCH, strings.TrimSpace(string(goVersion)))
	if got, err := os.ReadFile(bin + ".stamp"); err == nil && string(got) == stamp {
		return bin
	}
	skip := func(what string, err error, out []byte) {
		t.Helper()
		line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		t.Skipf("crictl: cannot %s %s@%s: %v %s", what, crictlModule, crictlVersion, err, line)
	}
	download := exec.Command("go", "mod", "download", "-json", crictlModule+"@"+crictlVersion)
	download.Dir, download.Env = os.TempDir(), env
	out, err := download.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); err != nil || jerr != nil || info.Dir == "" {
		skip("download", err, []byte(info.Error))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(tmp, "crictl"), "./cmd/crictl")
	build.Dir, build.Env = info.Dir, env
	if out, err := build.CombinedOutput(); err != nil {
		skip("build", err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "crictl"), bin); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin+".stamp", []byte(stamp), 0o644); err != nil {
		t.Fatal(err)
	}
	return bin
}

// criConfig is the CRI plugin's configuration: the runtime handler "jail",
// also the default so that nothing here runs runc (the runc shim, its BinaryName jail-runc and its root in the test's
// directory), the sandbox image made here, the streaming server on a port
// of the kernel's choosing on loopback, and CNI's directories in the
// test's (empty: the pods use the host's network).
//
// Where the test runs without CAP_SYS_RESOURCE (a container's root may),
// no runtime can lower a process's oom_score_adj, and CRI gives the
// sandbox -998: restrict_oom_score_adj then makes CRI clamp it to its own,
// as it does for rootless nodes.
func criConfig(dir, runtime, runcRoot string) string {
	restrict := !hasCapability(unix.CAP_SYS_RESOURCE)
	return fmt.Sprintf(`[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = %t
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "jail"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.jail]
    runtime_type = "io.containerd.runc.v2"
    pod_annotations = ["jail.dev/profile"]
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.jail.options]
      BinaryName = %q
      Root = %q
`, criPauseImage, restrict, filepath.Join(dir, "cni", "bin"), filepath.Join(dir, "cni", "net.d"), runtime, runcRoot)
}

// pauseScript is the sandbox image's command: it sleeps until SIGTERM, as
// pause does (the shell as pid 1 ignores signals it has no trap for).
const pauseScript = "trap 'exit 0' TERM INT; while :; do sleep 1000 & wait $!; done"

// TestCRIRunsAPodWithTheJailHandler: crictl runp --runtime jail starts a
// pod sandbox under jail oci, create/start a container in it, exec -s
// runs in the container (its stdout and status its own), logs has the
// container's output, and stop, rm, stopp and rmp leave no process,
// cgroup, state, mount or socket.
func TestCRIRunsAPodWithTheJailHandler(t *testing.T) {
	checkNoLeaks(t)
	crictlBin := buildCrictl(t)
	// On a kernel that confines with AppArmor (the v2 VM's), containerd
	// gives every container its default profile, which it loads itself,
	// as on a Debian or Ubuntu node: jail must apply it.
	const criProfile = "cri-containerd.apparmor.d"
	wantAppArmor := appArmorEnabled()
	if wantAppArmor {
		if _, err := exec.LookPath("apparmor_parser"); err != nil {
			wantAppArmor = false
		} else {
			appArmorSecurityfs(t, criProfile)
			t.Logf("AppArmor confines here: the container must run under %s", criProfile)
		}
	}
	c := startContainerd(t, func(c *containerd) string { return criConfig(c.dir, c.runtime, c.runcRoot) })
	c.namespace = criNamespace
	c.importBusybox(criPauseImage, "sh", "-c", pauseScript)
	c.importBusybox(criImage, "sh")

	config := filepath.Join(c.dir, "crictl.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf("runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 30\npull-image-on-create: false\n", c.address, c.address)), 0o600); err != nil {
		t.Fatal(err)
	}
	crictl := func(args ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, crictlBin, append([]string{"--config", config}, args...)...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("crictl %s: %v", strings.Join(args, " "), err)
		}
		return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
	}
	must := func(args ...string) string {
		t.Helper()
		r := crictl(args...)
		if r.code != 0 {
			t.Fatalf("crictl %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	// Whatever a failure leaves, removed before containerd stops.
	t.Cleanup(func() {
		crictl("rm", "--all", "--force")
		crictl("rmp", "--all", "--force")
		for _, h := range cgroupHierarchies() {
			_ = os.Remove(filepath.Join(h, criCgroupParent))
		}
	})

	logs := filepath.Join(c.dir, "pods")
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	// As a kubelet asks for a pod on the host's network (NODE, 2): a pid
	// namespace per container (CONTAINER, 1), the pod's ipc one (POD, 0).
	namespaces := map[string]any{"network": 2, "pid": 1, "ipc": 0}
	pod := filepath.Join(c.dir, "pod.json")
	writeJSON(t, pod, map[string]any{
		"metadata":      map[string]any{"name": "jail-pod", "namespace": "default", "uid": "jail-pod-uid", "attempt": 0},
		"log_directory": logs,
		// jail's strict profile on top of what CRI writes (docs/oci.md
		// §3), let through by the handler's pod_annotations.
		"annotations": map[string]string{"jail.dev/profile": "strict"},
		"linux": map[string]any{
			"cgroup_parent":    criCgroupParent,
			"security_context": map[string]any{"namespace_options": namespaces},
		},
	})
	ctr := filepath.Join(c.dir, "container.json")
	writeJSON(t, ctr, map[string]any{
		"metadata": map[string]any{"name": "box"},
		"image":    map[string]any{"image": criImage},
		"command":  []string{"sh", "-c", "trap 'exit 0' TERM; echo hello from the container; while :; do sleep 1000 & wait $!; done"},
		"log_path": "box.log",
		"linux": map[string]any{
			// As a kubelet asks for a pod with RuntimeDefault seccomp
			// (profile_type 0) and a memory limit and cpu request.
			"security_context": map[string]any{"namespace_options": namespaces, "seccomp": map[string]any{"profile_type": 0}},
			"resources":        map[string]any{"memory_limit_in_bytes": 64 << 20, "cpu_shares": 256},
		},
	})

	podID := must("runp", "--runtime", "jail", pod)
	ctrID := must("create", podID, ctr, pod)
	must("start", ctrID)

	// Both run under jail oci: its state in the handler's root, for
	// containerd's CRI namespace, and jail-runc state knows them.
	pids := map[string]int{}
	for what, id := range map[string]string{"sandbox": podID, "container": ctrID} {
		r := runCmd(t, exec.Command(c.runtime, "--root", filepath.Join(c.runcRoot, criNamespace), "state", id))
		var state struct {
			Status string
			Pid    int
		}
		if err := json.Unmarshal([]byte(r.stdout), &state); r.code != 0 || err != nil || state.Status != "running" || state.Pid <= 0 {
			t.Fatalf("jail-runc state of the %s: %d %q %q", what, r.code, r.stdout, r.stderr)
		}
		pids[what] = state.Pid
		cgroup, procs := containerProcesses(t, state.Pid)
		if want := criCgroupParent + "/" + id; !strings.HasSuffix(cgroup, want) {
			t.Errorf("the %s's cgroup is %s, not %s", what, cgroup, want)
		}
		if len(procs) == 0 {
			t.Errorf("the %s's cgroup has no process", what)
		}
	}

	// The container's limits and filter, as asked (on v2 as runc
	// converts them: 256 shares are a cpu.weight of 10).
	limits := map[string]string{
		"/sys/fs/cgroup/memory" + criCgroupParent + "/" + ctrID + "/memory.limit_in_bytes": fmt.Sprint(64 << 20),
		"/sys/fs/cgroup/cpu" + criCgroupParent + "/" + ctrID + "/cpu.shares":               "256",
	}
	if cgroupV2() {
		limits = map[string]string{
			"/sys/fs/cgroup" + criCgroupParent + "/" + ctrID + "/memory.max": fmt.Sprint(64 << 20),
			"/sys/fs/cgroup" + criCgroupParent + "/" + ctrID + "/cpu.weight": "10",
		}
	}
	limits[fmt.Sprintf("/proc/%d/status", pids["container"])] = "Seccomp:\t2\n"
	if wantAppArmor {
		limits[fmt.Sprintf("/proc/%d/attr/apparmor/current", pids["container"])] = criProfile + " (enforce)\n"
	}
	for file, want := range limits {
		if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s: %v, want %q in:\n%s", file, err, want, b)
		}
	}

	// The pod's namespaces, as asked: the container joined the sandbox's
	// ipc namespace, has a pid namespace of its own, and both have the
	// host's network.
	ns := func(pid int, kind string) string {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
		if err != nil {
			t.Fatal(err)
		}
		return link
	}
	host := os.Getpid()
	for _, n := range []struct {
		kind      string
		shared    bool // with the sandbox
		hostsOwn  bool
		container int
	}{
		{"ipc", true, false, pids["container"]},
		{"pid", false, false, pids["container"]},
		{"net", true, true, pids["container"]},
	} {
		if got := ns(n.container, n.kind) == ns(pids["sandbox"], n.kind); got != n.shared {
			t.Errorf("the container's %s namespace is the sandbox's: %t, want %t", n.kind, got, n.shared)
		}
		if got := ns(n.container, n.kind) == ns(host, n.kind); got != n.hostsOwn {
			t.Errorf("the container's %s namespace is the host's: %t, want %t", n.kind, got, n.hostsOwn)
		}
	}

	// The exec'd process is in the container's pid namespace (not its
	// init), with the container's init in its /proc; its status is
	// its own (crictl reports one that is not 0 as a failure).
	r := crictl("exec", "-s", ctrID, "sh", "-c", "echo exec as $$ beside $(cat /proc/1/cmdline | tr '\\0' ' ')")
	if want := regexp.MustCompile(`^exec as ([2-9]|[1-9][0-9]+) beside sh -c trap 'exit 0' TERM; echo hello`); r.code != 0 || !want.MatchString(strings.TrimSpace(r.stdout)) {
		t.Errorf("crictl exec -s: exit %d, stdout %q, stderr %q; want 0 and the exec's line", r.code, r.stdout, r.stderr)
	}
	// Through CRI's streaming server, as kubectl exec reaches it.
	if r := crictl("exec", ctrID, "sh", "-c", "echo streamed; echo to stderr >&2"); r.code != 0 || r.stdout != "streamed\n" || r.stderr != "to stderr\n" {
		t.Errorf("crictl exec: exit %d, stdout %q, stderr %q; want 0 and a line on each", r.code, r.stdout, r.stderr)
	}
	// The pod's jail.dev/profile reached the container: strict's filter
	// allows no socket but AF_UNIX, on top of RuntimeDefault's.
	if r := crictl("exec", "-s", ctrID, "busybox", "nc", "127.0.0.1", "1"); r.code == 0 || !strings.Contains(r.stdout+r.stderr, "socket: Operation not permitted") {
		t.Errorf("crictl exec -s busybox nc under the strict profile: exit %d, stdout %q, stderr %q; want the socket refused", r.code, r.stdout, r.stderr)
	}
	if r := crictl("exec", "-s", ctrID, "sh", "-c", "exit 3"); r.code == 0 || !strings.Contains(r.stderr, "exited with 3") {
		t.Errorf("crictl exec -s of a command that exits 3: exit %d, stderr %q", r.code, r.stderr)
	}
	waitFor(t, 20*time.Second, "the container's output in its log", func() bool {
		return crictl("logs", ctrID).stdout == "hello from the container\n"
	})

	// Stopped as a kubelet stops it: its stop signal (SIGTERM), which the
	// container's process handles and exits 0 on, within a grace period.
	must("stop", "--timeout", "30", ctrID)
	var status struct {
		Status struct {
			State    string
			ExitCode int
		}
	}
	if err := json.Unmarshal([]byte(must("inspect", ctrID)), &status); err != nil || status.Status.State != "CONTAINER_EXITED" || status.Status.ExitCode != 0 {
		t.Errorf("the stopped container: %+v %v; want exited with 0 (its SIGTERM trap)", status, err)
	}
	must("rm", ctrID)
	must("stopp", podID)
	must("rmp", podID)
	for what, pid := range pids {
		if alive(pid) {
			t.Errorf("the %s's process %d is still alive", what, pid)
		}
	}
	if left := must("ps", "--all", "--quiet"); left != "" {
		t.Errorf("containers left: %s", left)
	}
	if left := must("pods", "--quiet"); left != "" {
		t.Errorf("pods left: %s", left)
	}
	if states := c.states(criNamespace); len(states) != 0 {
		t.Errorf("jail oci states left: %v", states)
	}
	for _, h := range cgroupHierarchies() {
		if _, err := os.Stat(filepath.Join(h, criCgroupParent)); err == nil {
			t.Errorf("the pod's cgroup parent is left in %s", h)
		}
	}
}

// hasCapability says whether the test's process has capability c in its
// effective set.
func hasCapability(c int) bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			set, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && set&(1<<uint(c)) != 0
		}
	}
	return false
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOCICreateFailsOnAnOOMScoreAdjItCannotGive: CRI gives a pod's
// sandbox process.oomScoreAdj -998, which only a runtime with
// CAP_SYS_RESOURCE may give. Without it (a containerd in a container, or
// this capability dropped), jail oci create fails in one line saying so,
// as runc's create does, and leaves nothing; it used to succeed, and the
// process died at start with its error on its own stderr, which for a
// sandbox goes nowhere (CRI then said only "sandbox container is not
// running"). A raise, which needs no privilege, is the process's.
func TestOCICreateFailsOnAnOOMScoreAdjItCannotGive(t *testing.T) {
	checkNoLeaks(t)
	if os.Geteuid() != 0 {
		t.Skip("lowering oom_score_adj is root's")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is not installed")
	}
	for _, c := range []struct {
		name   string
		adj    int
		create string // "" when create succeeds
	}{
		{"lowered", -998, "jail: oci create: process.oomScoreAdj -998: permission denied (lowering it from "},
		{"raised", 500, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := ociRoot(t, asRoot)
			bundle := ociBundle(t, "sh", "-c", "cat /proc/self/oom_score_adj")
			var spec map[string]any
			config := filepath.Join(bundle, "config.json")
			data, err := os.ReadFile(config)
			if err != nil || json.Unmarshal(data, &spec) != nil {
				t.Fatalf("the bundle's config: %v", err)
			}
			spec["process"].(map[string]any)["oomScoreAdj"] = c.adj
			writeJSON(t, config, spec)
			out := filepath.Join(bundle, "out")
			f, err := os.Create(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// The runtime without CAP_SYS_RESOURCE, whatever the test has.
			create := exec.Command("setpriv", "--bounding-set", "-sys_resource", "--", jailBin, "oci", "--root", root, "create", "--bundle", bundle, "adj")
			// Files, not pipes: the container's process keeps them.
			errFile := filepath.Join(bundle, "err")
			ef, err := os.Create(errFile)
			if err != nil {
				t.Fatal(err)
			}
			defer ef.Close()
			create.Stdout, create.Stderr = f, ef
			err = create.Run()
			stderr, _ := os.ReadFile(errFile)
			t.Cleanup(func() { jail(t, asRoot, "oci", "--root", root, "delete", "--force", "adj") })
			if c.create != "" {
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				}
				expectOneLineFailure(t, result{stderr: string(stderr), code: code}, c.create)
				expectOneLineFailure(t, jail(t, asRoot, "oci", "--root", root, "state", "adj"), "does not exist")
				for _, h := range cgroupHierarchies() {
					if _, err := os.Stat(filepath.Join(h, "jail-oci", "adj")); err == nil {
						t.Errorf("the container's cgroup is left in %s", h)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("create: %v %s", err, stderr)
			}
			if r := jail(t, asRoot, "oci", "--root", root, "start", "adj"); r.code != 0 {
				t.Fatalf("start: %d %s", r.code, r.stderr)
			}
			waitFor(t, 10*time.Second, "the process's oom_score_adj", func() bool {
				b, _ := os.ReadFile(out)
				return string(b) == fmt.Sprintf("%d\n", c.adj)
			})
		})
	}
}
