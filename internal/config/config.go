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
