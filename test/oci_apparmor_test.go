package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

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
// process unconfined, as runc does. A bind mount over the container's
// /proc/self/attr cannot take the write elsewhere.
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
	pid := ociStarted(t, m, root, bundle, "sleep")
	if got, _ := os.ReadFile(filepath.Join("/proc", pid, "attr", "apparmor", "current")); string(got) != "jail-test-confined (enforce)\n" {
		t.Errorf("the container's process is confined by %q", got)
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

	// A profile that is not loaded fails create, naming it.
	spec.Process.ApparmorProfile = "jail-test-absent"
	root2, bundle2 := ociOwnBundle(t, m, spec, nil, nil)
	r = jail(t, m, "oci", "--root", root2, "create", "--bundle", bundle2, "box2")
	if r.code == 0 || !strings.Contains(r.stderr, "apparmor") || !strings.Contains(r.stderr, "jail-test-absent") {
		t.Errorf("create under a profile not loaded: %d %q", r.code, r.stderr)
	}
	jail(t, m, "oci", "--root", root2, "delete", "--force", "box2")

	// A file bound over the container's /proc/self/attr/apparmor/exec
	// (the process's own, not procfs's) is refused, not written.
	spec.Process.ApparmorProfile = "jail-test-confined"
	decoy := filepath.Join(sharedTempDir(t, nil), "exec")
	if err := os.WriteFile(decoy, []byte("untouched\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec.Mounts = append(spec.Mounts, specs.Mount{Destination: "/proc/self/attr/apparmor/exec", Type: "bind", Source: decoy, Options: []string{"bind", "rw"}})
	root3, bundle3 := ociOwnBundle(t, m, spec, nil, nil)
	r = jail(t, m, "oci", "--root", root3, "create", "--bundle", bundle3, "box3")
	jail(t, m, "oci", "--root", root3, "delete", "--force", "box3")
	written, _ := os.ReadFile(decoy)
	if r.code == 0 || string(written) != "untouched\n" {
		t.Errorf("a bind over attr/apparmor/exec: create %d %q, the bound file holds %q", r.code, r.stderr, written)
	}
}
