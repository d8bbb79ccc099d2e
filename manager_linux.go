//go:build linux

package jail

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/cgroups"
	"github.com/jail-sandbox/jail/internal/audit"
	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/oneline"
	"github.com/jail-sandbox/jail/internal/privdir"
	"github.com/jail-sandbox/jail/internal/sandboxdir"
	"github.com/jail-sandbox/jail/internal/sandboxlog"
	"github.com/jail-sandbox/jail/internal/secrets"
	"github.com/jail-sandbox/jail/internal/supervisor"
	"github.com/jail-sandbox/jail/profiles"
)

// ManagerOptions configure a Manager; the zero value is the user's own
// state directory, audit log and secrets.
type ManagerOptions struct {
	// StateDir overrides the state directory ($XDG_RUNTIME_DIR/jail, or
	// /run/jail for root).
	StateDir string
	// AuditLog overrides the audit log's path ($XDG_STATE_HOME/jail/
	// audit.log, or /var/log/jail/audit.log for root); "-" writes none.
	AuditLog string
	// SecretEnv, when set, is consulted first for a secret NAME as
	// JAIL_SECRET_<NAME> (jail serve passes its own environment).
	SecretEnv func(key string) string
	// Notices receives jail's remarks (an audit log that cannot be
	// written), one line each; nil: os.Stderr.
	Notices io.Writer
	// LogBound bounds each sandbox's log of its execs' output: at most
	// about twice this on disk (0: 1 MiB).
	LogBound int64
}

// Manager makes, finds and removes the persistent sandboxes of this
// process's user (docs/persistent.md). It keeps one connection to each
// sandbox it has run a command in, so that the next costs no connection;
// Close lets them go. Its methods may be called from several goroutines.
type Manager struct {
	opts  ManagerOptions
	store *sandboxdir.Store
	audit *audit.Log // nil: none

	mu    sync.Mutex
	conns map[string]*sandboxConn
}

// sandboxConn is what a Manager keeps of a running sandbox: its directory,
// a connection to its init, and what each exec starts from.
type sandboxConn struct {
	sb      *sandboxdir.Sandbox
	client  *supervisor.Client
	process config.Process
	cgroup  []string
	stored  storedSpec
	log     *sandboxlog.Log // nil: it could not be opened
}

func (c *sandboxConn) close() {
	c.client.Close()
	if c.log != nil {
		c.log.Close()
	}
	c.sb.Close()
}

// NewManager opens the state directory (making it if needed).
func NewManager(opts ManagerOptions) (*Manager, error) {
	if err := startedWithoutInit(); err != nil {
		return nil, err
	}
	root := opts.StateDir
	if root == "" {
		var err error
		if root, err = sandboxdir.Root(os.Geteuid(), os.Getenv); err != nil {
			return nil, &SetupError{Step: "state directory", Err: err}
		}
	}
	store, err := sandboxdir.Open(root)
	if err != nil {
		return nil, &SetupError{Step: "state directory", Err: err}
	}
	m := &Manager{opts: opts, store: store, conns: map[string]*sandboxConn{}}
	path := opts.AuditLog
	if path == "" {
		path = audit.DefaultPath(os.Geteuid(), os.Getenv)
	}
	if path != "" && path != "-" {
		if m.audit, err = audit.Open(path); err != nil {
			m.notice("audit log: %v (nothing is recorded)", err)
		}
	}
	return m, nil
}

// notice writes one of jail's remarks.
func (m *Manager) notice(format string, args ...any) {
	w := m.opts.Notices
	if w == nil {
		w = os.Stderr
	}
	fmt.Fprintf(w, "jail: notice: "+format+"\n", args...)
}

// record appends e to the audit log, as asked by this process's user.
func (m *Manager) record(e audit.Event) {
	if m.audit == nil {
		return
	}
	e.UID = os.Getuid()
	if err := m.audit.Write(e); err != nil {
		m.notice("audit log: %v", err)
	}
}

// secretValues reads the values of the secrets names (nil when none).
func (m *Manager) secretValues(names []string) (secrets.Values, error) {
	return secretValues(names, m.opts.SecretEnv)
}

// secretValues reads the values of the secrets names from the caller's
// definitions, override first (JAIL_SECRET_<NAME>, jail serve's).
func secretValues(names []string, override func(string) string) (secrets.Values, error) {
	if len(names) == 0 {
		return secrets.Values{}, nil
	}
	store, err := secrets.DefaultStore(os.Getenv)
	if err == nil {
		var v secrets.Values
		v, err = secrets.Resolve(names, secrets.Options{Store: store, Getenv: os.Getenv, Override: override})
		if err == nil {
			return v, nil
		}
	}
	return secrets.Values{}, &SetupError{Step: "--secret", Err: err, Refused: true}
}

// Close lets go of the connections the Manager keeps; the sandboxes live
// on.
func (m *Manager) Close() error {
	m.mu.Lock()
	conns := m.conns
	m.conns = map[string]*sandboxConn{}
	m.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	return m.store.Close()
}

// storedSpec is a sandbox's spec.json: the RUN OPTIONS it was made from
// (secrets by name only), its labels and times.
type storedSpec struct {
	Options     runOptions        `json:"options"`
	Labels      map[string]string `json:"labels,omitempty"`
	TTL         time.Duration     `json:"ttl,omitempty"`
	IdleTimeout time.Duration     `json:"idle_timeout,omitempty"`
	Created     time.Time         `json:"created"`
}

// runOptions are the parts of a Spec that make a sandbox what it is: a
// sandbox made from other ones is another sandbox (Reuse).
type runOptions struct {
	Image     string        `json:"image,omitempty"`
	Rootfs    string        `json:"rootfs,omitempty"`
	Profile   string        `json:"profile,omitempty"`
	Memory    int64         `json:"memory,omitempty"`
	CPUs      float64       `json:"cpus,omitempty"`
	Pids      int           `json:"pids,omitempty"`
	Timeout   time.Duration `json:"timeout,omitempty"`
	Net       string        `json:"net,omitempty"`
	NetLimits NetLimits     `json:"net_limits,omitempty"`
	Workspace string        `json:"workspace,omitempty"`
	Mounts    []Mount       `json:"mounts,omitempty"`
	Env       []string      `json:"env,omitempty"`
	Secrets   []string      `json:"secrets,omitempty"`
	User      string        `json:"user,omitempty"`
	Workdir   string        `json:"workdir,omitempty"`
	Hostname  string        `json:"hostname,omitempty"`
	ReadOnly  bool          `json:"read_only,omitempty"`
}

func storedOf(spec *Spec) storedSpec {
	return storedSpec{
		Options: runOptions{
			Image: spec.Image, Rootfs: spec.Rootfs, Profile: spec.ProfileName(), Memory: spec.Memory,
			CPUs: spec.CPUs, Pids: spec.Pids, Timeout: spec.Timeout, Net: spec.Net, NetLimits: spec.NetLimits, Workspace: spec.Workspace,
			Mounts: spec.Mounts, Env: spec.Env, Secrets: spec.Secrets, User: spec.User,
			Workdir: spec.Workdir, Hostname: spec.Hostname, ReadOnly: spec.ReadOnly,
		},
		Labels: spec.Labels, TTL: spec.TTL, IdleTimeout: spec.IdleTimeout,
	}
}

func (s storedSpec) spec() Spec {
	o := s.Options
	return Spec{
		Image: o.Image, Rootfs: o.Rootfs, Profile: o.Profile, Memory: o.Memory, CPUs: o.CPUs, Pids: o.Pids,
		Timeout: o.Timeout, Net: o.Net, NetLimits: o.NetLimits, Workspace: o.Workspace, Mounts: o.Mounts, Env: o.Env,
		Secrets: o.Secrets, User: o.User, Workdir: o.Workdir, Hostname: o.Hostname, ReadOnly: o.ReadOnly,
		Labels: s.Labels, TTL: s.TTL, IdleTimeout: s.IdleTimeout,
	}
}

// sameSandbox reports whether a and b make the same sandbox: the same run
// options (an empty list and none are the same), TTL and idle timeout.
func sameSandbox(a, b storedSpec) bool {
	norm := func(o runOptions) runOptions {
		if len(o.Mounts) == 0 {
			o.Mounts = nil
		}
		if len(o.Env) == 0 {
			o.Env = nil
		}
		if len(o.Secrets) == 0 {
			o.Secrets = nil
		}
		return o
	}
	return reflect.DeepEqual(norm(a.Options), norm(b.Options)) && a.TTL == b.TTL && a.IdleTimeout == b.IdleTimeout
}

// Bounds on a sandbox's labels.
const (
	maxLabels     = 64
	maxLabelBytes = 1024
)

// checkSandboxSpec checks what Create takes beside the RUN OPTIONS.
func checkSandboxSpec(spec *Spec) error {
	if err := sandboxdir.ValidName(spec.Name); err != nil {
		return invalid("name", "%q: a name is 1 to 63 of a-z A-Z 0-9 _ . -, starting with a letter or digit", truncate(spec.Name))
	}
	if spec.TTY {
		return invalid("--tty", "a sandbox has no terminal of its own: give -t to exec")
	}
	if spec.TTL < 0 {
		return invalid("--ttl", "%s: must be positive", spec.TTL)
	}
	if spec.IdleTimeout < 0 {
		return invalid("--idle-timeout", "%s: must be positive", spec.IdleTimeout)
	}
	if len(spec.Labels) > maxLabels {
		return invalid("--label", "more than %d labels", maxLabels)
	}
	for k, v := range spec.Labels {
		if err := checkLabel(k, v); err != nil {
			return err
		}
	}
	return nil
}

// checkLabel: a label's key is a variable-like name (dots and slashes
// allowed, as in Kubernetes' keys), its value any printable text.
func checkLabel(k, v string) error {
	if k == "" || len(k)+len(v) > maxLabelBytes {
		return invalid("--label "+truncate(k), "a label is K=V, K not empty, at most %d bytes", maxLabelBytes)
	}
	for _, c := range k {
		if !(c == '_' || c == '.' || c == '/' || c == '-' || ('0' <= c && c <= '9') || ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z')) {
			return invalid("--label "+truncate(k), "a label's key is letters, digits, _ . / -")
		}
	}
	for _, c := range v {
		if c < 0x20 || c == 0x7f {
			return invalid("--label "+truncate(k), "a label's value holds a control character")
		}
	}
	return nil
}

// Create makes the sandbox spec.Name from spec's RUN OPTIONS and returns
// once it is ready for commands. spec.Command is not run. An existing
// sandbox of that name is ErrExists, unless spec.Reuse: then it is
// returned when it was made from the same spec and still runs, and is
// otherwise removed and made anew.
func (m *Manager) Create(ctx context.Context, spec Spec) (*Sandbox, error) {
	spec.Command = nil
	if err := checkSandboxSpec(&spec); err != nil {
		err.(*SetupError).Refused = true
		return nil, err
	}
	// validate wants a command, which a sandbox gets with each exec.
	probe := spec
	probe.Command = []string{"true"}
	if err := validate(&probe); err != nil {
		var se *SetupError
		if errors.As(err, &se) {
			se.Refused = true
		}
		return nil, err
	}
	// Each secret must be there now; its value is read again at each
	// exec, and never kept (one bound to hosts: at each boot, for the
	// gateway only).
	if _, _, _, err := readSecrets(spec.Secrets, m.opts.SecretEnv); err != nil {
		return nil, err
	}
	// The image is pulled here, never by the holder: a sandbox's image is
	// fixed when it is made.
	if err := pullForCreate(&spec); err != nil {
		return nil, err
	}
	stored := storedOf(&spec)
	for attempt := 0; ; attempt++ {
		sb, err := m.store.Create(spec.Name)
		if errors.Is(err, sandboxdir.ErrExists) {
			if !spec.Reuse {
				return nil, fmt.Errorf("sandbox %s: %w", spec.Name, ErrExists)
			}
			if attempt > 0 {
				return nil, &SetupError{Step: "create " + spec.Name, Err: errors.New("made again by another process meanwhile")}
			}
			if s, ok := m.reusable(spec.Name, stored, &spec); ok {
				return s, nil
			}
			if err := m.Remove(spec.Name, true); err != nil && !errors.Is(err, ErrNotFound) {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, &SetupError{Step: "create " + spec.Name, Err: err}
		}
		s, err := m.boot(ctx, sb, stored)
		sb.Close()
		e := audit.Event{Event: audit.Create, Sandbox: spec.Name, Labels: spec.Labels}
		if err != nil {
			e.Error = err.Error()
		}
		m.record(e)
		return s, err
	}
}

// reusable returns the running sandbox name when it was made from stored
// and spec resolves as it did then.
func (m *Manager) reusable(name string, stored storedSpec, spec *Spec) (*Sandbox, bool) {
	sb, err := m.store.Open(name)
	if err != nil {
		return nil, false
	}
	defer sb.Close()
	old, err := readStored(sb)
	if err != nil || !sameSandbox(old, stored) {
		return nil, false
	}
	if live, err := sb.Live(); err != nil || !live {
		return nil, false
	}
	then, err := sb.ReadFile(fingerprintFile)
	if err != nil {
		return nil, false
	}
	if now, err := fingerprint(spec); err != nil || now != string(then) {
		return nil, false
	}
	return &Sandbox{m: m, name: name}, true
}

func readStored(sb *sandboxdir.Sandbox) (storedSpec, error) {
	var s storedSpec
	data, err := sb.ReadFile(sandboxdir.SpecFile)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("sandbox %s: spec: %w", sb.Name, err)
	}
	return s, nil
}

// boot writes the sandbox's spec into its new directory, starts its
// holder and waits for its report.
func (m *Manager) boot(ctx context.Context, sb *sandboxdir.Sandbox, stored storedSpec) (*Sandbox, error) {
	name := sb.Name
	stored.Created = time.Now().UTC()
	undo := func(err error) (*Sandbox, error) {
		_ = m.store.Remove(name)
		return nil, err
	}
	data, err := json.Marshal(stored)
	if err != nil {
		return undo(err)
	}
	if err := sb.WriteFile(sandboxdir.SpecFile, data); err != nil {
		return undo(&SetupError{Step: "create " + name, Err: err})
	}
	// The secrets bound to hosts go to the holder, for its gateway, over
	// a pipe: never in its environment or arguments, nor on disk.
	_, _, bound, err := readSecrets(stored.Options.Secrets, m.opts.SecretEnv)
	if err != nil {
		return undo(err)
	}
	boundData, err := json.Marshal(bound)
	if err != nil {
		return undo(err)
	}
	secretsR, secretsW, err := os.Pipe()
	if err != nil {
		return undo(&SetupError{Step: "create " + name, Err: err})
	}
	defer secretsR.Close()
	go func() {
		_, _ = secretsW.Write(boundData)
		secretsW.Close()
	}()
	r, w, err := os.Pipe()
	if err != nil {
		return undo(&SetupError{Step: "create " + name, Err: err})
	}
	defer r.Close()
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{holderArg, name},
		Env:        append(holderEnv(os.Environ()), "JAIL_AUDIT_LOG="+m.auditPath()),
		ExtraFiles: []*os.File{sb.Dir(), m.store.Dir(), w, secretsR},
		// Its own session: a terminal's ^C to the creator must not reach
		// the sandbox, which outlives it.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return undo(&SetupError{Step: "create " + name, Err: fmt.Errorf("start its holder: %w", err)})
	}
	// The holder becomes the monitor, a child of this process: reaped
	// here whenever it ends, so that a long-lived creator (jail serve)
	// keeps no zombies.
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	type outcome struct {
		rep holderReport
		err error
	}
	got := make(chan outcome, 1)
	go func() {
		var rep holderReport
		line, err := io.ReadAll(io.LimitReader(r, 64<<10))
		if err == nil {
			if len(line) == 0 {
				err = errors.New("its holder ended without a word")
			} else {
				err = json.Unmarshal(line, &rep)
			}
		}
		got <- outcome{rep, err}
	}()
	select {
	case o := <-got:
		if o.err == nil {
			o.err = o.rep.err()
		}
		if o.err != nil {
			<-waited
			var se *SetupError
			var ee *ExecError
			if !errors.As(o.err, &se) && !errors.As(o.err, &ee) {
				o.err = &SetupError{Step: "create " + name, Err: o.err}
			}
			return undo(o.err)
		}
		return &Sandbox{m: m, name: name}, nil
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-waited
		return undo(ctx.Err())
	}
}

// auditSize is the audit log's size now (-1: none to read).
func (m *Manager) auditSize() int64 {
	path := m.auditPath()
	if path == "-" {
		return -1
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// maxDenialScan bounds what tellDenials reads of the audit log.
const maxDenialScan = 4 << 20

// tellDenials writes to w the denials the gateway recorded, since offset
// from of the audit log, of the sandbox's exec whose command is execPid:
// one "net: denied HOST:PORT (reason)" line per destination. A log
// rotated meanwhile is read from its start.
func (m *Manager) tellDenials(w io.Writer, sandbox string, execPid int, from int64) {
	if from < 0 || execPid <= 0 {
		return
	}
	// Opened as the log it must be: not through a symbolic link, and
	// without waiting on a FIFO put in its place; the caller's own
	// regular file, or nothing is read.
	fd, err := unix.Open(m.auditPath(), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "audit.log")
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() {
		return
	}
	if st.Size < from {
		from = 0
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return
	}
	told := map[string]bool{}
	sc := bufio.NewScanner(io.LimitReader(f, maxDenialScan))
	sc.Buffer(make([]byte, 0, 64<<10), audit.MaxLine)
	for sc.Scan() {
		var l struct {
			Event   string `json:"event"`
			Sandbox string `json:"sandbox"`
			Exec    int    `json:"exec"`
			Verdict string `json:"verdict"`
			Host    string `json:"host"`
			Port    int    `json:"port"`
			Why     string `json:"why"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || (l.Event != audit.Net && l.Event != audit.DNS) ||
			l.Sandbox != sandbox || l.Exec != execPid || l.Verdict != "denied" || l.Host == "" {
			continue
		}
		target := oneline.Escape(l.Host)
		if l.Event == audit.Net && l.Port != 0 {
			if strings.Contains(target, ":") {
				target = "[" + target + "]"
			}
			target = fmt.Sprintf("%s:%d", target, l.Port)
		}
		if told[target] {
			continue
		}
		told[target] = true
		fmt.Fprintf(w, "net: denied %s (%s)\n", target, oneline.Escape(l.Why))
	}
}

// auditPath is the manager's audit log, as its holders' gateways are
// told: "-" for none.
func (m *Manager) auditPath() string {
	path := m.opts.AuditLog
	if path == "" {
		path = audit.DefaultPath(os.Geteuid(), os.Getenv)
	}
	if path == "" {
		return "-"
	}
	return path
}

// holderEnv is the environment a holder gets: what resolving a spec reads
// (where the image store, profiles and caches are) and what the egress
// gateway's resolver and trust in servers read, never a secret.
func holderEnv(env []string) []string {
	keep := map[string]bool{"HOME": true, "USER": true, "LOGNAME": true, "PATH": true, "TERM": true, "TMPDIR": true,
		"SSL_CERT_FILE": true, "SSL_CERT_DIR": true, "RES_OPTIONS": true, "LOCALDOMAIN": true}
	var out []string
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		switch {
		case strings.HasPrefix(k, "JAIL_SECRET_"), k == "JAIL_AUDIT_LOG":
		case keep[k], strings.HasPrefix(k, "XDG_"), strings.HasPrefix(k, "JAIL_"):
			out = append(out, e)
		}
	}
	return out
}

// Get returns the sandbox name, or ErrNotFound.
func (m *Manager) Get(name string) (*Sandbox, error) {
	if err := sandboxdir.ValidName(name); err != nil {
		return nil, invalid("name", "%q: not a sandbox name", truncate(name))
	}
	sb, err := m.store.Open(name)
	if err != nil {
		return nil, m.openError(name, err)
	}
	sb.Close()
	return &Sandbox{m: m, name: name}, nil
}

func (m *Manager) openError(name string, err error) error {
	if errors.Is(err, sandboxdir.ErrNotFound) {
		return fmt.Errorf("sandbox %s: %w", name, ErrNotFound)
	}
	return &SetupError{Step: "sandbox " + name, Err: err}
}

// List describes the user's sandboxes whose labels include every K=V of
// labels (nil: all), by name.
func (m *Manager) List(labels map[string]string) ([]SandboxInfo, error) {
	names, err := m.store.List()
	if err != nil {
		return nil, &SetupError{Step: "state directory", Err: err}
	}
	sort.Strings(names)
	out := []SandboxInfo{}
	for _, name := range names {
		info, err := (&Sandbox{m: m, name: name}).Info()
		if err != nil {
			continue // removed meanwhile
		}
		if hasLabels(info.Labels, labels) {
			out = append(out, info)
		}
	}
	return out, nil
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// Remove removes the sandbox name: a running one only with force (its
// processes are killed), a stopped or dead one always.
func (m *Manager) Remove(name string, force bool) error {
	if err := sandboxdir.ValidName(name); err != nil {
		return invalid("name", "%q: not a sandbox name", truncate(name))
	}
	m.forget(name)
	sb, err := m.store.Open(name)
	if err != nil {
		return m.openError(name, err)
	}
	defer sb.Close()
	var labels map[string]string
	if stored, err := readStored(sb); err == nil {
		labels = stored.Labels
	}
	if live, _ := sb.Live(); live {
		c, err := supervisor.Dial(sb.Dir())
		var refused *supervisor.MonitorRefusal
		if errors.As(err, &refused) {
			// Alive, but it cannot hand the init a connection.
			defer refused.Close()
			if !force {
				return &SetupError{Step: "rm " + name, Err: fmt.Errorf("%w: force its removal (-f)", refused)}
			}
			_ = refused.KillMonitor()
		}
		if err == nil {
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), answerWait)
			st, err := c.Status(ctx)
			cancel()
			if err == nil && !st.Stopped && !force {
				return fmt.Errorf("rm %s: %w: stop it first, or force its removal (-f)", name, ErrRunning)
			}
			if err != nil && !force {
				return &SetupError{Step: "rm " + name, Err: fmt.Errorf("the sandbox does not answer (%w): force its removal (-f)", err)}
			}
			// The init kills everything and ends; its monitor then
			// removes the directory and ends. One that does not
			// answer, or took no connection (every slot is a
			// client's), loses its monitor, and its janitor then
			// kills what is left in its cgroup.
			if err != nil || c.End() != nil {
				_ = c.KillMonitor()
			} else {
				select {
				case <-c.Gone():
				case <-time.After(answerWait):
					_ = c.KillMonitor()
				}
			}
		}
		if err := waitDead(sb, 10*time.Second); err != nil {
			return &SetupError{Step: "rm " + name, Err: err}
		}
	}
	if err := m.store.Remove(name); err != nil && !errors.Is(err, sandboxdir.ErrNotFound) {
		return &SetupError{Step: "rm " + name, Err: err}
	}
	m.record(audit.Event{Event: audit.Remove, Sandbox: name, Labels: labels})
	return nil
}

// answerWait bounds how long a sandbox's init may take to answer a
// status or an end: it answers at once unless something is wrong with it.
const answerWait = 5 * time.Second

// waitDead waits until the sandbox's monitor has let go of its lock.
func waitDead(sb *sandboxdir.Sandbox, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		live, err := sb.Live()
		if err != nil || !live {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("its monitor did not end")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// forget drops the kept connection to name.
func (m *Manager) forget(name string) {
	m.mu.Lock()
	c := m.conns[name]
	delete(m.conns, name)
	m.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// conn returns a connection to the running sandbox name, kept for the
// next call.
func (m *Manager) conn(name string) (*sandboxConn, error) {
	m.mu.Lock()
	c := m.conns[name]
	m.mu.Unlock()
	if c != nil {
		select {
		case <-c.client.Gone():
			m.forget(name)
		default:
			return c, nil
		}
	}
	sb, err := m.store.Open(name)
	if err != nil {
		return nil, m.openError(name, err)
	}
	c, err = dialSandbox(sb, m.opts.LogBound)
	if err != nil {
		sb.Close()
		return nil, err
	}
	m.mu.Lock()
	if other := m.conns[name]; other != nil {
		m.mu.Unlock()
		c.close()
		return other, nil
	}
	m.conns[name] = c
	m.mu.Unlock()
	return c, nil
}

// creationWait bounds how long a connection waits for a sandbox being
// made (its holder boots it, and may pull nothing: the creator pulled).
const creationWait = 60 * time.Second

func dialSandbox(sb *sandboxdir.Sandbox, bound int64) (*sandboxConn, error) {
	stored, err := readStored(sb)
	if err != nil {
		return nil, &SetupError{Step: "sandbox " + sb.Name, Err: err}
	}
	client, err := supervisor.Dial(sb.Dir())
	// A sandbox still being made has its lock held (its holder) and no
	// control socket yet: its creation is waited for, as its creator
	// does, rather than taken for death.
	for deadline := time.Now().Add(creationWait); errors.Is(err, supervisor.ErrNoControlSocket) && time.Now().Before(deadline); {
		if live, _ := sb.Live(); !live {
			break
		}
		time.Sleep(10 * time.Millisecond)
		client, err = supervisor.Dial(sb.Dir())
	}
	if err != nil {
		var refused *supervisor.MonitorRefusal
		if errors.As(err, &refused) {
			refused.Close()
		}
		if errors.Is(err, supervisor.ErrSandboxGone) {
			return nil, &SetupError{Step: "sandbox " + sb.Name, Err: errors.New("its monitor is gone (the sandbox is dead): remove it with jail rm")}
		}
		return nil, &SetupError{Step: "sandbox " + sb.Name, Err: err}
	}
	c := &sandboxConn{sb: sb, client: client, stored: stored}
	fail := func(err error) (*sandboxConn, error) {
		client.Close()
		return nil, &SetupError{Step: "sandbox " + sb.Name, Err: err}
	}
	data, err := sb.ReadFile(processFile)
	if err == nil {
		err = json.Unmarshal(data, &c.process)
	}
	if err != nil {
		return fail(err)
	}
	if data, err := sb.ReadFile(cgroupFile); err == nil {
		_ = json.Unmarshal(data, &c.cgroup)
	}
	c.log, _ = sandboxlog.Open(sb.Dir(), bound)
	return c, nil
}

// Sandbox is a handle on one persistent sandbox.
type Sandbox struct {
	m    *Manager
	name string
}

// Name is the sandbox's name.
func (s *Sandbox) Name() string { return s.name }

// Shell runs script with /bin/sh -c in the sandbox: Exec of
// {"/bin/sh", "-c", script} with p's other fields.
func (s *Sandbox) Shell(ctx context.Context, script string, p Process) (Result, error) {
	p.Command = []string{"/bin/sh", "-c", script}
	return s.Exec(ctx, p)
}

// Start brings a stopped sandbox back; a running one is left as it is.
func (s *Sandbox) Start(ctx context.Context) error {
	c, err := s.m.conn(s.name)
	if err != nil {
		return err
	}
	if err := c.client.SignalAll(0, false); err != nil {
		return s.gone(err)
	}
	s.m.record(audit.Event{Event: audit.Start, Sandbox: s.name, Labels: c.stored.Labels})
	return nil
}

func (s *Sandbox) gone(err error) error {
	s.m.forget(s.name)
	return &SetupError{Step: "sandbox " + s.name, Err: err}
}

// Stop sends SIGTERM to every process in the sandbox and SIGKILL to what
// is left after grace (0: DefaultStopGrace), keeping its files: its init
// stays, holding the sandbox's namespaces, its writable layer and /tmp.
func (s *Sandbox) Stop(ctx context.Context, grace time.Duration) error {
	if grace <= 0 {
		grace = DefaultStopGrace
	}
	c, err := s.m.conn(s.name)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := c.client.SignalAll(unix.SIGTERM, true); err != nil {
		return s.gone(err)
	}
	gctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	if s.waitEmpty(gctx, c) != nil {
		err = s.kill(ctx, c)
	}
	e := audit.Event{Event: audit.Stop, Sandbox: s.name, Labels: c.stored.Labels, Duration: time.Since(start)}
	if err != nil {
		e.Error = err.Error()
	}
	s.m.record(e)
	return err
}

// Kill sends SIGKILL to every process in the sandbox, keeping its files.
func (s *Sandbox) Kill() error {
	c, err := s.m.conn(s.name)
	if err != nil {
		return err
	}
	err = s.kill(context.Background(), c)
	e := audit.Event{Event: audit.Kill, Sandbox: s.name, Labels: c.stored.Labels}
	if err != nil {
		e.Error = err.Error()
	}
	s.m.record(e)
	return err
}

func (s *Sandbox) kill(ctx context.Context, c *sandboxConn) error {
	if err := c.client.SignalAll(unix.SIGKILL, true); err != nil {
		return s.gone(err)
	}
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.waitEmpty(kctx, c); err != nil {
		return &SetupError{Step: "kill " + s.name, Err: err}
	}
	return nil
}

// waitEmpty waits until nothing but the init runs in the sandbox.
func (s *Sandbox) waitEmpty(ctx context.Context, c *sandboxConn) error {
	for {
		st, err := c.client.Status(ctx)
		if err != nil {
			return err
		}
		if !st.Others {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Logs returns the combined output of the sandbox's commands, its last
// tail lines (0: all that is kept).
func (s *Sandbox) Logs(tail int) ([]byte, error) {
	if tail < 0 {
		return nil, invalid("--tail", "%d: must be positive", tail)
	}
	sb, err := s.m.store.Open(s.name)
	if err != nil {
		return nil, s.m.openError(s.name, err)
	}
	defer sb.Close()
	out, err := sandboxlog.Tail(sb.Dir(), tail)
	if err != nil {
		return nil, &SetupError{Step: "logs " + s.name, Err: err}
	}
	return out, nil
}

// Info describes the sandbox.
func (s *Sandbox) Info() (SandboxInfo, error) {
	sb, err := s.m.store.Open(s.name)
	if err != nil {
		return SandboxInfo{}, s.m.openError(s.name, err)
	}
	defer sb.Close()
	stored, err := readStored(sb)
	if err != nil {
		// Made a moment ago, its spec not yet written, or left so by a
		// creator killed then; with no monitor, it is dead, to remove.
		if live, _ := sb.Live(); !live {
			return SandboxInfo{Name: s.name, State: StateDead}, nil
		}
		return SandboxInfo{}, &SetupError{Step: "sandbox " + s.name, Err: err}
	}
	info := SandboxInfo{
		Name: s.name, State: StateDead, Image: stored.Options.Image, Rootfs: stored.Options.Rootfs,
		Labels: stored.Labels, Created: stored.Created,
		TTLSeconds: stored.TTL.Seconds(), IdleTimeoutSeconds: stored.IdleTimeout.Seconds(),
	}
	if live, _ := sb.Live(); !live {
		return info, nil
	}
	c, err := s.m.conn(s.name)
	if err != nil {
		// Its lock is held: alive, though it takes no connection
		// now (a monitor that cannot hand its init one, say).
		info.State = StateRunning
		return info, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), answerWait)
	st, err := c.client.Status(ctx)
	cancel()
	if err != nil {
		s.m.forget(s.name)
		info.State = StateRunning // alive (its lock is held), not answering
		return info, nil
	}
	info.State = StateRunning
	if st.Stopped {
		info.State = StateStopped
	}
	if st.Total > 0 {
		info.LastExec = st.Active.UTC().Round(time.Millisecond)
	}
	if len(c.cgroup) > 0 {
		if u, err := cgroups.UsageAt(c.cgroup); err == nil {
			info.CPUMs, info.PeakMemoryBytes = u.CPU.Milliseconds(), u.PeakMemory
		}
	}
	return info, nil
}

// Exec runs p in the sandbox (starting a stopped one first) and returns
// how it ended, as Run does: a *SetupError when it could not be started
// (exit status 125), an *ExecError when its program could not be executed
// (126, 127), and otherwise the Result, whatever its exit status.
func (s *Sandbox) Exec(ctx context.Context, p Process) (res Result, err error) {
	start := time.Now()
	if err := checkProcess(&p); err != nil {
		var se *SetupError
		if errors.As(err, &se) {
			se.Refused = true
		}
		return Result{ExitCode: ExitSetup}, err
	}
	c, err := s.m.conn(s.name)
	if err != nil {
		return Result{ExitCode: ExitSetup}, err
	}
	// The sandbox's secrets bound to hosts are placeholders in its
	// process's environment; the others are read now.
	var names []string
	for _, secret := range c.stored.Options.Secrets {
		if name, hosts := splitSecret(secret); hosts == nil {
			names = append(names, name)
		}
	}
	values, err := s.m.secretValues(append(names, p.Secrets...))
	if err != nil {
		return Result{ExitCode: ExitSetup}, err
	}
	proc, err := execProcess(c, &p)
	if err != nil {
		return Result{ExitCode: ExitSetup}, err
	}
	proc.Env = mergeEnv(proc.Env, values.Env())
	timeout := p.Timeout
	if timeout == 0 {
		timeout = c.stored.Options.Timeout
	}
	runCtx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	limit := p.OutputLimit
	if limit == 0 {
		limit = DefaultOutputLimit
	}
	io := newExecIO(&p, limit, values, c.log)
	defer io.close()
	execPid := 0
	defer func() { s.recordExec(c, &p, values, start, res, err, execPid) }()
	if p.NetDenials != nil {
		if _, egress := egressRules(c.stored.Options.Net); egress || c.stored.Options.Profile != "" {
			from := s.m.auditSize()
			defer func() { s.m.tellDenials(p.NetDenials, s.name, execPid, from) }()
		}
	}
	req := supervisor.ExecRequest{Process: proc, Signals: p.Signals}
	if p.TTY {
		req.Started = io.terminal
	} else {
		if err := io.pipes(&req); err != nil {
			return Result{ExitCode: ExitSetup}, &SetupError{Step: "exec", Err: err}
		}
	}
	var oomBefore int64 = -1
	if len(c.cgroup) > 0 {
		if n, err := cgroups.OOMKillsAt(c.cgroup); err == nil {
			oomBefore = n
		}
	}
	st, err := c.client.Exec(runCtx, req)
	execPid = st.Pid
	io.wait()
	res = Result{ExitCode: st.Code, Signal: st.Signal, CPUMS: st.CPU.Milliseconds(), PeakMemoryBytes: st.MaxRSS}
	res.WallMS = time.Since(start).Milliseconds()
	io.fill(&res)
	if err != nil {
		switch {
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			res.ExitCode, res.TimedOut = ExitTimeout, true
			return res, nil
		case errors.Is(err, supervisor.ErrSandboxGone):
			// Its connection is of no use any more: the next call
			// dials again, or says the sandbox is dead.
			s.m.forget(s.name)
		}
		return res, err
	}
	if st.Signal == int(unix.SIGKILL) && oomBefore >= 0 {
		if n, err := cgroups.OOMKillsAt(c.cgroup); err == nil && n > oomBefore {
			res.OOMKilled = true
		}
	}
	return res, nil
}

// recordExec writes the audit line of an exec: its command with secrets'
// values replaced, never its environment.
func (s *Sandbox) recordExec(c *sandboxConn, p *Process, values secrets.Values, start time.Time, res Result, err error, execPid int) {
	if s.m.audit == nil {
		return
	}
	command := make([]string, len(p.Command))
	for i, a := range p.Command {
		command[i] = values.Redact(a)
	}
	e := audit.Event{
		Event: audit.Exec, Sandbox: s.name, Labels: c.stored.Labels, Command: command, User: p.User,
		ExitCode: res.ExitCode, Signal: res.Signal, Duration: time.Since(start),
		CPU: time.Duration(res.CPUMS) * time.Millisecond, PeakMemory: res.PeakMemoryBytes, ExecPID: execPid,
	}
	if err != nil {
		e.Error = values.Redact(err.Error())
	}
	s.m.record(e)
}

// checkProcess checks p as validate checks a Spec.
func checkProcess(p *Process) error {
	if len(p.Command) == 0 {
		return invalid("exec", "no command given")
	}
	total := 0
	for _, a := range p.Command {
		if len(a) > maxArgBytes || strings.IndexByte(a, 0) >= 0 {
			return invalid("command", "an argument is longer than %d bytes or holds a NUL byte", maxArgBytes)
		}
		total += len(a) + 1
	}
	for _, e := range p.Env {
		if err := checkEnvEntry(e); err != nil {
			return err
		}
		total += len(e) + 1
	}
	if total > maxTotalBytes {
		return invalid("command", "arguments and environment exceed %d bytes", maxTotalBytes)
	}
	for _, s := range p.Secrets {
		if _, hosts := splitSecret(s); hosts != nil {
			return invalid("--secret "+truncate(s), "a secret is bound to hosts when the sandbox is made (create --secret NAME@HOST), not by an exec")
		}
	}
	spec := Spec{User: p.User, Workdir: p.Workdir, Timeout: p.Timeout, OutputLimit: p.OutputLimit}
	for _, check := range []func(*Spec) error{checkUser, checkWorkdir, checkTimeout, checkOutputLimit} {
		if err := check(&spec); err != nil {
			return err
		}
	}
	return nil
}

// execProcess is the process of one exec: the sandbox's own, with p's
// command, environment, working directory and user.
func execProcess(c *sandboxConn, p *Process) (*config.Process, error) {
	proc := c.process
	proc.Args = p.Command
	proc.Env = mergeEnv(proc.Env, p.Env)
	if p.Workdir != "" {
		proc.Cwd = p.Workdir
	} else if proc.Cwd == "" {
		proc.Cwd = "/"
	}
	if p.User != "" {
		uid, gid, err := parseUser(p.User)
		if err != nil {
			return nil, invalid("--user", "%v", err)
		}
		if uid != proc.UID || gid != proc.GID {
			proc.UID, proc.GID, proc.SwitchUser = uid, gid, true
		}
	}
	proc.TTY = p.TTY
	proc.Rows, proc.Cols = 0, 0
	if p.TTY && p.WindowSize != nil {
		proc.Rows, proc.Cols = p.WindowSize.Rows, p.WindowSize.Cols
	}
	if p.TTY && !hasKey(proc.Env, "TERM") {
		term := os.Getenv("TERM")
		if term == "" {
			term = "xterm"
		}
		proc.Env = append(proc.Env, "TERM="+term)
	}
	return &proc, nil
}

func hasKey(env []string, key string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, key+"=") {
			return true
		}
	}
	return false
}

// mergeEnv is base with each K=V of extra replacing base's K or added.
func mergeEnv(base, extra []string) []string {
	out := append([]string(nil), base...)
	for _, e := range extra {
		k, _, _ := strings.Cut(e, "=")
		replaced := false
		for i, b := range out {
			if strings.HasPrefix(b, k+"=") {
				out[i], replaced = e, true
			}
		}
		if !replaced {
			out = append(out, e)
		}
	}
	return out
}

// fingerprintFile holds what a sandbox's spec resolved to when it was made
// (its image's digest, its profile's policy), for Reuse.
const fingerprintFile = "resolved"

// fingerprint is a digest of what spec resolves to beyond its own text:
// the image its reference names now and the profile's policy as it reads
// now, so that a sandbox is not reused after a tag was moved or a profile
// edited.
func fingerprint(spec *Spec) (string, error) {
	h := sha256.New()
	if spec.Image != "" {
		store, err := ImageStore().Open()
		if err != nil {
			return "", err
		}
		img, err := store.Lookup(spec.Image)
		store.Close()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "image %s\n", img.Digest)
	}
	users := new(privdir.Passwd)
	profile, policy, err := resolveProfile(profiles.DefaultStore(users), spec.ProfileName(), users)
	if err != nil {
		return "", err
	}
	for _, v := range []any{profile, policy} {
		b, err := json.Marshal(v)
		if err != nil {
			return "", err
		}
		h.Write(b)
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
