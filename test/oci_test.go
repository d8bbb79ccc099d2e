package test

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/runtime-spec/specs-go/features"
	"golang.org/x/sys/unix"
)

// The OCI runtime's command line (jail oci, docs/oci.md) where it needs
// no container role: what containerd's shim meets on unknown containers,
// bad flags and refused bundles. Every failure is one line and status 1,
// as with runc, and changes nothing.

// ociRoot is a state root for mode m that does not exist yet, under a
// directory of m's user.
func ociRoot(t *testing.T, m mode) string {
	var owner *account
	if m.rootless {
		owner = rootless
	}
	return filepath.Join(sharedTempDir(t, owner), "state")
}

// expectOneLineFailure checks a failed jail oci: status 1, nothing on
// stdout, one line on stderr that contains want.
func expectOneLineFailure(t *testing.T, r result, want string) {
	t.Helper()
	if r.code != 1 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "jail: oci") || !strings.Contains(r.stderr, want) {
		t.Errorf("status %d, stdout %q, stderr %q; want status 1 and one line with %q", r.code, r.stdout, r.stderr, want)
	}
}

func TestOCIVersionAndFeatures(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		out := mustRun(t, m, "oci", "--version")
		if !strings.HasPrefix(out, "jail oci version ") || !strings.Contains(out, "\nspec: "+specs.Version+"\n") {
			t.Errorf("--version: %q", out)
		}
		var f features.Features
		if err := json.Unmarshal([]byte(mustRun(t, m, "oci", "features")), &f); err != nil {
			t.Fatalf("features: %v", err)
		}
		if f.OCIVersionMax != specs.Version || f.Linux == nil || f.Linux.Seccomp == nil || !*f.Linux.Seccomp.Enabled {
			t.Errorf("features: %+v", f)
		}
	})
	// Installed as jail-runc, for the shim's BinaryName.
	dir := sharedTempDir(t, nil)
	runtime := filepath.Join(dir, "jail-runc")
	if err := os.Symlink(jailBin, runtime); err != nil {
		t.Fatal(err)
	}
	r := runCmd(t, programAs(asRootless, runtime, "-v"))
	if r.code != 0 || !strings.HasPrefix(r.stdout, "jail-runc version ") {
		t.Errorf("jail-runc -v: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

func TestOCIUnknownContainers(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		root := ociRoot(t, m)
		for _, args := range [][]string{
			{"state", "nothere"},
			{"start", "nothere"},
			{"kill", "nothere", "KILL"},
			{"kill", "--all", "nothere", "9"},
			{"delete", "nothere"},
			{"pause", "nothere"},
			{"resume", "nothere"},
			{"ps", "--format", "json", "nothere"},
		} {
			r := jail(t, m, append([]string{"oci", "--root", root}, args...)...)
			expectOneLineFailure(t, r, "jail: oci "+args[0]+": container does not exist")
		}
		if r := jail(t, m, "oci", "--root", root, "delete", "--force", "nothere"); r.code != 0 {
			t.Errorf("delete --force of nothing: %d %s", r.code, r.stderr)
		}
		if r := jail(t, m, "oci", "--root", root, "list", "--format", "json"); r.code != 0 || r.stdout != "[]\n" {
			t.Errorf("list: %d %q %s", r.code, r.stdout, r.stderr)
		}
		if _, err := os.Stat(root); !os.IsNotExist(err) {
			t.Errorf("commands on unknown containers made the root: %v", err)
		}
	})
}

func TestOCIBadCommandLines(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		root := ociRoot(t, m)
		cases := []struct {
			args []string
			want string
		}{
			{[]string{"--bogus", "state", "x"}, "jail: oci: flag provided but not defined: -bogus"},
			{[]string{"--root", root, "--log-format", "yaml", "state", "x"}, `unknown log-format "yaml"`},
			{[]string{"--root", root, "create", "--bogus", "x"}, "jail: oci create: flag provided but not defined: -bogus"},
			{[]string{"--root", root, "create"}, `"create" requires exactly 1 argument(s)`},
			{[]string{"--root", root, "kill", "x", "SIGNOPE"}, `unknown signal "SIGNOPE"`},
			{[]string{"--root", root, "state", "../x"}, `invalid id format: "../x"`},
			{[]string{"--root", root, "frob", "x"}, `no such command "frob"`},
			{[]string{"--root", root, "exec", "--process", "/p.json", "--detach", "x"}, "jail: oci exec: container does not exist"},
		}
		for _, c := range cases {
			expectOneLineFailure(t, jail(t, m, append([]string{"oci"}, c.args...)...), c.want)
		}
		if _, err := os.Stat(root); !os.IsNotExist(err) {
			t.Errorf("bad command lines made the root: %v", err)
		}
	})
}

// TestOCICreateRefusesBundlesJailCannotRealise: each is refused at create
// with one line (in the JSON log too, where the shim reads it), and
// nothing is made: no state, no cgroup.
func TestOCICreateRefusesBundlesJailCannotRealise(t *testing.T) {
	cases := []struct {
		name   string
		change func(*specs.Spec)
		want   string
	}{
		{"relative mount destination", func(s *specs.Spec) {
			s.Mounts = []specs.Mount{{Destination: "proc", Type: "proc", Source: "proc"}}
		}, `mounts[0].destination "proc" is not an absolute path`},
		{"unknown namespace", func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: "spaceship"})
		}, `linux.namespaces: unknown type "spaceship"`},
		{"maps without a user namespace", func(s *specs.Spec) {
			s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 1000, Size: 1}}
		}, "linux.uidMappings and gidMappings need a user namespace"},
		{"hostname without uts", func(s *specs.Spec) {
			s.Hostname = "box"
			s.Linux.Namespaces = []specs.LinuxNamespace{{Type: "mount"}}
		}, "unable to set hostname without a private UTS namespace"},
		{"intelRdt", func(s *specs.Spec) { s.Linux.IntelRdt = &specs.LinuxIntelRdt{ClosID: "x"} }, "linux.intelRdt is not supported"},
		{"seccomp notify", func(s *specs.Spec) {
			s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, ListenerPath: "/run/agent.sock"}
		}, "linux.seccomp: notifications (SCMP_ACT_NOTIFY, listenerPath) are not supported"},
		{"joined mount namespace", func(s *specs.Spec) {
			s.Linux.Namespaces = []specs.LinuxNamespace{{Type: "mount", Path: "/proc/1/ns/mnt"}}
		}, "linux.namespaces: joining a mount namespace by path is not supported"},
		{"host sysctl", func(s *specs.Spec) { s.Linux.Sysctl = map[string]string{"kernel.panic": "0"} }, `linux.sysctl: "kernel.panic" is not in a separate kernel namespace`},
		{"too many createContainer hooks", func(s *specs.Spec) {
			s.Hooks = &specs.Hooks{CreateContainer: make([]specs.Hook, 65)}
			for i := range s.Hooks.CreateContainer {
				s.Hooks.CreateContainer[i].Path = "/bin/true"
			}
		}, "hooks.createContainer: 65 hooks, at most 64"},
		{"terminal without a console socket", func(s *specs.Spec) { s.Process.Terminal = true }, "process.terminal needs --console-socket"},
	}
	forEachMode(t, func(t *testing.T, m mode) {
		var owner *account
		if m.rootless {
			owner = rootless
		}
		dir := sharedTempDir(t, owner)
		root := filepath.Join(dir, "state")
		for i, c := range cases {
			spec := &specs.Spec{
				Version: specs.Version,
				Root:    &specs.Root{Path: "rootfs"},
				Process: &specs.Process{Args: []string{"/bin/sh"}, Cwd: "/"},
				Linux:   &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: "mount"}, {Type: "pid"}, {Type: "uts"}, {Type: "ipc"}}},
			}
			c.change(spec)
			bundle := filepath.Join(dir, "bundle"+string(rune('a'+i)))
			if err := os.MkdirAll(filepath.Join(bundle, "rootfs"), 0o755); err != nil {
				t.Fatal(err)
			}
			data, _ := json.Marshal(spec)
			if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			log := filepath.Join(dir, "log"+string(rune('a'+i))+".json")
			r := jail(t, m, "oci", "--root", root, "--log", log, "--log-format", "json", "create", "--bundle", bundle, "--pid-file", filepath.Join(dir, "pid"), "box")
			expectOneLineFailure(t, r, "jail: oci create: "+c.want)
			b, err := os.ReadFile(log)
			var entry struct{ Level, Msg string }
			if err != nil || json.Unmarshal(b, &entry) != nil || entry.Level != "error" || entry.Msg+"\n" != r.stderr {
				t.Errorf("%s: log %q (%v)", c.name, b, err)
			}
			if _, err := os.Stat(root); !os.IsNotExist(err) {
				t.Errorf("%s: the root was made", c.name)
			}
			if _, err := os.Stat(filepath.Join(dir, "pid")); !os.IsNotExist(err) {
				t.Errorf("%s: a pid file was written", c.name)
			}
		}
		for _, h := range []string{"memory", "pids", "unified"} {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", h, "jail-oci", "box")); !os.IsNotExist(err) {
				t.Errorf("a cgroup was made in %s", h)
			}
		}
	})
}

// ociBundle writes a bundle of the suite's busybox root and runc's default
// configuration with args as the process (no terminal), and returns its
// directory.
func ociBundle(t *testing.T, args ...string) string {
	t.Helper()
	dir := sharedTempDir(t, nil)
	if err := os.Symlink(rootfsDir, filepath.Join(dir, "rootfs")); err != nil {
		t.Fatal(err)
	}
	spec := ociDefaultSpec(args)
	data, err := json.MarshalIndent(spec, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// ociDefaultSpec is `runc spec`'s configuration (the one every runtime's
// user starts from), with args.
func ociDefaultSpec(args []string) *specs.Spec {
	caps := []string{"CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"}
	deny := false
	return &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			Args: args, Env: []string{"PATH=/bin:/usr/bin", "TERM=xterm"}, Cwd: "/",
			Capabilities:    &specs.LinuxCapabilities{Bounding: caps, Effective: caps, Permitted: caps, Ambient: caps},
			Rlimits:         []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024}},
			NoNewPrivileges: true,
		},
		Root:     &specs.Root{Path: "rootfs", Readonly: true},
		Hostname: "oci",
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs"},
		},
		Linux: &specs.Linux{
			Resources:  &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: deny, Access: "rwm"}}},
			Namespaces: []specs.LinuxNamespace{{Type: "pid"}, {Type: "network"}, {Type: "ipc"}, {Type: "uts"}, {Type: "mount"}, {Type: "cgroup"}},
			MaskedPaths: []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
				"/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
}

// writeOCISpec writes spec as bundle's config.json.
func writeOCISpec(t *testing.T, bundle string, spec *specs.Spec) {
	t.Helper()
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ociWithOutput returns a runner of jail oci in mode m with state root
// root, whose output (and the container's, which inherits create's) goes
// to the bundle's file out, and that file's path. The runner returns the
// exit status.
func ociWithOutput(t *testing.T, m mode, root, bundle string) (oci func(args ...string) int, out string) {
	t.Helper()
	out = filepath.Join(bundle, "out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return func(args ...string) int {
		cmd := command(m, append([]string{"oci", "--root", root}, args...)...)
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Run(); err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				return ee.ExitCode()
			}
			t.Fatal(err)
		}
		return 0
	}, out
}

// TestOCIContainerLifecycle: a container of runc's default configuration
// through jail oci as the shim drives it: create leaves it created with
// its pid in --pid-file; start runs its process, as pid 1 of its own
// namespaces under the bundle's host name, read-only root and
// capabilities; exec runs more processes in it (their status their own;
// --detach leaves one running with its pid in --pid-file); ps lists them;
// kill ends it; delete removes it; and nothing is left: no process, state,
// cgroup or mount.
func TestOCIContainerLifecycle(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		if m.rootless {
			t.Skip("rootless jail oci needs a bundle with a user namespace: TestOCIContainerInAUserNamespace runs one")
		}
		root := ociRoot(t, m)
		bundle := ociBundle(t, "sh", "-c", "echo started as $$ in $(hostname); touch /x 2>/dev/null || echo root ro; grep CapBnd /proc/self/status; exec sleep 1000")
		out := filepath.Join(bundle, "out")
		f, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		oci := func(args ...string) result {
			cmd := command(m, append([]string{"oci", "--root", root}, args...)...)
			cmd.Stdout, cmd.Stderr = f, f
			if err := cmd.Run(); err != nil {
				if ee, ok := err.(*exec.ExitError); ok {
					return result{code: ee.ExitCode()}
				}
				t.Fatal(err)
			}
			return result{}
		}
		var created int
		t.Cleanup(func() {
			jail(t, m, "oci", "--root", root, "delete", "--force", "box")
			if created > 0 {
				// The test is its process's parent's parent: whatever
				// reparented it, it must be gone.
				waitFor(t, 10*time.Second, "the container's process gone", func() bool { return syscall.Kill(created, 0) != nil })
			}
		})
		pidFile := filepath.Join(bundle, "pid")
		if r := oci("create", "--bundle", bundle, "--pid-file", pidFile, "box"); r.code != 0 {
			b, _ := os.ReadFile(out)
			t.Fatalf("create: exit %d: %s", r.code, b)
		}
		pid, _ := os.ReadFile(pidFile)
		created, _ = strconv.Atoi(strings.TrimSpace(string(pid)))
		var st specs.State
		if err := json.Unmarshal([]byte(mustRun(t, m, "oci", "--root", root, "state", "box")), &st); err != nil || st.Status != specs.StateCreated || st.Pid != created || created <= 0 {
			t.Fatalf("state after create: %+v %v (pid file %q)", st, err, pid)
		}
		if r := oci("start", "box"); r.code != 0 {
			t.Fatal("start failed")
		}
		waitFor(t, 10*time.Second, "the process's first lines", func() bool {
			b, _ := os.ReadFile(out)
			return strings.Contains(string(b), "CapBnd")
		})
		if r := oci("exec", "box", "sh", "-c", "echo exec as $$ in $(hostname); exit 4"); r.code != 4 {
			t.Errorf("exec: exit %d, want 4", r.code)
		}
		if r := oci("exec", "--detach", "--pid-file", filepath.Join(bundle, "exec.pid"), "box", "sleep", "1000"); r.code != 0 {
			t.Errorf("exec --detach: exit %d", r.code)
		}
		var pids []int
		if err := json.Unmarshal([]byte(mustRun(t, m, "oci", "--root", root, "ps", "--format", "json", "box")), &pids); err != nil || len(pids) != 2 {
			t.Errorf("ps: %v %v, want the container's process and the detached exec", pids, err)
		}
		if r := oci("kill", "--all", "box", "9"); r.code != 0 {
			t.Errorf("kill --all: exit %d", r.code)
		}
		waitFor(t, 10*time.Second, "the container stopped", func() bool {
			return strings.Contains(mustRun(t, m, "oci", "--root", root, "state", "box"), `"stopped"`)
		})
		if r := oci("delete", "box"); r.code != 0 {
			t.Errorf("delete: exit %d", r.code)
		}
		b, _ := os.ReadFile(out)
		// The exec'd shell is another process of the container's pid
		// namespace (not its pid 1), under its host name.
		if !regexp.MustCompile(`exec as ([2-9]|[1-9][0-9]+) in oci\n`).Match(b) {
			t.Errorf("no exec'd process in the container's namespaces in the output:\n%s", b)
		}
		for _, want := range []string{"started as 1 in oci\n", "root ro\n", "CapBnd:\t0000000020000420\n"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("no %q in the output:\n%s", want, b)
			}
		}
		expectOneLineFailure(t, jail(t, m, "oci", "--root", root, "state", "box"), "does not exist")
	})
}

// TestOCICapabilityBoundingIgnoresTheContainersProc: a volume the
// container writes, mounted over /proc/sys/kernel, gives it a
// cap_last_cap of its own ("0"). The
// bounding set of the container's process and of an exec'd one is still
// the bundle's alone: the number of capabilities is the kernel's, not
// read from a /proc the container controls (which kept every capability
// but the first, and so gave a root process all of them at its exec).
func TestOCICapabilityBoundingIgnoresTheContainersProc(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		if m.rootless {
			t.Skip("rootless jail oci needs a bundle with a user namespace: TestOCIContainerInAUserNamespace runs one")
		}
		root := ociRoot(t, m)
		bundle := ociBundle(t)
		volume := filepath.Join(bundle, "volume")
		if err := os.Mkdir(volume, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(volume, "cap_last_cap"), []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		spec := ociDefaultSpec([]string{"sh", "-c", "grep CapBnd /proc/self/status; exec sleep 1000"})
		spec.Process.NoNewPrivileges = false
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: "/proc/sys/kernel", Type: "bind", Source: volume, Options: []string{"rbind", "rw"}})
		writeOCISpec(t, bundle, spec)
		oci, out := ociWithOutput(t, m, root, bundle)
		t.Cleanup(func() { jail(t, m, "oci", "--root", root, "delete", "--force", "box") })
		if oci("create", "--bundle", bundle, "box") != 0 || oci("start", "box") != 0 {
			b, _ := os.ReadFile(out)
			t.Fatalf("create and start: %s", b)
		}
		waitFor(t, 10*time.Second, "the process's capabilities", func() bool {
			b, _ := os.ReadFile(out)
			return strings.Contains(string(b), "CapBnd")
		})
		if code := oci("exec", "box", "grep", "CapBnd", "/proc/self/status"); code != 0 {
			t.Errorf("exec: exit %d", code)
		}
		b, _ := os.ReadFile(out)
		// CAP_AUDIT_WRITE, CAP_KILL, CAP_NET_BIND_SERVICE: the bundle's.
		if got := strings.Count(string(b), "CapBnd:\t0000000020000420\n"); got != 2 {
			t.Errorf("want the bundle's bounding set for the process and the exec'd one, got:\n%s", b)
		}
	})
}

// TestOCIRefusesMountDestinationsLedIntoProc: an image whose /data is a
// symlink to /proc would have the bundle's volume at /data cover the
// container's procfs, and with it the masks, the read-only paths and the
// exec FIFO's /proc/self/fd (a FIFO of the volume's there kept jail oci
// start waiting forever). Create refuses it in one line and leaves
// nothing.
func TestOCIRefusesMountDestinationsLedIntoProc(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		if m.rootless {
			t.Skip("rootless jail oci needs a bundle with a user namespace: TestOCIContainerInAUserNamespace runs one")
		}
		for _, link := range []string{"/proc", "/proc/sys/kernel", "../proc/self"} {
			root := ociRoot(t, m)
			bundle := sharedTempDir(t, nil)
			rootfs, err := makeBusyboxRootfs(filepath.Join(bundle, "rootfs"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(link, filepath.Join(rootfs, "data")); err != nil {
				t.Fatal(err)
			}
			volume := filepath.Join(bundle, "volume")
			if err := os.Mkdir(volume, 0o755); err != nil {
				t.Fatal(err)
			}
			spec := ociDefaultSpec([]string{"true"})
			spec.Mounts = append(spec.Mounts, specs.Mount{Destination: "/data", Type: "bind", Source: volume, Options: []string{"rbind", "rw"}})
			data, err := json.Marshal(spec)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			r := jail(t, m, "oci", "--root", root, "create", "--bundle", bundle, "box")
			if r.code == 0 {
				jail(t, m, "oci", "--root", root, "delete", "--force", "box")
			}
			expectOneLineFailure(t, r, "leads into /proc")
		}
	})
}

// TestOCIProfileAnnotationAddsJailsFilter: a bundle annotated
// jail.dev/profile: strict gets the strict profile's seccomp filter on top
// of its own (no socket but AF_UNIX, in the container's process and in
// what exec starts) and jail's masks (/proc/timer_list, which this bundle
// leaves unmasked); the same bundle without the annotation gets neither,
// and a profile jail does not know refuses it in one line.
func TestOCIProfileAnnotationAddsJailsFilter(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("jail oci is tested as root")
	}
	m := asRoot
	checkNoLeaks(t)
	{
		script := "echo timer_list $(wc -c < /proc/timer_list); busybox nc 127.0.0.1 1 </dev/null; exec sleep 1000"
		// A bundle's own filter that answers seccomp(2) with "success"
		// (errno 0) without loading anything: were it loaded before the
		// profile's, the profile's filter would never be.
		zero := uint(0)
		fakeSeccomp := &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{
			{Names: []string{"seccomp"}, Action: specs.ActErrno, ErrnoRet: &zero},
		}}
		for _, c := range []struct {
			name, profile string
			seccomp       *specs.LinuxSeccomp
			newPrivileges bool // the filters loaded before the ids change
			denied        bool
		}{
			{"without", "", nil, false, false}, {"strict", "strict", nil, false, true},
			{"strict under a bundle filter that fakes seccomp", "strict", fakeSeccomp, false, true},
			{"strict with new privileges under a bundle filter that fakes seccomp", "strict", fakeSeccomp, true, true},
		} {
			t.Run(c.name, func(t *testing.T) {
				root := ociRoot(t, m)
				bundle := ociBundle(t)
				spec := ociDefaultSpec([]string{"sh", "-c", script})
				spec.Linux.MaskedPaths = nil
				spec.Linux.Seccomp = c.seccomp
				spec.Process.NoNewPrivileges = !c.newPrivileges
				if c.profile != "" {
					spec.Annotations = map[string]string{"jail.dev/profile": c.profile}
				}
				writeOCISpec(t, bundle, spec)
				oci, out := ociWithOutput(t, m, root, bundle)
				t.Cleanup(func() { jail(t, m, "oci", "--root", root, "delete", "--force", "profiled") })
				if oci("create", "--bundle", bundle, "profiled") != 0 || oci("start", "profiled") != 0 {
					b, _ := os.ReadFile(out)
					t.Fatalf("create and start: %s", b)
				}
				waitFor(t, 10*time.Second, "the process's nc", func() bool {
					b, _ := os.ReadFile(out)
					return strings.Count(string(b), "nc: ") == 1
				})
				oci("exec", "profiled", "busybox", "nc", "127.0.0.1", "1")
				b, _ := os.ReadFile(out)
				denials := strings.Count(string(b), "nc: socket: Operation not permitted")
				masked := strings.Contains(string(b), "timer_list 0\n")
				if c.denied && (denials != 2 || !masked) {
					t.Errorf("want the socket denied to the process and the exec'd one, and timer_list masked, got:\n%s", b)
				}
				if !c.denied && (denials != 0 || masked) {
					t.Errorf("without the annotation jail added to the bundle:\n%s", b)
				}
			})
		}
		r := jail(t, m, "oci", "--root", ociRoot(t, m), "create", "--bundle", func() string {
			bundle := ociBundle(t)
			spec := ociDefaultSpec([]string{"true"})
			spec.Annotations = map[string]string{"jail.dev/profile": "lenient"}
			writeOCISpec(t, bundle, spec)
			return bundle
		}(), "profiled")
		expectOneLineFailure(t, r, `annotation jail.dev/profile: `)
	}
}

// ociOwnBundle writes a bundle with a busybox root of its own (with the
// applets extra as well, and what prepare adds) and spec, and returns the
// bundle's directory and a state root.
func ociOwnBundle(t *testing.T, m mode, spec *specs.Spec, extra []string, prepare func(rootfs string)) (root, bundle string) {
	t.Helper()
	root = ociRoot(t, m)
	bundle = sharedTempDir(t, nil)
	rootfs, err := makeBusyboxRootfs(filepath.Join(bundle, "rootfs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, applet := range extra {
		if err := os.Symlink("busybox", filepath.Join(rootfs, "bin", applet)); err != nil {
			t.Fatal(err)
		}
	}
	if prepare != nil {
		prepare(rootfs)
	}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return root, bundle
}

// ociCreate runs jail oci create (with --pid-file in the bundle) with its
// output, which the container's process keeps without a terminal, to a
// file, and returns the process's pid.
func ociCreate(t *testing.T, m mode, root, bundle string) string {
	t.Helper()
	out, err := os.Create(filepath.Join(bundle, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	pidFile := filepath.Join(bundle, "pid")
	cmd := command(m, "oci", "--root", root, "create", "--bundle", bundle, "--pid-file", pidFile, "box")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		b, _ := os.ReadFile(out.Name())
		t.Fatalf("create: %v: %s", err, b)
	}
	b, _ := os.ReadFile(pidFile)
	return strings.TrimSpace(string(b))
}

// ociStarted creates and starts container box of bundle, deleted when the
// test ends, and returns its process's pid once the process executed
// the program named comm.
func ociStarted(t *testing.T, m mode, root, bundle, comm string) string {
	t.Helper()
	t.Cleanup(func() { jail(t, m, "oci", "--root", root, "delete", "--force", "box") })
	pid := ociCreate(t, m, root, bundle)
	if r := jail(t, m, "oci", "--root", root, "start", "box"); r.code != 0 {
		t.Fatalf("start: %d %s", r.code, r.stderr)
	}
	waitFor(t, 10*time.Second, "the process's exec", func() bool {
		got, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
		return strings.TrimSpace(string(got)) == comm
	})
	return pid
}

// consoleSocket listens on a unix socket for the terminal's master as
// runc sends it: one message, the file's name as data, its descriptor in
// SCM_RIGHTS. The master comes on the channel (nil when none came).
func consoleSocket(t *testing.T) (string, <-chan *os.File) {
	t.Helper()
	path := filepath.Join(sharedTempDir(t, nil), "console.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	masters := make(chan *os.File, 1)
	go func() {
		defer close(masters)
		conn, err := l.AcceptUnix()
		if err != nil {
			return
		}
		defer conn.Close()
		name := make([]byte, 4096)
		oob := make([]byte, unix.CmsgSpace(4))
		n, oobn, _, _, err := conn.ReadMsgUnix(name, oob)
		if err != nil || n == 0 {
			return
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 {
			return
		}
		fds, err := unix.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) != 1 {
			return
		}
		masters <- os.NewFile(uintptr(fds[0]), string(name[:n]))
	}()
	return path, masters
}

// TestOCIExecOnATerminal: jail oci exec --tty, not detached, sends the
// terminal's master to --console-socket; what is typed there reaches the
// process, its output comes back, and its status is exec's. The terminal
// is the container's own (its devpts), and its user's.
func TestOCIExecOnATerminal(t *testing.T) {
	checkNoLeaks(t)
	forEachMode(t, func(t *testing.T, m mode) {
		if m.rootless {
			t.Skip("rootless jail oci needs a bundle with a user namespace: TestOCIContainerInAUserNamespace runs one")
		}
		root, bundle := ociOwnBundle(t, m, ociDefaultSpec([]string{"sleep", "1000"}), []string{"tty"}, nil)
		t.Cleanup(func() { jail(t, m, "oci", "--root", root, "delete", "--force", "box") })
		ociCreate(t, m, root, bundle)
		if r := jail(t, m, "oci", "--root", root, "start", "box"); r.code != 0 {
			t.Fatalf("start: %d %s", r.code, r.stderr)
		}
		sock, masters := consoleSocket(t)
		cmd := command(m, "oci", "--root", root, "exec", "--tty", "--console-socket", sock, "--user", "1000:1000", "box",
			"sh", "-c", `tty; stat -c "owner %u" $(tty); echo rea''dy; read line; echo "got $line"; exit 7`)
		done := make(chan result, 1)
		go func() { done <- runCmd(t, cmd) }()
		master, ok := <-masters
		if !ok || master == nil {
			t.Fatalf("no terminal on the console socket: %+v", <-done)
		}
		defer master.Close()
		scr := watch(master)
		scr.waitFor(t, "ready")
		if _, err := master.WriteString("typed-line\r"); err != nil {
			t.Fatal(err)
		}
		scr.waitFor(t, "got typed-line")
		r := <-done
		if r.code != 7 || !strings.Contains(scr.buf.String(), "/dev/pts/") || !strings.Contains(scr.buf.String(), "owner 1000") {
			t.Errorf("exec --tty: exit %d (want 7), stderr %q; want the terminal's name and its owner 1000 on the screen:\n%s", r.code, r.stderr, scr.buf.String())
		}
	})
}

// TestOCITerminalOnlyFromTheContainersDevpts: a container without a
// devpts mount whose process made /dev/pts/ptmx a FIFO (a link or another
// device would do as well) gets no terminal from it: jail oci exec --tty
// refuses in one line, having opened nothing there (which would have let
// the FIFO's reader go on, and handed the shim the FIFO as the terminal).
func TestOCITerminalOnlyFromTheContainersDevpts(t *testing.T) {
	checkNoLeaks(t)
	forEachMode(t, func(t *testing.T, m mode) {
		if m.rootless {
			t.Skip("rootless jail oci needs a bundle with a user namespace: TestOCIContainerInAUserNamespace runs one")
		}
		spec := ociDefaultSpec([]string{"sh", "-c", "mkdir -p /dev/pts && mkfifo /dev/pts/ptmx && cat /dev/pts/ptmx; echo opened > /dev/opened; exec sleep 1000"})
		var mounts []specs.Mount
		for _, mnt := range spec.Mounts {
			if mnt.Type != "devpts" {
				mounts = append(mounts, mnt)
			}
		}
		spec.Mounts = mounts
		root, bundle := ociOwnBundle(t, m, spec, []string{"mkfifo", "tty"}, nil)
		t.Cleanup(func() { jail(t, m, "oci", "--root", root, "delete", "--force", "box") })
		pid := ociCreate(t, m, root, bundle)
		if r := jail(t, m, "oci", "--root", root, "start", "box"); r.code != 0 {
			t.Fatalf("start: %d %s", r.code, r.stderr)
		}
		fifo := filepath.Join("/proc", pid, "root", "dev", "pts", "ptmx")
		waitFor(t, 10*time.Second, "the container's FIFO", func() bool {
			st, err := os.Lstat(fifo)
			return err == nil && st.Mode()&os.ModeNamedPipe != 0
		})
		sock, _ := consoleSocket(t)
		r := jail(t, m, "oci", "--root", root, "exec", "--tty", "--console-socket", sock, "box", "tty")
		expectOneLineFailure(t, r, "not a devpts mount")
		// Its reader still waits: a writer's open that does not block
		// finds it.
		f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Errorf("the FIFO's reader was let go (opened by the runtime): %v", err)
		} else {
			f.Close()
		}
	})
}

// TestOCIOomScoreAdjReachesTheProcess: the bundle's oomScoreAdj is the
// process's, and written nowhere else: a bind mount over the container's
// /proc/self/oom_score_adj (here a file of the bundle's; an image's link
// in a root without a proc mount would do the same) took the write, and
// left the process's score as it was.
func TestOCIOomScoreAdjReachesTheProcess(t *testing.T) {
	checkNoLeaks(t)
	forEachMode(t, func(t *testing.T, m mode) {
		if m.rootless {
			t.Skip("rootless jail oci needs a bundle with a user namespace: TestOCIContainerInAUserNamespace runs one")
		}
		spec := ociDefaultSpec([]string{"sleep", "1000"})
		adj := 567
		spec.Process.OOMScoreAdj = &adj
		decoy := filepath.Join(sharedTempDir(t, nil), "oom_score_adj")
		if err := os.WriteFile(decoy, []byte("untouched\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: "/proc/self/oom_score_adj", Type: "bind", Source: decoy, Options: []string{"bind", "rw"}})
		root, bundle := ociOwnBundle(t, m, spec, nil, nil)
		pid := ociStarted(t, m, root, bundle, "sleep")
		got, _ := os.ReadFile(filepath.Join("/proc", pid, "oom_score_adj"))
		written, _ := os.ReadFile(decoy)
		if strings.TrimSpace(string(got)) != "567" || string(written) != "untouched\n" {
			t.Errorf("the process's oom_score_adj is %q (want 567), the bound file holds %q (want it untouched)", got, written)
		}
	})
}

// TestOCIForcedDeleteEndsACreatedContainer: delete --force (and delete)
// of a container that was created and never started ends its process,
// waiting on the exec FIFO, and leaves nothing.
func TestOCIForcedDeleteEndsACreatedContainer(t *testing.T) {
	checkNoLeaks(t)
	forEachMode(t, func(t *testing.T, m mode) {
		if m.rootless {
			t.Skip("rootless jail oci needs a bundle with a user namespace: TestOCIContainerInAUserNamespace runs one")
		}
		for _, force := range []bool{true, false} {
			root := ociRoot(t, m)
			bundle := ociBundle(t, "sleep", "1000")
			pid, _ := strconv.Atoi(ociCreate(t, m, root, bundle))
			args := []string{"oci", "--root", root, "delete", "box"}
			if force {
				args = []string{"oci", "--root", root, "delete", "--force", "box"}
			}
			if r := jail(t, m, args...); r.code != 0 {
				t.Errorf("delete (force %v) of a created container: %d %s", force, r.code, r.stderr)
				jail(t, m, "oci", "--root", root, "delete", "--force", "box")
			}
			// Gone, not merely signalled: delete waited for its end
			// (a zombie's stat says Z; it is reaped by whoever adopted it).
			if st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); err == nil && pid > 0 {
				if f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:])); len(f) > 0 && f[0] != "Z" {
					t.Errorf("delete (force %v): the container's process %d still runs: %s", force, pid, st)
				}
			}
			expectOneLineFailure(t, jail(t, m, "oci", "--root", root, "state", "box"), "does not exist")
		}
	})
}

// TestOCIBindSourceSwappedAfterCreateOpenedItIsRefused: a directory of a
// bind source's path renamed and replaced by another between jail oci
// create's resolution of it and the role's mount (here while create is
// held writing its warning to a --log FIFO the test keeps full) would put
// the other directory in the container; the role refuses the source in
// one line and leaves nothing.
func TestOCIBindSourceSwappedAfterCreateOpenedItIsRefused(t *testing.T) {
	checkNoLeaks(t)
	forEachMode(t, func(t *testing.T, m mode) {
		if m.rootless {
			t.Skip("rootless jail oci needs a bundle with a user namespace: TestOCIContainerInAUserNamespace runs one")
		}
		spec := ociDefaultSpec([]string{"sleep", "1000"})
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: "/data", Type: "bind", Source: "volume", Options: []string{"rbind", "ro"}})
		root, bundle := ociOwnBundle(t, m, spec, nil, nil)
		volume := filepath.Join(bundle, "volume")
		if err := os.Mkdir(volume, 0o755); err != nil {
			t.Fatal(err)
		}
		logPath := filepath.Join(bundle, "log")
		if err := unix.Mkfifo(logPath, 0o600); err != nil {
			t.Fatal(err)
		}
		logFifo, err := os.OpenFile(logPath, os.O_RDWR|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer logFifo.Close()
		// Full: create's first line (the --no-pivot warning, written once
		// the bundle is translated) waits for the test.
		if _, err := unix.FcntlInt(logFifo.Fd(), unix.F_SETPIPE_SZ, 4096); err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := unix.Write(int(logFifo.Fd()), make([]byte, 512)); err != nil {
				break
			}
		}
		out, err := os.Create(filepath.Join(bundle, "out"))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		cmd := command(m, "oci", "--root", root, "--log", logPath, "create", "--no-pivot", "--bundle", bundle, "--pid-file", filepath.Join(bundle, "pid"), "box")
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { jail(t, m, "oci", "--root", root, "delete", "--force", "box") })
		waitFor(t, 20*time.Second, "create writing its log", func() bool {
			tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "task", "*", "wchan"))
			for _, task := range tasks {
				if w, _ := os.ReadFile(task); strings.Contains(string(w), "pipe_write") { // anon_pipe_write on 6.x
					return true
				}
			}
			return false
		})
		if err := os.Rename(volume, volume+".checked"); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(volume, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(volume, "swapped-in"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		go func() {
			b := make([]byte, 4096)
			for {
				if _, err := logFifo.Read(b); err != nil && !errors.Is(err, syscall.EAGAIN) {
					return
				}
			}
		}()
		err = cmd.Wait()
		b, _ := os.ReadFile(out.Name())
		if err == nil {
			pid, _ := os.ReadFile(filepath.Join(bundle, "pid"))
			entries, _ := os.ReadDir(filepath.Join("/proc", strings.TrimSpace(string(pid)), "root", "data"))
			t.Fatalf("create went on with the swapped source (the container's /data: %v): %s", entries, b)
		}
		if !strings.Contains(string(b), "changed after it was checked") || strings.Count(string(b), "\n") != 1 {
			t.Errorf("create: %v, output %q; want one line saying the source changed", err, b)
		}
	})
}
