package test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestSandboxSeesOnlyItsOwnProcesses(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		out := mustRun(t, m, withProbe("--", "/opt/probe/jailprobe", "pids")...)
		// Only the probe itself: no host process, and not the init either
		// (it is non-dumpable, and /proc hides what one may not ptrace).
		if pids := parseInts(t, out); len(pids) != 1 || pids[0] > 64 {
			t.Errorf("sandbox sees pids %v; want only its own", pids)
		}
	})
}

func TestSandboxHasOnlyLoopback(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		out := mustRun(t, m, "run", "--", "cat", "/proc/net/dev")
		var ifaces []string
		for _, line := range strings.Split(out, "\n") {
			if name, _, ok := strings.Cut(line, ":"); ok {
				ifaces = append(ifaces, strings.TrimSpace(name))
			}
		}
		if len(ifaces) != 1 || ifaces[0] != "lo" {
			t.Errorf("interfaces %v; want only lo", ifaces)
		}
		if out := mustRun(t, m, "run", "--", "cat", "/sys/class/net/lo/operstate"); strings.TrimSpace(out) == "down" {
			t.Errorf("lo is down")
		}
	})
}

func TestSandboxCannotReachTheHost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	forEachMode(t, func(t *testing.T, m mode) {
		r := jail(t, m, withProbe("--", "/opt/probe/jailprobe", "connect", ln.Addr().String())...)
		if r.code == 0 {
			t.Errorf("sandbox connected to the host's %s: %s", ln.Addr(), r.stdout)
		}
		// Loopback inside works, and is the sandbox's own.
		inner := jail(t, m, withProbe("--", "sh", "-c", "/opt/probe/jailprobe connect 127.0.0.1:"+portOf(ln))...)
		if inner.code == 0 {
			t.Errorf("sandbox reached the host's listener through its own loopback")
		}
	})
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host listener accepted %d connections from sandboxes", n)
	}
}

func TestSandboxCannotWriteTheHostTree(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, path := range []string{"/usr/jail-test-x", "/etc/jail-test-x", "/jail-test-x", "/var/jail-test-x"} {
			r := jail(t, m, "run", "--", "touch", path)
			if r.code == 0 {
				t.Errorf("sandbox created %s", path)
			}
			if _, err := os.Lstat(path); err == nil {
				os.Remove(path)
				t.Errorf("%s appeared on the host", path)
			}
		}
	})
}

func TestSandboxCannotReadHostSecrets(t *testing.T) {
	secrets := map[string]os.FileMode{"/root/jail-test-secret": 0o600, "/home/jail-test-secret": 0o644}
	if os.Geteuid() == 0 {
		for path, perm := range secrets {
			if err := os.WriteFile(path, []byte("TOPSECRET\n"), perm); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(path)
		}
	}
	forEachMode(t, func(t *testing.T, m mode) {
		script := "cat /etc/shadow /etc/gshadow /root/jail-test-secret /home/jail-test-secret; ls -A /root /home"
		r := jail(t, m, "run", "--", "sh", "-c", script)
		if strings.Contains(r.stdout, "TOPSECRET") || regexp.MustCompile(`(?m)^root:`).MatchString(r.stdout) {
			t.Errorf("sandbox read a host secret:\n%s", r.stdout)
		}
		// /root is the sandbox's own (empty) home, /home is empty.
		if listing := strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(r.stdout, "/root:", ""), "/home:", "")); listing != "" {
			t.Errorf("/root or /home not empty in the sandbox: %q", listing)
		}
	})
}

func TestTmpIsPrivate(t *testing.T) {
	hostFile, err := os.CreateTemp("", "jail-host-visible-")
	if err != nil {
		t.Fatal(err)
	}
	hostFile.Close()
	defer os.Remove(hostFile.Name())
	forEachMode(t, func(t *testing.T, m mode) {
		if out := mustRun(t, m, "run", "--", "ls", "-A", "/tmp", "/dev/shm"); strings.Contains(out, "jail-host-visible") {
			t.Errorf("sandbox sees the host's /tmp: %s", out)
		}
		mustRun(t, m, "run", "--", "sh", "-c", "echo a > /tmp/jail-from-sandbox && echo b > /dev/shm/jail-from-sandbox")
		if _, err := os.Stat(filepath.Join(os.TempDir(), "jail-from-sandbox")); err == nil {
			t.Errorf("a sandbox's /tmp file reached the host")
		}
		// A second sandbox does not see the first one's files (isolate 2.6's
		// shared /dev/shm).
		if r := jail(t, m, "run", "--", "cat", "/tmp/jail-from-sandbox", "/dev/shm/jail-from-sandbox"); r.code == 0 {
			t.Errorf("a sandbox saw another's /tmp or /dev/shm: %s", r.stdout)
		}
	})
}

func TestSandboxSeesNoneOfTheCallersEnvironment(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		cmd := command(m, "run", "--", "/usr/bin/env")
		cmd.Env = append(cmd.Env, "JAIL_TEST_SECRET=leaked", "AWS_SECRET_ACCESS_KEY=leaked")
		r := runCmd(t, cmd)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		var keys []string
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			k, _, _ := strings.Cut(line, "=")
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if strings.Join(keys, " ") != "HOME LANG PATH" {
			t.Errorf("environment keys %v; want exactly HOME LANG PATH", keys)
		}
		if strings.Contains(r.stdout, "leaked") {
			t.Errorf("caller's environment leaked: %s", r.stdout)
		}
	})
}

// TestSandboxCapabilities: sandbox root keeps only the capabilities the
// kernel confines to its user namespace (CHOWN, DAC_OVERRIDE, FOWNER,
// FSETID, KILL, SETGID, SETUID: 0xfb), never inheritable or ambient; any
// other user has none; no_new_privs always.
func TestSandboxCapabilities(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, c := range []struct {
			user     string
			bounding string
			held     string
		}{{"0", "00000000000000fb", "00000000000000fb"}, {"1000:1000", "00000000000000fb", "0000000000000000"}} {
			out := mustRun(t, m, "run", "--user", c.user, "--", "cat", "/proc/self/status")
			want := map[string]string{"CapInh": "0000000000000000", "CapAmb": "0000000000000000",
				"CapPrm": c.held, "CapEff": c.held, "CapBnd": c.bounding}
			for field, v := range want {
				if got := statusField(out, field); got != v {
					t.Errorf("--user %s: %s = %q; want %q", c.user, field, got, v)
				}
			}
			if v := statusField(out, "NoNewPrivs"); v != "1" {
				t.Errorf("--user %s: NoNewPrivs = %q", c.user, v)
			}
		}
		// The strict profile keeps none, root or not.
		out := mustRun(t, m, "run", "--profile", "strict", "--", "cat", "/proc/self/status")
		for _, field := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			if v := statusField(out, field); v != "0000000000000000" {
				t.Errorf("--profile strict: %s = %q; want none", field, v)
			}
		}
	})
}

func TestSandboxRootIsNotHostRoot(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		out := mustRun(t, m, "run", "--", "sh", "-c", "id -u; cat /proc/self/uid_map")
		lines := strings.Fields(out)
		if len(lines) < 4 || lines[0] != "0" || lines[1] != "0" {
			t.Fatalf("unexpected identity: %q", out)
		}
		want := strconv.Itoa(hostRangeStart)
		if m.rootless {
			want = strconv.Itoa(rootless.uid)
		}
		if lines[2] != want {
			t.Errorf("sandbox root is host uid %s; want %s", lines[2], want)
		}
		if out := mustRun(t, m, "run", "--user", "1000:1001", "--", "sh", "-c", "id -u; id -g"); strings.Fields(out)[0] != "1000" || strings.Fields(out)[1] != "1001" {
			t.Errorf("--user 1000:1001 ran as %q", out)
		}
	})
}

func TestOnlyStdioReachesTheSandbox(t *testing.T) {
	leaked, err := os.Open("/etc/hostname")
	if err != nil {
		t.Fatal(err)
	}
	defer leaked.Close()
	forEachMode(t, func(t *testing.T, m mode) {
		cmd := command(m, withProbe("--", "/opt/probe/jailprobe", "fds")...)
		cmd.ExtraFiles = []*os.File{leaked, leaked, leaked}
		r := runCmd(t, cmd)
		if strings.TrimSpace(r.stdout) != "[0 1 2]" {
			t.Errorf("open fds in the sandbox: %s (stderr %s); want [0 1 2]", r.stdout, r.stderr)
		}
	})
}

func TestInitCannotBeInspectedOrAltered(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, probe := range [][]string{
			{"/opt/probe/jailprobe", "ptrace", "1"},
			{"/opt/probe/jailprobe", "open-write", "/proc/1/exe"},
			{"cat", "/proc/1/environ"},
			{"ls", "/proc/1/fd"},
			{"/opt/probe/jailprobe", "open-write", "/proc/self/exe"},
		} {
			r := jail(t, m, withProbe(append([]string{"--"}, probe...)...)...)
			if r.code == 0 {
				t.Errorf("%v succeeded inside the sandbox: %s", probe, r.stdout)
			}
		}
	})
}

func TestSandboxCannotMountOrTouchCgroups(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, script := range []string{
			"mount -t tmpfs none /mnt",
			"mount -t cgroup -o memory none /mnt",
			"mount -t proc proc /tmp",
			"echo $$ > /sys/fs/cgroup/cgroup.procs",
		} {
			if r := jail(t, m, "run", "--", "sh", "-c", script); r.code == 0 {
				t.Errorf("%q succeeded in the sandbox", script)
			}
		}
		if out := mustRun(t, m, "run", "--", "ls", "-A", "/sys/fs/cgroup"); strings.TrimSpace(out) != "" {
			t.Errorf("the host's cgroups are visible: %s", out)
		}
	})
}

func TestHostname(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		if out := mustRun(t, m, "run", "--", "hostname"); strings.TrimSpace(out) != "jail" {
			t.Errorf("default host name %q", out)
		}
		if out := mustRun(t, m, "run", "--hostname", "build-7", "--", "hostname"); strings.TrimSpace(out) != "build-7" {
			t.Errorf("--hostname: got %q", out)
		}
	})
}

func parseInts(t *testing.T, s string) []int {
	t.Helper()
	var out []int
	for _, f := range regexp.MustCompile(`\d+`).FindAllString(s, -1) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

func statusField(status, field string) string {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func portOf(ln net.Listener) string {
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// TestSandboxIsInItsOwnCgroup: the command runs in the sandbox's cgroup in
// every hierarchy jail limits, seen from the host, wherever jail makes one
// (as root); and its cgroup namespace is rooted there, so the sandbox sees
// no host cgroup path.
func TestSandboxIsInItsOwnCgroup(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		out := mustRun(t, m, "run", "--", "cat", "/proc/self/cgroup")
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasSuffix(line, ":/") {
				t.Errorf("the sandbox sees a cgroup path: %q", line)
			}
		}
		if m.rootless {
			return // a cgroup only where the user has one delegated
		}
		pid := startSleeper(t, m, "7.25")
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			t.Fatal(err)
		}
		v1 := strings.Contains(string(b), ":memory:")
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			fields := strings.SplitN(line, ":", 3)
			if len(fields) != 3 {
				continue
			}
			limited := fields[0] == "0" && !v1
			for _, c := range strings.Split(fields[1], ",") {
				limited = limited || c == "memory" || c == "pids" || c == "cpu"
			}
			if limited && !strings.Contains(fields[2], "/jail/") {
				t.Errorf("the command is outside its cgroup: %q", line)
			}
		}
	})
}

// TestInitIsNotHostRoot: the init, started before its ids are mapped, runs
// as the sandbox's root user as the host sees it, never as host root.
func TestInitIsNotHostRoot(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		_, initPid := startSleeperAndInit(t, m, "7.75")
		want := strconv.Itoa(hostRangeStart)
		if m.rootless {
			want = strconv.Itoa(rootless.uid)
		}
		for _, field := range []string{"Uid", "Gid"} {
			ids := strings.Fields(statusOf(t, initPid, field))
			if field == "Gid" && m.rootless {
				want = strconv.Itoa(rootless.gid)
			}
			for _, id := range ids {
				if id != want {
					t.Errorf("the init's %s is %v as the host sees it; want %s everywhere", field, ids, want)
					break
				}
			}
		}
		if groups := statusOf(t, initPid, "Groups"); !m.rootless && groups != "" {
			t.Errorf("the init keeps supplementary groups %q", groups)
		}
	})
}

func statusOf(t *testing.T, pid int, field string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	return statusField(string(b), field)
}

// startSleeperAndInit runs startSleeper and returns the host pids of the
// sleep and of its sandbox's init, its parent.
func startSleeperAndInit(t *testing.T, m mode, seconds string) (sleeper, initPid int) {
	t.Helper()
	sleeper = startSleeper(t, m, seconds)
	initPid, err := strconv.Atoi(statusOf(t, sleeper, "PPid"))
	if err != nil {
		t.Fatal(err)
	}
	if name := statusOf(t, initPid, "Name"); name != "jail-init" {
		t.Fatalf("the command's parent is %q; want jail-init", name)
	}
	return sleeper, initPid
}

// startSleeper runs `sleep seconds` in a sandbox in mode m until the test
// ends, and returns the host pid of the sleep, found by its command line
// (seconds makes it unique).
func startSleeper(t *testing.T, m mode, seconds string) int {
	t.Helper()
	cmd := command(m, "run", "--", "sleep", seconds)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	return findProcess(t, "sleep\x00"+seconds+"\x00")
}

// findProcess waits until a process with the command line cmdline (its
// NUL-terminated arguments) runs, and returns its host pid.
func findProcess(t *testing.T, cmdline string) int {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			if b, _ := os.ReadFile(p); string(b) == cmdline {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
				return pid
			}
		}
	}
	t.Fatalf("the command %q did not start", strings.ReplaceAll(cmdline, "\x00", " "))
	return 0
}
