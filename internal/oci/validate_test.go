package oci

import (
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// baseSpec is the smallest bundle jail accepts: a process, a root and a
// new mount namespace.
func baseSpec() *specs.Spec {
	return &specs.Spec{
		Version: "1.2.1",
		Root:    &specs.Root{Path: "rootfs"},
		Process: &specs.Process{Args: []string{"/bin/sh"}, Cwd: "/", Env: []string{"PATH=/bin"}},
		Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{
			{Type: "mount"}, {Type: "pid"}, {Type: "ipc"}, {Type: "uts"}, {Type: "network"},
		}},
	}
}

func i64(v int64) *int64   { return &v }
func u64(v uint64) *uint64 { return &v }
func boolp(v bool) *bool   { return &v }
func u16(v uint16) *uint16 { return &v }
func u32(v uint32) *uint32 { return &v }
func intp(v int) *int      { return &v }

func withNamespaces(s *specs.Spec, ns ...specs.LinuxNamespace) {
	s.Linux.Namespaces = ns
}

func TestValidateRefusesWhatJailCannotDoOrIsMalformed(t *testing.T) {
	cases := []struct {
		name   string
		change func(s *specs.Spec)
		want   string // "" : accepted
	}{
		{"minimal bundle", func(*specs.Spec) {}, ""},
		{"ociVersion 2", func(s *specs.Spec) { s.Version = "2.0.0" }, `unsupported ociVersion "2.0.0"`},
		{"no ociVersion", func(s *specs.Spec) { s.Version = "" }, "unsupported ociVersion"},
		{"windows section", func(s *specs.Spec) { s.Windows = &specs.Windows{} }, "windows is not supported"},
		{"vm section", func(s *specs.Spec) { s.VM = &specs.VM{} }, "vm is not supported"},
		{"no root", func(s *specs.Spec) { s.Root = nil }, "root.path must be set"},
		{"root with NUL", func(s *specs.Spec) { s.Root.Path = "a\x00b" }, "NUL"},
		{"no process", func(s *specs.Spec) { s.Process = nil }, "process must be set"},
		{"no args", func(s *specs.Spec) { s.Process.Args = nil }, "process.args must not be empty"},
		{"NUL in an argument", func(s *specs.Spec) { s.Process.Args = []string{"/bin/sh", "a\x00"} }, "NUL"},
		{"env without =", func(s *specs.Spec) { s.Process.Env = []string{"PATH"} }, "not NAME=VALUE"},
		{"env with empty name", func(s *specs.Spec) { s.Process.Env = []string{"=x"} }, "not NAME=VALUE"},
		{"relative cwd", func(s *specs.Spec) { s.Process.Cwd = "tmp" }, "process.cwd \"tmp\" is not an absolute path"},
		{"no cwd", func(s *specs.Spec) { s.Process.Cwd = "" }, "process.cwd must be set"},
		{"apparmor profile (loaded or not, the kernel says at create)", func(s *specs.Spec) { s.Process.ApparmorProfile = "cri-containerd.apparmor.d" }, ""},
		{"apparmor profile with a newline", func(s *specs.Spec) { s.Process.ApparmorProfile = "a\nchangehat b" }, "holds a space or a control character"},
		{"apparmor profile with a space", func(s *specs.Spec) { s.Process.ApparmorProfile = "a b" }, "holds a space or a control character"},
		{"apparmor profile too long", func(s *specs.Spec) { s.Process.ApparmorProfile = strings.Repeat("a", 1025) }, "longer than 1024 bytes"},
		{"selinux label (decided at translation, by the host)", func(s *specs.Spec) { s.Process.SelinuxLabel = "x" }, ""},
		{"mount label (decided at translation, by the host)", func(s *specs.Spec) { s.Linux.MountLabel = "x" }, ""},
		{"scheduler", func(s *specs.Spec) { s.Process.Scheduler = &specs.Scheduler{} }, "process.scheduler is not supported"},
		{"umask too large", func(s *specs.Spec) { s.Process.User.Umask = u32(0o1000) }, "not a umask"},
		{"umask", func(s *specs.Spec) { s.Process.User.Umask = u32(0o027) }, ""},
		{"unknown rlimit", func(s *specs.Spec) { s.Process.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_FOO"}} }, `unknown type "RLIMIT_FOO"`},
		{"rlimit twice", func(s *specs.Spec) {
			s.Process.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 1, Hard: 1}, {Type: "RLIMIT_NOFILE", Soft: 1, Hard: 1}}
		}, "RLIMIT_NOFILE is given twice"},
		{"rlimit soft above hard", func(s *specs.Spec) {
			s.Process.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 2, Hard: 1}}
		}, "soft limit 2 above hard limit 1"},
		{"oomScoreAdj out of range", func(s *specs.Spec) { s.Process.OOMScoreAdj = intp(1001) }, "outside -1000..1000"},
		{"malformed capability", func(s *specs.Spec) {
			s.Process.Capabilities = &specs.LinuxCapabilities{Bounding: []string{"sys_admin"}}
		}, `"sys_admin" is not a capability name`},
		{"unknown but well-formed capability", func(s *specs.Spec) {
			s.Process.Capabilities = &specs.LinuxCapabilities{Bounding: []string{"CAP_FROM_THE_FUTURE"}}
		}, ""},
		{"no linux section", func(s *specs.Spec) { s.Linux = nil }, "linux must be set"},
		{"unknown namespace", func(s *specs.Spec) {
			withNamespaces(s, specs.LinuxNamespace{Type: "mount"}, specs.LinuxNamespace{Type: "foo"})
		}, `unknown type "foo"`},
		{"namespace twice", func(s *specs.Spec) {
			withNamespaces(s, specs.LinuxNamespace{Type: "mount"}, specs.LinuxNamespace{Type: "pid"}, specs.LinuxNamespace{Type: "pid"})
		}, `"pid" is listed twice`},
		{"relative namespace path", func(s *specs.Spec) {
			withNamespaces(s, specs.LinuxNamespace{Type: "mount"}, specs.LinuxNamespace{Type: "network", Path: "ns/net"})
		}, "is not an absolute path"},
		{"time namespace", func(s *specs.Spec) {
			withNamespaces(s, specs.LinuxNamespace{Type: "mount"}, specs.LinuxNamespace{Type: "time"})
		}, "time namespaces are not supported"},
		{"no mount namespace", func(s *specs.Spec) { withNamespaces(s, specs.LinuxNamespace{Type: "pid"}) }, "a new mount namespace is required"},
		{"mount namespace joined", func(s *specs.Spec) { withNamespaces(s, specs.LinuxNamespace{Type: "mount", Path: "/proc/1/ns/mnt"}) }, "joining a mount namespace by path is not supported"},
		{"maps without a user namespace", func(s *specs.Spec) {
			s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 1000, Size: 1}}
		}, "need a user namespace"},
		{"new user namespace without maps", func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: "user"})
		}, "a new user namespace needs linux.uidMappings and linux.gidMappings"},
		{"joined user namespace with maps", func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: "user", Path: "/proc/1/ns/user"})
			s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 1000, Size: 1}}
			s.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 1000, Size: 1}}
		}, "not one joined by path"},
		{"map of size 0", func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: "user"})
			s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 1000, Size: 0}}
			s.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 1000, Size: 1}}
		}, "is not a valid range"},
		{"map past 2^32", func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: "user"})
			s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 4294967295, Size: 2}}
			s.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 1000, Size: 1}}
		}, "is not a valid range"},
		{"hostname without a uts namespace", func(s *specs.Spec) {
			withNamespaces(s, specs.LinuxNamespace{Type: "mount"})
			s.Hostname = "box"
		}, "unable to set hostname without a private UTS namespace"},
		{"hostname too long", func(s *specs.Spec) { s.Hostname = strings.Repeat("a", 65) }, "is not a valid name"},
		{"hostname", func(s *specs.Spec) { s.Hostname, s.Domainname = "box", "example" }, ""},
		{"relative mount destination", func(s *specs.Spec) { s.Mounts = []specs.Mount{{Destination: "proc", Type: "proc", Source: "proc"}} }, `mounts[0].destination "proc" is not an absolute path`},
		{"recursive read-only option", func(s *specs.Spec) {
			s.Mounts = []specs.Mount{{Destination: "/data", Type: "bind", Source: "/tmp", Options: []string{"rbind", "rro"}}}
		}, `option "rro" is not supported`},
		{"id-mapped mount option", func(s *specs.Spec) {
			s.Mounts = []specs.Mount{{Destination: "/data", Type: "bind", Source: "/tmp", Options: []string{"rbind", "idmap"}}}
		}, `option "idmap" is not supported`},
		{"id-mapped mount", func(s *specs.Spec) {
			s.Mounts = []specs.Mount{{Destination: "/data", Type: "bind", Source: "/tmp", UIDMappings: []specs.LinuxIDMapping{{Size: 1}}}}
		}, "id-mapped mounts are not supported"},
		{"bind without source", func(s *specs.Spec) { s.Mounts = []specs.Mount{{Destination: "/data", Options: []string{"bind"}}} }, "a bind mount needs a source"},
		{"no type and no bind", func(s *specs.Spec) { s.Mounts = []specs.Mount{{Destination: "/data", Source: "/tmp"}} }, "no type, and not a bind mount"},
		{"mounts", func(s *specs.Spec) {
			s.Mounts = []specs.Mount{
				{Destination: "/proc", Type: "proc", Source: "proc"},
				{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
				{Destination: "/data", Source: "/tmp", Options: []string{"rbind", "ro", "rprivate"}},
			}
		}, ""},
		{"device of unknown type", func(s *specs.Spec) { s.Linux.Devices = []specs.LinuxDevice{{Path: "/dev/x", Type: "z"}} }, `unknown type "z"`},
		{"device with negative major", func(s *specs.Spec) { s.Linux.Devices = []specs.LinuxDevice{{Path: "/dev/x", Type: "c", Major: -1}} }, "negative major or minor"},
		{"device at /", func(s *specs.Spec) { s.Linux.Devices = []specs.LinuxDevice{{Path: "/", Type: "c", Major: 1, Minor: 3}} }, "path is /"},
		{"device at a relative path", func(s *specs.Spec) { s.Linux.Devices = []specs.LinuxDevice{{Path: "dev/x", Type: "c"}} }, "is not an absolute path"},
		{"host-wide sysctl", func(s *specs.Spec) { s.Linux.Sysctl = map[string]string{"kernel.panic": "1"} }, `"kernel.panic" is not in a separate kernel namespace`},
		{"net sysctl without a network namespace", func(s *specs.Spec) {
			withNamespaces(s, specs.LinuxNamespace{Type: "mount"})
			s.Linux.Sysctl = map[string]string{"net.ipv4.ip_forward": "1"}
		}, "needs a network namespace"},
		{"sysctl climbing out of /proc/sys", func(s *specs.Spec) { s.Linux.Sysctl = map[string]string{"net/../../kernel/panic": "1"} }, "is not a valid parameter"},
		{"sysctl with an empty component", func(s *specs.Spec) { s.Linux.Sysctl = map[string]string{"net..ipv4": "1"} }, "is not a valid parameter"},
		{"namespaced sysctls", func(s *specs.Spec) {
			s.Linux.Sysctl = map[string]string{"net.ipv4.ip_forward": "1", "kernel.shmmax": "1", "fs.mqueue.msg_max": "10", "net.ipv4.conf.eth0/100.forwarding": "1"}
		}, ""},
		{"relative masked path", func(s *specs.Spec) { s.Linux.MaskedPaths = []string{"proc/kcore"} }, "linux.maskedPaths[0]"},
		{"relative read-only path", func(s *specs.Spec) { s.Linux.ReadonlyPaths = []string{"proc/sys"} }, "linux.readonlyPaths[0]"},
		{"unknown rootfsPropagation", func(s *specs.Spec) { s.Linux.RootfsPropagation = "sideways" }, "is not a propagation"},
		{"intelRdt", func(s *specs.Spec) { s.Linux.IntelRdt = &specs.LinuxIntelRdt{} }, "linux.intelRdt is not supported"},
		{"personality", func(s *specs.Spec) { s.Linux.Personality = &specs.LinuxPersonality{} }, "linux.personality is not supported"},
		{"memoryPolicy", func(s *specs.Spec) { s.Linux.MemoryPolicy = &specs.LinuxMemoryPolicy{} }, "linux.memoryPolicy is not supported"},
		{"swappiness above 100", func(s *specs.Spec) {
			s.Linux.Resources = &specs.LinuxResources{Memory: &specs.LinuxMemory{Swappiness: u64(101)}}
		}, "memory.swappiness 101 is above 100"},
		{"swap below memory", func(s *specs.Spec) {
			s.Linux.Resources = &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: i64(2 << 20), Swap: i64(1 << 20)}}
		}, "is below memory.limit"},
		{"swap without memory", func(s *specs.Spec) {
			s.Linux.Resources = &specs.LinuxResources{Memory: &specs.LinuxMemory{Swap: i64(1 << 20)}}
		}, "memory.swap needs memory.limit"},
		{"realtime cpu", func(s *specs.Spec) {
			s.Linux.Resources = &specs.LinuxResources{CPU: &specs.LinuxCPU{RealtimeRuntime: i64(1)}}
		}, "cpu.realtimeRuntime is not supported"},
		{"malformed cpuset", func(s *specs.Spec) { s.Linux.Resources = &specs.LinuxResources{CPU: &specs.LinuxCPU{Cpus: "0-a"}} }, "is not a list of ranges"},
		{"blockIO weight", func(s *specs.Spec) {
			s.Linux.Resources = &specs.LinuxResources{BlockIO: &specs.LinuxBlockIO{Weight: u16(5)}}
		}, "blockIO.weight 5 is not within 10..1000"},
		{"blockIO device weight", func(s *specs.Spec) {
			s.Linux.Resources = &specs.LinuxResources{BlockIO: &specs.LinuxBlockIO{WeightDevice: []specs.LinuxWeightDevice{{Weight: u16(2000)}}}}
		}, "weightDevice[0].weight 2000 is not within"},
		{"blockIO negative device", func(s *specs.Spec) {
			d := specs.LinuxThrottleDevice{Rate: 1}
			d.Major = -1
			s.Linux.Resources = &specs.LinuxResources{BlockIO: &specs.LinuxBlockIO{ThrottleReadBpsDevice: []specs.LinuxThrottleDevice{d}}}
		}, "throttleReadBpsDevice[0]: a device's major and minor are not negative"},
		{"network priority of no interface", func(s *specs.Spec) {
			s.Linux.Resources = &specs.LinuxResources{Network: &specs.LinuxNetwork{Priorities: []specs.LinuxInterfacePriority{{Name: "eth0 1\nlo", Priority: 1}}}}
		}, "priorities[0]: \"eth0 1\\nlo\" is not an interface name"},
		{"unified not a controller's file", func(s *specs.Spec) { s.Linux.Resources = &specs.LinuxResources{Unified: map[string]string{"a": "b"}} }, `"a" is not a controller's file`},
		{"unified path", func(s *specs.Spec) {
			s.Linux.Resources = &specs.LinuxResources{Unified: map[string]string{"../memory.max": "1"}}
		}, `"../memory.max" is not a controller's file`},
		// The controller's name goes into the parents'
		// cgroup.subtree_control as "+NAME": "+memory -cpu" would take
		// the cpu controller from every sibling cgroup.
		{"unified controller name with a space", func(s *specs.Spec) {
			s.Linux.Resources = &specs.LinuxResources{Unified: map[string]string{"memory -cpu.max": "1"}}
		}, `"memory -cpu.max" is not a controller's file`},
		{"unified controller name with a newline", func(s *specs.Spec) {
			s.Linux.Resources = &specs.LinuxResources{Unified: map[string]string{"memory\n-cpu.max": "1"}}
		}, `is not a controller's file`},
		{"unified knob with a space", func(s *specs.Spec) {
			s.Linux.Resources = &specs.LinuxResources{Unified: map[string]string{"memory.max x": "1"}}
		}, `is not a controller's file`},
		{"unified empty knob part", func(s *specs.Spec) {
			s.Linux.Resources = &specs.LinuxResources{Unified: map[string]string{"memory..max": "1"}}
		}, `is not a controller's file`},
		{"unified cpuset partition", func(s *specs.Spec) {
			s.Linux.Resources = &specs.LinuxResources{Unified: map[string]string{"cpuset.cpus.partition": "root"}}
		}, `"cpuset.cpus.partition" takes cpus from the cgroups beside`},
		{"unified cgroup.procs", func(s *specs.Spec) {
			s.Linux.Resources = &specs.LinuxResources{Unified: map[string]string{"cgroup.procs": "1"}}
		}, `"cgroup.procs" is the cgroup core's`},
		{"hugepage size", func(s *specs.Spec) {
			s.Linux.Resources = &specs.LinuxResources{HugepageLimits: []specs.LinuxHugepageLimit{{Pagesize: "2XB"}}}
		}, "is not a page size"},
		{"device rule access", func(s *specs.Spec) {
			s.Linux.Resources = &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwx"}}}
		}, "is not made of r, w and m"},
		{"unified files of controllers", func(s *specs.Spec) {
			s.Linux.Resources = &specs.LinuxResources{Unified: map[string]string{
				"memory.swap.max": "max", "hugetlb.2MB.max": "0", "cpu.uclamp.min": "0", "io.bfq.weight": "100", "misc.max": "x 1",
			}}
		}, ""},
		{"resources", func(s *specs.Spec) {
			s.Linux.Resources = &specs.LinuxResources{
				Memory:  &specs.LinuxMemory{Limit: i64(64 << 20), Swap: i64(128 << 20), Reservation: i64(32 << 20)},
				CPU:     &specs.LinuxCPU{Shares: u64(512), Quota: i64(50000), Period: u64(100000), Cpus: "0-1", Mems: "0"},
				Pids:    &specs.LinuxPids{Limit: i64(100)},
				Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}, {Allow: true, Type: "c", Major: i64(1), Minor: i64(3), Access: "rwm"}},
			}
		}, ""},
		{"seccomp notify", func(s *specs.Spec) { s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActNotify} }, "notifications"},
		{"seccomp listener", func(s *specs.Spec) {
			s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, ListenerPath: "/run/x"}
		}, "notifications"},
		{"seccomp flags", func(s *specs.Spec) {
			s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Flags: []specs.LinuxSeccompFlag{specs.LinuxSeccompFlagLog}}
		}, "flags (SECCOMP_FILTER_FLAG_LOG) are not supported"},
		{"seccomp unknown action", func(s *specs.Spec) { s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: "SCMP_ACT_MAYBE"} }, "is not an action"},
		{"seccomp argument 6", func(s *specs.Spec) {
			s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{
				{Names: []string{"kill"}, Action: specs.ActErrno, Args: []specs.LinuxSeccompArg{{Index: 6, Op: specs.OpEqualTo}}},
			}}
		}, "argument index 6"},
		{"seccomp unknown operator", func(s *specs.Spec) {
			s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{
				{Names: []string{"kill"}, Action: specs.ActErrno, Args: []specs.LinuxSeccompArg{{Index: 0, Op: "SCMP_CMP_ABOUT"}}},
			}}
		}, "is not an operator"},
		{"seccomp rule without names", func(s *specs.Spec) {
			s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{{Action: specs.ActErrno}}}
		}, "no names"},
		{"too many createContainer hooks", func(s *specs.Spec) {
			s.Hooks = &specs.Hooks{CreateContainer: make([]specs.Hook, MaxContainerHooks+1)}
		}, "hooks.createContainer: 65 hooks, at most 64"},
		{"too many startContainer hooks", func(s *specs.Spec) {
			s.Hooks = &specs.Hooks{StartContainer: make([]specs.Hook, MaxContainerHooks+1)}
		}, "hooks.startContainer: 65 hooks, at most 64"},
		{"relative createContainer hook", func(s *specs.Spec) {
			s.Hooks = &specs.Hooks{CreateContainer: []specs.Hook{{Path: "bin/true"}}}
		}, "hooks.createContainer[0].path"},
		{"startContainer hook with a NUL", func(s *specs.Spec) {
			s.Hooks = &specs.Hooks{StartContainer: []specs.Hook{{Path: "/bin/true", Env: []string{"A=\x00"}}}}
		}, "hooks.startContainer[0]: an argument or variable holds a NUL byte"},
		{"startContainer hook without time", func(s *specs.Spec) {
			s.Hooks = &specs.Hooks{StartContainer: []specs.Hook{{Path: "/bin/true", Timeout: ptr(0)}}}
		}, "hooks.startContainer[0].timeout must be positive"},
		{"relative hook", func(s *specs.Spec) { s.Hooks = &specs.Hooks{Prestart: []specs.Hook{{Path: "true"}}} }, "hooks.prestart[0].path"},
		{"hook timeout 0", func(s *specs.Spec) {
			s.Hooks = &specs.Hooks{Poststop: []specs.Hook{{Path: "/bin/true", Timeout: intp(0)}}}
		}, "timeout must be positive"},
		{"hooks", func(s *specs.Spec) {
			s.Hooks = &specs.Hooks{Prestart: []specs.Hook{{Path: "/bin/true", Timeout: intp(5)}}, Poststop: []specs.Hook{{Path: "/bin/true"}}}
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := baseSpec()
			c.change(s)
			err := Validate(s)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && err == nil:
				t.Fatalf("accepted; want %q", c.want)
			case err != nil && (!strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "oci: ") || strings.Contains(err.Error(), "\n")):
				t.Fatalf("%q; want one line oci: ...%s...", err, c.want)
			}
		})
	}
}

func TestParseMountOptionsAsRunc(t *testing.T) {
	const (
		rdonly  = 0x1
		nosuid  = 0x2
		nodev   = 0x4
		noexec  = 0x8
		sync    = 0x10
		remount = 0x20
		mand    = 0x40
		dirsync = 0x80
		noatime = 0x400
		nodirat = 0x800
		bind    = 0x1000
		rec     = 0x4000
		relat   = 0x200000
		strict  = 0x1000000
		unbind  = 0x20000
		private = 0x40000
		slave   = 0x80000
		shared  = 0x100000
	)
	cases := []struct {
		opts        []string
		flags, prop uint64
		data        string
	}{
		{nil, 0, 0, ""},
		{[]string{"ro", "nosuid", "nodev", "noexec"}, rdonly | nosuid | nodev | noexec, 0, ""},
		{[]string{"ro", "rw"}, 0, 0, ""},
		{[]string{"nosuid", "suid", "nodev", "dev", "noexec", "exec"}, 0, 0, ""},
		{[]string{"sync", "async", "dirsync"}, dirsync, 0, ""},
		{[]string{"remount", "mand", "nomand"}, remount, 0, ""},
		{[]string{"mand"}, mand, 0, ""},
		{[]string{"noatime", "atime", "nodiratime", "relatime", "norelatime", "strictatime"}, nodirat | strict, 0, ""},
		{[]string{"diratime", "nostrictatime", "relatime"}, relat, 0, ""},
		{[]string{"bind"}, bind, 0, ""},
		{[]string{"rbind", "ro"}, bind | rec | rdonly, 0, ""},
		{[]string{"private"}, 0, private, ""},
		{[]string{"rprivate"}, 0, private | rec, ""},
		{[]string{"shared"}, 0, shared, ""},
		{[]string{"rshared"}, 0, shared | rec, ""},
		{[]string{"slave"}, 0, slave, ""},
		{[]string{"rslave"}, 0, slave | rec, ""},
		{[]string{"unbindable"}, 0, unbind, ""},
		{[]string{"runbindable"}, 0, unbind | rec, ""},
		{[]string{"rshared", "rprivate"}, 0, private | rec, ""},
		{[]string{"nosuid", "mode=755", "size=65536k", "defaults"}, nosuid, 0, "mode=755,size=65536k"},
		{[]string{"newinstance", "ptmxmode=0666", "gid=5"}, 0, 0, "newinstance,ptmxmode=0666,gid=5"},
	}
	for _, c := range cases {
		got, err := parseMountOptions(c.opts)
		if err != nil {
			t.Errorf("%v: %v", c.opts, err)
			continue
		}
		if got.Flags != c.flags || got.Propagation != c.prop || got.Data != c.data {
			t.Errorf("%v: flags %#x propagation %#x data %q; want %#x %#x %q", c.opts, got.Flags, got.Propagation, got.Data, c.flags, c.prop, c.data)
		}
	}
	for _, bad := range [][]string{{"rro"}, {"ridmap"}, {"tmpcopyup"}, {""}, {"a\x00b"}} {
		if _, err := parseMountOptions(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
