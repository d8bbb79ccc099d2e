package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/layout"
	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/profiles"
	"github.com/jail-sandbox/jail/seccomp/filter"
)

// writeBundle makes a bundle directory with a rootfs and spec's
// config.json, and returns its path.
func writeBundle(t *testing.T, spec *specs.Spec) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "rootfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func translateBundle(t *testing.T, spec *specs.Spec, opts TranslateOptions) (*Prepared, error) {
	t.Helper()
	b, err := LoadBundle(writeBundle(t, spec))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if opts.CapLastCap == 0 {
		opts.CapLastCap = 40
	}
	p, err := Translate(b, opts)
	if p != nil {
		t.Cleanup(p.Close)
	}
	return p, err
}

func TestTranslateNamespaces(t *testing.T) {
	spec := baseSpec()
	spec.Linux.Namespaces = []specs.LinuxNamespace{
		{Type: "mount"}, {Type: "pid"}, {Type: "uts"},
		{Type: "network", Path: "/proc/self/ns/net"},
		{Type: "ipc", Path: "/proc/self/ns/ipc"},
	}
	p, err := translateBundle(t, spec, TranslateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Container
	if want := int64(unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWUTS); c.New != want {
		t.Errorf("New %#x; want %#x", c.New, want)
	}
	// Joined in runc's order (ipc before network), numbered from 4 in the
	// order attached.
	want := []config.JoinedNamespace{{Type: unix.CLONE_NEWIPC, FD: 4}, {Type: unix.CLONE_NEWNET, FD: 5}}
	if len(c.Join) != 2 || c.Join[0] != want[0] || c.Join[1] != want[1] {
		t.Fatalf("Join %+v; want %+v", c.Join, want)
	}
	if len(p.Files) != 2 {
		t.Fatalf("%d files attached", len(p.Files))
	}
	for i, f := range p.Files {
		got, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_NSTYPE)
		if err != nil || int64(got) != c.Join[i].Type {
			t.Errorf("file %d: type %#x (%v)", i, got, err)
		}
	}
	if fd := p.Attach(p.Files[0]); fd != 6 {
		t.Errorf("next file is %d; want 6", fd)
	}
	p.Files = p.Files[:2]
}

func TestTranslateRefusesNamespaceFilesOfAnotherKind(t *testing.T) {
	notNS := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(notNS, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		ns   specs.LinuxNamespace
		want string
	}{
		{specs.LinuxNamespace{Type: "network", Path: "/proc/self/ns/ipc"}, "is a namespace of another type"},
		{specs.LinuxNamespace{Type: "pid", Path: "/proc/self/ns/pid_for_children"}, ""},
		{specs.LinuxNamespace{Type: "uts", Path: notNS}, "is not a namespace file"},
		{specs.LinuxNamespace{Type: "ipc", Path: "/proc/self/ns"}, "is not a namespace file"},
		{specs.LinuxNamespace{Type: "ipc", Path: "/nonexistent/ns"}, "no such file"},
	}
	for _, c := range cases {
		spec := baseSpec()
		spec.Linux.Namespaces = []specs.LinuxNamespace{{Type: "mount"}, c.ns}
		_, err := translateBundle(t, spec, TranslateOptions{})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %s: %v", c.ns.Type, c.ns.Path, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %s: %v; want %q", c.ns.Type, c.ns.Path, err, c.want)
		}
	}
}

func TestTranslateRootAndMounts(t *testing.T) {
	spec := baseSpec()
	spec.Root.Readonly = true
	spec.Linux.RootfsPropagation = "rprivate"
	spec.Mounts = []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{Destination: "/data/", Source: "data", Options: []string{"rbind", "ro", "rslave"}},
		{Destination: "/etc/hosts", Type: "bind", Source: "hosts"},
	}
	dir := writeBundle(t, spec)
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "real-hosts"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real-hosts", filepath.Join(dir, "hosts")); err != nil {
		t.Fatal(err)
	}
	b, err := LoadBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p, err := Translate(b, TranslateOptions{CapLastCap: 40})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := p.Container
	canonical, _ := filepath.EvalSymlinks(dir)
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "rootfs"), &st); err != nil {
		t.Fatal(err)
	}
	if c.Rootfs != filepath.Join(canonical, "rootfs") || c.RootfsDev != st.Dev || c.RootfsIno != st.Ino || !c.RootfsReadOnly {
		t.Errorf("root %q %d %d %v; want %q %d %d true", c.Rootfs, c.RootfsDev, c.RootfsIno, c.RootfsReadOnly, filepath.Join(canonical, "rootfs"), st.Dev, st.Ino)
	}
	if c.RootPropagation != unix.MS_PRIVATE|unix.MS_REC {
		t.Errorf("root propagation %#x", c.RootPropagation)
	}
	var data, hosts unix.Stat_t
	if unix.Stat(filepath.Join(dir, "data"), &data) != nil || unix.Stat(filepath.Join(dir, "real-hosts"), &hosts) != nil {
		t.Fatal("stat the bind sources")
	}
	want := []config.ContainerMount{
		{Destination: "/proc", Type: "proc", Source: "proc", Flags: unix.MS_NOSUID | unix.MS_NOEXEC | unix.MS_NODEV},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Flags: unix.MS_NOSUID | unix.MS_NOEXEC, Data: "newinstance,ptmxmode=0666,mode=0620"},
		{Destination: "/data", Source: filepath.Join(canonical, "data"), Flags: unix.MS_BIND | unix.MS_REC | unix.MS_RDONLY, Propagation: unix.MS_SLAVE | unix.MS_REC,
			SourceDev: data.Dev, SourceIno: data.Ino},
		{Destination: "/etc/hosts", Source: filepath.Join(canonical, "real-hosts"), Flags: unix.MS_BIND, SourceDev: hosts.Dev, SourceIno: hosts.Ino},
	}
	if len(c.Mounts) != len(want) {
		t.Fatalf("%d mounts", len(c.Mounts))
	}
	for i := range want {
		if c.Mounts[i] != want[i] {
			t.Errorf("mount %d: %+v; want %+v", i, c.Mounts[i], want[i])
		}
	}
}

func TestTranslateRefusesTheHostRootAndMissingSources(t *testing.T) {
	cases := []struct {
		name   string
		change func(*specs.Spec)
		want   string
	}{
		{"root is /", func(s *specs.Spec) { s.Root.Path = "/" }, "is the host's /"},
		{"root climbs to /", func(s *specs.Spec) { s.Root.Path = "../../../../../../../../.." }, "is the host's /"},
		{"root missing", func(s *specs.Spec) { s.Root.Path = "nothere" }, "no such file"},
		{"root is a file", func(s *specs.Spec) { s.Root.Path = "config.json" }, "not a directory"},
		{"bind source missing", func(s *specs.Spec) {
			s.Mounts = []specs.Mount{{Destination: "/x", Source: "missing", Options: []string{"bind"}}}
		}, "mounts[0] (/x): source missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := baseSpec()
			c.change(s)
			_, err := translateBundle(t, s, TranslateOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v; want %q", err, c.want)
			}
		})
	}
}

func TestTranslateProcess(t *testing.T) {
	spec := baseSpec()
	spec.Hostname = "box"
	spec.Process.Cwd = "/work/"
	spec.Process.User = specs.User{UID: 1000, GID: 100, AdditionalGids: []uint32{5, 6}, Umask: u32(0o027)}
	spec.Process.Rlimits = []specs.POSIXRlimit{
		{Type: "RLIMIT_NOFILE", Soft: 1024, Hard: 4096},
		{Type: "RLIMIT_CORE", Soft: 0, Hard: 0},
		{Type: "RLIMIT_RTTIME", Soft: 1, Hard: 2},
	}
	spec.Process.OOMScoreAdj = intp(-500)
	spec.Process.NoNewPrivileges = true
	spec.Process.Terminal = true
	spec.Process.Capabilities = &specs.LinuxCapabilities{
		Bounding:    []string{"CAP_CHOWN", "CAP_KILL", "CAP_NET_BIND_SERVICE", "CAP_CHECKPOINT_RESTORE", "CAP_FROM_THE_FUTURE"},
		Effective:   []string{"CAP_KILL"},
		Permitted:   []string{"CAP_KILL", "CAP_SYS_ADMIN"},
		Inheritable: []string{},
		Ambient:     []string{"CAP_NET_BIND_SERVICE"},
	}
	spec.Linux.Devices = []specs.LinuxDevice{
		{Path: "/dev/fuse", Type: "c", Major: 10, Minor: 229},
		{Path: "/dev/x", Type: "u", Major: 1, Minor: 2, UID: u32(7), GID: u32(8)},
		{Path: "/dev/p", Type: "p", Major: 3, Minor: 4},
	}
	mode := os.FileMode(0o600)
	spec.Linux.Devices[1].FileMode = &mode
	spec.Linux.Sysctl = map[string]string{"net.ipv4.ip_forward": "1", "kernel.shmmax": "65536"}
	spec.Linux.MaskedPaths = []string{"/proc/kcore/"}
	// A kernel that knows capabilities up to 39 (CAP_BPF).
	p, err := translateBundle(t, spec, TranslateOptions{CapLastCap: 39})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Container
	pr := c.Process
	if pr.Cwd != "/work" || pr.UID != 1000 || pr.GID != 100 || len(pr.AdditionalGIDs) != 2 || !pr.SetUmask || pr.Umask != 0o027 {
		t.Errorf("process %+v", pr)
	}
	wantLimits := []config.Rlimit{{Type: 7, Soft: 1024, Hard: 4096}, {Type: 4}, {Type: 15, Soft: 1, Hard: 2}}
	for i, r := range wantLimits {
		if i >= len(pr.Rlimits) || pr.Rlimits[i] != r {
			t.Errorf("rlimits %+v; want %+v", pr.Rlimits, wantLimits)
			break
		}
	}
	if !pr.SetOOMScoreAdj || pr.OOMScoreAdj != -500 || !pr.NoNewPrivileges || !pr.Terminal {
		t.Errorf("process %+v", pr)
	}
	bits := func(caps ...uint) uint64 {
		var b uint64
		for _, c := range caps {
			b |= 1 << c
		}
		return b
	}
	if pr.Bounding != bits(0, 5, 10) || pr.Effective != bits(5) || pr.Permitted != bits(5, 21) || pr.Inheritable != 0 || pr.Ambient != bits(10) {
		t.Errorf("capabilities %#x %#x %#x %#x %#x", pr.Bounding, pr.Effective, pr.Permitted, pr.Inheritable, pr.Ambient)
	}
	warned := strings.Join(p.Warnings, "; ")
	if !strings.Contains(warned, "CAP_FROM_THE_FUTURE") || !strings.Contains(warned, "CAP_CHECKPOINT_RESTORE is unknown to this kernel") {
		t.Errorf("warnings %q", warned)
	}
	if !c.SetHostname || c.Hostname != "box" {
		t.Errorf("hostname %v %q", c.SetHostname, c.Hostname)
	}
	// The runtime spec's default devices first, then the bundle's.
	wantDevices := append(defaultDevices(),
		config.Device{Path: "/dev/fuse", Type: "c", Major: 10, Minor: 229, Mode: 0o666},
		config.Device{Path: "/dev/x", Type: "c", Major: 1, Minor: 2, Mode: 0o600, UID: 7, GID: 8},
		config.Device{Path: "/dev/p", Type: "p", Mode: 0o666},
	)
	for i, d := range wantDevices {
		if i >= len(c.Devices) || c.Devices[i] != d {
			t.Errorf("devices %+v; want %+v", c.Devices, wantDevices)
			break
		}
	}
	if len(c.Sysctl) != 2 || c.Sysctl[0].Key != "kernel.shmmax" || c.Sysctl[1] != (config.Sysctl{Key: "net.ipv4.ip_forward", Value: "1"}) {
		t.Errorf("sysctl %+v", c.Sysctl)
	}
	if len(c.MaskedPaths) != 1 || c.MaskedPaths[0] != "/proc/kcore" {
		t.Errorf("masked %v", c.MaskedPaths)
	}
}

func TestTranslateJoinedUTSKeepsItsNames(t *testing.T) {
	spec := baseSpec()
	spec.Hostname = "box"
	spec.Linux.Namespaces = []specs.LinuxNamespace{{Type: "mount"}, {Type: "uts", Path: "/proc/self/ns/uts"}}
	p, err := translateBundle(t, spec, TranslateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Container.SetHostname || len(p.Warnings) == 0 {
		t.Errorf("SetHostname %v, warnings %v", p.Container.SetHostname, p.Warnings)
	}
}

// TestTranslateSELinuxLabels: jail applies no SELinux label, so a
// bundle's label is refused where the host enforces SELinux (the
// container would be less confined than asked) and ignored with a
// warning where it does not (it means nothing there).
func TestTranslateSELinuxLabels(t *testing.T) {
	for _, tc := range []struct {
		name           string
		mount, process string
		selinux        bool
		err            string
		warnings       int
	}{
		{"no labels on an SELinux host", "", "", true, "", 0},
		{"mount label, no SELinux", "system_u:object_r:container_file_t:s0", "", false, "", 1},
		{"both labels, no SELinux", "system_u:object_r:container_file_t:s0", "system_u:system_r:container_t:s0", false, "", 2},
		{"mount label on an SELinux host", "system_u:object_r:container_file_t:s0", "", true, "oci: linux.mountLabel: this host enforces SELinux labels and jail does not apply them", 0},
		{"process label on an SELinux host", "", "system_u:system_r:container_t:s0", true, "oci: process.selinuxLabel: this host enforces SELinux labels and jail does not apply them", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := baseSpec()
			spec.Linux.MountLabel, spec.Process.SelinuxLabel = tc.mount, tc.process
			p, err := translateBundle(t, spec, TranslateOptions{SELinuxEnabled: func() bool { return tc.selinux }})
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, w := range p.Warnings {
				if strings.Contains(w, "SELinux") {
					n++
				}
			}
			if n != tc.warnings {
				t.Errorf("warnings %q, want %d about SELinux", p.Warnings, tc.warnings)
			}
		})
	}
}

// TestTranslateAppArmor: a profile reaches the process where the host
// confines with AppArmor and is refused with one line where it does not
// (the process would run unconfined).
func TestTranslateAppArmor(t *testing.T) {
	spec := baseSpec()
	spec.Process.ApparmorProfile = "cri-containerd.apparmor.d"
	p, err := translateBundle(t, spec, TranslateOptions{AppArmorEnabled: func() bool { return true }})
	if err != nil {
		t.Fatalf("enabled: %v", err)
	}
	if p.Container.Process.AppArmorProfile != "cri-containerd.apparmor.d" {
		t.Errorf("enabled: profile %q", p.Container.Process.AppArmorProfile)
	}
	_, err = translateBundle(t, spec, TranslateOptions{AppArmorEnabled: func() bool { return false }})
	if err == nil || err.Error() != `oci: process.apparmorProfile "cri-containerd.apparmor.d": AppArmor is not enabled on this host` {
		t.Errorf("not enabled: %v", err)
	}
	spec.Process.ApparmorProfile = ""
	if _, err := translateBundle(t, spec, TranslateOptions{AppArmorEnabled: func() bool { t.Error("asked the host without a profile"); return false }}); err != nil {
		t.Error(err)
	}
}

func TestTranslateSeccomp(t *testing.T) {
	spec := baseSpec()
	spec.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow}
	if _, err := translateBundle(t, spec, TranslateOptions{}); err == nil || !strings.Contains(err.Error(), "cannot compile") {
		t.Errorf("no compiler: %v", err)
	}
	compiled := filter.Filter{Allowlist: make([]byte, 8)}
	p, err := translateBundle(t, spec, TranslateOptions{CompileSeccomp: func(*specs.LinuxSeccomp) (filter.Filter, error) { return compiled, nil }})
	if err != nil || len(p.Container.Seccomp.Allowlist) != 8 {
		t.Errorf("compiled: %v", err)
	}
	_, err = translateBundle(t, spec, TranslateOptions{CompileSeccomp: func(*specs.LinuxSeccomp) (filter.Filter, error) {
		return filter.Filter{}, errors.New("unknown architecture")
	}})
	if err == nil || err.Error() != "oci: linux.seccomp: unknown architecture" {
		t.Errorf("compiler's error: %v", err)
	}
}

// TestTranslateProfileAnnotation: jail.dev/profile adds the named jail
// profile's filter, jail's masks and read-only paths and the profile's
// own to the bundle's, each once; without it nothing is added, and a
// profile that cannot be had refuses the bundle.
func TestTranslateProfileAnnotation(t *testing.T) {
	strict := filter.Filter{Allowlist: make([]byte, 16)}
	resolve := func(name string) (*profiles.Profile, filter.Filter, error) {
		if name != "strict" {
			return nil, filter.Filter{}, fmt.Errorf("profile %q: no such profile", name)
		}
		return &profiles.Profile{Masks: []string{"/secret", "relative"}, ReadOnly: []string{"/etc"}}, strict, nil
	}
	spec := baseSpec()
	spec.Linux.MaskedPaths = []string{"/proc/kcore"}
	p, err := translateBundle(t, spec, TranslateOptions{ResolveProfile: resolve})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Container.ProfileSeccomp.Allowlist) != 0 || len(p.Container.MaskedPaths) != 1 || len(p.Container.ReadonlyPaths) != 0 {
		t.Errorf("no annotation: %+v %v %v", p.Container.ProfileSeccomp, p.Container.MaskedPaths, p.Container.ReadonlyPaths)
	}

	spec.Annotations = map[string]string{ProfileAnnotation: "strict"}
	p, err = translateBundle(t, spec, TranslateOptions{ResolveProfile: resolve})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Container.ProfileSeccomp.Allowlist) != 16 {
		t.Error("the profile's filter is not the container's")
	}
	count := func(list []string, want string) int {
		n := 0
		for _, p := range list {
			if p == want {
				n++
			}
		}
		return n
	}
	for _, want := range append([]string{"/secret"}, layout.KernelMasked...) {
		if count(p.Container.MaskedPaths, want) != 1 {
			t.Errorf("masked paths %v: %s not once", p.Container.MaskedPaths, want)
		}
	}
	if count(p.Container.MaskedPaths, "relative") != 0 {
		t.Errorf("a relative mask was taken: %v", p.Container.MaskedPaths)
	}
	for _, want := range append([]string{"/etc"}, layout.ProcReadOnly...) {
		if count(p.Container.ReadonlyPaths, want) != 1 {
			t.Errorf("read-only paths %v: %s not once", p.Container.ReadonlyPaths, want)
		}
	}

	for _, c := range []struct {
		name    string
		profile string
		resolve ProfileResolver
		want    string
	}{
		{"unknown profile", "lenient", resolve, `oci: annotation jail.dev/profile: profile "lenient": no such profile`},
		{"no resolver", "strict", nil, "oci: annotation jail.dev/profile: this build cannot apply jail profiles"},
		{"no filter", "strict", func(string) (*profiles.Profile, filter.Filter, error) {
			return &profiles.Profile{}, filter.Filter{}, nil
		}, `profile "strict" has no compiled filter`},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec.Annotations = map[string]string{ProfileAnnotation: c.profile}
			if _, err := translateBundle(t, spec, TranslateOptions{ResolveProfile: c.resolve}); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v; want %q", err, c.want)
			}
		})
	}
}

func TestLoadBundleBounds(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadBundle(dir); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("no config.json: %v", err)
	}
	big := make([]byte, MaxConfig+1)
	for i := range big {
		big[i] = ' '
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadBundle(dir); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("too large: %v", err)
	}
	os.Remove(filepath.Join(dir, "config.json"))
	if err := unix.Mkfifo(filepath.Join(dir, "config.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadBundle(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FIFO: %v", err)
	}
	os.Remove(filepath.Join(dir, "config.json"))
	for _, bad := range []string{`{"ociVersion": "1.2.1"} {}`, `{"ociVersion": 1}`, `[`} {
		if _, err := DecodeConfig([]byte(bad)); err == nil {
			t.Errorf("%s: decoded", bad)
		}
	}
	s, err := DecodeConfig([]byte(`{"ociVersion": "1.2.1", "someday": {"x": 1}, "process": {"cwd": "/", "args": ["a"], "user": {"uid": 0, "gid": 0}}}`))
	if err != nil || s.Process.Args[0] != "a" {
		t.Errorf("unknown properties: %v", err)
	}
}

// TestCompileSeccompInTools: the tools program compiles a bundle's policy
// and returns its refusal as one message.
func TestCompileSeccompInTools(t *testing.T) {
	f, err := CompileSeccompInTools(&specs.LinuxSeccomp{
		DefaultAction: specs.ActErrno,
		Syscalls:      []specs.LinuxSyscall{{Names: []string{"read", "write", "exit_group"}, Action: specs.ActAllow}},
	})
	if errors.Is(err, programs.ErrNotBuilt) {
		t.Skip("no tools program in this build (go generate ./internal/programs)")
	}
	if err != nil || !f.Valid() {
		t.Fatalf("%v", err)
	}
	_, err = CompileSeccompInTools(&specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Architectures: []specs.Arch{"SCMP_ARCH_VAX"}})
	if err == nil || !strings.HasPrefix(err.Error(), "seccomp: architecture SCMP_ARCH_VAX") {
		t.Errorf("refusal: %v", err)
	}
}

// TestCompileSeccompCached: a policy is compiled once and then read from
// the cache; an entry others could have written, or one that is not a
// filter, is not believed (compiled again and replaced).
func TestCompileSeccompCached(t *testing.T) {
	policy := &specs.LinuxSeccomp{
		DefaultAction: specs.ActErrno,
		Syscalls:      []specs.LinuxSyscall{{Names: []string{"read", "write", "exit_group"}, Action: specs.ActAllow}},
	}
	if _, err := CompileSeccompInTools(policy); errors.Is(err, programs.ErrNotBuilt) {
		t.Skip("no tools program in this build (go generate ./internal/programs)")
	}
	dir := filepath.Join(t.TempDir(), "cache")
	compile := CompileSeccompCached(dir)
	first, err := compile(policy)
	if err != nil || !first.Valid() {
		t.Fatalf("%v", err)
	}
	entries, _ := filepath.Glob(filepath.Join(dir, "oci-*.json"))
	if len(entries) != 1 {
		t.Fatalf("cache entries %v; want one", entries)
	}
	// A planted filter the cache's owner wrote is what the next compile
	// returns: it came from the cache.
	planted := filter.Filter{Allowlist: []byte{6, 0, 0, 0, 0, 0, 0xff, 0x7f}}
	data, _ := json.Marshal(planted)
	if err := os.WriteFile(entries[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := compile(policy); err != nil || string(got.Allowlist) != string(planted.Allowlist) {
		t.Errorf("second compile did not come from the cache: %v", err)
	}
	for _, c := range []struct {
		name  string
		plant func(path string) error
	}{
		{"writable by others", func(p string) error { return os.Chmod(p, 0o666) }},
		{"not a filter", func(p string) error { return os.WriteFile(p, []byte(`{"allowlist": "AAAA"}`), 0o644) }},
		{"a link to a planted filter", func(p string) error {
			elsewhere := filepath.Join(filepath.Dir(filepath.Dir(p)), "planted.json")
			if err := os.WriteFile(elsewhere, data, 0o644); err != nil {
				return err
			}
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Symlink(elsewhere, p)
		}},
		{"in a directory others can write", func(p string) error { return os.Chmod(filepath.Dir(p), 0o777) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.Chmod(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			_ = os.Remove(entries[0])
			if err := os.WriteFile(entries[0], data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := c.plant(entries[0]); err != nil {
				t.Fatal(err)
			}
			got, err := compile(policy)
			if err != nil || string(got.Allowlist) != string(first.Allowlist) {
				t.Errorf("the entry was believed: %v", err)
			}
		})
	}
	other := *policy
	other.DefaultAction = specs.ActKill
	if got, err := compile(&other); err != nil || string(got.Allowlist) == string(first.Allowlist) {
		t.Errorf("another policy got the first's filter: %v", err)
	}
}

// TestTranslateGivesTheInitItsHooks: the createContainer and
// startContainer hooks go to the container's init (which runs them), the
// others stay jail oci's.
func TestTranslateGivesTheInitItsHooks(t *testing.T) {
	spec := baseSpec()
	spec.Hooks = &specs.Hooks{
		Prestart:        []specs.Hook{{Path: "/bin/prestart"}},
		CreateContainer: []specs.Hook{{Path: "/usr/bin/nvidia-ctk", Args: []string{"nvidia-ctk", "hook", "update-ldcache"}, Env: []string{"A=1"}, Timeout: intp(5)}},
		StartContainer:  []specs.Hook{{Path: "/in/the/root"}},
	}
	p, err := translateBundle(t, spec, TranslateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Container
	wantCreate := []config.ContainerHook{{Path: "/usr/bin/nvidia-ctk", Args: []string{"nvidia-ctk", "hook", "update-ldcache"}, Env: []string{"A=1"}, Timeout: 5}}
	wantStart := []config.ContainerHook{{Path: "/in/the/root"}}
	if !reflect.DeepEqual(c.CreateContainerHooks, wantCreate) || !reflect.DeepEqual(c.StartContainerHooks, wantStart) {
		t.Errorf("hooks %+v %+v; want %+v %+v", c.CreateContainerHooks, c.StartContainerHooks, wantCreate, wantStart)
	}
}
