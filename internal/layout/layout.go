// Package layout holds the fixed parts of every sandbox's root filesystem
// that the supervisor (Go) and the sandbox's init (C) both know: what is
// masked, what is made read-only, which top-level entries of the host tree
// are replaced, which devices are bound and which links /dev gets.
//
// These lists are the one source: the C init's copy
// (internal/programs/init/layout.h) is generated from them by go generate
// (./gen), and TestLayoutHeaderIsCurrent fails when it is stale. Every list
// is in the order the init applies it.
package layout

//go:generate go run ./gen

// HostMasked are host paths hidden from a sandbox that sees the host tree.
// Files are covered by an empty unreadable file, directories by an empty
// read-only directory. A path that does not exist on this host is skipped.
var HostMasked = []string{
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
	"/etc/sudoers", "/etc/security/opasswd",
	"/var/run/docker.sock", "/var/run/containerd/containerd.sock",
	"/etc/sudoers.d", "/etc/ssl/private", "/var/lib/sudo",
	"/var/lib/docker", "/var/lib/containerd", "/var/lib/containers",
	"/var/spool/cron/crontabs", "/var/lib/jail",
	// Host services' unix sockets outside /run and /tmp: a read-only mount
	// does not stop connect() (README, Known limits).
	"/var/lib/mysql", "/var/lib/sss/pipes", "/var/spool/postfix/private",
	"/var/spool/postfix/public", "/var/lib/libvirt", "/var/lib/lxd",
	"/var/snap/lxd/common/lxd", "/var/lib/incus", "/var/lib/rancher",
}

// HostMaskedGlobs are expanded on the host when the sandbox is built, and
// each match is masked as HostMasked's are.
var HostMaskedGlobs = []string{"/etc/ssh/ssh_host_*_key"}

// KernelMasked are kernel interfaces no sandbox needs, covered in every
// sandbox, after the lists runc has refined over the years.
var KernelMasked = []string{
	"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug",
	"/proc/latency_stats", "/proc/timer_stats", "/proc/sysrq-trigger",
	"/proc/acpi", "/proc/scsi", "/sys/firmware",
}

// ProcReadOnly are made read-only in every sandbox.
var ProcReadOnly = []string{"/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs"}

// HostTopLevelReplaced are the top-level entries of the host tree that a
// sandbox never sees as they are: kernel filesystems and scratch space are
// mounted fresh, homes are masked.
var HostTopLevelReplaced = []string{"proc", "sys", "dev", "tmp", "run", "home", "root"}

// Device is a device node bound from the host's /dev. Its number is
// checked, so a swapped node (CVE-2025-31133) is refused.
type Device struct {
	Name         string
	Major, Minor uint32
}

// HostDevices are the devices every sandbox's /dev has.
var HostDevices = []Device{
	{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7},
	{"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0},
}

// Symlink is a link in a sandbox's /dev: Name points to Target.
type Symlink struct {
	Name, Target string
}

// DevSymlinks are the links every sandbox's /dev has.
var DevSymlinks = []Symlink{
	{"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"},
	{"stderr", "/proc/self/fd/2"}, {"ptmx", "pts/ptmx"}, {"core", "/proc/kcore"},
}
