package test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// appArmorEnabled says whether this kernel confines with AppArmor (the
// v2 VM's Debian kernels do; this host's does not).
func appArmorEnabled() bool {
	b, err := os.ReadFile("/sys/module/apparmor/parameters/enabled")
	return err == nil && strings.HasPrefix(string(b), "Y")
}

// appArmorSecurityfs makes AppArmor's interface reachable for the test,
// as a host's boot makes it: securityfs mounted where nothing has (the
// VM mounts none), unmounted afterwards, after the profiles named in
// loaded are removed from the kernel. It returns apparmor_parser's path,
// and skips the test without it.
func appArmorSecurityfs(t *testing.T, loaded ...string) string {
	t.Helper()
	parser, err := exec.LookPath("apparmor_parser")
	if err != nil {
		t.Skip("apparmor_parser (Debian's apparmor) is not installed")
	}
	const securityfs = "/sys/kernel/security"
	if _, err := os.Stat(securityfs + "/apparmor"); os.IsNotExist(err) {
		if err := syscall.Mount("securityfs", securityfs, "securityfs", 0, ""); err != nil {
			t.Fatalf("mount securityfs: %v", err)
		}
		t.Cleanup(func() { syscall.Unmount(securityfs, syscall.MNT_DETACH) })
	}
	t.Cleanup(func() {
		for _, name := range loaded {
			os.WriteFile(securityfs+"/apparmor/.remove", []byte(name), 0)
		}
	})
	return parser
}

// loadAppArmorProfile loads profile (apparmor_parser's source) into the
// kernel for the test (see appArmorSecurityfs).
func loadAppArmorProfile(t *testing.T, name, profile string) {
	t.Helper()
	parser := appArmorSecurityfs(t, name)
	file := filepath.Join(t.TempDir(), "profile")
	if err := os.WriteFile(file, []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(parser, "--replace", "--skip-cache", file).CombinedOutput(); err != nil {
		t.Fatalf("apparmor_parser: %v: %s", err, out)
	}
}

// TestOCIAppArmorProfile: process.apparmorProfile confines the
// container's process and every process exec'd into it (which takes the
// container's process's profile unless --apparmor names another), where
// the kernel confines with AppArmor; a profile that is not loaded fails
// create with its name, as runc's create does. Where AppArmor is not
// enabled, create refuses the bundle with one line rather than run the
// process unconfined, as runc does. Neither a bind mount over the
// container's /proc/self/attr/apparmor/exec (of a host file, of a procfs
// file that takes any write) nor the image's symlinks under /proc can
// take the write elsewhere: it is made through the host's /proc.
func TestOCIAppArmorProfile(t *testing.T) {
	checkNoLeaks(t)
	if os.Geteuid() != 0 {
		t.Skip("jail oci runs as root")
	}
	m := asRoot
	spec := ociDefaultSpec([]string{"sleep", "1000"})
	spec.Process.ApparmorProfile = "jail-test-confined"
	root, bundle := ociOwnBundle(t, m, spec, nil, func(rootfs string) {
		if err := os.WriteFile(filepath.Join(rootfs, "secret"), []byte("s3cret\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	if !appArmorEnabled() {
		r := jail(t, m, "oci", "--root", root, "create", "--bundle", bundle, "box")
		expectOneLineFailure(t, r, `jail: oci create: process.apparmorProfile "jail-test-confined": AppArmor is not enabled on this host`)
		return
	}
	loadAppArmorProfile(t, "jail-test-confined", `profile jail-test-confined flags=(attach_disconnected,mediate_deleted) {
  /** rwlkm,
  /** ix,
  deny /secret r,
  capability,
  signal,
  unix,
  network,
}
`)
	// A createContainer hook runs before the init makes its request, as
	// runc runs it: unconfined.
	hookLabel := filepath.Join(bundle, "hook-label")
	hook := writeHook(t, filepath.Join(bundle, "create-container.sh"), "cat /proc/self/attr/apparmor/current > "+hookLabel+"\n")
	spec.Hooks = &specs.Hooks{CreateContainer: []specs.Hook{{Path: hook}}}
	writeOCISpec(t, bundle, spec)
	spec.Hooks = nil
	pid := ociStarted(t, m, root, bundle, "sleep")
	if got, _ := os.ReadFile(filepath.Join("/proc", pid, "attr", "apparmor", "current")); string(got) != "jail-test-confined (enforce)\n" {
		t.Errorf("the container's process is confined by %q", got)
	}
	if got, _ := os.ReadFile(hookLabel); string(got) != "unconfined\n" {
		t.Errorf("the createContainer hook ran under %q", got)
	}
	r := jail(t, m, "oci", "--root", root, "exec", "box", "cat", "/proc/self/attr/apparmor/current")
	if r.code != 0 || r.stdout != "jail-test-confined (enforce)\n" {
		t.Errorf("an exec'd process: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = jail(t, m, "oci", "--root", root, "exec", "box", "cat", "/secret")
	if r.code == 0 || strings.Contains(r.stdout, "s3cret") || !strings.Contains(r.stderr, "denied") {
		t.Errorf("the profile's deny did not hold for an exec'd process: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = jail(t, m, "oci", "--root", root, "exec", "--apparmor", "jail-test-absent", "box", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "jail-test-absent") {
		t.Errorf("exec under a profile not loaded: %d %q", r.code, r.stderr)
	}

	// --process without a profile: the process takes the container's,
	// as runc's exec does (containerd's shim always passes --process).
	processFile := filepath.Join(sharedTempDir(t, nil), "process.json")
	processJSON, err := json.Marshal(specs.Process{Args: []string{"cat", "/proc/self/attr/apparmor/current"}, Cwd: "/", Env: spec.Process.Env})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(processFile, processJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	r = jail(t, m, "oci", "--root", root, "exec", "--process", processFile, "box")
	if r.code != 0 || r.stdout != "jail-test-confined (enforce)\n" {
		t.Errorf("an exec'd --process without a profile: %d %q %q", r.code, r.stdout, r.stderr)
	}

	// A profile that is not loaded fails create, naming it.
	spec.Process.ApparmorProfile = "jail-test-absent"
	root2, bundle2 := ociOwnBundle(t, m, spec, nil, nil)
	r = jail(t, m, "oci", "--root", root2, "create", "--bundle", bundle2, "box2")
	if r.code == 0 || !strings.Contains(r.stderr, "apparmor") || !strings.Contains(r.stderr, "jail-test-absent") {
		t.Errorf("create under a profile not loaded: %d %q", r.code, r.stderr)
	}
	jail(t, m, "oci", "--root", root2, "delete", "--force", "box2")

	// A file bound over the container's /proc/self/attr/apparmor/exec
	// cannot take the write elsewhere: not a file of the host's, and not
	// a procfs file that takes any write (a sysctl, /proc/self/sched),
	// which passes a check that the file is procfs's. The container
	// either fails to start or runs confined; the file is not written.
	spec.Process.ApparmorProfile = "jail-test-confined"
	decoy := filepath.Join(sharedTempDir(t, nil), "exec")
	if err := os.WriteFile(decoy, []byte("untouched\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mounts := spec.Mounts
	for i, source := range []string{decoy, "/proc/sys/kernel/domainname", "/proc/self/sched"} {
		if _, err := os.Stat(source); err != nil {
			continue // no /proc/self/sched without CONFIG_SCHED_DEBUG
		}
		id := "box" + strconv.Itoa(3+i)
		spec.Mounts = append(mounts[:len(mounts):len(mounts)], specs.Mount{Destination: "/proc/self/attr/apparmor/exec", Type: "bind", Source: source, Options: []string{"bind", "rw"}})
		root3, bundle3 := ociOwnBundle(t, m, spec, nil, nil)
		// Its output to a file: a created init holds it open.
		pidFile, out := filepath.Join(bundle3, "pid"), filepath.Join(bundle3, "out")
		cmd := command(m, "oci", "--root", root3, "create", "--bundle", bundle3, "--pid-file", pidFile, id)
		outFile, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = outFile, outFile
		err = cmd.Run()
		outFile.Close()
		if err == nil {
			pidBytes, _ := os.ReadFile(pidFile)
			pid := strings.TrimSpace(string(pidBytes))
			if r := jail(t, m, "oci", "--root", root3, "start", id); r.code != 0 {
				t.Errorf("a bind of %s over attr/apparmor/exec: start %d %q", source, r.code, r.stderr)
			}
			waitFor(t, 10*time.Second, "the process's exec", func() bool {
				comm, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
				return strings.TrimSpace(string(comm)) == "sleep"
			})
			if got, _ := os.ReadFile(filepath.Join("/proc", pid, "attr", "apparmor", "current")); string(got) != "jail-test-confined (enforce)\n" {
				t.Errorf("a bind of %s over attr/apparmor/exec: the container's process runs under %q", source, got)
			}
			// An exec enters the container's mounts, the bind with them.
			r := jail(t, m, "oci", "--root", root3, "exec", id, "cat", "/proc/self/attr/apparmor/current")
			if r.code != 0 || r.stdout != "jail-test-confined (enforce)\n" {
				t.Errorf("a bind of %s over attr/apparmor/exec: an exec'd process: %d %q %q", source, r.code, r.stdout, r.stderr)
			}
		}
		jail(t, m, "oci", "--root", root3, "delete", "--force", id)
	}
	spec.Mounts = mounts

	// Nor the image's symlinks: a bundle that mounts procfs at /proc2
	// only, whose image's /proc/self is a directory leading fd to the
	// real one (the exec FIFO is opened through it) and
	// attr/apparmor/exec to a sysctl. Every process's /proc/self is that
	// directory, an exec'd one's too.
	symlinked := *spec
	symlinked.Mounts = nil
	for _, mnt := range mounts {
		if mnt.Destination == "/proc" {
			mnt.Destination = "/proc2"
		}
		symlinked.Mounts = append(symlinked.Mounts, mnt)
	}
	linux := *spec.Linux
	linux.MaskedPaths, linux.ReadonlyPaths = nil, nil
	symlinked.Linux = &linux
	root5, bundle5 := ociOwnBundle(t, m, &symlinked, nil, func(rootfs string) {
		self := filepath.Join(rootfs, "proc", "self")
		if err := os.MkdirAll(filepath.Join(self, "attr", "apparmor"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/proc2/self/fd", filepath.Join(self, "fd")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/proc2/sys/kernel/domainname", filepath.Join(self, "attr", "apparmor", "exec")); err != nil {
			t.Fatal(err)
		}
	})
	out5, err := os.Create(filepath.Join(bundle5, "out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := command(m, "oci", "--root", root5, "create", "--bundle", bundle5, "--pid-file", filepath.Join(bundle5, "pid"), "box7")
	cmd.Stdout, cmd.Stderr = out5, out5
	err = cmd.Run()
	out5.Close()
	if err == nil {
		pidBytes, _ := os.ReadFile(filepath.Join(bundle5, "pid"))
		pid := strings.TrimSpace(string(pidBytes))
		if r := jail(t, m, "oci", "--root", root5, "start", "box7"); r.code != 0 {
			t.Errorf("image symlinks into procfs: start %d %q", r.code, r.stderr)
		}
		waitFor(t, 10*time.Second, "the process's exec", func() bool {
			comm, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
			return strings.TrimSpace(string(comm)) == "sleep"
		})
		if got, _ := os.ReadFile(filepath.Join("/proc", pid, "attr", "apparmor", "current")); string(got) != "jail-test-confined (enforce)\n" {
			t.Errorf("image symlinks into procfs: the container's process runs under %q", got)
		}
		r := jail(t, m, "oci", "--root", root5, "exec", "box7", "cat", "/proc2/self/attr/apparmor/current")
		if r.code != 0 || r.stdout != "jail-test-confined (enforce)\n" {
			t.Errorf("image symlinks into procfs: an exec'd process: %d %q %q", r.code, r.stdout, r.stderr)
		}
	}
	jail(t, m, "oci", "--root", root5, "delete", "--force", "box7")

	if written, _ := os.ReadFile(decoy); string(written) != "untouched\n" {
		t.Errorf("a bind over attr/apparmor/exec: the bound file holds %q", written)
	}

	// In a user namespace of its own the process is confined the same:
	// the request, made before the namespaces, reaches it across them.
	spec.Linux.Namespaces = append(spec.Linux.Namespaces, specs.LinuxNamespace{Type: "user"})
	spec.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 200000, Size: 65536}}
	spec.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 200000, Size: 65536}}
	root4, bundle4 := ociOwnBundle(t, m, spec, nil, nil)
	out4, err := os.Create(filepath.Join(bundle4, "out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd = command(m, "oci", "--root", root4, "create", "--bundle", bundle4, "--pid-file", filepath.Join(bundle4, "pid"), "box6")
	cmd.Stdout, cmd.Stderr = out4, out4
	err = cmd.Run()
	out4.Close()
	defer jail(t, m, "oci", "--root", root4, "delete", "--force", "box6")
	if err != nil {
		b, _ := os.ReadFile(out4.Name())
		t.Fatalf("create in a user namespace: %v: %s", err, b)
	}
	pidBytes, _ := os.ReadFile(filepath.Join(bundle4, "pid"))
	pid = strings.TrimSpace(string(pidBytes))
	if r := jail(t, m, "oci", "--root", root4, "start", "box6"); r.code != 0 {
		t.Fatalf("start in a user namespace: %d %q", r.code, r.stderr)
	}
	waitFor(t, 10*time.Second, "the process's exec", func() bool {
		comm, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
		return strings.TrimSpace(string(comm)) == "sleep"
	})
	if got, _ := os.ReadFile(filepath.Join("/proc", pid, "attr", "apparmor", "current")); string(got) != "jail-test-confined (enforce)\n" {
		t.Errorf("in a user namespace, the container's process is confined by %q", got)
	}
	r = jail(t, m, "oci", "--root", root4, "exec", "box6", "cat", "/proc/self/attr/apparmor/current")
	if r.code != 0 || r.stdout != "jail-test-confined (enforce)\n" {
		t.Errorf("in a user namespace, an exec'd process: %d %q %q", r.code, r.stdout, r.stderr)
	}
}
