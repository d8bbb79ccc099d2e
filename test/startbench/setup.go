package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jail-sandbox/jail/api"
	"github.com/jail-sandbox/jail/client"
	"github.com/jail-sandbox/jail/profiles/files"
)

// cgroupParent is where crun and runc put their cgroups for the run.
const cgroupParent = "jail-bench"

// hostRange mirrors what jail maps a root-run sandbox onto, so that crun and
// runc get the same kind of user namespace.
const hostRange = 2000000000

// bench is the run's scratch space: a busybox root, the seccomp filter
// exported by jail, and OCI bundles for crun and runc.
type bench struct {
	jail     string
	dir      string
	rootfs   string
	allowBPF string
	denyBPF  string
	serial   atomic.Int64
	wanted   func(name string) bool
	// servers are `jail serve` processes, by contender name.
	servers map[string]*server
	// cgwrap is the wrapper of the bwrap+cgroup contender ("" where it
	// cannot run: not cgroup v1).
	cgwrap string
}

// cgwrapSource puts a command under cgroup limits as jail's (v1), the way
// a careful wrapper would: for the bwrap+cgroup contender.
//
//go:embed cgwrap/cgwrap.c
var cgwrapSource []byte

// server is a `jail serve` the API contenders send their runs to.
type server struct {
	cmd    *exec.Cmd
	client *client.Client
	socket string
}

// contender is one way of starting /bin/true.
type contender struct {
	name string
	// argv returns the command line for one run by worker w.
	argv func(b *bench, w int) []string
	// files are opened afresh for each run and passed as fds 3, 4, ...
	files []string
	// call, when set, is one run through jail's HTTP API instead of a
	// process started; desc then describes it.
	call func(w int) error
	desc string
	b    *bench
}

func newBench(jail string, wanted func(name string) bool) (*bench, error) {
	for _, tool := range []string{"bwrap", "crun", "runc", "unshare", "busybox"} {
		if tool != "busybox" && !wanted(tool) {
			continue
		}
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is not installed (make bench installs the Debian packages)", tool)
		}
	}
	dir, err := os.MkdirTemp("/var/tmp", "jail-startbench.")
	if err != nil {
		return nil, err
	}
	b := &bench{jail: jail, dir: dir, wanted: wanted, servers: map[string]*server{}}
	if err := b.setup(); err != nil {
		b.cleanup()
		return nil, err
	}
	return b, nil
}

func (b *bench) setup() error {
	// The sandboxes' unprivileged ids walk into the work directory.
	if err := os.Chmod(b.dir, 0o755); err != nil {
		return err
	}
	b.rootfs = filepath.Join(b.dir, "rootfs")
	if err := busyboxRoot(b.rootfs); err != nil {
		return err
	}
	b.allowBPF, b.denyBPF = filepath.Join(b.dir, "allow.bpf"), filepath.Join(b.dir, "deny.bpf")
	if out, err := exec.Command(b.jail, "profile", "export", "default", "--bpf", b.allowBPF, "--denials", b.denyBPF).CombinedOutput(); err != nil {
		return fmt.Errorf("jail profile export: %v: %s", err, out)
	}
	seccomp, err := ociSeccomp()
	if err != nil {
		return err
	}
	for _, tool := range []string{"crun", "runc"} {
		if !b.wanted(tool) {
			continue
		}
		for w := 0; w < 2; w++ {
			if err := b.writeBundle(tool, w, seccomp); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(filepath.Join(b.dir, tool+"-state"), 0o700); err != nil {
			return err
		}
	}
	if b.wanted(bwrapInCgroup) && isDir("/sys/fs/cgroup/memory") && isDir("/sys/fs/cgroup/pids") {
		if err := b.buildCgwrap(); err != nil {
			return err
		}
	}
	for name, pool := range map[string]string{"jail serve": "2", "jail serve --pool 0": "0"} {
		if !b.wanted(name) {
			continue
		}
		if err := b.startServer(name, pool); err != nil {
			return err
		}
	}
	return nil
}

// bwrapInCgroup is the name of the contender that runs bwrap under the
// cgroup limits jail sets (cgwrap), on v1 hosts.
const bwrapInCgroup = "bwrap+cgroup"

// buildCgwrap compiles the wrapper of the bwrap+cgroup contender.
func (b *bench) buildCgwrap() error {
	src := filepath.Join(b.dir, "cgwrap.c")
	if err := os.WriteFile(src, cgwrapSource, 0o644); err != nil {
		return err
	}
	bin := filepath.Join(b.dir, "cgwrap")
	if out, err := exec.Command("gcc", "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		return fmt.Errorf("build cgwrap: %v: %s", err, out)
	}
	b.cgwrap = bin
	return nil
}

// startServer starts `jail serve --pool N` and waits until it answers.
func (b *bench) startServer(name, pool string) error {
	socket := filepath.Join(b.dir, fmt.Sprintf("serve-%s.sock", pool))
	cmd := exec.Command(b.jail, "serve", "--socket", socket, "--pool", pool)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return err
	}
	s := &server{cmd: cmd, client: client.New(socket), socket: socket}
	b.servers[name] = s
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := s.client.Health(context.Background()); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("jail serve does not answer: %v\n%s", err, out.String())
		}
	}
}

// apiContender runs /bin/true through the server of name, with the request
// that `jail run` with args would make.
func (b *bench) apiContender(name string, req api.RunRequest) contender {
	req.Cmd = "/bin/true"
	desc := fmt.Sprintf("POST /v1/run %s (%s)", mustJSON(req), name)
	return contender{name: name, desc: desc, call: func(int) error {
		s := b.servers[name]
		if s == nil {
			return fmt.Errorf("%s is not running", name)
		}
		res, err := s.client.Run(context.Background(), req)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
		}
		if err != nil {
			return fmt.Errorf("%s: %v", desc, err)
		}
		return nil
	}}
}

func mustJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// cleanup stops the servers, removes the work directory and any cgroup crun
// or runc left.
func (b *bench) cleanup() {
	for _, s := range b.servers {
		s.client.Close()
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		_ = s.cmd.Wait()
	}
	for _, tool := range []string{"crun", "runc"} {
		if !b.wanted(tool) {
			continue
		}
		state := filepath.Join(b.dir, tool+"-state")
		out, _ := exec.Command(tool, "--root", state, "list", "-q").Output()
		for _, id := range strings.Fields(string(out)) {
			_ = exec.Command(tool, "--root", state, "delete", "-f", id).Run()
		}
	}
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*/" + cgroupParent)
	if d := "/sys/fs/cgroup/" + cgroupParent; isDir(d) {
		hierarchies = append(hierarchies, d)
	}
	for _, parent := range hierarchies {
		children, _ := filepath.Glob(parent + "/*")
		for _, c := range children {
			if isDir(c) {
				_ = os.Remove(c)
			}
		}
		_ = os.Remove(parent)
	}
	_ = os.RemoveAll(b.dir)
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// busyboxRoot lays out a minimal root filesystem from Debian's
// busybox-static.
func busyboxRoot(dir string) error {
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		return err
	}
	for _, d := range []string{"bin", "etc", "proc", "dev", "sys", "tmp", "run"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	data, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "busybox"), data, 0o755); err != nil {
		return err
	}
	for _, applet := range []string{"sh", "true"} {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", applet)); err != nil {
			return err
		}
	}
	return nil
}

// ociSeccomp is jail's default allowlist in the OCI runtime spec's form, so
// that crun and runc load the same filter (both compile it with libseccomp
// in every start; that cost is theirs).
func ociSeccomp() (map[string]any, error) {
	p, err := files.Resolve(nil, "default")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range p.Seccomp.Allow {
		names = append(names, s.Name)
	}
	return map[string]any{
		"defaultAction":   "SCMP_ACT_ERRNO",
		"defaultErrnoRet": 1,
		"architectures":   []string{"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"},
		"syscalls":        []map[string]any{{"names": names, "action": "SCMP_ACT_ALLOW"}},
	}, nil
}

// writeBundle writes the OCI bundle that tool's worker w runs: the busybox
// root, jail's namespaces, id mapping, limits and filter.
func (b *bench) writeBundle(tool string, w int, seccomp map[string]any) error {
	dir := filepath.Join(b.dir, fmt.Sprintf("%s-bundle-%d", tool, w))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	idMap := []map[string]int{{"containerID": 0, "hostID": hostRange, "size": 65536}}
	memory := int64(512 << 20)
	spec := map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"terminal": false,
			"user":     map[string]int{"uid": 0, "gid": 0},
			"args":     []string{"/bin/true"},
			"env":      []string{"PATH=/bin"},
			"cwd":      "/",
			"capabilities": map[string][]string{
				"bounding": {}, "effective": {}, "permitted": {}, "inheritable": {}, "ambient": {},
			},
			"noNewPrivileges": true,
		},
		"root":     map[string]any{"path": b.rootfs, "readonly": false},
		"hostname": "sandbox",
		"mounts": []map[string]any{
			{"destination": "/proc", "type": "proc", "source": "proc", "options": []string{"nosuid", "noexec", "nodev"}},
			{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "nodev", "mode=1777"}},
			{"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": []string{"nosuid", "noexec", "nodev", "ro"}},
		},
		"linux": map[string]any{
			"uidMappings": idMap,
			"gidMappings": idMap,
			"namespaces": []map[string]string{
				{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"},
				{"type": "mount"}, {"type": "user"}, {"type": "cgroup"},
			},
			"cgroupsPath": fmt.Sprintf("/%s/%s-%d", cgroupParent, tool, w),
			"resources": map[string]any{
				"memory": map[string]int64{"limit": memory, "swap": memory},
				"cpu":    map[string]any{"quota": 100000, "period": 100000},
				"pids":   map[string]int64{"limit": 256},
			},
			"seccomp":       seccomp,
			"maskedPaths":   []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"},
			"readonlyPaths": []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644)
}

// scenario is one cold-start comparison, jail first.
type scenario struct {
	key, name  string
	contenders []contender
}

// scenarios are the cold-start comparisons; image names an image in jail's
// store for the image scenario ("" leaves it out).
func (b *bench) scenarios(image string) []scenario {
	bwrapFilter := []string{"--add-seccomp-fd", "3", "--add-seccomp-fd", "4"}
	fixed := func(args ...string) func(*bench, int) []string {
		return func(*bench, int) []string { return args }
	}
	oci := func(tool string) func(*bench, int) []string {
		return func(b *bench, w int) []string {
			return []string{tool, "--root", filepath.Join(b.dir, tool+"-state"), "run",
				"--bundle", filepath.Join(b.dir, fmt.Sprintf("%s-bundle-%d", tool, w)),
				fmt.Sprintf("bench-%d", b.serial.Add(1))}
		}
	}
	filters := []string{b.allowBPF, b.denyBPF}
	bwrapBusybox := append(append([]string{"bwrap", "--unshare-all", "--ro-bind", b.rootfs, "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"}, bwrapFilter...), "/bin/true")
	all := []scenario{
		{"busybox", "busybox root, all isolation on", []contender{
			{name: "jail", argv: fixed(b.jail, "run", "--rootfs", b.rootfs, "--", "/bin/true")},
			{name: "bwrap", files: filters, argv: fixed(bwrapBusybox...)},
			{name: bwrapInCgroup, files: filters, argv: fixed(append([]string{b.cgwrap, cgroupParent}, bwrapBusybox...)...)},
			{name: "crun", argv: oci("crun")},
			{name: "runc", argv: oci("runc")},
			{name: "unshare", argv: fixed("unshare", "-Urmpinuf", "--mount-proc", "/bin/true")},
			{name: "bare", argv: fixed("/bin/true")},
			b.apiContender("jail serve", api.RunRequest{Rootfs: b.rootfs}),
			b.apiContender("jail serve --pool 0", api.RunRequest{Rootfs: b.rootfs}),
		}},
		{"host", "default root (the host tree read-only)", []contender{
			{name: "jail", argv: fixed(b.jail, "run", "--", "/bin/true")},
			{name: "bwrap", files: filters, argv: fixed(append(append([]string{"bwrap", "--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"}, bwrapFilter...), "/bin/true")...)},
			b.apiContender("jail serve", api.RunRequest{}),
			b.apiContender("jail serve --pool 0", api.RunRequest{}),
		}},
	}
	if image != "" {
		all = append(all, scenario{"image", "--image " + image + " beside the default root", []contender{
			{name: "jail", argv: fixed(b.jail, "run", "--", "/bin/true")},
			{name: "jail --image", argv: fixed(b.jail, "run", "--image", image, "--", "/bin/true")},
		}})
	}
	for i := range all {
		var kept []contender
		for _, c := range all[i].contenders {
			if c.name == bwrapInCgroup && b.cgwrap == "" {
				continue
			}
			c.b = b
			kept = append(kept, c)
		}
		all[i].contenders = kept
	}
	return all
}

// throughputContenders are the busybox-root contenders that isolate.
func (b *bench) throughputContenders() []contender {
	var out []contender
	for _, c := range b.scenarios("")[0].contenders {
		if c.name != "bare" {
			out = append(out, c)
		}
	}
	return out
}

// describe is the command line as a user would type it.
func (c contender) describe() string {
	if c.call != nil {
		return c.desc
	}
	return strings.Join(c.argv(c.b, 0), " ")
}

// start runs the contender once as worker w and waits for it.
func (c contender) start(w int) error {
	if c.call != nil {
		return c.call(w)
	}
	argv := c.argv(c.b, w)
	cmd := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	for _, path := range c.files {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, out.String())
	}
	return nil
}

// once times one run.
func (c contender) once() (time.Duration, error) {
	t0 := time.Now()
	err := c.start(0)
	return time.Since(t0), err
}

// parallel keeps n runs going at once for d and counts those that finished.
func (c contender) parallel(n int, d time.Duration) (int, time.Duration, error) {
	var done atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	t0 := time.Now()
	deadline := t0.Add(d)
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := c.start(w); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				done.Add(1)
			}
		}(w)
	}
	wg.Wait()
	return int(done.Load()), time.Since(t0), firstErr
}
