// Package config describes one sandbox as its init stage realises it.
//
// The supervisor validates the user's request, resolves every host path and
// decides the identity mapping; what it sends to the init over the control
// socket is an Init value. The init trusts this description (it comes from
// the supervisor, never from the sandboxed code) but not the filesystem it
// points into: every path inside a root filesystem is resolved again, safely,
// when it is used.
package config

import "github.com/jail-sandbox/jail/seccomp/filter"

// Init is everything the init stage needs to build and start a sandbox.
//
// These types are the control protocol's description: the supervisor's
// encoder and the C init's decoder are generated from their fields, in
// declaration order, and their wire tags (internal/control/gen). After a
// change here, run go generate ./internal/control.
type Init struct {
	Rootfs   Rootfs   `json:"rootfs"`
	Mounts   []Mount  `json:"mounts,omitempty"`
	Hostname string   `json:"hostname"`
	Process  Process  `json:"process"`
	Limits   Limits   `json:"limits"`
	Masks    []string `json:"masks,omitempty"`                              // extra paths to hide, beyond the built-in lists
	ReadOnly []string `json:"read_only,omitempty" wire:"c=read_only_paths"` // extra paths to make read-only
	// Seccomp is the profile's compiled filter, loaded last before exec.
	Seccomp filter.Filter `json:"seccomp"`
	// EnterCgroup: a cgroup message follows this description, with the
	// tasks files of the sandbox's v1 cgroup, which the supervisor makes
	// while the init builds the root. Once the root is built, the init
	// reads it and moves the thread that forks the command into the
	// cgroup, before anything of the sandbox runs, and only then makes the
	// cgroup namespace, so that the namespace is rooted at the sandbox's
	// cgroup.
	EnterCgroup bool `json:"enter_cgroup,omitempty"`
	// TakeRoot: the init was started as host root before its ids were
	// mapped (namespaces.Identity.TakesRoot); it makes itself sandbox root
	// (uid and gid 0, no supplementary groups) before anything else.
	TakeRoot bool `json:"take_root,omitempty"`
	// Capabilities is the bounding set the command keeps (bit N:
	// capability N), all within the sandbox's user namespace; the command
	// has them only when it runs as uid 0 there. 0: none.
	Capabilities uint64 `json:"capabilities,omitempty"`
	// Persistent: the sandbox serves execs (control.KindExec) once ready,
	// rather than waiting for one release, until its control socket hangs
	// up (docs/persistent.md). Process is then unused.
	Persistent bool `json:"persistent,omitempty"`
	// TTL and IdleTimeout (nanoseconds, 0: none) end a persistent
	// sandbox's init, with status 0 as KindEnd does, that long after it
	// was ready, or once no command started on request has run for that
	// long.
	TTL         int64 `json:"ttl,omitempty" wire:"min=0"`
	IdleTimeout int64 `json:"idle_timeout,omitempty" wire:"min=0"`
	// Listen are sockets the init opens in the sandbox's network namespace
	// once its loopback is up, before anything of the sandbox runs, and
	// attaches to KindReady in this order: the egress gateway's, which
	// serves them from outside the sandbox (docs/egress.md). The init keeps
	// no copy, so nothing in the sandbox holds them.
	Listen []Listener `json:"listen,omitempty"`
	// Files are written by the init under the sandbox's /run/egress (not
	// /run/jail, root's state directory, which is masked), each in a file
	// of its own, and bound read-only over their destinations (the
	// gateway's resolv.conf and trust store).
	Files []File `json:"files,omitempty"`
}

// Listener is one socket the init opens for the supervisor.
type Listener struct {
	// Stream: a listening TCP socket; otherwise a bound UDP one.
	Stream bool `json:"stream"`
	// Address is an IPv4 address in dotted-quad form.
	Address string `json:"address"`
	Port    int    `json:"port" wire:"min=1,max=65535"`
}

// File is one file the init writes and binds over Destination, an
// absolute, clean path inside the sandbox.
type File struct {
	Destination string `json:"destination"`
	Data        []byte `json:"data"`
	// Append: the file holds what the root has at Destination (a regular
	// file, when there is one) followed by Data, as a trust store gets
	// the gateway's authority added to its own.
	Append bool `json:"append,omitempty"`
	// Optional: written only where the root has Destination already
	// (nothing is made for it).
	Optional bool `json:"optional,omitempty"`
}

// Rootfs says what the sandbox's / is made of.
type Rootfs struct {
	// HostTree: the host's own tree, bound read-only, with the host masks.
	HostTree bool `json:"host_tree"`
	// Lowers are the read-only layers of the root when HostTree is false,
	// top layer first: a --rootfs directory, or an image's layers.
	Lowers []Layer `json:"lowers,omitempty"`
	// ReadOnly: no writable layer over the root; only /tmp, /run, /dev/shm
	// and /workspace can be written.
	ReadOnly bool `json:"read_only"`
	// Home is the writable, initially empty home directory of the sandbox
	// user ("" for none). It replaces whatever the root has there.
	Home string `json:"home,omitempty"`
}

// Layer is a directory of the host used as a read-only layer.
type Layer struct {
	// Path is canonical (no symlinks); Dev and Ino identify it as the
	// supervisor saw it, so a directory swapped in between is refused.
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
	// FD, when not 0, is the init's file descriptor of a detached,
	// read-only clone of the layer made by jail as root (a --rootfs
	// directory), which the init mounts on its stage and uses instead of
	// reopening Path. 0 (stdin, never a layer) is none: a layer of jail's
	// own image store is reopened by path.
	FD int `json:"fd,omitempty" wire:"min=0"`
}

// Mount is one bind mount from the host into the sandbox.
type Mount struct {
	// Source is the canonical host path (symlinks already resolved by the
	// supervisor); SourceDev/SourceIno identify it as the supervisor saw it.
	Source    string `json:"source"`
	SourceDev uint64 `json:"source_dev"`
	SourceIno uint64 `json:"source_ino"`
	// SourceUID and SourceGID own the source on the host.
	SourceUID int `json:"source_uid" wire:"min=-1,max=4294967295"`
	SourceGID int `json:"source_gid" wire:"min=-1,max=4294967295"`
	// SourceIsDir tells whether the mountpoint to create is a directory.
	SourceIsDir bool `json:"source_is_dir"`
	// Destination is an absolute, clean path inside the sandbox.
	Destination string `json:"destination"`
	Writable    bool   `json:"writable"`
	// FD, when not -1, is the init's file descriptor of a detached mount
	// (a clone of the source opened at check time, its attributes set and
	// id-mapped where it had to be, by jail as root) to attach instead of
	// binding Source.
	FD int `json:"fd" wire:"min=-1"`
}

// Process is the command the sandbox runs.
type Process struct {
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Cwd  string   `json:"cwd"`
	UID  uint32   `json:"uid"`
	GID  uint32   `json:"gid"`
	// SwitchUser: the init runs as sandbox root and switches to UID/GID for
	// the command (true when jail runs as root and maps a range of ids).
	// When false the init already runs as UID/GID.
	SwitchUser bool   `json:"switch_user"`
	TTY        bool   `json:"tty"`
	Rows       uint16 `json:"rows,omitempty"`
	Cols       uint16 `json:"cols,omitempty"`
}

// Limits bounds what the sandbox may consume inside its own namespaces.
// Sizes are bytes.
type Limits struct {
	TmpSize   int64 `json:"tmp_size"`
	RunSize   int64 `json:"run_size"`
	ShmSize   int64 `json:"shm_size"`
	UpperSize int64 `json:"upper_size"`
	HomeSize  int64 `json:"home_size"`
	// RlimitData and RlimitNproc, when not 0, are set before the command
	// runs: the fallback where no cgroup can hold the sandbox.
	RlimitData  int64 `json:"rlimit_data,omitempty"`
	RlimitNproc int64 `json:"rlimit_nproc,omitempty"`
	// SysVShm, when not 0, bounds the System V shared memory of the
	// sandbox's ipc namespace (kernel.shmmax and shmall): the fallback
	// too, since no cgroup charges it.
	SysVShm int64 `json:"sysv_shm,omitempty" wire:"c=sysv_shm"`
	// RlimitStack, when not 0, is the hard limit of RLIMIT_STACK (the soft
	// one at most 8 MiB): a stack's growth is not data.
	RlimitStack int64 `json:"rlimit_stack,omitempty"`
}

// Container is an OCI container (jail oci, docs/oci.md) as the helper's
// container role realises it: the bundle's config.json, translated and
// checked by package oci, with every host path resolved. Nothing of jail's
// own sandbox defaults is in it: what the bundle does not ask for is not
// done. It comes in a KindContainer message, with the files its FD fields
// name (counted from 4: fd 3 is the control socket).
type Container struct {
	// Join are namespaces the container joins, before it makes the new
	// ones: a user namespace first, then the others.
	Join []JoinedNamespace `json:"join,omitempty"`
	// New is the CLONE_NEW* flags of the namespaces made for it. A new
	// user namespace's maps are written by the supervisor
	// (KindUsernsReady, then KindMapped).
	New int64 `json:"new" wire:"min=0"`
	// Rootfs is the canonical host path of the root; RootfsDev and
	// RootfsIno identify it as the supervisor checked it.
	Rootfs         string `json:"rootfs"`
	RootfsDev      uint64 `json:"rootfs_dev"`
	RootfsIno      uint64 `json:"rootfs_ino"`
	RootfsReadOnly bool   `json:"rootfs_read_only"`
	// RootPropagation is the MS_* propagation of the container's mounts
	// (linux.rootfsPropagation; 0: MS_SLAVE|MS_REC, as runc).
	RootPropagation uint64           `json:"root_propagation,omitempty"`
	Mounts          []ContainerMount `json:"mounts,omitempty"`
	// Hostname and Domainname are set when SetHostname (a new uts
	// namespace).
	SetHostname bool   `json:"set_hostname,omitempty"`
	Hostname    string `json:"hostname,omitempty"`
	Domainname  string `json:"domainname,omitempty"`
	// MaskedPaths and ReadonlyPaths are linux.maskedPaths and
	// linux.readonlyPaths, inside the root.
	MaskedPaths   []string         `json:"masked_paths,omitempty"`
	ReadonlyPaths []string         `json:"readonly_paths,omitempty"`
	Devices       []Device         `json:"devices,omitempty"`
	Sysctl        []Sysctl         `json:"sysctl,omitempty"`
	Process       ContainerProcess `json:"process"`
	// Seccomp is the bundle's filter, compiled; empty: none.
	Seccomp filter.Filter `json:"seccomp"`
	// ProfileSeccomp is the filter of the jail profile the bundle's
	// jail.dev/profile annotation names, loaded before the bundle's (so
	// that the bundle's cannot fake the loading; the kernel applies the
	// stricter of the two); empty: none.
	ProfileSeccomp filter.Filter `json:"profile_seccomp"`
	// ExecFifoFD is the descriptor of the state directory's exec FIFO
	// (O_PATH): the container's process is started once `jail oci start`
	// opens its other end. -1 in a KindEnter, whose process starts at once.
	ExecFifoFD int `json:"exec_fifo_fd" wire:"min=-1"`
	// PreservedFDs are the descriptors (attached, in order) the process
	// gets as 3, 4, ... and keeps across its exec: the caller's
	// --preserve-fds, as runc passes them (systemd's socket activation).
	PreservedFDs []int `json:"preserved_fds,omitempty" wire:"min=4,c=preserved_fds"`
	// CreateContainerHooks are hooks.createContainer: the init runs them
	// in the container's namespaces, with its privileges, once the
	// mounts are made and before it pivots into the root (the paths are
	// resolved in the tree the runtime sees). StartContainerHooks are
	// hooks.startContainer: the init runs them once started, as the
	// container's process (its ids, capabilities and filters, in its
	// root), right before the exec. Both get the state KindState brings
	// on stdin; a container with either waits for it before it pivots.
	CreateContainerHooks []ContainerHook `json:"create_container_hooks,omitempty"`
	StartContainerHooks  []ContainerHook `json:"start_container_hooks,omitempty"`
}

// ContainerHook is one hook the container's init runs (a hooks entry of
// the bundle).
type ContainerHook struct {
	// Path is absolute; Args its argv (empty: Path alone); Env all of its
	// environment.
	Path string   `json:"path"`
	Args []string `json:"args,omitempty"`
	Env  []string `json:"env,omitempty"`
	// Timeout is in seconds (0: none): the hook is killed then, and fails.
	Timeout int `json:"timeout,omitempty" wire:"min=0"`
}

// JoinedNamespace is one namespace to join: FD is an open namespace file.
type JoinedNamespace struct {
	// Type is its CLONE_NEW* flag.
	Type int64 `json:"type" wire:"min=0"`
	FD   int   `json:"fd" wire:"min=4"`
}

// ContainerMount is one entry of the bundle's mounts.
type ContainerMount struct {
	// Destination is absolute inside the root, resolved there when it is
	// mounted (never following a link out of it).
	Destination string `json:"destination"`
	// Type is the filesystem type ("" for a bind); Source its source: a
	// canonical host path for a bind, anything for the others.
	Type   string `json:"type,omitempty"`
	Source string `json:"source,omitempty"`
	// Flags are MS_* flags (MS_BIND, MS_REC, MS_RDONLY, MS_NOSUID, ...);
	// Propagation the MS_* propagation flags applied after the mount.
	Flags       uint64 `json:"flags,omitempty"`
	Propagation uint64 `json:"propagation,omitempty"`
	// Data is the filesystem's options (mount(2)'s data).
	Data string `json:"data,omitempty"`
	// SourceDev and SourceIno are a bind source's device and inode as jail
	// oci create opened it: the role refuses another file at Source.
	SourceDev uint64 `json:"source_dev,omitempty"`
	SourceIno uint64 `json:"source_ino,omitempty"`
}

// Device is one device node made in the container (linux.devices).
type Device struct {
	// Path is absolute inside the root.
	Path string `json:"path"`
	// Type is 'c', 'b' or 'p' (a FIFO).
	Type  string `json:"type"`
	Major int64  `json:"major" wire:"min=0"`
	Minor int64  `json:"minor" wire:"min=0"`
	// Mode is the file's permission bits.
	Mode uint32 `json:"mode"`
	UID  uint32 `json:"uid"`
	GID  uint32 `json:"gid"`
}

// Sysctl is one kernel parameter written under /proc/sys (Key with dots).
type Sysctl struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// ContainerProcess is the container's process (the bundle's process).
type ContainerProcess struct {
	Args []string `json:"args"`
	Env  []string `json:"env,omitempty"`
	// Cwd is absolute inside the root.
	Cwd            string   `json:"cwd"`
	UID            uint32   `json:"uid"`
	GID            uint32   `json:"gid"`
	AdditionalGIDs []uint32 `json:"additional_gids,omitempty" wire:"c=additional_gids"`
	// Umask, when SetUmask, is set before the exec.
	SetUmask bool     `json:"set_umask,omitempty"`
	Umask    uint32   `json:"umask,omitempty" wire:"max=511"`
	Rlimits  []Rlimit `json:"rlimits,omitempty"`
	// Capability sets, bit N for capability N.
	Bounding, Effective, Inheritable, Permitted, Ambient uint64
	NoNewPrivileges                                      bool `json:"no_new_privileges,omitempty"`
	// OOMScoreAdj, when SetOOMScoreAdj, is written to its oom_score_adj.
	SetOOMScoreAdj bool `json:"set_oom_score_adj,omitempty"`
	OOMScoreAdj    int  `json:"oom_score_adj,omitempty" wire:"min=-1000,max=1000"`
	// Terminal: the process gets a new pseudo-terminal, whose master the
	// container's init sends with KindCreated.
	Terminal bool `json:"terminal,omitempty"`
	// AppArmorProfile, when not empty, is the AppArmor profile the
	// process is executed under: the role asks for it through its
	// attr/apparmor/exec (attr/exec before Linux 5.8), opened through the
	// host's /proc before any of the bundle's mounts or namespaces.
	AppArmorProfile string `json:"apparmor_profile,omitempty" wire:"c=apparmor_profile"`
}

// Rlimit is one process.rlimits entry (Type: RLIMIT_* number).
type Rlimit struct {
	Type int    `json:"type" wire:"min=0,max=15"`
	Soft uint64 `json:"soft"`
	Hard uint64 `json:"hard"`
}
