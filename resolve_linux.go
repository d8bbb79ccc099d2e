package jail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/cgroups"
	"github.com/jail-sandbox/jail/images"
	"github.com/jail-sandbox/jail/internal/audit"
	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/privdir"
	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/internal/sandboxdir"
	"github.com/jail-sandbox/jail/internal/supervisor"
	"github.com/jail-sandbox/jail/namespaces"
	"github.com/jail-sandbox/jail/profiles"
	"github.com/jail-sandbox/jail/rootfs"
	"github.com/jail-sandbox/jail/seccomp"
	"github.com/jail-sandbox/jail/seccomp/filter"
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

// What Capture keeps of each stream when Spec.OutputLimit is 0, and at
// most: it is held in the caller's memory (jail serve's, for a request),
// outside the sandbox's memory limit.
const (
	DefaultOutputLimit = defaultOutputLimit
	MaxOutputLimit     = 64 << 20
)

// plan is the supervisor's Plan while resolve makes it.
type plan struct {
	supervisor.Plan
	// guards are jail's own filter rules for this sandbox (filter.Guard).
	guards filter.Guards
}

// prepare validates spec and resolves it. It changes nothing on the host;
// what it refuses is the request's own fault (SetupError.Refused).
func prepare(spec *Spec) (*supervisor.Plan, error) {
	err := validate(spec)
	var p *plan
	if err == nil {
		p, err = resolve(spec)
	}
	var se *SetupError
	if errors.As(err, &se) {
		se.Refused = true
	}
	if err != nil {
		return nil, err
	}
	return &p.Plan, nil
}

// resolve turns a valid spec into a plan: it finds the image and the
// profile, fills in their defaults and jail's, decides the identity, and
// opens and checks the host paths the sandbox is to see. This is the I/O
// of a run's preparation; what needs none is in validate.
func resolve(spec *Spec) (*plan, error) {
	users := new(privdir.Passwd)
	var image *images.Image
	var layers []images.Layer
	if spec.Image != "" {
		img, l, err := resolveImage(spec)
		if err != nil {
			return nil, &SetupError{Step: "image " + spec.Image, Err: err}
		}
		image, layers = &img, l
	}
	if len(spec.Command) == 0 {
		// The image gives none either.
		return nil, invalid("run", "no command given")
	}
	profileName := spec.ProfileName()
	profile, policy, err := resolveProfile(profiles.DefaultStore(users), profileName, users)
	if err != nil {
		return nil, profileError(profileName, err)
	}
	if err := applyProfile(spec, profile); err != nil {
		return nil, err
	}
	uid, gid, err := parseUser(spec.User)
	if err != nil {
		return nil, invalid("--user", "%v", err)
	}
	id, err := namespaces.ForCaller(users, uid, gid)
	if err != nil {
		return nil, invalid("--user", "%v", err)
	}
	if image != nil {
		// Layers stored with subordinate owners need the same mapping.
		if err := image.CheckOwners(id); err != nil {
			return nil, &SetupError{Step: "image " + spec.Image, Err: err}
		}
	}
	p := &plan{Plan: supervisor.Plan{Identity: id, Users: users}}
	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()

	hostname := spec.Hostname
	if hostname == "" {
		hostname = defaultHostname
	}

	home := "/tmp"
	if uid == 0 {
		home = "/root"
	}
	var imageEnv []string
	if image != nil {
		imageEnv = image.Config.Env
	}
	_, egress := egressRules(spec.Net)
	if egress {
		imageEnv = append(append([]string(nil), imageEnv...), egressEnv...)
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

	p.Limits = cgroups.Limits{Memory: spec.Memory, CPUs: spec.CPUs, Pids: int64(spec.Pids)}
	if p.Limits.Memory == 0 {
		p.Limits.Memory = defaultMemory
	}
	if p.Limits.CPUs == 0 {
		p.Limits.CPUs = defaultCPUs
	}
	if p.Limits.Pids == 0 {
		p.Limits.Pids = defaultPids
	}
	// Each writable tmpfs may take half the memory limit (or what the
	// profile says): filling one gives ENOSPC before the memory limit is
	// reached (tmpfs pages are charged to the sandbox's memory).
	scratch := p.Limits.Memory / 2
	if profile.Limits.Scratch != "" {
		if scratch, err = ParseSize(profile.Limits.Scratch); err != nil {
			return nil, invalid("profile "+profileName, "limits.scratch: %v", err)
		}
	}
	p.Config = config.Init{
		Hostname: hostname,
		Rootfs:   config.Rootfs{ReadOnly: spec.ReadOnly},
		Limits: config.Limits{
			TmpSize: scratch, RunSize: min(runSize, scratch), ShmSize: min(shmSize, scratch),
			UpperSize: scratch, HomeSize: scratch,
		},
		Process: config.Process{
			Args: spec.Command, Env: env, Cwd: "/",
			UID: uid, GID: gid, SwitchUser: id.SwitchesUser(),
			TTY: spec.TTY,
		},
	}
	if uid == 0 {
		p.Config.Rootfs.Home = home
	}
	if egress {
		egressConfig(&p.Config)
	}
	p.Config.Masks, p.Config.ReadOnly = profile.Masks, profile.ReadOnly
	p.Config.Seccomp = policy
	for _, c := range profile.CapabilityNumbers() {
		p.Config.Capabilities |= 1 << c
	}
	var why error
	if p.Cgroup, why = cgroups.Detect(); p.Cgroup.Version == cgroups.None {
		p.Notices = append(p.Notices, fmt.Sprintf("no cgroup for this sandbox (%v): %s", why, p.fallbackLimits()))
	}
	if spec.TTY && spec.WindowSize != nil {
		p.Config.Process.Rows, p.Config.Process.Cols = spec.WindowSize.Rows, spec.WindowSize.Cols
	}

	// Jail's own state is never shown to a sandbox: one that could change
	// it would change the next sandbox (its init, filter, profile or
	// image).
	callerHome, _ := os.UserHomeDir()
	var jailDirs []string
	if spec.Rootfs != "" || len(spec.Mounts) > 0 || spec.Workspace != "" {
		jailDirs = jailStateDirs(ImageStore().Root, users)
	}

	switch {
	case image != nil:
		// Overlay wants the top layer first.
		for i := len(layers) - 1; i >= 0; i-- {
			p.Config.Rootfs.Lowers = append(p.Config.Rootfs.Lowers, config.Layer{Path: layers[i].Path, Dev: layers[i].Dev, Ino: layers[i].Ino})
		}
		if image.Config.WorkingDir != "" {
			p.Config.Process.Cwd = filepath.Clean(image.Config.WorkingDir)
		}
	case spec.Rootfs != "":
		// A root layer shows the sandbox everything below it: the same
		// policy as a mount source (--rootfs $HOME would show ~/.ssh).
		src, err := openHostSource(spec.Rootfs, callerHome, jailDirs)
		if err != nil {
			return nil, invalid("--rootfs "+spec.Rootfs, "%v", err)
		}
		defer src.close()
		if !src.isDir() {
			return nil, invalid("--rootfs "+spec.Rootfs, "not a directory")
		}
		p.Config.Rootfs.Lowers = []config.Layer{{Path: src.path, Dev: src.stat.Dev, Ino: src.stat.Ino}}
		if err := p.cloneLayer(&p.Config.Rootfs.Lowers[0], src); err != nil {
			return nil, invalid("--rootfs "+spec.Rootfs, "%v", err)
		}
	default:
		p.Config.Rootfs.HostTree = true
		p.Config.Masks = append(append(p.Config.Masks, hostHomes(callerHome, users)...), stateMasks()...)
	}

	mounts := spec.Mounts
	if spec.Workspace != "" {
		mounts = append([]Mount{{Source: spec.Workspace, Destination: "/workspace", Writable: true}}, mounts...)
		p.Config.Process.Cwd = "/workspace"
	}
	var sources []*hostSource
	defer func() {
		for _, src := range sources {
			src.close()
		}
	}()
	for _, m := range mounts {
		flag := "--mount " + m.Source
		if m.Destination == "/workspace" && m.Source == spec.Workspace {
			flag = "--workspace " + m.Source
		}
		cm, src, err := checkMount(m, callerHome, jailDirs)
		if err != nil {
			return nil, invalid(flag, "%v", err)
		}
		if d := rootfs.WithinAny(cm.Destination, p.Config.Masks); d != "" {
			src.close()
			return nil, invalid(flag, "%s is inside %s, which the sandbox does not see (a home, or a masked path): mount it elsewhere", cm.Destination, d)
		}
		p.Config.Mounts = append(p.Config.Mounts, cm)
		sources = append(sources, src)
	}
	if err := p.shareWritableMounts(sources); err != nil {
		return nil, err
	}
	if err := p.cloneMounts(sources); err != nil {
		return nil, err
	}
	for _, m := range p.Config.Mounts {
		if m.Writable {
			// Nothing made in a host directory may be set-id there.
			p.guards.SetID = true
		}
	}
	p.Config.Seccomp.Guard = filter.Guard(p.guards)

	if spec.Workdir != "" {
		p.Config.Process.Cwd = filepath.Clean(spec.Workdir)
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
	return resolveProfile(store, name, nil)
}

// resolveProfile is ResolveProfile, asking users for the home of the
// filters' cache (nil: the password database is read).
func resolveProfile(store profiles.Store, name string, users *privdir.Passwd) (*profiles.Profile, seccomp.Filter, error) {
	if !profiles.ValidName(name) {
		return nil, seccomp.Filter{}, &profiles.Error{Profile: name, Err: profiles.ErrBadName}
	}
	if !store.Overrides(name) {
		if p, f, ok := seccomp.Builtin(name); ok {
			return p, f, nil
		}
		return nil, seccomp.Filter{}, &profiles.Error{Profile: name, Err: profiles.ErrUnknown}
	}
	return seccomp.Cached(seccomp.CacheDir(users), store.Files(), name, programs.ProfileResolver())
}

// resolver resolves the symbolic links of paths that need not exist: a
// path is taken where its longest existing part leads, the rest appended.
// It remembers what it looked up, so the many paths below a few places
// (jail's directories in each home) cost a few lstat calls, not dozens.
type resolver map[string]resolved

type resolved struct {
	path   string
	exists bool
}

// canonical is dir resolved (see resolver); "" stays "".
func (r resolver) canonical(dir string) string {
	if dir == "" {
		return ""
	}
	return r.resolve(filepath.Clean(dir)).path
}

func (r resolver) resolve(p string) resolved {
	if p == "/" || p == "." {
		return resolved{p, true}
	}
	if v, ok := r[p]; ok {
		return v
	}
	parent := r.resolve(filepath.Dir(p))
	v := resolved{path: filepath.Join(parent.path, filepath.Base(p))}
	if parent.exists {
		var st unix.Stat_t
		if unix.Lstat(v.path, &st) == nil {
			v.exists = true
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				if real, err := filepath.EvalSymlinks(v.path); err == nil {
					v.path = real
				} else {
					v.exists = false
				}
			}
		}
	}
	r[p] = v
	return v
}

// ImageStore is the caller's image store (images.CallerStore).
func ImageStore() images.Store { return images.CallerStore() }

// resolveImage finds spec's image and its layers in the caller's store,
// opened once, and fills in what the image decides when spec does not: the
// command and the user. The image's working directory is checked as
// --workdir is.
func resolveImage(spec *Spec) (images.Image, []images.Layer, error) {
	store, err := ImageStore().Open()
	if err != nil {
		return images.Image{}, nil, err
	}
	defer store.Close()
	img, err := store.Lookup(spec.Image)
	if err != nil {
		return img, nil, err
	}
	for _, e := range img.Config.Env {
		// The caller's entries are checked as --env; the image's
		// could not be handed to the init either.
		if strings.IndexByte(e, 0) >= 0 {
			k, _, _ := strings.Cut(e, "=")
			return img, nil, fmt.Errorf("the image's environment: %q holds a NUL byte", truncate(k))
		}
	}
	if wd := img.Config.WorkingDir; wd != "" {
		if err := rootfs.CheckWorkdir(wd); err != nil {
			return img, nil, fmt.Errorf("the image's working directory: %v", err)
		}
	}
	layers, err := store.Layers(img)
	if err != nil {
		return img, nil, err
	}
	if len(spec.Command) == 0 {
		spec.Command = append(append([]string{}, img.Config.Entrypoint...), img.Config.Cmd...)
	}
	if spec.User == "" && img.Config.User != "" {
		if spec.User, err = store.ResolveUser(img, img.Config.User); err != nil {
			return img, nil, err
		}
	}
	return img, layers, nil
}

// applyProfile fills in what the caller left to the profile: limits and
// environment (the caller's --env entries win).
func applyProfile(spec *Spec, p *profiles.Profile) error {
	if err := profileNet(spec, p); err != nil {
		return err
	}
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

// fallbackLimits bounds what can be bounded without a cgroup: rlimits per
// process, and the shared places the sandbox can fill (its tmpfs mounts,
// System V shared memory), whose sizes add up to less than the memory
// limit (tmpfs pages count against nothing else here). It returns what
// bounds the sandbox and what does not, for the notice.
func (p *plan) fallbackLimits() string {
	mem := p.Limits.Memory
	l := &p.Config.Limits
	l.RlimitData, l.RlimitNproc, l.RlimitStack = mem, p.Limits.Pids, mem
	// A stack mapping is private memory that RLIMIT_DATA does not count.
	p.guards.NoGrowsDown = true
	// RLIMIT_NPROC counts one user's tasks: with subordinate ids, sandbox
	// root could start --pids tasks under each of its other ids. Without
	// SETUID and SETGID it stays one user (its files keep their owners).
	if p.Identity.SubIDs {
		p.Config.Capabilities &^= 1<<unix.CAP_SETUID | 1<<unix.CAP_SETGID
	}
	// tmp, upper, home a sixth each, /dev/shm an eighth, /run a
	// sixteenth, System V shm the remaining eighth or so.
	l.TmpSize, l.UpperSize, l.HomeSize = min(l.TmpSize, mem/6), min(l.UpperSize, mem/6), min(l.HomeSize, mem/6)
	l.ShmSize, l.RunSize = min(l.ShmSize, mem/8), min(l.RunSize, mem/16)
	// Only the ipc namespace's root may set its limits: an init that
	// runs as the command's non-root user (rootless, one id) cannot.
	sysv := p.Identity.InitUID == 0
	if sysv {
		l.SysVShm = mem / 8
	}
	return FallbackLimits(sysv, p.Identity.SubIDs)
}

// FallbackLimits says what bounds a sandbox that has no cgroup (rootless
// on cgroup v1, or v2 without a delegated subtree), and what does not;
// sysv tells whether System V shared memory is bounded (it is unless the
// sandbox runs as a non-root user with only the caller's id), and perUser
// whether the sandbox has several users (subordinate ids), each of which
// RLIMIT_NPROC would count apart.
func FallbackLimits(sysv, perUser bool) string {
	bounded := "each process's private memory is bounded by RLIMIT_DATA and its stack by RLIMIT_STACK (--memory; " +
		"stack mappings are refused), the writable tmpfs mounts " +
		"(/tmp, /run, /dev/shm, the home and the root's writable layer) by sizes that add up to less than --memory, "
	notBounded := "NOT bounded: memfd and other shared mappings, "
	if sysv {
		bounded += "System V shared memory and message queues by the ipc namespace's limits (an eighth and a sixteenth of --memory), "
	} else {
		notBounded += "System V shared memory, "
	}
	tasks := "and tasks by RLIMIT_NPROC (--pids); "
	if perUser {
		tasks = "and tasks by RLIMIT_NPROC (--pids), which counts one user's: sandbox root keeps no SETUID or SETGID here, so it cannot switch users; "
	}
	return bounded + tasks + notBounded +
		"the page cache, kernel memory, and CPU (--cpus is not enforced)"
}

// stateMasks are jail's own directories that a sandbox on the host tree
// must not see where no other mask hides them: root's filter cache and
// configuration, and an image store outside /var/lib/jail (its layers
// belong to the sandboxes' own host ids, so any sandbox could read every
// image's files). A rootless caller's are in its home, masked already,
// unless $JAIL_IMAGE_STORE puts the store elsewhere. Missing ones cost
// nothing (the init skips them).
func stateMasks() []string {
	var dirs []string
	if os.Geteuid() == 0 {
		dirs = append(dirs, "/var/cache/jail", "/etc/jail")
	}
	// The persistent sandboxes' state (their control sockets) and the
	// audit log: wherever this environment puts them.
	state, _ := sandboxdir.Root(os.Geteuid(), os.Getenv)
	auditDir := ""
	if path := audit.DefaultPath(os.Geteuid(), os.Getenv); path != "" {
		auditDir = filepath.Dir(path)
	}
	for _, d := range []string{ImageStore().Root, os.Getenv("JAIL_IMAGE_STORE"), state, auditDir} {
		if d = filepath.Clean(d); filepath.IsAbs(d) && d != "/" && d != "/var/lib/jail" && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// hostHomes are the homes of the host's accounts that a sandbox on the host
// tree must not see (rootfs.HomeMasks): the caller's, wherever it is, and
// every person's or login's in the password database (users).
func hostHomes(callerHome string, users *privdir.Passwd) []string {
	accounts, _ := users.Accounts()
	// /home and /root are replaced whole in the sandbox's root; where one
	// is a symlink (ostree systems: /home -> var/home, /root ->
	// var/roothome), what it leads to comes with the rest of the host
	// tree and is masked as a home. Two lstat calls when neither is.
	homes := []string{callerHome}
	for _, top := range []string{"/home", "/root"} {
		if real, err := filepath.EvalSymlinks(top); err == nil && real != top {
			homes = append(homes, real)
		}
	}
	return rootfs.HomeMasks(accounts, os.Getuid(), homes...)
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
	// The caller's entries, which validate checked, come after the
	// profile's, which are checked here.
	for _, e := range spec.Env {
		if err := checkEnvEntry(e); err != nil {
			return nil, err
		}
		k, _, _ := strings.Cut(e, "=")
		if i, ok := index[k]; ok {
			env[i] = e
			continue
		}
		index[k] = len(env)
		env = append(env, e)
	}
	return env, nil
}
