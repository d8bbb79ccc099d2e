package oci

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/layout"
	"github.com/jail-sandbox/jail/profiles"
	"github.com/jail-sandbox/jail/seccomp/filter"
)

// firstFD is the container role's descriptor of the first file attached
// to a KindContainer (3 is the control socket).
const firstFD = 4

// SeccompCompiler compiles a bundle's seccomp section into BPF.
type SeccompCompiler func(*specs.LinuxSeccomp) (filter.Filter, error)

// TranslateOptions are what Translate needs besides the bundle.
type TranslateOptions struct {
	// CompileSeccomp compiles linux.seccomp; nil refuses a bundle that
	// has one.
	CompileSeccomp SeccompCompiler
	// CapLastCap is the highest capability this kernel knows; 0 reads
	// /proc/sys/kernel/cap_last_cap.
	CapLastCap uint
	// ResolveProfile finds a jail profile and its compiled filter, for
	// the ProfileAnnotation; nil refuses a bundle that has one.
	ResolveProfile ProfileResolver
	// SELinuxEnabled says whether this host labels with SELinux; nil
	// asks the host (selinuxEnabled).
	SELinuxEnabled func() bool
	// AppArmorEnabled says whether this host confines with AppArmor; nil
	// asks the host (appArmorEnabled).
	AppArmorEnabled func() bool
}

// ProfileResolver finds the named jail profile and its compiled filter.
type ProfileResolver func(name string) (*profiles.Profile, filter.Filter, error)

// ProfileAnnotation names a jail profile whose seccomp filter, masks and
// read-only paths apply on top of the bundle's: jail's own defaults,
// when a pod asks for them. Without it jail adds nothing the bundle did
// not ask for.
const ProfileAnnotation = "jail.dev/profile"

// Prepared is a container's description for the role and the files it
// names, which are attached, in order, to the KindContainer.
type Prepared struct {
	Container config.Container
	Files     []*os.File
	// Warnings are what the bundle asked that the spec says to ignore
	// with a warning (unknown capabilities, say).
	Warnings []string
}

// Attach adds f to the files sent and returns the role's descriptor of it.
// f is the Prepared's from then on (Close closes it).
func (p *Prepared) Attach(f *os.File) int {
	p.Files = append(p.Files, f)
	return firstFD + len(p.Files) - 1
}

// Close closes the attached files.
func (p *Prepared) Close() {
	for _, f := range p.Files {
		f.Close()
	}
	p.Files = nil
}

// Translate turns a validated bundle into the role's description: it opens
// the namespace files to join (checked to be of their type) and attaches
// them, resolves and identifies the root and the bind mounts' sources
// (relative paths are the bundle's), and compiles the seccomp filter. The
// exec FIFO is the caller's to attach (ExecFifoFD).
func Translate(b *Bundle, opts TranslateOptions) (*Prepared, error) {
	spec := b.Spec
	if err := Validate(spec); err != nil {
		return nil, err
	}
	p := &Prepared{}
	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()
	c := &p.Container
	ns, _ := validateNamespaces(spec.Linux.Namespaces)
	if err := p.namespaces(ns); err != nil {
		return nil, err
	}
	if err := p.root(b); err != nil {
		return nil, err
	}
	c.RootPropagation = propagationFlags()[spec.Linux.RootfsPropagation]
	for i, m := range spec.Mounts {
		cm, err := translateMount(b, m)
		if err != nil {
			return nil, fmt.Errorf("oci: mounts[%d] (%s): %w", i, m.Destination, err)
		}
		if cm.Type == "cgroup" {
			expanded, err := expandCgroupMount(b, cm, ns.has("user"), ns.isNew("cgroup"))
			if err != nil {
				return nil, fmt.Errorf("oci: mounts[%d] (%s): %w", i, m.Destination, err)
			}
			c.Mounts = append(c.Mounts, expanded...)
			continue
		}
		c.Mounts = append(c.Mounts, cm)
	}
	c.SetHostname = ns.isNew("uts")
	c.Hostname, c.Domainname = spec.Hostname, spec.Domainname
	if !c.SetHostname && (spec.Hostname != "" || spec.Domainname != "") {
		p.Warnings = append(p.Warnings, "the uts namespace is joined: its host and domain names are left as they are")
	}
	for _, m := range spec.Linux.MaskedPaths {
		c.MaskedPaths = append(c.MaskedPaths, filepath.Clean(m))
	}
	for _, r := range spec.Linux.ReadonlyPaths {
		c.ReadonlyPaths = append(c.ReadonlyPaths, filepath.Clean(r))
	}
	c.Devices = translateDevices(spec.Linux.Devices)
	c.Sysctl = translateSysctl(spec.Linux.Sysctl)
	lastCap := opts.CapLastCap
	if lastCap == 0 {
		var err error
		if lastCap, err = readCapLastCap(); err != nil {
			return nil, err
		}
	}
	if spec.Process.ConsoleSize != nil {
		p.Warnings = append(p.Warnings, "process.consoleSize is not applied: the console socket's reader sizes the terminal")
	}
	if r := spec.Linux.Resources; r != nil && r.Memory != nil && r.Memory.Kernel != nil {
		p.Warnings = append(p.Warnings, "linux.resources.memory.kernel is ignored: kernel memory limits are deprecated (runtime-spec) and gone from cgroup v2")
	}
	labelWarnings, err := selinuxLabels(opts.SELinuxEnabled, spec.Linux.MountLabel, spec.Process.SelinuxLabel)
	if err != nil {
		return nil, err
	}
	if err := appArmorUsable(opts.AppArmorEnabled, spec.Process.ApparmorProfile); err != nil {
		return nil, err
	}
	p.Warnings = append(p.Warnings, labelWarnings...)
	process, warnings := translateProcess(spec.Process, lastCap)
	c.Process = process
	p.Warnings = append(p.Warnings, warnings...)
	if spec.Linux.Seccomp != nil {
		if opts.CompileSeccomp == nil {
			return nil, errors.New("oci: linux.seccomp: this build cannot compile seccomp filters")
		}
		f, err := opts.CompileSeccomp(spec.Linux.Seccomp)
		if err != nil {
			return nil, fmt.Errorf("oci: linux.seccomp: %w", err)
		}
		c.Seccomp = f
	}
	if h := spec.Hooks; h != nil {
		c.CreateContainerHooks = containerHooks(h.CreateContainer)
		c.StartContainerHooks = containerHooks(h.StartContainer)
	}
	if name, asked := spec.Annotations[ProfileAnnotation]; asked {
		if err := applyProfile(c, name, opts.ResolveProfile); err != nil {
			return nil, err
		}
	}
	ok = true
	return p, nil
}

// containerHooks are hooks as the container's init runs them.
func containerHooks(hooks []specs.Hook) []config.ContainerHook {
	var out []config.ContainerHook
	for _, h := range hooks {
		ch := config.ContainerHook{Path: h.Path, Args: h.Args, Env: h.Env}
		if h.Timeout != nil {
			// The init counts seconds in 32 bits: a longer timeout (the
			// spec allows any) is 68 years, as good as none.
			ch.Timeout = min(*h.Timeout, math.MaxInt32)
		}
		out = append(out, ch)
	}
	return out
}

// applyProfile adds the jail profile name's filter, and the masks and
// read-only paths every jail sandbox has with the profile's own, to c.
func applyProfile(c *config.Container, name string, resolve ProfileResolver) error {
	prof, f, err := resolveAnnotated(name, resolve)
	if err != nil {
		return err
	}
	c.ProfileSeccomp = f
	c.MaskedPaths = appendNew(c.MaskedPaths, layout.KernelMasked, prof.Masks)
	c.ReadonlyPaths = appendNew(c.ReadonlyPaths, layout.ProcReadOnly, prof.ReadOnly)
	return nil
}

// resolveAnnotated resolves the profile ProfileAnnotation names.
func resolveAnnotated(name string, resolve ProfileResolver) (*profiles.Profile, filter.Filter, error) {
	if resolve == nil {
		return nil, filter.Filter{}, fmt.Errorf("oci: annotation %s: this build cannot apply jail profiles", ProfileAnnotation)
	}
	prof, f, err := resolve(name)
	if err != nil {
		return nil, filter.Filter{}, fmt.Errorf("oci: annotation %s: %w", ProfileAnnotation, err)
	}
	if !f.Valid() {
		return nil, filter.Filter{}, fmt.Errorf("oci: annotation %s: profile %q has no compiled filter", ProfileAnnotation, name)
	}
	return prof, f, nil
}

// appendNew appends the clean absolute paths of lists that list does not
// hold yet.
func appendNew(list []string, lists ...[]string) []string {
	seen := make(map[string]bool, len(list))
	for _, p := range list {
		seen[p] = true
	}
	for _, l := range lists {
		for _, p := range l {
			p = filepath.Clean(p)
			if filepath.IsAbs(p) && !seen[p] {
				seen[p] = true
				list = append(list, p)
			}
		}
	}
	return list
}

// namespaces sets New and opens and attaches the namespaces to join, in
// joinOrder.
func (p *Prepared) namespaces(ns namespaceSet) error {
	for _, t := range joinOrder {
		path, listed := ns[t]
		if !listed {
			continue
		}
		flag := namespaceTypes()[t]
		if path == "" {
			p.Container.New |= flag
			continue
		}
		f, err := openNamespace(path, flag)
		if err != nil {
			return fmt.Errorf("oci: linux.namespaces: %s: %w", t, err)
		}
		fd := p.Attach(f)
		p.Container.Join = append(p.Container.Join, config.JoinedNamespace{Type: flag, FD: fd})
	}
	return nil
}

// openNamespace opens the namespace file path and checks that it is one,
// of the type flag (a CLONE_NEW* flag): an nsfs file that NS_GET_NSTYPE
// names so. What is checked is what is sent.
func openNamespace(path string, flag int64) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if fs.Type != unix.NSFS_MAGIC {
		f.Close()
		return nil, fmt.Errorf("%s is not a namespace file", path)
	}
	got, err := unix.IoctlRetInt(fd, unix.NS_GET_NSTYPE)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: namespace type: %w", path, err)
	}
	if int64(got) != flag {
		f.Close()
		return nil, fmt.Errorf("%s is a namespace of another type", path)
	}
	return f, nil
}

// root resolves root.path (relative to the bundle), opened once: the
// canonical path the descriptor reads as, and its device and inode.
func (p *Prepared) root(b *Bundle) error {
	fd, err := unix.Openat(int(b.Dir.Fd()), b.Spec.Root.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("oci: root.path %s: %w", b.Spec.Root.Path, err)
	}
	defer unix.Close(fd)
	path, err := fdPath(fd)
	if err != nil {
		return fmt.Errorf("oci: root.path %s: %w", b.Spec.Root.Path, err)
	}
	if path == "/" {
		return fmt.Errorf("oci: root.path %s is the host's /", b.Spec.Root.Path)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("oci: root.path %s: %w", b.Spec.Root.Path, err)
	}
	c := &p.Container
	c.Rootfs, c.RootfsDev, c.RootfsIno = path, st.Dev, st.Ino
	c.RootfsReadOnly = b.Spec.Root.Readonly
	return nil
}

// fdPath is the canonical path of the file fd, as the kernel reads it.
func fdPath(fd int) (string, error) {
	path, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(path) || strings.HasSuffix(path, " (deleted)") {
		return "", fmt.Errorf("%q has no path", path)
	}
	return path, nil
}

// translateMount: a bind mount's source is resolved (relative to the
// bundle when relative) to its canonical host path, with its device and
// inode; the others' sources are the filesystem's.
func translateMount(b *Bundle, m specs.Mount) (config.ContainerMount, error) {
	opts, err := parseMountOptions(m.Options)
	if err != nil {
		return config.ContainerMount{}, err
	}
	out := config.ContainerMount{
		Destination: filepath.Clean(m.Destination),
		Type:        m.Type,
		Source:      m.Source,
		Flags:       opts.Flags,
		Propagation: opts.Propagation,
		Data:        opts.Data,
	}
	if m.Type == "bind" || opts.Flags&unix.MS_BIND != 0 {
		out.Type = ""
		out.Flags |= unix.MS_BIND
		fd, err := unix.Openat(int(b.Dir.Fd()), m.Source, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return config.ContainerMount{}, fmt.Errorf("source %s: %w", m.Source, err)
		}
		// The role reopens the canonical path (without following any
		// link) and checks it is still this file.
		var st unix.Stat_t
		out.Source, err = fdPath(fd)
		if err == nil {
			err = unix.Fstat(fd, &st)
		}
		unix.Close(fd)
		if err != nil {
			return config.ContainerMount{}, fmt.Errorf("source %s: %w", m.Source, err)
		}
		out.SourceDev, out.SourceIno = st.Dev, st.Ino
	}
	return out, nil
}

// defaultDevices are the devices the runtime spec says every container
// has (config-linux.md, "Default Devices"), unless the bundle lists the
// path itself; /dev/ptmx is the role's link to pts/ptmx.
func defaultDevices() []config.Device {
	return []config.Device{
		{Path: "/dev/null", Type: "c", Major: 1, Minor: 3, Mode: 0o666},
		{Path: "/dev/zero", Type: "c", Major: 1, Minor: 5, Mode: 0o666},
		{Path: "/dev/full", Type: "c", Major: 1, Minor: 7, Mode: 0o666},
		{Path: "/dev/random", Type: "c", Major: 1, Minor: 8, Mode: 0o666},
		{Path: "/dev/urandom", Type: "c", Major: 1, Minor: 9, Mode: 0o666},
		{Path: "/dev/tty", Type: "c", Major: 5, Minor: 0, Mode: 0o666},
	}
}

// translateDevices: type u is c (unbuffered is all the kernel has); the
// mode defaults to 0666 and the owner to root, as runc. The default
// devices come first, but for those the bundle lists.
func translateDevices(devices []specs.LinuxDevice) []config.Device {
	var out []config.Device
	listed := map[string]bool{}
	for _, d := range devices {
		listed[filepath.Clean(d.Path)] = true
	}
	for _, d := range defaultDevices() {
		if !listed[d.Path] {
			out = append(out, d)
		}
	}
	for _, d := range devices {
		dev := config.Device{Path: filepath.Clean(d.Path), Type: d.Type, Major: d.Major, Minor: d.Minor, Mode: 0o666}
		if dev.Type == "u" {
			dev.Type = "c"
		}
		if dev.Type == "p" {
			dev.Major, dev.Minor = 0, 0
		}
		if d.FileMode != nil {
			dev.Mode = uint32(d.FileMode.Perm())
		}
		if d.UID != nil {
			dev.UID = *d.UID
		}
		if d.GID != nil {
			dev.GID = *d.GID
		}
		out = append(out, dev)
	}
	return out
}

// translateSysctl sorts the parameters by key: a map has no order, and the
// description had better be the same for the same bundle.
func translateSysctl(sysctl map[string]string) []config.Sysctl {
	var out []config.Sysctl
	for k, v := range sysctl {
		out = append(out, config.Sysctl{Key: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func translateProcess(p *specs.Process, lastCap uint) (config.ContainerProcess, []string) {
	out := config.ContainerProcess{
		Args:            p.Args,
		Env:             p.Env,
		Cwd:             filepath.Clean(p.Cwd),
		UID:             p.User.UID,
		GID:             p.User.GID,
		AdditionalGIDs:  p.User.AdditionalGids,
		NoNewPrivileges: p.NoNewPrivileges,
		Terminal:        p.Terminal,
		AppArmorProfile: p.ApparmorProfile,
	}
	if p.User.Umask != nil {
		out.SetUmask, out.Umask = true, *p.User.Umask
	}
	for _, r := range p.Rlimits {
		out.Rlimits = append(out.Rlimits, config.Rlimit{Type: rlimits()[r.Type], Soft: r.Soft, Hard: r.Hard})
	}
	if p.OOMScoreAdj != nil {
		out.SetOOMScoreAdj, out.OOMScoreAdj = true, *p.OOMScoreAdj
	}
	var warnings []string
	if c := p.Capabilities; c != nil {
		for _, set := range []struct {
			names []string
			bits  *uint64
		}{
			{c.Bounding, &out.Bounding}, {c.Effective, &out.Effective}, {c.Inheritable, &out.Inheritable},
			{c.Permitted, &out.Permitted}, {c.Ambient, &out.Ambient},
		} {
			bits, w := capabilityBits(set.names, lastCap)
			*set.bits = bits
			warnings = append(warnings, w...)
		}
	}
	return out, dedupe(warnings)
}

// capabilityBits turns names into a set (bit N: capability N). A name
// jail does not know, or this kernel lacks, is ignored with a warning,
// which the spec asks for.
func capabilityBits(names []string, lastCap uint) (uint64, []string) {
	var bits uint64
	var warnings []string
	table := capabilities()
	for _, n := range names {
		c, ok := table[n]
		switch {
		case !ok:
			warnings = append(warnings, "unknown capability "+n+" ignored")
		case c > lastCap:
			warnings = append(warnings, "capability "+n+" is unknown to this kernel: ignored")
		default:
			bits |= 1 << c
		}
	}
	return bits, warnings
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func readCapLastCap() (uint, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("oci: capabilities: %w", err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 6)
	if err != nil {
		return 0, fmt.Errorf("oci: capabilities: cap_last_cap: %w", err)
	}
	return uint(n), nil
}

// selinuxLabels decides what becomes of a bundle's SELinux labels, which
// jail does not apply: on a host that labels with SELinux a label left
// unapplied would leave the container less confined than its author
// asked, so it is refused; on one that does not, the label has no
// meaning and is ignored with a warning, as crun ignores it.
func selinuxLabels(enabled func() bool, mountLabel, processLabel string) ([]string, error) {
	if mountLabel == "" && processLabel == "" {
		return nil, nil
	}
	if enabled == nil {
		enabled = selinuxEnabled
	}
	field := "linux.mountLabel"
	if mountLabel == "" {
		field = "process.selinuxLabel"
	}
	if enabled() {
		return nil, fmt.Errorf("oci: %s: this host enforces SELinux labels and jail does not apply them", field)
	}
	var warnings []string
	if mountLabel != "" {
		warnings = append(warnings, "linux.mountLabel is ignored: SELinux is not enabled on this host")
	}
	if processLabel != "" {
		warnings = append(warnings, "process.selinuxLabel is ignored: SELinux is not enabled on this host")
	}
	return warnings, nil
}

// selinuxEnabled says whether SELinux labels mean anything here: as
// libselinux decides it, when its file system is mounted where its tools
// look for it (without it no label can be set).
func selinuxEnabled() bool {
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/selinux", &st); err != nil {
		return false
	}
	return uint32(st.Type) == unix.SELINUX_MAGIC
}

// appArmorUsable refuses a profile where AppArmor is not enabled, as runc
// does: the process would run unconfined where its author asked for a
// profile. Whether the profile is loaded the kernel says at the write.
func appArmorUsable(enabled func() bool, profile string) error {
	if profile == "" {
		return nil
	}
	if enabled == nil {
		enabled = appArmorEnabled
	}
	if !enabled() {
		return fmt.Errorf("oci: process.apparmorProfile %q: AppArmor is not enabled on this host", profile)
	}
	return nil
}

// appArmorEnabled says whether AppArmor confines processes here, as
// libapparmor's aa_is_enabled decides it first: the module says so.
func appArmorEnabled() bool {
	b, err := os.ReadFile("/sys/module/apparmor/parameters/enabled")
	return err == nil && len(b) > 0 && b[0] == 'Y'
}
