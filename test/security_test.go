package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostileRootfs copies the busybox rootfs and lets change make it hostile.
func hostileRootfs(t *testing.T, change func(dir string)) string {
	t.Helper()
	dir := filepath.Join(sharedTempDir(t, nil), "rootfs")
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(rootfsDir, "bin", "busybox"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "bin", "busybox"), data, 0o755)
	for _, a := range []string{"sh", "cat", "ls", "echo", "touch"} {
		os.Symlink("busybox", filepath.Join(dir, "bin", a))
	}
	for _, d := range []string{"etc", "proc", "sys", "tmp", "dev", "run"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	change(dir)
	return dir
}

// Lessons 4 and 7 (CVE-2025-31133, CVE-2026-41579): a root filesystem whose
// /dev or /dev/null is a symlink must not steer jail's mounts anywhere.
func TestHostileDevSymlinks(t *testing.T) {
	cases := []struct {
		name   string
		change func(dir string)
	}{
		{"/dev is a symlink to a host path", func(dir string) {
			os.Remove(filepath.Join(dir, "dev"))
			os.Symlink("/proc/sys/kernel", filepath.Join(dir, "dev"))
		}},
		{"/dev/null is a symlink to core_pattern", func(dir string) {
			os.Symlink("/proc/sys/kernel/core_pattern", filepath.Join(dir, "dev", "null"))
		}},
		{"/proc is a symlink", func(dir string) {
			os.Remove(filepath.Join(dir, "proc"))
			os.Symlink("/etc", filepath.Join(dir, "proc"))
		}},
		{"/tmp is a symlink out", func(dir string) {
			os.Remove(filepath.Join(dir, "tmp"))
			os.Symlink("../../../../../../etc", filepath.Join(dir, "tmp"))
		}},
	}
	pattern, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	forEachMode(t, func(t *testing.T, m mode) {
		for _, c := range cases {
			dir := hostileRootfs(t, c.change)
			r := jail(t, m, "run", "--rootfs", dir, "--", "sh", "-c", "echo '|/tmp/pwn' > /dev/null; ls /dev")
			// Either refused as jail's own error, or run with the sandbox's
			// own /dev/null: never a write to the host's kernel settings.
			if r.code != 0 && (r.code != 125 || !strings.HasPrefix(r.stderr, "jail: ")) {
				t.Errorf("%s: exit %d, stderr %q", c.name, r.code, r.stderr)
			}
			if now, _ := os.ReadFile("/proc/sys/kernel/core_pattern"); string(now) != string(pattern) {
				t.Fatalf("%s: the host's core_pattern changed to %q", c.name, now)
			}
		}
	})
}

// Lesson 3 (CVE-2021-30465): a mount destination that is a symlink in the
// root filesystem is resolved inside the root, never on the host.
func TestMountDestinationSymlinkStaysInside(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		dir := hostileRootfs(t, func(dir string) {
			os.Symlink("/etc", filepath.Join(dir, "workspace"))
			os.WriteFile(filepath.Join(dir, "etc", "marker"), []byte("image etc\n"), 0o644)
		})
		ws := sharedTempDir(t, rootless)
		os.WriteFile(filepath.Join(ws, "ws-file"), []byte("workspace\n"), 0o644)
		r := jail(t, m, "run", "--rootfs", dir, "--workspace", ws, "--", "sh", "-c", "cat /etc/ws-file")
		if r.code != 0 || r.stdout != "workspace\n" {
			t.Errorf("exit %d, stdout %q, stderr %q: want the workspace bound on the image's own /etc", r.code, r.stdout, r.stderr)
		}
		if _, err := os.Stat("/etc/ws-file"); err == nil {
			t.Errorf("the workspace landed on the host's /etc")
		}
	})
}

// A relative symlink in a --rootfs that climbs out of it still resolves
// inside the root.
func TestRootfsSymlinkCannotClimbOut(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		dir := hostileRootfs(t, func(dir string) {
			os.Symlink("../../../../../../../../etc/hostname", filepath.Join(dir, "escape"))
		})
		r := jail(t, m, "run", "--rootfs", dir, "--", "cat", "/escape")
		host, _ := os.ReadFile("/etc/hostname")
		if r.code == 0 && r.stdout == string(host) {
			t.Errorf("a symlink in the rootfs read the host's /etc/hostname")
		}
	})
}

// TestProgramsCannotBeMounted: the directory holding the copies of jail's
// own programs (what every sandbox's init runs from) and its cached filters
// is never given to a sandbox, nor a directory above or below it; rootless,
// the sandbox user owns those files and could otherwise rewrite the next
// sandbox's init or filter.
func TestProgramsCannotBeMounted(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		mustRun(t, m, "run", "--", "true") // the copies exist now
		dir := "/run/jail"
		if m.rootless {
			home := os.Getenv("HOME")
			if os.Geteuid() == 0 {
				home = rootless.home
			}
			dir = filepath.Join(home, ".cache", "jail")
		}
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("no program copies where expected: %v", err)
		}
		// (/run/jail, and directories above, may be refused as sensitive
		// host paths first.)
		srcs := []string{dir, filepath.Dir(dir)}
		if m.rootless {
			// The cached seccomp filters, below it: writable, they
			// would weaken the next sandbox's filter.
			cache := filepath.Join(dir, "seccomp")
			if err := os.MkdirAll(cache, 0o755); err == nil && os.Geteuid() == 0 {
				os.Chown(cache, rootless.uid, rootless.gid)
			}
			srcs = append(srcs, cache)
		}
		for _, src := range srcs {
			r := jail(t, m, "run", "--workspace", src, "--", "true")
			if r.code != 125 || !strings.Contains(r.stderr, "refused") {
				t.Errorf("--workspace %s: exit %d, stderr %q", src, r.code, r.stderr)
			}
		}
	})
}
