package rootfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Host paths hidden from a sandbox that sees the host tree. Files are covered
// by an empty unreadable file, directories by an empty read-only directory.
// A path that does not exist on this host is skipped.
var hostMasked = []string{
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
	"/etc/sudoers", "/etc/security/opasswd",
	"/var/run/docker.sock", "/var/run/containerd/containerd.sock",
	"/etc/sudoers.d", "/etc/ssl/private", "/var/lib/sudo",
	"/var/lib/docker", "/var/lib/containerd", "/var/lib/containers",
	"/var/spool/cron/crontabs", "/var/lib/jail",
}

// hostMaskedGlobs are expanded on the host when the sandbox is built.
var hostMaskedGlobs = []string{"/etc/ssh/ssh_host_*_key"}

// Kernel interfaces no sandbox needs: covered (masked) or made read-only,
// after the lists runc has refined over the years.
var kernelMasked = []string{
	"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug",
	"/proc/latency_stats", "/proc/timer_stats", "/proc/sysrq-trigger",
	"/proc/acpi", "/proc/scsi", "/sys/firmware",
}

var procReadOnly = []string{"/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs"}

// Top-level entries of the host tree that a sandbox never sees as they are:
// kernel filesystems and scratch space are mounted fresh, homes are masked.
var hostTopLevelReplaced = map[string]bool{
	"proc": true, "sys": true, "dev": true, "tmp": true, "run": true,
	"home": true, "root": true,
}

// sensitiveExact are host paths that may never be bind-mounted into a
// sandbox, nor any directory that contains them.
var sensitiveExact = []string{
	"/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/sudoers.d",
	"/etc/ssl/private", "/root",
	"/var/run/docker.sock", "/run/docker.sock", "/run/containerd", "/var/lib/docker",
	"/run/user", "/run/jail", "/var/lib/jail",
}

// sensitiveTrees are host trees no path inside of which may be mounted.
var sensitiveTrees = []string{"/proc", "/sys", "/dev", "/boot"}

// sensitiveNames are credential stores wherever they appear (any home).
var sensitiveNames = map[string]bool{
	".ssh": true, ".aws": true, ".gnupg": true, ".docker": true, ".kube": true,
	".netrc": true, ".git-credentials": true, ".pgpass": true,
}

// CheckMountSource refuses host paths that must not be visible in a sandbox.
// path must already be absolute and canonical (symlinks resolved); home is
// the caller's home directory, whose credential stores are protected even
// when they do not exist yet, and so are jailDirs (jail's own files: a
// sandbox that could change them would change the next sandbox).
func CheckMountSource(path, home string, jailDirs ...string) error {
	if path == "/" {
		return fmt.Errorf("%s is the host's whole tree", path)
	}
	for _, t := range sensitiveTrees {
		if within(path, t) {
			return fmt.Errorf("%s is inside %s, a kernel or boot tree", path, t)
		}
	}
	for _, comp := range strings.Split(path, "/") {
		if sensitiveNames[comp] {
			return fmt.Errorf("%s is a credential store (%s)", path, comp)
		}
	}
	protected := append([]string{}, sensitiveExact...)
	if home != "" && home != "/" {
		for name := range sensitiveNames {
			protected = append(protected, filepath.Join(home, name))
		}
	}
	always := map[string]bool{}
	for _, d := range jailDirs {
		if d != "" {
			protected, always[d] = append(protected, d), true
		}
	}
	for _, s := range protected {
		if within(path, s) {
			return fmt.Errorf("%s is a sensitive host path (%s)", path, s)
		}
		if within(s, path) {
			if _, err := os.Lstat(s); err == nil || strings.HasPrefix(s, home+"/") || always[s] {
				return fmt.Errorf("%s contains the sensitive host path %s", path, s)
			}
		}
	}
	return nil
}

// CheckDestination validates a path inside the sandbox that something is
// mounted on.
func CheckDestination(dst string) error {
	if !filepath.IsAbs(dst) {
		return fmt.Errorf("%q is not an absolute path", dst)
	}
	for _, comp := range strings.Split(dst, "/") {
		if comp == ".." {
			return fmt.Errorf("%q leaves the sandbox root", dst)
		}
	}
	if filepath.Clean(dst) == "/" {
		return fmt.Errorf("%q would replace the sandbox root", dst)
	}
	return CheckWorkdir(dst)
}

// CheckWorkdir validates a working directory inside the sandbox. Kernel trees
// are refused: a working directory reached through /proc/self/fd/N could be
// a directory outside the root (CVE-2024-21626).
func CheckWorkdir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%q is not an absolute path", dir)
	}
	if len(dir) > 4095 {
		return fmt.Errorf("path is longer than 4095 bytes")
	}
	clean := filepath.Clean(dir)
	for _, t := range []string{"/proc", "/sys", "/dev"} {
		if within(clean, t) {
			return fmt.Errorf("%q is inside %s, which jail manages", dir, t)
		}
	}
	return nil
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}
