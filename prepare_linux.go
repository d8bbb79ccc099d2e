package jail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/cgroups"
	"github.com/jail-sandbox/jail/images"
	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/namespaces"
	"github.com/jail-sandbox/jail/profiles"
	"github.com/jail-sandbox/jail/rootfs"
	"github.com/jail-sandbox/jail/seccomp"
)

// Defaults of the RUN OPTIONS, where neither the caller nor the profile set
// them, and the most /run and /dev/shm hold (less when the profile's
// scratch size is smaller).
const (
	defaultMemory      = 512 << 20
	defaultCPUs        = 1
	defaultPids        = 256
	defaultOutputLimit = 1 << 20
	defaultHostname    = "jail"
	defaultPath        = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

	runSize = 16 << 20
	shmSize = 64 << 20
)

// Bounds on what a caller may pass; past them the kernel would refuse the
// exec, or the request is not what anyone means.
const (
	maxArgBytes   = 128 << 10 // MAX_ARG_STRLEN: one argument or K=V
	maxTotalBytes = 1 << 20   // all arguments and environment
	maxEnvKey     = 255
	maxHostname   = 64
	maxMounts     = 64
)

// validEnvKey: a letter or '_', then letters, digits, '_', '.' or '-'.
func validEnvKey(k string) bool {
	for i, c := range k {
		switch {
		case c == '_' || ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z'):
		case i > 0 && (('0' <= c && c <= '9') || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return k != ""
}

// validHostname: letters, digits, '-' and '.', starting and ending with a
// letter or digit.
func validHostname(h string) bool {
	for i, c := range h {
		alnum := ('0' <= c && c <= '9') || ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z')
		if !alnum && ((c != '-' && c != '.') || i == 0 || i == len(h)-1) {
			return false
		}
	}
	return h != ""
}

// plan is a validated Spec turned into what the init needs, plus the host
// objects the supervisor opened for it.
type plan struct {
	cfg config.Init
	id  namespaces.Identity
	// files are handed to the init after the control socket, as fd 4...
	files []*os.File
	// cgroup is the layout the sandbox's cgroup goes in (None: rlimits).
	cgroup cgroups.Layout
	limits cgroups.Limits
	// notices are jail's own one-line remarks, shown once the command runs.
	notices []string
}

func (p *plan) close() {
	for _, f := range p.files {
		f.Close()
	}
}

// prepare validates spec and resolves it. It changes nothing on the host;
// what it refuses is the request's own fault (SetupError.Refused).
func prepare(spec *Spec) (*plan, error) {
	p, err := resolve(spec)
	var se *SetupError
	if errors.As(err, &se) {
		se.Refused = true
	}
	return p, err
}

// resolve is prepare, short of marking its errors.
func resolve(spec *Spec) (*plan, error) {
	var image *images.Image
	store := ImageStore()
	if spec.Image != "" {
		if spec.Rootfs != "" {
			return nil, invalid("--image", "--image and --rootfs exclude each other")
		}
		img, err := store.Lookup(spec.Image)
		if err != nil {
			return nil, &SetupError{Step: "image " + spec.Image, Err: err}
		}
		image = &img
		if len(spec.Command) == 0 {
			spec.Command = append(append([]string{}, img.Config.Entrypoint...), img.Config.Cmd...)
		}
		if spec.User == "" && img.Config.User != "" {
			if spec.User, err = store.ResolveUser(img, img.Config.User); err != nil {
				return nil, &SetupError{Step: "image " + spec.Image, Err: err}
			}
		}
	}
	if len(spec.Command) == 0 {
		return nil, invalid("run", "no command given")
	}
	profileName := spec.Profile
	if profileName == "" {
		profileName = "default"
	}
	profile, filter, err := ResolveProfile(profiles.DefaultStore(), profileName)
	if err != nil {
		return nil, profileError(profileName, err)
	}
	if spec.Net != "" && spec.Net != "none" {
		return nil, invalid("--net", "%q is not supported yet (only none)", spec.Net)
	}
	if len(spec.Secrets) > 0 {
		return nil, invalid("--secret", "secrets are not supported yet")
	}
	if spec.Memory < 0 || (spec.Memory > 0 && spec.Memory < 4<<20) {
		return nil, invalid("--memory", "%d bytes: must be at least 4M", spec.Memory)
	}
	if spec.CPUs < 0 || spec.CPUs > 1024 {
		return nil, invalid("--cpus", "%g: must be between 0.01 and 1024", spec.CPUs)
	}
	if spec.Pids < 0 {
		return nil, invalid("--pids", "%d: must be positive", spec.Pids)
	}
	if spec.Timeout < 0 {
		return nil, invalid("--timeout", "%s: must be positive", spec.Timeout)
	}
	if spec.OutputLimit < 0 {
		return nil, invalid("--output-limit", "%d: must be positive", spec.OutputLimit)
	}

	if err := applyProfile(spec, profile); err != nil {
		return nil, err
	}
	uid, gid, err := parseUser(spec.User)
	if err != nil {
		return nil, invalid("--user", "%v", err)
	}
	id, err := namespaces.ForCaller(uid, gid)
	if err != nil {
		return nil, invalid("--user", "%v", err)
	}
	p := &plan{id: id}
	ok := false
	defer func() {
		if !ok {
			p.close()
		}
	}()

	hostname := spec.Hostname
	if hostname == "" {
		hostname = defaultHostname
	}
	if len(hostname) > maxHostname || !validHostname(hostname) {
		return nil, invalid("--hostname", "%q: must be 1 to %d letters, digits, '-' or '.'", truncate(hostname), maxHostname)
	}

	home := "/tmp"
	if uid == 0 {
		home = "/root"
	}
	var imageEnv []string
	if image != nil {
		imageEnv = image.Config.Env
	}
	env, err := buildEnv(spec, home, imageEnv)
	if err != nil {
		return nil, err
	}
	total := 0
	for _, a := range spec.Command {
		if len(a) > maxArgBytes || strings.IndexByte(a, 0) >= 0 {
			return nil, invalid("command", "an argument is longer than %d bytes or holds a NUL byte", maxArgBytes)
		}
		total += len(a) + 1
	}
	for _, e := range env {
		total += len(e) + 1
	}
	if total > maxTotalBytes {
		return nil, invalid("command", "arguments and environment exceed %d bytes", maxTotalBytes)
	}

	p.limits = cgroups.Limits{Memory: spec.Memory, CPUs: spec.CPUs, Pids: int64(spec.Pids)}
	if p.limits.Memory == 0 {
		p.limits.Memory = defaultMemory
	}
	if p.limits.CPUs == 0 {
		p.limits.CPUs = defaultCPUs
	}
	if p.limits.Pids == 0 {
		p.limits.Pids = defaultPids
	}
	// Each writable tmpfs may take half the memory limit (or what the
	// profile says): filling one gives ENOSPC before the memory limit is
	// reached (tmpfs pages are charged to the sandbox's memory).
	scratch := p.limits.Memory / 2
	if profile.Limits.Scratch != "" {
		if scratch, err = ParseSize(profile.Limits.Scratch); err != nil {
			return nil, invalid("profile "+profileName, "limits.scratch: %v", err)
		}
	}
	p.cfg = config.Init{
		Hostname: hostname,
		Rootfs:   config.Rootfs{ReadOnly: spec.ReadOnly},
		Limits: config.Limits{
			TmpSize: scratch, RunSize: min(runSize, scratch), ShmSize: min(shmSize, scratch),
			UpperSize: scratch, HomeSize: scratch,
		},
		Process: config.Process{
			Args: spec.Command, Env: env, Cwd: "/",
			UID: uid, GID: gid, SwitchUser: !id.Rootless,
			TTY: spec.TTY,
		},
	}
	if uid == 0 {
		p.cfg.Rootfs.Home = home
	}
	p.cfg.Masks, p.cfg.ReadOnly = profile.Masks, profile.ReadOnly
	p.cfg.Seccomp = filter
	var why error
	if p.cgroup, why = cgroups.Detect(); p.cgroup.Version == cgroups.None {
		p.cfg.Limits.RlimitData, p.cfg.Limits.RlimitNproc = p.limits.Memory, p.limits.Pids
		p.notices = append(p.notices, fmt.Sprintf("no cgroup for this sandbox (%v): memory is bounded per process (RLIMIT_DATA) and tasks by RLIMIT_NPROC; --cpus is not enforced", why))
	}
	if spec.TTY && spec.WindowSize != nil {
		p.cfg.Process.Rows, p.cfg.Process.Cols = spec.WindowSize.Rows, spec.WindowSize.Cols
	}

	switch {
	case image != nil:
		// Overlay wants the top layer first.
		for i := len(image.Layers) - 1; i >= 0; i-- {
			l, err := layerOf(store.LayerDir(image.Layers[i]))
			if err != nil {
				return nil, &SetupError{Step: "image " + spec.Image, Err: err}
			}
			p.cfg.Rootfs.Lowers = append(p.cfg.Rootfs.Lowers, l)
		}
		if image.Config.WorkingDir != "" {
			p.cfg.Process.Cwd = image.Config.WorkingDir
		}
	case spec.Rootfs != "":
		l, err := layerOf(spec.Rootfs)
		if err != nil {
			return nil, invalid("--rootfs "+spec.Rootfs, "%v", err)
		}
		p.cfg.Rootfs.Lowers = []config.Layer{l}
	default:
		p.cfg.Rootfs.HostTree = true
	}

	mounts := spec.Mounts
	if spec.Workspace != "" {
		mounts = append([]Mount{{Source: spec.Workspace, Destination: "/workspace", Writable: true}}, mounts...)
		p.cfg.Process.Cwd = "/workspace"
	}
	if len(mounts) > maxMounts {
		return nil, invalid("--mount", "more than %d mounts", maxMounts)
	}
	callerHome, _ := os.UserHomeDir()
	var jailDirs []string
	if len(mounts) > 0 {
		for _, d := range append(programs.Dirs(), seccomp.CacheDir()) {
			jailDirs = append(jailDirs, canonical(d))
		}
	}
	for _, m := range mounts {
		flag := "--mount " + m.Source
		if m.Destination == "/workspace" && m.Source == spec.Workspace {
			flag = "--workspace " + m.Source
		}
		cm, err := checkMount(m, callerHome, jailDirs)
		if err != nil {
			return nil, invalid(flag, "%v", err)
		}
		p.cfg.Mounts = append(p.cfg.Mounts, cm)
	}
	if err := p.shareWritableMounts(); err != nil {
		return nil, err
	}

	if spec.Workdir != "" {
		if err := rootfs.CheckWorkdir(spec.Workdir); err != nil {
			return nil, invalid("--workdir", "%v", err)
		}
		p.cfg.Process.Cwd = filepath.Clean(spec.Workdir)
	}
	ok = true
	return p, nil
}

// ResolveProfile finds the named profile in store and its compiled filter.
// A built-in that no user file shadows comes as resolved and compiled at
// build time, which keeps YAML, hashing and compiling off the start of
// every sandbox; a user profile is resolved and compiled on first use by
// the tools program and cached. A name that is neither is refused here,
// without the tools program.
func ResolveProfile(store profiles.Store, name string) (*profiles.Profile, seccomp.Filter, error) {
	if !profiles.ValidName(name) {
		return nil, seccomp.Filter{}, &profiles.Error{Profile: name, Err: profiles.ErrBadName}
	}
	if !store.Overrides(name) {
		if p, f, ok := seccomp.Builtin(name); ok {
			return p, f, nil
		}
		return nil, seccomp.Filter{}, &profiles.Error{Profile: name, Err: profiles.ErrUnknown}
	}
	return seccomp.Cached(seccomp.CacheDir(), store.Files(), name, programs.ProfileResolver())
}

// canonical resolves the symlinks of dir when it exists; mount sources are
// compared in that form.
func canonical(dir string) string {
	if dir == "" {
		return ""
	}
	if resolved, err := filepath.EvalSymlinks(dir); err == nil {
		return resolved
	}
	return dir
}

// layerOf resolves a directory used as a root layer.
func layerOf(dir string) (config.Layer, error) {
	path, st, err := resolveHostPath(dir)
	if err != nil {
		return config.Layer{}, err
	}
	if !st.IsDir() {
		return config.Layer{}, fmt.Errorf("not a directory")
	}
	sys := st.Sys().(*syscall.Stat_t)
	return config.Layer{Path: path, Dev: uint64(sys.Dev), Ino: sys.Ino}, nil
}

// ImageStore is the caller's image store (images.CallerStore).
func ImageStore() images.Store { return images.CallerStore() }

// applyProfile fills in what the caller left to the profile: limits and
// environment (the caller's --env entries win).
func applyProfile(spec *Spec, p *profiles.Profile) error {
	if spec.Memory == 0 && p.Limits.Memory != "" {
		m, err := ParseSize(p.Limits.Memory)
		if err != nil {
			return invalid("profile "+p.Name, "limits.memory: %v", err)
		}
		spec.Memory = m
	}
	if spec.CPUs == 0 {
		spec.CPUs = p.Limits.CPUs
	}
	if spec.Pids == 0 {
		spec.Pids = p.Limits.Pids
	}
	if len(p.Env) > 0 {
		keys := make([]string, 0, len(p.Env))
		for k := range p.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var env []string
		for _, k := range keys {
			env = append(env, k+"="+p.Env[k])
		}
		spec.Env = append(env, spec.Env...)
	}
	return nil
}

// profileError turns a profile problem into `jail: profile NAME: ...`.
func profileError(name string, err error) error {
	var pe *profiles.Error
	if errors.As(err, &pe) {
		if pe.Line > 0 {
			return &SetupError{Step: "profile " + pe.Profile, Err: fmt.Errorf("line %d: %w", pe.Line, pe.Err)}
		}
		return &SetupError{Step: "profile " + pe.Profile, Err: pe.Err}
	}
	return &SetupError{Step: "profile " + name, Err: err}
}

// checkMount validates one bind mount and resolves its source.
func checkMount(m Mount, callerHome string, jailDirs []string) (config.Mount, error) {
	if !filepath.IsAbs(m.Source) {
		return config.Mount{}, fmt.Errorf("source must be an absolute path")
	}
	if err := rootfs.CheckDestination(m.Destination); err != nil {
		return config.Mount{}, err
	}
	// Checked as written and as resolved: a link may hide either way.
	if err := rootfs.CheckMountSource(filepath.Clean(m.Source), callerHome, jailDirs...); err != nil {
		return config.Mount{}, fmt.Errorf("refused: %v", err)
	}
	path, st, err := resolveHostPath(m.Source)
	if err != nil {
		return config.Mount{}, err
	}
	if err := rootfs.CheckMountSource(path, callerHome, jailDirs...); err != nil {
		return config.Mount{}, fmt.Errorf("refused: %v", err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	return config.Mount{
		Source: path, SourceDev: uint64(sys.Dev), SourceIno: sys.Ino, SourceIsDir: st.IsDir(),
		SourceUID: int(sys.Uid), SourceGID: int(sys.Gid),
		Destination: filepath.Clean(m.Destination), Writable: m.Writable, FD: -1,
	}, nil
}

// shareWritableMounts makes what the sandbox writes in a writable mount
// belong to the mounted directory's owner on the host. Rootless, the sandbox
// user already is the caller. As root, each writable mount becomes an
// id-mapped clone (owner <-> sandbox user). Where the kernel cannot id-map
// the filesystem (tmpfs before Linux 6.3), the sandbox user is mapped onto
// the owner instead, if all writable mounts have the same unprivileged one.
func (p *plan) shareWritableMounts() error {
	if p.id.Rootless {
		return nil
	}
	var writable []int
	for i, m := range p.cfg.Mounts {
		if m.Writable {
			writable = append(writable, i)
		}
	}
	if len(writable) == 0 {
		return nil
	}
	err := p.idmapMounts(writable)
	if err == nil || !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EOPNOTSUPP) {
		return err
	}
	first := p.cfg.Mounts[writable[0]]
	for _, i := range writable {
		if m := p.cfg.Mounts[i]; m.SourceUID != first.SourceUID || m.SourceGID != first.SourceGID {
			return invalid("--mount "+m.Source, "this kernel cannot id-map its filesystem, and writable mounts with different owners cannot share one sandbox user")
		}
	}
	if mapErr := p.id.MapUserOnto(first.SourceUID, first.SourceGID); mapErr != nil {
		return invalid("--mount "+first.Source, "this kernel cannot id-map its filesystem (%v), and %v", err, mapErr)
	}
	return nil
}

// idmapMounts replaces the writable mounts by id-mapped detached clones,
// passed to the init as files. On failure none is kept.
func (p *plan) idmapMounts(writable []int) (err error) {
	hostUID, _ := p.id.HostUID(p.cfg.Process.UID)
	hostGID, _ := p.id.HostGID(p.cfg.Process.GID)
	kept := len(p.files)
	defer func() {
		if err != nil {
			for _, f := range p.files[kept:] {
				f.Close()
			}
			p.files = p.files[:kept]
			for _, i := range writable {
				p.cfg.Mounts[i].FD = -1
			}
		}
	}()
	namespaces := map[[2]int]*os.File{}
	defer func() {
		for _, ns := range namespaces {
			ns.Close()
		}
	}()
	for _, i := range writable {
		m := &p.cfg.Mounts[i]
		owner := [2]int{m.SourceUID, m.SourceGID}
		ns := namespaces[owner]
		if ns == nil {
			if ns, err = mappingUserns(owner, hostUID, hostGID); err != nil {
				return invalid("--mount "+m.Source, "%v", err)
			}
			namespaces[owner] = ns
		}
		tree, err := unix.OpenTree(unix.AT_FDCWD, m.Source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return invalid("--mount "+m.Source, "clone mount: %w", err)
		}
		p.files = append(p.files, os.NewFile(uintptr(tree), m.Source))
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(ns.Fd())}
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
			return invalid("--mount "+m.Source, "id-mapped mount: %w", err)
		}
		m.FD = 3 + len(p.files) // fd 3 is the control socket
	}
	return nil
}

// mappingUserns makes the user namespace that shows files of owner as the
// sandbox user's host ids.
func mappingUserns(owner [2]int, hostUID, hostGID int) (*os.File, error) {
	return namespaces.MappingUserns(
		[]syscall.SysProcIDMap{{ContainerID: owner[0], HostID: hostUID, Size: 1}},
		[]syscall.SysProcIDMap{{ContainerID: owner[1], HostID: hostGID, Size: 1}})
}

// resolveHostPath makes path canonical (every symlink resolved, so the init
// can refuse any symlink it meets) and stats it.
func resolveHostPath(path string) (string, os.FileInfo, error) {
	if len(path) > 4095 {
		return "", nil, fmt.Errorf("path is longer than 4095 bytes")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if os.IsNotExist(err) {
			return "", nil, fmt.Errorf("no such file or directory")
		}
		return "", nil, err
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", nil, err
	}
	return real, st, nil
}

// buildEnv returns the sandbox's environment: PATH, HOME, LANG (TERM with a
// tty), the image's Env, then the caller's additions, later entries
// replacing earlier ones.
func buildEnv(spec *Spec, home string, imageEnv []string) ([]string, error) {
	env := []string{"PATH=" + defaultPath, "HOME=" + home, "LANG=C.UTF-8"}
	for _, e := range imageEnv {
		if k, _, ok := strings.Cut(e, "="); ok && validEnvKey(k) {
			replaced := false
			for i, d := range env {
				if strings.HasPrefix(d, k+"=") {
					env[i], replaced = e, true
				}
			}
			if !replaced {
				env = append(env, e)
			}
		}
	}
	if spec.TTY {
		term := os.Getenv("TERM")
		if term == "" {
			term = "xterm"
		}
		env = append(env, "TERM="+term)
	}
	index := map[string]int{}
	for i, e := range env {
		k, _, _ := strings.Cut(e, "=")
		index[k] = i
	}
	for _, e := range spec.Env {
		k, _, hasValue := strings.Cut(e, "=")
		if !hasValue {
			return nil, invalid("--env "+truncate(e), "must be K=V")
		}
		if len(k) > maxEnvKey || !validEnvKey(k) {
			return nil, invalid("--env "+truncate(k), "not a valid variable name (at most %d of A-Z a-z 0-9 _ . -)", maxEnvKey)
		}
		if len(e) > maxArgBytes || strings.IndexByte(e, 0) >= 0 {
			return nil, invalid("--env "+k, "value longer than %d bytes or holds a NUL byte", maxArgBytes)
		}
		if i, ok := index[k]; ok {
			env[i] = e
			continue
		}
		index[k] = len(env)
		env = append(env, e)
	}
	return env, nil
}

// truncate shortens user input quoted in an error message.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}
