package test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ociUsernsSpec is `runc spec --rootless`'s configuration (a user
// namespace mapping the container's root to one id of the host, no
// network namespace, the host's /sys bound, no resources) with args and
// the container's root mapped to uid and gid.
func ociUsernsSpec(args []string, uid, gid, size uint32) *specs.Spec {
	spec := ociDefaultSpec(args)
	spec.Linux.Resources = nil
	spec.Linux.Namespaces = []specs.LinuxNamespace{{Type: "pid"}, {Type: "ipc"}, {Type: "uts"}, {Type: "mount"}, {Type: "user"}}
	spec.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: uid, Size: size}}
	spec.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: gid, Size: size}}
	for i, m := range spec.Mounts {
		if m.Destination == "/sys" {
			spec.Mounts[i] = specs.Mount{Destination: "/sys", Type: "none", Source: "/sys", Options: []string{"rbind", "nosuid", "noexec", "nodev", "ro"}}
		}
	}
	return spec
}

// TestOCIContainerInAUserNamespace: a bundle with a user namespace runs
// through jail oci as root (its root mapped to a range of the host's ids)
// and as an unprivileged user (`runc spec --rootless`: its root mapped to
// the user's own id, the maps written without newuidmap, no cgroup of its
// own): its process is root of the namespace only, an exec joins it, the
// cgroup mount (which the kernel does not make in a user namespace on a v1
// host, nor cgroup2 without a cgroup namespace of its own) is the host's
// tree bound read-only, and nothing is left once it is deleted.
func TestOCIContainerInAUserNamespace(t *testing.T) {
	t.Run("host cgroup namespace", func(t *testing.T) { testOCIContainerInAUserNamespace(t, false) })
	// On a v2 host, cgroup2 is mounted in it; on a v1 host, bound still.
	t.Run("cgroup namespace", func(t *testing.T) { testOCIContainerInAUserNamespace(t, true) })
}

func testOCIContainerInAUserNamespace(t *testing.T, cgroupNS bool) {
	forEachMode(t, func(t *testing.T, m mode) {
		uid, gid, size := uint32(100000), uint32(100000), uint32(65536)
		if m.rootless {
			uid, gid, size = uint32(rootless.uid), uint32(rootless.gid), 1
		}
		script := "cat /proc/self/uid_map /proc/self/gid_map; id -u; ls /sys/fs/cgroup >/dev/null && echo cgroups listed; " +
			ownCgroupAtTheRoot + "touch /sys/fs/cgroup/x 2>/dev/null || echo cgroups read-only; exec sleep 1000"
		if m.rootless && !cgroupNS {
			// Without one, said before anything is made.
			norm := ociRoot(t, m)
			expectOneLineFailure(t, jail(t, m, "oci", "--root", norm, "create", "--bundle", ociBundle(t, "true"), "plain"), "no user namespace")
			if _, err := os.Stat(filepath.Join(norm, "plain")); !os.IsNotExist(err) {
				t.Errorf("a refused create left its state: %v", err)
			}
		}
		spec := ociUsernsSpec([]string{"sh", "-c", script}, uid, gid, size)
		if cgroupNS {
			spec.Linux.Namespaces = append(spec.Linux.Namespaces, specs.LinuxNamespace{Type: "cgroup"})
		}
		root, bundle := ociOwnBundle(t, m, spec, nil, nil)
		oci, out := ociWithOutput(t, m, root, bundle)
		var pid int
		t.Cleanup(func() {
			jail(t, m, "oci", "--root", root, "delete", "--force", "box")
			if pid > 0 {
				waitFor(t, 10*time.Second, "the container's process gone", func() bool { return !processExists(pid) })
			}
		})
		var owner *account
		if m.rootless {
			owner = rootless
		}
		pidFile := filepath.Join(sharedTempDir(t, owner), "pid")
		if code := oci("create", "--bundle", bundle, "--pid-file", pidFile, "box"); code != 0 {
			b, _ := os.ReadFile(out)
			t.Fatalf("create: exit %d: %s", code, b)
		}
		pid = readPid(t, pidFile)
		if code := oci("start", "box"); code != 0 {
			b, _ := os.ReadFile(out)
			t.Fatalf("start: exit %d: %s", code, b)
		}
		waitFor(t, 10*time.Second, "the process's lines", func() bool {
			b, _ := os.ReadFile(out)
			return strings.Contains(string(b), "cgroups read-only")
		})
		b, _ := os.ReadFile(out)
		for _, want := range []string{
			"0 " + itoa(int(uid)) + " " + itoa(int(size)) + "\n",
			"0 " + itoa(int(gid)) + " " + itoa(int(size)) + "\n",
			"\n0\n", "cgroups listed\n", "cgroups read-only\n",
		} {
			if !strings.Contains(squeezeSpaces(string(b)), want) {
				t.Errorf("no %q in the output:\n%s", want, b)
			}
		}
		// Its cgroup namespace's root, not the host's tree above it (a
		// v1 host's hierarchies are mounted there; on a v2 host the
		// host's cgroup2, which the bind of /sys brought, is covered).
		if want := "own cgroup at the root\n"; cgroupNS && !strings.Contains(string(b), want) {
			t.Errorf("the cgroup mount is not the container's cgroup namespace's: no %q in the output:\n%s", want, b)
		}
		// The host sees the process as the mapped id.
		if st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status"); err != nil || !strings.Contains(string(st), "\nUid:\t"+itoa(int(uid))+"\t") {
			t.Errorf("the process on the host: %v\n%s", err, st)
		}
		r := jail(t, m, "oci", "--root", root, "exec", "box", "sh", "-c", "id -u; cat /proc/self/uid_map")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "0\n") || !strings.Contains(squeezeSpaces(r.stdout), "0 "+itoa(int(uid))+" "+itoa(int(size))) {
			t.Errorf("exec: %d %q %q", r.code, r.stdout, r.stderr)
		}
		if code := oci("kill", "box", "KILL"); code != 0 {
			t.Errorf("kill: exit %d", code)
		}
		waitFor(t, 10*time.Second, "the container stopped", func() bool {
			var st specs.State
			return json.Unmarshal([]byte(mustRun(t, m, "oci", "--root", root, "state", "box")), &st) == nil && st.Status == specs.StateStopped
		})
		if code := oci("delete", "box"); code != 0 {
			t.Errorf("delete: exit %d", code)
		}
	})
}

// ownCgroupAtTheRoot is a container's shell command that says "own cgroup
// at the root" when the cgroup mount at /sys/fs/cgroup (cgroup2's, or a v1
// host's memory hierarchy's) has the container's cgroup as its root: its
// process, pid 1 of its namespace, is listed there.
const ownCgroupAtTheRoot = "cat /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/memory/cgroup.procs 2>/dev/null | grep -qx 1 && echo own cgroup at the root; "

// squeezeSpaces makes every run of blanks one space (the id maps align
// their columns).
func squeezeSpaces(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

func processExists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		t.Fatalf("pid file %q", b)
	}
	return n
}

// TestOCIRootlessWithSubordinateIDs: an unprivileged user's bundle that
// maps the container's root to the user and ids 1..65535 to the user's
// subordinate range gets its maps through newuidmap and newgidmap, and a
// process exec'd as the container's uid 1000 is the range's id on the host.
func TestOCIRootlessWithSubordinateIDs(t *testing.T) {
	acct, subUID := subIDAccount(t)
	subGID := subGIDStart(t, "jail-test-sub")
	checkNoLeaks(t)
	spec := ociUsernsSpec([]string{"sh", "-c", "cat /proc/self/uid_map /proc/self/gid_map; echo listed; exec sleep 1000"}, uint32(acct.uid), uint32(acct.gid), 1)
	spec.Linux.UIDMappings = append(spec.Linux.UIDMappings, specs.LinuxIDMapping{ContainerID: 1, HostID: uint32(subUID), Size: 65535})
	spec.Linux.GIDMappings = append(spec.Linux.GIDMappings, specs.LinuxIDMapping{ContainerID: 1, HostID: uint32(subGID), Size: 65535})
	_, bundle := ociOwnBundle(t, asRoot, spec, nil, nil)
	root := filepath.Join(sharedTempDir(t, acct), "state")
	out, err := os.Create(filepath.Join(sharedTempDir(t, acct), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	oci := func(args ...string) (string, int) {
		cmd := exec.Command("setpriv", append([]string{"--reuid", strconv.Itoa(acct.uid), "--regid", strconv.Itoa(acct.gid), "--clear-groups", "--",
			jailBin, "oci", "--root", root}, args...)...)
		cmd.Env = []string{"PATH=" + systemPath, "HOME=" + acct.home}
		cmd.Dir = bundle
		var stdout strings.Builder
		cmd.Stdout, cmd.Stderr = out, out
		// A detached process keeps its stdout: a pipe would hold Run.
		if args[0] == "exec" && args[1] != "--detach" {
			cmd.Stdout = &stdout
		}
		if err := cmd.Run(); err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				return stdout.String(), ee.ExitCode()
			}
			t.Fatal(err)
		}
		return stdout.String(), 0
	}
	t.Cleanup(func() { oci("delete", "--force", "box") })
	if _, code := oci("create", "--bundle", bundle, "box"); code != 0 {
		b, _ := os.ReadFile(out.Name())
		t.Fatalf("create: exit %d: %s", code, b)
	}
	if _, code := oci("start", "box"); code != 0 {
		b, _ := os.ReadFile(out.Name())
		t.Fatalf("start: exit %d: %s", code, b)
	}
	waitFor(t, 10*time.Second, "the process's lines", func() bool {
		b, _ := os.ReadFile(out.Name())
		return strings.Contains(string(b), "listed")
	})
	b, _ := os.ReadFile(out.Name())
	for _, want := range []string{"1 " + strconv.Itoa(subUID) + " 65535\n", "1 " + strconv.Itoa(subGID) + " 65535\n"} {
		if !strings.Contains(squeezeSpaces(string(b)), want) {
			t.Errorf("no %q in the output:\n%s", want, b)
		}
	}
	got, code := oci("exec", "--user", "1000:1000", "box", "sh", "-c", "id -u; id -g; grep ^Uid: /proc/self/status")
	if code != 0 || !strings.HasPrefix(got, "1000\n1000\n") {
		t.Errorf("exec as 1000: %d %q", code, got)
	}
	// The kernel shows the ids as the reader's namespace sees them: ask
	// the host's /proc for the exec'd id's host value.
	got, code = oci("exec", "--detach", "--user", "1000:1000", "box", "sleep", "1000")
	if code != 0 {
		t.Fatalf("exec --detach: %d %q", code, got)
	}
	found := false
	waitFor(t, 10*time.Second, "the detached process on the host", func() bool {
		procs, _ := os.ReadDir("/proc")
		for _, p := range procs {
			st, err := os.ReadFile("/proc/" + p.Name() + "/status")
			if err == nil && strings.Contains(string(st), "\nUid:\t"+strconv.Itoa(subUID+999)+"\t") {
				found = true
			}
		}
		return found
	})
	if _, code := oci("delete", "--force", "box"); code != 0 {
		t.Errorf("delete --force: %d", code)
	}
}

// TestOCICgroupNamespaceUnderABoundSys: a bundle run by root without a user
// namespace that binds the host's /sys (which brings the host's cgroup
// mounts under /sys/fs/cgroup) and asks for a cgroup namespace and the
// cgroup mount gets its namespace's cgroup at the root of that mount,
// read-only: on a v2 host the cgroup2 mount finds the host's there (EBUSY),
// which must be covered, not kept (it shows every cgroup of the host).
func TestOCICgroupNamespaceUnderABoundSys(t *testing.T) {
	checkNoLeaks(t)
	m := asRoot
	spec := ociDefaultSpec([]string{"sh", "-c", ownCgroupAtTheRoot + "touch /sys/fs/cgroup/x 2>/dev/null || echo cgroups read-only; exec sleep 1000"})
	for i, mnt := range spec.Mounts {
		if mnt.Destination == "/sys" {
			spec.Mounts[i] = specs.Mount{Destination: "/sys", Type: "none", Source: "/sys", Options: []string{"rbind", "nosuid", "noexec", "nodev", "ro"}}
		}
	}
	root, bundle := ociOwnBundle(t, m, spec, nil, nil)
	oci, out := ociWithOutput(t, m, root, bundle)
	t.Cleanup(func() { jail(t, m, "oci", "--root", root, "delete", "--force", "box") })
	if code := oci("create", "--bundle", bundle, "box"); code != 0 {
		b, _ := os.ReadFile(out)
		t.Fatalf("create: exit %d: %s", code, b)
	}
	if code := oci("start", "box"); code != 0 {
		b, _ := os.ReadFile(out)
		t.Fatalf("start: exit %d: %s", code, b)
	}
	waitFor(t, 10*time.Second, "the process's lines", func() bool {
		b, _ := os.ReadFile(out)
		return strings.Contains(string(b), "cgroups read-only")
	})
	if b, _ := os.ReadFile(out); !strings.Contains(string(b), "own cgroup at the root\n") {
		t.Errorf("the cgroup mount is not the container's cgroup namespace's:\n%s", b)
	}
	if code := oci("delete", "--force", "box"); code != 0 {
		t.Errorf("delete --force: exit %d", code)
	}
}

// TestOCIRootlessRoleIsDumpableOnlyToItsUsersHostProcesses: while an
// unprivileged jail oci create maps the user namespace its role made (the
// role dumpable, so that its /proc/PID files are the user's), a process of
// the same user in another user namespace, as a container's processes
// are, root there or not, can neither read nor open the role's descriptors
// (its control socket to create), its memory or its environment: only the
// user's own processes on the host, which could do what it does anyway,
// can. A stand-in newuidmap, first on create's PATH, tries while create
// waits for it, then runs the real one.
func TestOCIRootlessRoleIsDumpableOnlyToItsUsersHostProcesses(t *testing.T) {
	acct, subUID := subIDAccount(t)
	subGID := subGIDStart(t, "jail-test-sub")
	checkNoLeaks(t)
	dir := sharedTempDir(t, acct)
	report := filepath.Join(dir, "report")
	// From the host, then in each other user namespace (-r: its root,
	// with every capability there): how many of the role's descriptors
	// it can read (their links: opening one checks the same), and
	// whether it can open the role's memory and environment.
	tries := `pid=$1
probe='
	read=0; for fd in /proc/$1/fd/*; do readlink $fd >/dev/null 2>&1 && read=$((read+1)); done
	echo "$2 descriptors read: $read"
	if (exec 5</proc/$1/mem) 2>/dev/null; then echo "$2 mem: opened"; else echo "$2 mem: refused"; fi
	if (exec 5</proc/$1/environ) 2>/dev/null; then echo "$2 environ: opened"; else echo "$2 environ: refused"; fi
'
{
echo "host: $(readlink /proc/$pid/fd/3)"
sh -c "$probe" sh "$pid" host
unshare -U sh -c "$probe" sh "$pid" userns
unshare -Ur sh -c "$probe" sh "$pid" userns-root
} >` + report + ` 2>&1
exec /usr/bin/newuidmap "$@"
`
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "newuidmap"), []byte("#!/bin/sh\n"+tries), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := ociUsernsSpec([]string{"true"}, uint32(acct.uid), uint32(acct.gid), 1)
	spec.Linux.UIDMappings = append(spec.Linux.UIDMappings, specs.LinuxIDMapping{ContainerID: 1, HostID: uint32(subUID), Size: 10})
	spec.Linux.GIDMappings = append(spec.Linux.GIDMappings, specs.LinuxIDMapping{ContainerID: 1, HostID: uint32(subGID), Size: 10})
	_, bundle := ociOwnBundle(t, asRoot, spec, nil, nil)
	root := filepath.Join(dir, "state")
	// To a file: the created container keeps create's stdio.
	outPath := filepath.Join(dir, "out")
	oci := func(args ...string) (string, error) {
		out, err := os.Create(outPath)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		cmd := exec.Command("setpriv", append([]string{"--reuid", strconv.Itoa(acct.uid), "--regid", strconv.Itoa(acct.gid), "--clear-groups", "--",
			jailBin, "oci", "--root", root}, args...)...)
		cmd.Env = []string{"PATH=" + bin + ":" + systemPath, "HOME=" + acct.home}
		cmd.Dir = bundle
		cmd.Stdout, cmd.Stderr = out, out
		err = cmd.Run()
		b, _ := os.ReadFile(outPath)
		return string(b), err
	}
	t.Cleanup(func() { oci("delete", "--force", "box") })
	if out, err := oci("create", "--bundle", bundle, "box"); err != nil {
		t.Fatalf("create: %v: %s", err, out)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	t.Logf("the stand-in newuidmap:\n%s", got)
	// The window is real: the user's own host process reads the role's.
	if !strings.Contains(got, "host: socket:[") {
		t.Fatalf("the stand-in did not see the role's control socket from the host:\n%s", got)
	}
	if !strings.Contains(got, "host mem: opened\n") || strings.Contains(got, "host descriptors read: 0\n") {
		t.Fatalf("the probe cannot tell: the user's host process did not reach the role:\n%s", got)
	}
	for _, want := range []string{"userns descriptors read: 0\n", "userns mem: refused\n", "userns environ: refused\n",
		"userns-root descriptors read: 0\n", "userns-root mem: refused\n", "userns-root environ: refused\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q: another user namespace of the user reached the role:\n%s", want, got)
		}
	}
	if out, err := oci("delete", "--force", "box"); err != nil {
		t.Errorf("delete --force: %v: %s", err, out)
	}
}
