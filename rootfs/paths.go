// Package rootfs holds the supervisor's side of a sandbox's root
// filesystem: the checks of what a caller may mount where (CheckMountSource,
// CheckDestination, CheckWorkdir) and the host paths every sandbox masks
// beyond the fixed lists (HomeMasks, CredentialNames). The root itself is
// built by the sandbox's init, in C (internal/programs/init/init.c, whose
// build_root states the order of the steps; the fixed lists of what is
// masked, made read-only and replaced are package layout's, generated into
// the init's layout.h); nothing here runs in the sandbox.
package rootfs

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/jail-sandbox/jail/internal/privdir"
)

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

// CredentialNames are the names of credential stores that no mount source
// may be or hold, in a home or anywhere.
func CredentialNames() []string {
	names := make([]string, 0, len(sensitiveNames))
	for n := range sensitiveNames {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
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
	if strings.IndexByte(dir, 0) >= 0 {
		// The init could not be handed it: refused here, as the
		// request's fault, rather than once a sandbox is started.
		return fmt.Errorf("%q holds a NUL byte", dir)
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

// systemDirs are directories no home may hide: a service account whose
// home is /, /bin or /var keeps it as a home in name only.
var systemDirs = []string{
	"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/media", "/mnt",
	"/opt", "/proc", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var", "/var/cache",
	"/var/lib", "/var/local", "/var/log", "/var/mail", "/var/opt", "/var/run", "/var/spool", "/var/tmp",
}

// noLoginShells mark accounts nobody logs in to.
var noLoginShells = map[string]bool{
	"/usr/sbin/nologin": true, "/sbin/nologin": true, "/bin/false": true, "/usr/bin/false": true,
	"/bin/sync": true, "/sbin/halt": true, "/sbin/shutdown": true, "": false,
}

// firstUserID is where Debian and most distributions start the ids of
// people's accounts (login.defs UID_MIN); nobody (65534) is not one.
const firstUserID = 1000

// HomeMasks returns the homes a sandbox on the host tree must not see,
// beyond /home and /root (which are replaced whole): the caller's own,
// wherever it is ($HOME, given in callerHomes, and the password database's
// home of callerUID), and that of every account in accounts (the password
// database's) that a person or a login may use (a uid of firstUserID and
// up, or a login shell), such as a CI user's /var/lib/jenkins. Homes that
// are system directories, or hold one, are left alone.
func HomeMasks(accounts []privdir.Account, callerUID int, callerHomes ...string) []string {
	var homes []string
	seen := map[string]bool{}
	add := func(h string) {
		if !filepath.IsAbs(h) {
			return
		}
		h = filepath.Clean(h)
		if seen[h] || within(h, "/home") || within(h, "/root") {
			return
		}
		for _, d := range systemDirs {
			if within(d, h) {
				return
			}
		}
		seen[h] = true
		homes = append(homes, h)
	}
	for _, h := range callerHomes {
		add(h)
	}
	for _, a := range accounts {
		person := a.UID >= firstUserID && a.UID != 65534
		shell := strings.TrimSpace(a.Shell)
		if person || a.UID == callerUID || (shell != "" && !noLoginShells[shell]) {
			add(a.Home)
		}
	}
	return homes
}

// WithinAny returns the first of dirs that path is or lies below, or "".
func WithinAny(path string, dirs []string) string {
	for _, d := range dirs {
		if within(path, d) {
			return d
		}
	}
	return ""
}
