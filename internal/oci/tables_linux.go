package oci

import "golang.org/x/sys/unix"

// mountFlag is what one mount option does to mount(2)'s flags: set or
// clear flag.
type mountFlag struct {
	clear bool
	flag  uint64
}

// mountFlags returns the mount options that are MS_* flags, as runc reads
// them; every other option but the propagation ones, and those refused, is
// the filesystem's (mount(2)'s data).
func mountFlags() map[string]mountFlag {
	return map[string]mountFlag{
		"acl":           {false, unix.MS_POSIXACL},
		"async":         {true, unix.MS_SYNCHRONOUS},
		"atime":         {true, unix.MS_NOATIME},
		"bind":          {false, unix.MS_BIND},
		"defaults":      {false, 0},
		"dev":           {true, unix.MS_NODEV},
		"diratime":      {true, unix.MS_NODIRATIME},
		"dirsync":       {false, unix.MS_DIRSYNC},
		"exec":          {true, unix.MS_NOEXEC},
		"iversion":      {false, unix.MS_I_VERSION},
		"lazytime":      {false, unix.MS_LAZYTIME},
		"loud":          {true, unix.MS_SILENT},
		"mand":          {false, unix.MS_MANDLOCK},
		"noacl":         {true, unix.MS_POSIXACL},
		"noatime":       {false, unix.MS_NOATIME},
		"nodev":         {false, unix.MS_NODEV},
		"nodiratime":    {false, unix.MS_NODIRATIME},
		"noexec":        {false, unix.MS_NOEXEC},
		"noiversion":    {true, unix.MS_I_VERSION},
		"nolazytime":    {true, unix.MS_LAZYTIME},
		"nomand":        {true, unix.MS_MANDLOCK},
		"norelatime":    {true, unix.MS_RELATIME},
		"nostrictatime": {true, unix.MS_STRICTATIME},
		"nosuid":        {false, unix.MS_NOSUID},
		"nosymfollow":   {false, unix.MS_NOSYMFOLLOW},
		"rbind":         {false, unix.MS_BIND | unix.MS_REC},
		"relatime":      {false, unix.MS_RELATIME},
		"remount":       {false, unix.MS_REMOUNT},
		"ro":            {false, unix.MS_RDONLY},
		"rw":            {true, unix.MS_RDONLY},
		"silent":        {false, unix.MS_SILENT},
		"strictatime":   {false, unix.MS_STRICTATIME},
		"suid":          {true, unix.MS_NOSUID},
		"sync":          {false, unix.MS_SYNCHRONOUS},
		"symfollow":     {true, unix.MS_NOSYMFOLLOW},
	}
}

// propagationFlags returns the propagation options of a mount, and the values
// of linux.rootfsPropagation.
func propagationFlags() map[string]uint64 {
	return map[string]uint64{
		"private":     unix.MS_PRIVATE,
		"rprivate":    unix.MS_PRIVATE | unix.MS_REC,
		"shared":      unix.MS_SHARED,
		"rshared":     unix.MS_SHARED | unix.MS_REC,
		"slave":       unix.MS_SLAVE,
		"rslave":      unix.MS_SLAVE | unix.MS_REC,
		"unbindable":  unix.MS_UNBINDABLE,
		"runbindable": unix.MS_UNBINDABLE | unix.MS_REC,
	}
}

// unsupportedMountOptions returns the options runc gives a meaning of its own
// (mount_setattr's recursive attributes, id-mapped mounts, copying up a
// tmpfs) that jail does not realise yet: passed on as a filesystem's
// option they would be dropped without a word on a bind mount, whose data
// the kernel ignores, so they are refused.
func unsupportedMountOptions() map[string]bool {
	return map[string]bool{
		"rro": true, "rrw": true, "rnosuid": true, "rsuid": true, "rnodev": true, "rdev": true,
		"rnoexec": true, "rexec": true, "rnodiratime": true, "rdiratime": true, "rrelatime": true,
		"rnorelatime": true, "rnoatime": true, "ratime": true, "rstrictatime": true,
		"rnostrictatime": true, "rnosymfollow": true, "rsymfollow": true,
		"idmap": true, "ridmap": true, "tmpcopyup": true,
	}
}

// namespaceTypes returns the CLONE_NEW* flags of the spec's namespace types.
func namespaceTypes() map[string]int64 {
	return map[string]int64{
		"pid":     unix.CLONE_NEWPID,
		"network": unix.CLONE_NEWNET,
		"mount":   unix.CLONE_NEWNS,
		"ipc":     unix.CLONE_NEWIPC,
		"uts":     unix.CLONE_NEWUTS,
		"user":    unix.CLONE_NEWUSER,
		"cgroup":  unix.CLONE_NEWCGROUP,
		"time":    unix.CLONE_NEWTIME,
	}
}

// joinOrder is the order namespaces given by path are joined in: the user
// namespace first (it grants the rights over the others), then the rest
// as runc's nsenter joins them.
var joinOrder = []string{"user", "ipc", "uts", "network", "pid", "cgroup", "mount", "time"}

// capabilities returns the kernel's capabilities by their spec names.
func capabilities() map[string]uint {
	return map[string]uint{
		"CAP_CHOWN":              unix.CAP_CHOWN,
		"CAP_DAC_OVERRIDE":       unix.CAP_DAC_OVERRIDE,
		"CAP_DAC_READ_SEARCH":    unix.CAP_DAC_READ_SEARCH,
		"CAP_FOWNER":             unix.CAP_FOWNER,
		"CAP_FSETID":             unix.CAP_FSETID,
		"CAP_KILL":               unix.CAP_KILL,
		"CAP_SETGID":             unix.CAP_SETGID,
		"CAP_SETUID":             unix.CAP_SETUID,
		"CAP_SETPCAP":            unix.CAP_SETPCAP,
		"CAP_LINUX_IMMUTABLE":    unix.CAP_LINUX_IMMUTABLE,
		"CAP_NET_BIND_SERVICE":   unix.CAP_NET_BIND_SERVICE,
		"CAP_NET_BROADCAST":      unix.CAP_NET_BROADCAST,
		"CAP_NET_ADMIN":          unix.CAP_NET_ADMIN,
		"CAP_NET_RAW":            unix.CAP_NET_RAW,
		"CAP_IPC_LOCK":           unix.CAP_IPC_LOCK,
		"CAP_IPC_OWNER":          unix.CAP_IPC_OWNER,
		"CAP_SYS_MODULE":         unix.CAP_SYS_MODULE,
		"CAP_SYS_RAWIO":          unix.CAP_SYS_RAWIO,
		"CAP_SYS_CHROOT":         unix.CAP_SYS_CHROOT,
		"CAP_SYS_PTRACE":         unix.CAP_SYS_PTRACE,
		"CAP_SYS_PACCT":          unix.CAP_SYS_PACCT,
		"CAP_SYS_ADMIN":          unix.CAP_SYS_ADMIN,
		"CAP_SYS_BOOT":           unix.CAP_SYS_BOOT,
		"CAP_SYS_NICE":           unix.CAP_SYS_NICE,
		"CAP_SYS_RESOURCE":       unix.CAP_SYS_RESOURCE,
		"CAP_SYS_TIME":           unix.CAP_SYS_TIME,
		"CAP_SYS_TTY_CONFIG":     unix.CAP_SYS_TTY_CONFIG,
		"CAP_MKNOD":              unix.CAP_MKNOD,
		"CAP_LEASE":              unix.CAP_LEASE,
		"CAP_AUDIT_WRITE":        unix.CAP_AUDIT_WRITE,
		"CAP_AUDIT_CONTROL":      unix.CAP_AUDIT_CONTROL,
		"CAP_SETFCAP":            unix.CAP_SETFCAP,
		"CAP_MAC_OVERRIDE":       unix.CAP_MAC_OVERRIDE,
		"CAP_MAC_ADMIN":          unix.CAP_MAC_ADMIN,
		"CAP_SYSLOG":             unix.CAP_SYSLOG,
		"CAP_WAKE_ALARM":         unix.CAP_WAKE_ALARM,
		"CAP_BLOCK_SUSPEND":      unix.CAP_BLOCK_SUSPEND,
		"CAP_AUDIT_READ":         unix.CAP_AUDIT_READ,
		"CAP_PERFMON":            unix.CAP_PERFMON,
		"CAP_BPF":                unix.CAP_BPF,
		"CAP_CHECKPOINT_RESTORE": unix.CAP_CHECKPOINT_RESTORE,
	}
}

// rlimits returns the RLIMIT_* numbers by their spec names.
func rlimits() map[string]int {
	return map[string]int{
		"RLIMIT_CPU":        unix.RLIMIT_CPU,
		"RLIMIT_FSIZE":      unix.RLIMIT_FSIZE,
		"RLIMIT_DATA":       unix.RLIMIT_DATA,
		"RLIMIT_STACK":      unix.RLIMIT_STACK,
		"RLIMIT_CORE":       unix.RLIMIT_CORE,
		"RLIMIT_RSS":        unix.RLIMIT_RSS,
		"RLIMIT_NPROC":      unix.RLIMIT_NPROC,
		"RLIMIT_NOFILE":     unix.RLIMIT_NOFILE,
		"RLIMIT_MEMLOCK":    unix.RLIMIT_MEMLOCK,
		"RLIMIT_AS":         unix.RLIMIT_AS,
		"RLIMIT_LOCKS":      unix.RLIMIT_LOCKS,
		"RLIMIT_SIGPENDING": unix.RLIMIT_SIGPENDING,
		"RLIMIT_MSGQUEUE":   unix.RLIMIT_MSGQUEUE,
		"RLIMIT_NICE":       unix.RLIMIT_NICE,
		"RLIMIT_RTPRIO":     unix.RLIMIT_RTPRIO,
		"RLIMIT_RTTIME":     unix.RLIMIT_RTTIME,
	}
}
