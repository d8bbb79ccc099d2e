package oci

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// maxIDMapLines is the kernel's limit on the lines of a uid or gid map.
const maxIDMapLines = 340

// hostNameMax is the kernel's limit on a host or domain name
// (HOST_NAME_MAX).
const hostNameMax = 64

// Validate checks spec, and reads nothing else: it refuses what jail
// cannot realise and what is malformed, with one line starting "oci: ".
func Validate(spec *specs.Spec) error {
	if spec == nil {
		return errors.New("oci: no spec")
	}
	if !strings.HasPrefix(spec.Version, "1.") {
		return fmt.Errorf("oci: unsupported ociVersion %q (jail reads 1.x)", spec.Version)
	}
	for name, set := range map[string]bool{
		"solaris": spec.Solaris != nil, "windows": spec.Windows != nil, "vm": spec.VM != nil,
		"zos": spec.ZOS != nil, "freebsd": spec.FreeBSD != nil,
	} {
		if set {
			return fmt.Errorf("oci: %s is not supported (jail is a Linux runtime)", name)
		}
	}
	if spec.Root == nil || spec.Root.Path == "" {
		return errors.New("oci: root.path must be set")
	}
	if hasNUL(spec.Root.Path) {
		return errors.New("oci: root.path holds a NUL byte")
	}
	if spec.Process == nil {
		return errors.New("oci: process must be set")
	}
	if err := validateProcess(spec.Process); err != nil {
		return err
	}
	if spec.Linux == nil {
		return errors.New("oci: linux must be set (jail needs at least a new mount namespace)")
	}
	ns, err := validateNamespaces(spec.Linux.Namespaces)
	if err != nil {
		return err
	}
	checks := []func() error{
		func() error { return validateIDMaps(spec.Linux, ns) },
		func() error { return validateNames(spec, ns) },
		func() error { return validateMounts(spec.Mounts) },
		func() error { return validateDevices(spec.Linux.Devices) },
		func() error { return validateSysctl(spec.Linux.Sysctl, ns) },
		func() error { return validatePaths(spec.Linux) },
		func() error { return validateLinuxUnsupported(spec.Linux) },
		func() error { return validateResources(spec.Linux.Resources) },
		func() error { return validateSeccomp(spec.Linux.Seccomp) },
		func() error { return validateHooks(spec.Hooks) },
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// namespaceSet is the bundle's namespaces by type: the path to join, or ""
// for a new one.
type namespaceSet map[string]string

func (s namespaceSet) has(t string) bool { _, ok := s[t]; return ok }

func (s namespaceSet) isNew(t string) bool { p, ok := s[t]; return ok && p == "" }

func hasNUL(ss ...string) bool {
	for _, s := range ss {
		if strings.IndexByte(s, 0) >= 0 {
			return true
		}
	}
	return false
}

// absolute checks that p is an absolute path with no NUL byte.
func absolute(what, p string) error {
	if hasNUL(p) {
		return fmt.Errorf("oci: %s %q holds a NUL byte", what, p)
	}
	if !filepath.IsAbs(p) {
		return fmt.Errorf("oci: %s %q is not an absolute path", what, p)
	}
	return nil
}

func validateProcess(p *specs.Process) error {
	if len(p.Args) == 0 {
		return errors.New("oci: process.args must not be empty")
	}
	if hasNUL(p.Args...) {
		return errors.New("oci: process.args: an argument holds a NUL byte")
	}
	for _, e := range p.Env {
		if i := strings.IndexByte(e, '='); i <= 0 || hasNUL(e) {
			return fmt.Errorf("oci: process.env: %q is not NAME=VALUE", e)
		}
	}
	if err := validAppArmorProfile(p.ApparmorProfile); err != nil {
		return err
	}
	if p.Cwd == "" {
		return errors.New("oci: process.cwd must be set")
	}
	if err := absolute("process.cwd", p.Cwd); err != nil {
		return err
	}
	for name, set := range map[string]bool{
		"process.scheduler":       p.Scheduler != nil,
		"process.ioPriority":      p.IOPriority != nil,
		"process.execCPUAffinity": p.ExecCPUAffinity != nil,
		"process.commandLine":     p.CommandLine != "",
		"process.user.username":   p.User.Username != "",
	} {
		if set {
			return fmt.Errorf("oci: %s is not supported", name)
		}
	}
	if p.User.Umask != nil && *p.User.Umask > 0o777 {
		return fmt.Errorf("oci: process.user.umask %#o is not a umask", *p.User.Umask)
	}
	seen := map[string]bool{}
	for _, r := range p.Rlimits {
		if _, ok := rlimits()[r.Type]; !ok {
			return fmt.Errorf("oci: process.rlimits: unknown type %q", r.Type)
		}
		if seen[r.Type] {
			return fmt.Errorf("oci: process.rlimits: %s is given twice", r.Type)
		}
		seen[r.Type] = true
		if r.Soft > r.Hard {
			return fmt.Errorf("oci: process.rlimits: %s: soft limit %d above hard limit %d", r.Type, r.Soft, r.Hard)
		}
	}
	if p.OOMScoreAdj != nil && (*p.OOMScoreAdj < -1000 || *p.OOMScoreAdj > 1000) {
		return fmt.Errorf("oci: process.oomScoreAdj %d is outside -1000..1000", *p.OOMScoreAdj)
	}
	if c := p.Capabilities; c != nil {
		for set, names := range map[string][]string{
			"bounding": c.Bounding, "effective": c.Effective, "inheritable": c.Inheritable,
			"permitted": c.Permitted, "ambient": c.Ambient,
		} {
			for _, n := range names {
				if !wellFormedCapability(n) {
					return fmt.Errorf("oci: process.capabilities.%s: %q is not a capability name", set, n)
				}
			}
		}
	}
	return nil
}

// wellFormedCapability: CAP_ and upper-case letters, digits and '_'. A
// well-formed name the table lacks is warned about and ignored, as the
// spec asks (it may be newer than jail).
func wellFormedCapability(n string) bool {
	if !strings.HasPrefix(n, "CAP_") || len(n) == 4 || len(n) > 64 {
		return false
	}
	for _, r := range n[4:] {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

func validateNamespaces(list []specs.LinuxNamespace) (namespaceSet, error) {
	set := namespaceSet{}
	for _, n := range list {
		t := string(n.Type)
		if _, ok := namespaceTypes()[t]; !ok {
			return nil, fmt.Errorf("oci: linux.namespaces: unknown type %q", t)
		}
		if set.has(t) {
			return nil, fmt.Errorf("oci: linux.namespaces: %q is listed twice", t)
		}
		if n.Path != "" {
			if err := absolute("linux.namespaces: "+t+" path", n.Path); err != nil {
				return nil, err
			}
		}
		set[t] = n.Path
	}
	if set.has("time") {
		return nil, errors.New("oci: linux.namespaces: time namespaces are not supported yet")
	}
	if !set.has("mount") {
		return nil, errors.New("oci: linux.namespaces: a new mount namespace is required (jail builds the root in one)")
	}
	if !set.isNew("mount") {
		return nil, errors.New("oci: linux.namespaces: joining a mount namespace by path is not supported (jail builds the root in a new one)")
	}
	return set, nil
}

func validateIDMaps(l *specs.Linux, ns namespaceSet) error {
	hasMaps := len(l.UIDMappings) > 0 || len(l.GIDMappings) > 0
	switch {
	case hasMaps && !ns.has("user"):
		return errors.New("oci: linux.uidMappings and gidMappings need a user namespace")
	case hasMaps && !ns.isNew("user"):
		return errors.New("oci: linux.uidMappings and gidMappings are for a new user namespace, not one joined by path")
	case ns.isNew("user") && (len(l.UIDMappings) == 0 || len(l.GIDMappings) == 0):
		return errors.New("oci: a new user namespace needs linux.uidMappings and linux.gidMappings")
	}
	for name, maps := range map[string][]specs.LinuxIDMapping{"uidMappings": l.UIDMappings, "gidMappings": l.GIDMappings} {
		if len(maps) > maxIDMapLines {
			return fmt.Errorf("oci: linux.%s: %d lines, at most %d", name, len(maps), maxIDMapLines)
		}
		for _, m := range maps {
			if m.Size == 0 || uint64(m.ContainerID)+uint64(m.Size) > 1<<32 || uint64(m.HostID)+uint64(m.Size) > 1<<32 {
				return fmt.Errorf("oci: linux.%s: %d %d %d is not a valid range", name, m.ContainerID, m.HostID, m.Size)
			}
		}
	}
	return nil
}

// validateNames: a host or domain name needs a uts namespace of the
// container's (runc's wording).
func validateNames(spec *specs.Spec, ns namespaceSet) error {
	for what, name := range map[string]string{"hostname": spec.Hostname, "domainname": spec.Domainname} {
		if name == "" {
			continue
		}
		if !ns.has("uts") {
			return fmt.Errorf("oci: unable to set %s without a private UTS namespace", what)
		}
		if len(name) > hostNameMax || hasNUL(name) {
			return fmt.Errorf("oci: %s %q is not a valid name (at most %d bytes)", what, name, hostNameMax)
		}
	}
	return nil
}

func validateMounts(mounts []specs.Mount) error {
	for i, m := range mounts {
		what := fmt.Sprintf("mounts[%d].destination", i)
		if err := absolute(what, m.Destination); err != nil {
			return err
		}
		if hasNUL(m.Source, m.Type) {
			return fmt.Errorf("oci: mounts[%d] (%s): source or type holds a NUL byte", i, m.Destination)
		}
		if len(m.UIDMappings) > 0 || len(m.GIDMappings) > 0 {
			return fmt.Errorf("oci: mounts[%d] (%s): id-mapped mounts are not supported yet", i, m.Destination)
		}
		opts, err := parseMountOptions(m.Options)
		if err != nil {
			return fmt.Errorf("oci: mounts[%d] (%s): %v", i, m.Destination, err)
		}
		bind := m.Type == "bind" || opts.Flags&unix.MS_BIND != 0
		switch {
		case bind && m.Source == "":
			return fmt.Errorf("oci: mounts[%d] (%s): a bind mount needs a source", i, m.Destination)
		case !bind && m.Type == "":
			return fmt.Errorf("oci: mounts[%d] (%s): no type, and not a bind mount", i, m.Destination)
		}
	}
	return nil
}

func validateDevices(devices []specs.LinuxDevice) error {
	for i, d := range devices {
		if err := absolute(fmt.Sprintf("linux.devices[%d].path", i), d.Path); err != nil {
			return err
		}
		if filepath.Clean(d.Path) == "/" {
			return fmt.Errorf("oci: linux.devices[%d].path is /", i)
		}
		switch d.Type {
		case "c", "b", "u":
			if d.Major < 0 || d.Minor < 0 {
				return fmt.Errorf("oci: linux.devices[%d] (%s): negative major or minor", i, d.Path)
			}
		case "p":
		default:
			return fmt.Errorf("oci: linux.devices[%d] (%s): unknown type %q (c, b, u or p)", i, d.Path, d.Type)
		}
	}
	return nil
}

// ipcSysctls returns the parameters of an ipc namespace outside fs.mqueue.
func ipcSysctls() map[string]bool {
	return map[string]bool{
		"kernel.msgmax": true, "kernel.msgmnb": true, "kernel.msgmni": true, "kernel.sem": true,
		"kernel.shmall": true, "kernel.shmmax": true, "kernel.shmmni": true, "kernel.shm_rmid_forced": true,
	}
}

// validateSysctl allows, as runc does, only the parameters of a namespace
// the container has of its own (new or joined): a write to any other
// would change the host.
func validateSysctl(sysctl map[string]string, ns namespaceSet) error {
	for key, value := range sysctl {
		if !wellFormedSysctl(key) || hasNUL(value) {
			return fmt.Errorf("oci: linux.sysctl: %q is not a valid parameter", key)
		}
		var need string
		switch {
		case ipcSysctls()[key] || strings.HasPrefix(key, "fs.mqueue."):
			need = "ipc"
		case strings.HasPrefix(key, "net."):
			need = "network"
		case key == "kernel.hostname" || key == "kernel.domainname":
			need = "uts"
		default:
			return fmt.Errorf("oci: linux.sysctl: %q is not in a separate kernel namespace", key)
		}
		if !ns.has(need) {
			return fmt.Errorf("oci: linux.sysctl: %q needs a %s namespace of the container's", key, need)
		}
	}
	return nil
}

// wellFormedSysctl: components of letters, digits, '_' and '-', separated
// by '.' or '/' (an interface name with a dot is written with '/'): none
// empty, so none is "..".
func wellFormedSysctl(key string) bool {
	if key == "" || len(key) > 256 {
		return false
	}
	for _, c := range strings.FieldsFunc(key, func(r rune) bool { return r == '.' || r == '/' }) {
		for _, r := range c {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
				return false
			}
		}
	}
	return !strings.Contains(key, "..") && !strings.Contains(key, "//") && !strings.Contains(key, "./") &&
		!strings.Contains(key, "/.") && strings.Trim(key, "./") == key
}

func validatePaths(l *specs.Linux) error {
	for i, p := range l.MaskedPaths {
		if err := absolute(fmt.Sprintf("linux.maskedPaths[%d]", i), p); err != nil {
			return err
		}
	}
	for i, p := range l.ReadonlyPaths {
		if err := absolute(fmt.Sprintf("linux.readonlyPaths[%d]", i), p); err != nil {
			return err
		}
	}
	if _, ok := propagationFlags()[l.RootfsPropagation]; l.RootfsPropagation != "" && !ok {
		return fmt.Errorf("oci: linux.rootfsPropagation %q is not a propagation", l.RootfsPropagation)
	}
	return nil
}

func validateLinuxUnsupported(l *specs.Linux) error {
	for name, set := range map[string]bool{
		"linux.intelRdt":     l.IntelRdt != nil,
		"linux.personality":  l.Personality != nil,
		"linux.memoryPolicy": l.MemoryPolicy != nil,
		"linux.timeOffsets":  len(l.TimeOffsets) > 0,
		"linux.netDevices":   len(l.NetDevices) > 0,
	} {
		if set {
			return fmt.Errorf("oci: %s is not supported", name)
		}
	}
	return nil
}

// MaxContainerHooks bounds the createContainer and the startContainer
// hooks of a bundle (each kind), which the container's init runs one
// after the other (the C end refuses more too).
const MaxContainerHooks = 64

func validateHooks(h *specs.Hooks) error {
	if h == nil {
		return nil
	}
	for name, hooks := range map[string][]specs.Hook{"createContainer": h.CreateContainer, "startContainer": h.StartContainer} {
		if len(hooks) > MaxContainerHooks {
			return fmt.Errorf("oci: hooks.%s: %d hooks, at most %d", name, len(hooks), MaxContainerHooks)
		}
	}
	for name, hooks := range map[string][]specs.Hook{
		"prestart": h.Prestart, "createRuntime": h.CreateRuntime, "createContainer": h.CreateContainer,
		"startContainer": h.StartContainer, "poststart": h.Poststart, "poststop": h.Poststop,
	} {
		for i, hook := range hooks {
			if err := absolute(fmt.Sprintf("hooks.%s[%d].path", name, i), hook.Path); err != nil {
				return err
			}
			if hasNUL(hook.Args...) || hasNUL(hook.Env...) {
				return fmt.Errorf("oci: hooks.%s[%d]: an argument or variable holds a NUL byte", name, i)
			}
			if hook.Timeout != nil && *hook.Timeout <= 0 {
				return fmt.Errorf("oci: hooks.%s[%d].timeout must be positive", name, i)
			}
		}
	}
	return nil
}

// maxAppArmorProfile bounds a profile's name (the kernel takes a page for
// the whole "exec NAME" write).
const maxAppArmorProfile = 1024

// validAppArmorProfile accepts what can be written as one "exec NAME" to
// the kernel: a name of printable bytes, bounded.
func validAppArmorProfile(name string) error {
	if len(name) > maxAppArmorProfile {
		return fmt.Errorf("oci: process.apparmorProfile is longer than %d bytes", maxAppArmorProfile)
	}
	for i := 0; i < len(name); i++ {
		if name[i] <= ' ' || name[i] == 0x7f {
			return fmt.Errorf("oci: process.apparmorProfile %q holds a space or a control character", name)
		}
	}
	return nil
}
