// Package namespaces decides which namespaces a sandbox gets and how its
// user and group ids map onto the host.
//
// Invariant: sandbox root is never host root. When jail runs as root, the
// sandbox's ids 0..65535 map onto an unprivileged host range (HostRangeStart
// upwards), so host files that are not world-readable stay unreadable and
// nothing the sandbox creates on a shared path is owned by a real host user.
// When an ordinary user runs jail, the one sandbox id in use maps onto that
// user: the sandbox can never act as anyone the caller could not. Where the
// administrator gave the user subordinate ids (/etc/subuid, /etc/subgid)
// and the setuid helpers newuidmap and newgidmap are installed, sandbox root
// maps onto the user and sandbox ids 1..N onto those subordinate ids, as
// podman does, so that archives and images with several owners keep them;
// the helpers write these maps, which no unprivileged process may.
//
// A root-run sandbox's user namespace is created, and so owned, by
// NamespaceOwner, a host uid nothing runs as, never by root: the kernel
// charges a namespace's per-user counts to its creator, and root's must
// not be a sandbox's to spend.
package namespaces

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/privdir"
)

// CloneFlags are the namespaces every sandbox gets. The cgroup namespace
// hides the host's cgroup tree (a rootless writable cgroupfs was an escape,
// CVE-2023-25809).
const CloneFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID |
	unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP

// HostRangeStart is the first host id of the range that sandbox ids map to
// when jail runs as root; HostRangeSize ids follow it. The range is far above
// any id a distribution hands out to users or to subordinate-id ranges.
const (
	HostRangeStart = 2000000000
	HostRangeSize  = 65536
)

// NamespaceOwner is the host uid that creates, and so owns, the user
// namespace of a sandbox jail runs as root. The kernel charges what a user
// namespace's processes take of the per-user counts (inotify instances and
// watches, message-queue bytes, pending signals, tasks) to the namespace's
// creator as well, up to its limits: created by root, a sandbox could take
// all of host root's (128 inotify instances) and break root's services.
// Created by this id, sandboxes can only crowd each other. No process ever
// runs as it: one in the host's namespace that did would hold every
// capability in the namespaces it owns.
const NamespaceOwner = HostRangeStart - 1

// Creator returns the host uid that creates the sandbox's user namespace
// (NamespaceOwner when jail runs as root), or -1 for the caller itself.
func (id Identity) Creator() int {
	if id.Rootless {
		return -1
	}
	return NamespaceOwner
}

// Identity is how one sandbox's ids relate to the host's.
type Identity struct {
	// Rootless is true when the caller is not host root.
	Rootless bool
	UIDMap   []syscall.SysProcIDMap
	GIDMap   []syscall.SysProcIDMap
	// User and Group are the ids the command runs as, inside.
	User, Group uint32
	// InitUID is the uid the init runs as, inside: sandbox root when jail
	// runs as root or maps subordinate ids, otherwise the command's own.
	InitUID uint32
	// SubIDs: a rootless identity whose maps include the caller's
	// subordinate ids, written by newuidmap and newgidmap (MapIDs).
	SubIDs bool
}

// SwitchesUser reports whether the init runs as sandbox root and switches
// to the command's user (and may drop supplementary groups); otherwise it
// already runs as the command's user.
func (id Identity) SwitchesUser() bool { return !id.Rootless || id.SubIDs }

// ForCaller returns the identity for a sandbox whose command runs as
// user:group inside, started by the current process; its error is about
// the --user option, which the caller names. users is asked for
// the caller's name, which may key its subordinate ids (nil: the password
// database is read).
func ForCaller(users *privdir.Passwd, user, group uint32) (Identity, error) {
	if os.Geteuid() == 0 {
		if user >= HostRangeSize || group >= HostRangeSize {
			return Identity{}, fmt.Errorf("%d:%d: ids must be below %d when jail runs as root", user, group, HostRangeSize)
		}
		return Identity{
			UIDMap: []syscall.SysProcIDMap{{ContainerID: 0, HostID: HostRangeStart, Size: HostRangeSize}},
			GIDMap: []syscall.SysProcIDMap{{ContainerID: 0, HostID: HostRangeStart, Size: HostRangeSize}},
			User:   user, Group: group,
		}, nil
	}
	if sub, ok := callerSubIDs(users); ok {
		size := min(sub.uids.size, sub.gids.size, HostRangeSize-1)
		if int64(user) > int64(size) || int64(group) > int64(size) {
			return Identity{}, fmt.Errorf("%d:%d: ids must be at most %d (your subordinate ids)", user, group, size)
		}
		return Identity{
			Rootless: true, SubIDs: true,
			UIDMap: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}, {ContainerID: 1, HostID: sub.uids.start, Size: size}},
			GIDMap: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}, {ContainerID: 1, HostID: sub.gids.start, Size: size}},
			User:   user, Group: group,
		}, nil
	}
	// Rootless: the caller's own ids are the only ones we may map, so the
	// sandbox identity is exactly the requested pair, mapped onto them.
	if user == 0xFFFFFFFF || group == 0xFFFFFFFF {
		return Identity{}, fmt.Errorf("id %d is reserved", uint32(0xFFFFFFFF))
	}
	return Identity{
		Rootless: true,
		UIDMap:   []syscall.SysProcIDMap{{ContainerID: int(user), HostID: os.Geteuid(), Size: 1}},
		GIDMap:   []syscall.SysProcIDMap{{ContainerID: int(group), HostID: os.Getegid(), Size: 1}},
		User:     user, Group: group,
		InitUID: user,
	}, nil
}

// MapUserOnto maps the command's user and group onto the given host ids
// instead of the unprivileged range; the rest of the range stays. It is the
// fallback for sharing a writable directory when the kernel cannot id-map
// its filesystem: the sandbox user then is the directory's owner, as in
// rootless mode. Host root is refused.
func (id *Identity) MapUserOnto(hostUID, hostGID int) error {
	if id.Rootless {
		return fmt.Errorf("rootless sandboxes already run as the caller")
	}
	if hostUID == 0 || hostGID == 0 {
		return fmt.Errorf("the sandbox user may not be host root")
	}
	id.UIDMap = splitRange(id.UIDMap[0], int(id.User), hostUID)
	id.GIDMap = splitRange(id.GIDMap[0], int(id.Group), hostGID)
	return nil
}

// splitRange maps inside id `one` onto host instead of its place in r.
func splitRange(r syscall.SysProcIDMap, one, host int) []syscall.SysProcIDMap {
	var out []syscall.SysProcIDMap
	if one > r.ContainerID {
		out = append(out, syscall.SysProcIDMap{ContainerID: r.ContainerID, HostID: r.HostID, Size: one - r.ContainerID})
	}
	out = append(out, syscall.SysProcIDMap{ContainerID: one, HostID: host, Size: 1})
	if end := r.ContainerID + r.Size; one+1 < end {
		out = append(out, syscall.SysProcIDMap{ContainerID: one + 1, HostID: r.HostID + one + 1 - r.ContainerID, Size: end - one - 1})
	}
	return out
}

// HostUID returns the host uid that sandbox uid id maps to, and whether it is
// mapped at all.
func (id Identity) HostUID(uid uint32) (int, bool) { return lookup(id.UIDMap, uid) }

// HostGID is HostUID for group ids.
func (id Identity) HostGID(gid uint32) (int, bool) { return lookup(id.GIDMap, gid) }

func lookup(m []syscall.SysProcIDMap, in uint32) (int, bool) {
	for _, e := range m {
		if int(in) >= e.ContainerID && int(in) < e.ContainerID+e.Size {
			return e.HostID + int(in) - e.ContainerID, true
		}
	}
	return 0, false
}

// initCaps are the capabilities a rootless init needs when it does not run as
// sandbox root (its caps would otherwise be cleared at exec): mounts,
// pivot_root, bringing up lo, and emptying the bounding set.
var initCaps = []uintptr{
	unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP, unix.CAP_NET_ADMIN, unix.CAP_SYS_CHROOT,
	unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH, unix.CAP_FOWNER, unix.CAP_CHOWN,
	unix.CAP_SETUID, unix.CAP_SETGID,
}

// SysProcAttr returns the process attributes that start an init in fresh
// namespaces under this identity. The init dies with its parent. An
// identity with subordinate ids gets only its first mapping (sandbox root
// onto the caller) this way: the rest needs the helpers (MapIDs).
func (id Identity) SysProcAttr() *syscall.SysProcAttr {
	uids, gids := id.UIDMap, id.GIDMap
	if id.SubIDs {
		uids, gids = uids[:1], gids[:1]
	}
	attr := &syscall.SysProcAttr{
		Cloneflags:  CloneFlags,
		UidMappings: uids,
		GidMappings: gids,
		// Rootless: setgroups must be denied before an unprivileged
		// process may write gid_map. As root we keep it, so the command's
		// supplementary groups can be cleared.
		GidMappingsEnableSetgroups: !id.Rootless,
		Pdeathsig:                  syscall.SIGKILL,
		// A session of its own: a terminal's ^C reaches jail, which
		// forwards it once, instead of reaching the sandbox directly.
		Setsid: true,
	}
	if id.Rootless {
		if id.InitUID != 0 {
			attr.AmbientCaps = initCaps
		}
	} else {
		// Become sandbox root inside the new namespace: host root is not
		// mapped there, and an unmapped process loses its capabilities
		// at exec.
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0}
	}
	return attr
}

// UnmappedSysProcAttr returns the process attributes that start an init in
// fresh namespaces before its ids are mapped; its starter then calls MapIDs
// with the init's pid before the init does anything else.
//
// Why: Go starts a child that gets a new user namespace with fork rather
// than vfork, because the child has to wait between clone and exec for its
// parent to write the id maps. Copying the parent's page tables and the
// copy-on-write faults after cost about 0.8 ms per start here. With the
// maps written after the exec, the clone can share the parent's memory
// (CLONE_VM|CLONE_VFORK) as any other start does.
//
// An unmapped process loses its capabilities at exec; the child raises them
// to its ambient set first, so the init keeps them in its namespace. They are
// the same ones as with SysProcAttr: every capability when the init is
// sandbox root, initCaps otherwise. When jail runs as root the init is
// unmapped host root until it takes sandbox root itself (TakesRoot).
func (id Identity) UnmappedSysProcAttr() (*syscall.SysProcAttr, error) {
	attr := id.SysProcAttr()
	attr.Cloneflags |= unix.CLONE_VM | unix.CLONE_VFORK
	attr.UidMappings, attr.GidMappings, attr.GidMappingsEnableSetgroups = nil, nil, false
	attr.Credential = nil
	if attr.AmbientCaps != nil {
		return attr, nil // initCaps, for an init that is not sandbox root
	}
	last, err := LastCap()
	if err != nil {
		return nil, err
	}
	for c := uintptr(0); c <= last; c++ {
		attr.AmbientCaps = append(attr.AmbientCaps, c)
	}
	return attr, nil
}

// TakesRoot reports whether an init started with UnmappedSysProcAttr must
// make itself sandbox root (uid and gid 0, no supplementary groups) once
// its ids are mapped: when jail runs as root, whose own ids are not mapped.
func (id Identity) TakesRoot() bool { return !id.Rootless }

// MapIDs writes the id maps of the user namespace that process pid was
// started in with UnmappedSysProcAttr, as Go does for SysProcAttr's.
func (id Identity) MapIDs(pid int) error {
	if id.SubIDs {
		return mapWithHelpers(pid, id.UIDMap, id.GIDMap)
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	if err := os.WriteFile(dir+"uid_map", mapText(id.UIDMap), 0); err != nil {
		return fmt.Errorf("uid map: %w", err)
	}
	// An unprivileged process may write gid_map only once setgroups is
	// denied.
	if id.Rootless {
		if err := os.WriteFile(dir+"setgroups", []byte("deny"), 0); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
	}
	if err := os.WriteFile(dir+"gid_map", mapText(id.GIDMap), 0); err != nil {
		return fmt.Errorf("gid map: %w", err)
	}
	return nil
}

func mapText(m []syscall.SysProcIDMap) []byte {
	var b []byte
	for _, e := range m {
		b = strconv.AppendInt(b, int64(e.ContainerID), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(e.HostID), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(e.Size), 10)
		b = append(b, '\n')
	}
	return b
}

// LastCap is the highest capability this kernel knows.
func LastCap() (uintptr, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("capabilities: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 || n > 63 {
		return 0, fmt.Errorf("capabilities: cap_last_cap %q", b)
	}
	return uintptr(n), nil
}

// MappingUserns returns a user namespace (as an open nsfs file) with the
// given mappings, for id-mapped mounts. It briefly starts a holder process
// (self with argv[0] HolderArg) that owns the namespace until the file is
// open. Only host root can use the result with mount_setattr.
func MappingUserns(uidMap, gidMap []syscall.SysProcIDMap) (*os.File, error) {
	holder := &exec.Cmd{
		// The running binary, even one started from a memfd (the tools
		// program, when it serves) that has no path.
		Path: "/proc/self/exe",
		Args: []string{HolderArg},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  unix.CLONE_NEWUSER,
			UidMappings: uidMap,
			GidMappings: gidMap,
			Pdeathsig:   syscall.SIGKILL,
		},
	}
	if err := holder.Start(); err != nil {
		return nil, fmt.Errorf("id-mapping namespace: %w", err)
	}
	defer func() {
		_ = holder.Process.Kill()
		_ = holder.Wait()
	}()
	// Start returns once the holder has exec'd: its namespace and
	// mappings exist now, whatever its runtime is still doing.
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", holder.Process.Pid))
	if err != nil {
		return nil, fmt.Errorf("id-mapping namespace: %w", err)
	}
	return ns, nil
}

// HolderArg is argv[0] of the process MappingUserns starts. The program's
// init hook recognises it and waits to be killed.
const HolderArg = "jail:userns-holder"
