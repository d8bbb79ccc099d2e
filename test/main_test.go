// Package test holds jail's integration tests: each one starts real
// sandboxes with the jail binary, as root and as an unprivileged user, and
// checks what a user would check, then that nothing was left behind.
package test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testUserName is the unprivileged account the rootless tests run as when
// the suite runs as root. It is created if missing.
const testUserName = "jail-test"

// hostRangeStart mirrors namespaces.HostRangeStart: host ids of sandboxes
// started by root.
const hostRangeStart = 2000000000

var (
	workDir   string // the suite's own scratch directory, readable by all
	jailTmp   string // TMPDIR of every jail the suite starts: must stay empty
	jailBin   string // the jail binary under test
	probeDir  string // holds jailprobe; mounted at /opt/probe
	rootfsDir string // a busybox root filesystem
	rootless  *account
)

type account struct {
	uid, gid int
	home     string
}

func TestMain(m *testing.M) {
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test setup:", err)
		code = 1
	}
	if workDir != "" {
		os.RemoveAll(workDir)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	var err error
	if workDir, err = os.MkdirTemp("", "jail-suite-"); err != nil {
		return 1, err
	}
	if err := os.Chmod(workDir, 0o755); err != nil {
		return 1, err
	}
	jailTmp = filepath.Join(workDir, "jail-tmp")
	if err := os.Mkdir(jailTmp, 0o1777); err != nil {
		return 1, err
	}
	if err := os.Chmod(jailTmp, 0o1777); err != nil {
		return 1, err
	}
	jailBin = filepath.Join(workDir, "bin", "jail")
	probeDir = filepath.Join(workDir, "probe")
	if err := buildBinaries(); err != nil {
		return 1, err
	}
	if rootfsDir, err = makeBusyboxRootfs(filepath.Join(workDir, "rootfs")); err != nil {
		return 1, err
	}
	if rootless, err = unprivilegedAccount(); err != nil {
		return 1, err
	}
	return m.Run(), nil
}

// buildBinaries builds jail and jailprobe into the suite's directory, or
// copies them from $JAIL_TEST_BINARIES when that is set (for running the
// compiled suite in a VM, where compiling is slow).
func buildBinaries() error {
	probe := filepath.Join(probeDir, "jailprobe")
	if dir := os.Getenv("JAIL_TEST_BINARIES"); dir != "" {
		for src, dst := range map[string]string{filepath.Join(dir, "jail"): jailBin, filepath.Join(dir, "jailprobe"): probe} {
			data, err := os.ReadFile(src)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(dst, data, 0o755); err != nil {
				return err
			}
		}
		return nil
	}
	// The helper programs jail embeds first (see internal/programs).
	if out, err := exec.Command("go", "generate", "../internal/programs").CombinedOutput(); err != nil {
		return fmt.Errorf("build jail's programs: %v\n%s", err, out)
	}
	// Built as make builds it (internal/programs/gobuild.sh).
	build := exec.Command("sh", "../internal/programs/gobuild.sh", "-o", jailBin, "../cmd/jail")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build jail: %v\n%s", err, out)
	}
	build = exec.Command("go", "build", "-o", probe, "./jailprobe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build jailprobe: %v\n%s", err, out)
	}
	return nil
}

// makeBusyboxRootfs lays out a minimal root filesystem from Debian's
// busybox-static.
func makeBusyboxRootfs(dir string) (string, error) {
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		return "", fmt.Errorf("busybox-static is needed: %v", err)
	}
	for _, d := range []string{"bin", "etc", "proc", "dev", "sys", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return "", err
		}
	}
	data, err := os.ReadFile(busybox)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "busybox"), data, 0o755); err != nil {
		return "", err
	}
	for _, applet := range []string{"sh", "cat", "ls", "echo", "id", "touch", "mkdir", "env", "sleep", "true", "false", "stat", "hostname", "grep", "wc"} {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", applet)); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "etc", "image-release"), []byte("busybox test image\n"), 0o644); err != nil {
		return "", err
	}
	return dir, nil
}

// unprivilegedAccount returns the account for rootless runs: the caller
// when it is not root, otherwise the test user (created if missing).
func unprivilegedAccount() (*account, error) {
	if os.Geteuid() != 0 {
		home, _ := os.UserHomeDir()
		return &account{uid: os.Geteuid(), gid: os.Getegid(), home: home}, nil
	}
	u, err := user.Lookup(testUserName)
	if err != nil {
		out, err := exec.Command("useradd", "--system", "--create-home", "--shell", "/usr/sbin/nologin", testUserName).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("useradd %s: %v: %s", testUserName, err, out)
		}
		if u, err = user.Lookup(testUserName); err != nil {
			return nil, err
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &account{uid: uid, gid: gid, home: u.HomeDir}, nil
}

// mode is a way of running jail: as root, or as an ordinary user.
type mode struct {
	name     string
	rootless bool
}

var (
	asRoot     = mode{name: "root"}
	asRootless = mode{name: "rootless", rootless: true}
)

// modes lists the modes this suite can exercise here.
func modes() []mode {
	if os.Geteuid() == 0 {
		return []mode{asRoot, asRootless}
	}
	return []mode{asRootless}
}

// skipEmulatedKernelAgnostic skips, in the cgroup v2 VM, a test whose
// subject is neither cgroups nor the kernel (decompression bounds of the
// tools program, say) and which takes a minute there under software
// emulation: the host runs it.
func skipEmulatedKernelAgnostic(t *testing.T) {
	t.Helper()
	if os.Getenv("JAIL_TEST_EMULATED") != "" {
		t.Skip("kernel-agnostic and slow under the VM's emulation: tested on the host")
	}
}

// raceRounds is how many runs a test races a swap against: n on the
// host, a quarter of it in the cgroup v2 VM, where each run costs ten
// times more under emulation and the host has tried the race n times.
func raceRounds(n int) int {
	if os.Getenv("JAIL_TEST_EMULATED") != "" {
		return n / 4
	}
	return n
}

// forEachMode runs f as a subtest per mode, each checked for leaks.
func forEachMode(t *testing.T, f func(t *testing.T, m mode)) {
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			checkNoLeaks(t)
			f(t, m)
		})
	}
}

// command builds the command that runs jail with args in mode m. The
// environment is minimal plus extraEnv.
func command(m mode, args ...string) *exec.Cmd {
	return programAs(m, jailBin, args...)
}

// programAs is program with args, to run as mode m's user, in the
// environment command gives jail.
func programAs(m mode, program string, args ...string) *exec.Cmd {
	env := []string{"PATH=" + systemPath, "TMPDIR=" + jailTmp}
	var cmd *exec.Cmd
	if m.rootless && os.Geteuid() == 0 {
		full := append([]string{"--reuid", strconv.Itoa(rootless.uid), "--regid", strconv.Itoa(rootless.gid), "--clear-groups", "--", program}, args...)
		cmd = exec.Command("setpriv", full...)
		env = append(env, "HOME="+rootless.home)
	} else {
		cmd = exec.Command(program, args...)
		home, _ := os.UserHomeDir()
		env = append(env, "HOME="+home)
	}
	cmd.Env = env
	return cmd
}

// result is what one jail invocation did.
type result struct {
	stdout, stderr string
	code           int
}

// jail runs jail with args in mode m and waits for it.
func jail(t *testing.T, m mode, args ...string) result {
	t.Helper()
	return runCmd(t, command(m, args...))
}

func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %.200s: %v", strings.Join(cmd.Args, " "), err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%.200s did not finish within 60s (a hang, not a timing check)", strings.Join(cmd.Args, " "))
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// mustRun runs jail and fails the test unless it exits 0.
func mustRun(t *testing.T, m mode, args ...string) string {
	t.Helper()
	r := jail(t, m, args...)
	if r.code != 0 {
		t.Fatalf("jail %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// withProbe prefixes run arguments with the mount of jailprobe.
func withProbe(args ...string) []string {
	return append([]string{"run", "--mount", probeDir + ":/opt/probe"}, args...)
}

// hostState is what a sandbox must leave as it found it.
type hostState struct {
	mounts    []string
	processes []string
	tmp       []string
	cgroups   []string
}

func snapshot() hostState {
	var s hostState
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if f := strings.Fields(line); len(f) > 4 {
				s.mounts = append(s.mounts, f[4])
			}
		}
		sort.Strings(s.mounts)
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if desc := sandboxProcess(pid); desc != "" {
			s.processes = append(s.processes, desc)
		}
	}
	// Temporary files: whatever jail put in its TMPDIR, and anything named
	// after jail in the system's (other processes may use /tmp meanwhile).
	mine, _ := os.ReadDir(jailTmp)
	for _, e := range mine {
		s.tmp = append(s.tmp, filepath.Join(jailTmp, e.Name()))
	}
	tmp, _ := os.ReadDir(os.TempDir())
	for _, e := range tmp {
		if strings.Contains(e.Name(), "jail") {
			s.tmp = append(s.tmp, filepath.Join(os.TempDir(), e.Name()))
		}
	}
	// Sandbox cgroups: children of jail's parent in any hierarchy.
	for _, pattern := range []string{"/sys/fs/cgroup/*/jail/*", "/sys/fs/cgroup/jail/*"} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			if st, err := os.Stat(m); err == nil && st.IsDir() {
				s.cgroups = append(s.cgroups, m)
			}
		}
	}
	return s
}

// sandboxProcess describes pid if it belongs to a sandbox (a jail stage,
// or a process running as a sandbox's host id), or returns "".
func sandboxProcess(pid int) string {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	name := strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " ")
	if strings.HasPrefix(name, "jail:") {
		return fmt.Sprintf("%d %s", pid, name)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d", pid), &st); err != nil {
		return ""
	}
	if st.Uid >= hostRangeStart && st.Uid < hostRangeStart+65536 {
		return fmt.Sprintf("%d %s (uid %d)", pid, name, st.Uid)
	}
	if os.Geteuid() == 0 && rootless != nil && int(st.Uid) == rootless.uid {
		return fmt.Sprintf("%d %s (test user)", pid, name)
	}
	return ""
}

func (s hostState) diff(o hostState) string {
	var out []string
	for _, d := range []struct {
		what       string
		before, at []string
	}{{"mounts", s.mounts, o.mounts}, {"sandbox processes", s.processes, o.processes}, {"temporary files", s.tmp, o.tmp}, {"cgroups", s.cgroups, o.cgroups}} {
		if added := minus(d.at, d.before); len(added) > 0 {
			out = append(out, fmt.Sprintf("%s left behind: %v", d.what, added))
		}
	}
	return strings.Join(out, "; ")
}

func minus(a, b []string) []string {
	seen := map[string]int{}
	for _, x := range b {
		seen[x]++
	}
	var out []string
	for _, x := range a {
		if seen[x] > 0 {
			seen[x]--
			continue
		}
		out = append(out, x)
	}
	return out
}

// checkNoLeaks snapshots the host now and, when the test ends (after its
// other cleanups), fails it if a mount, sandbox process or temp entry
// remains. Sandboxes are torn down asynchronously by the kernel, so it
// allows a few seconds.
func checkNoLeaks(t *testing.T) {
	before := snapshot()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			d := before.diff(snapshot())
			if d == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("leak: %s", d)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// sharedTempDir makes a directory, removed when the test ends, that the
// rootless user can reach too (t.TempDir's parent is private to root).
func sharedTempDir(t *testing.T, owner *account) string {
	t.Helper()
	dir, err := os.MkdirTemp(workDir, "t-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if owner != nil && os.Geteuid() == 0 {
		if err := os.Chown(dir, owner.uid, owner.gid); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
