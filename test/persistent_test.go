package test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jail-sandbox/jail/api"
)

// The persistent sandboxes of issue 24, through the CLI: each test has a
// state directory and an audit log of its own (JAIL_STATE_DIR,
// JAIL_AUDIT_LOG), owned by the mode's user.

// sandboxHost is one mode's jail with a private state directory.
type sandboxHost struct {
	t     *testing.T
	m     mode
	state string
	audit string
}

func newSandboxHost(t *testing.T, m mode) *sandboxHost {
	t.Helper()
	var owner *account
	if m.rootless {
		owner = rootless
	}
	dir := sharedTempDir(t, owner)
	h := &sandboxHost{t: t, m: m, state: filepath.Join(dir, "state"), audit: filepath.Join(dir, "audit", "audit.log")}
	// Whatever a test leaves is removed, so that the leak check sees
	// only what jail itself failed to remove.
	t.Cleanup(func() {
		var infos []sandboxInfo
		if r := h.run("ls", "--json"); r.code == 0 && json.Unmarshal([]byte(r.stdout), &infos) == nil {
			for _, i := range infos {
				h.run("rm", "-f", i.Name)
			}
		}
	})
	return h
}

func (h *sandboxHost) cmd(args ...string) *exec.Cmd {
	cmd := command(h.m, args...)
	cmd.Env = append(cmd.Env, "JAIL_STATE_DIR="+h.state, "JAIL_AUDIT_LOG="+h.audit)
	return cmd
}

func (h *sandboxHost) run(args ...string) result {
	h.t.Helper()
	return runCmd(h.t, h.cmd(args...))
}

func (h *sandboxHost) must(args ...string) string {
	h.t.Helper()
	r := h.run(args...)
	if r.code != 0 {
		h.t.Fatalf("jail %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

type sandboxInfo struct {
	Name     string            `json:"name"`
	State    string            `json:"state"`
	Labels   map[string]string `json:"labels"`
	Created  time.Time         `json:"created"`
	LastExec time.Time         `json:"last_exec"`
	CPUMs    int64             `json:"cpu_ms"`
	Peak     int64             `json:"peak_memory_bytes"`
}

func (h *sandboxHost) ls(args ...string) []sandboxInfo {
	h.t.Helper()
	var infos []sandboxInfo
	out := h.must(append([]string{"ls", "--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &infos); err != nil {
		h.t.Fatalf("ls --json: %v: %s", err, out)
	}
	return infos
}

func (h *sandboxHost) state1(name string) string {
	h.t.Helper()
	for _, i := range h.ls() {
		if i.Name == name {
			return i.State
		}
	}
	return "gone"
}

// waitFor polls cond for up to limit (a bound on a hang, not a timing
// check).
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPersistentAgentSession is an agent's session: a workspace, git, a
// hundred commands keeping state in /tmp, the root layer and /workspace, a
// background process seen by the next command, stop, start, rm.
func TestPersistentAgentSession(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		h := newSandboxHost(t, m)
		ws := sharedTempDir(t, rootless)
		h.must("create", "--workspace", ws, "--label", "agent=test", "--label", "task=42", "s1")
		h.must("exec", "s1", "--", "sh", "-c", `git init -q . && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m first && echo done`)
		if out := h.must("exec", "s1", "--", "git", "log", "--format=%s"); strings.TrimSpace(out) != "first" {
			t.Fatalf("git log in /workspace: %q", out)
		}
		if _, err := os.Stat(filepath.Join(ws, ".git")); err != nil {
			t.Fatalf("the repository is not in the host's workspace: %v", err)
		}
		for i := 0; i < 100; i++ {
			h.must("shell", "s1", fmt.Sprintf("echo %d >> /tmp/count; echo %d >> /workspace/count", i, i))
		}
		for _, f := range []string{"/tmp/count", "/workspace/count"} {
			if out := h.must("exec", "s1", "--", "wc", "-l", f); !strings.HasPrefix(strings.TrimSpace(out), "100") {
				t.Errorf("%s after 100 execs: %q", f, out)
			}
		}
		h.must("shell", "s1", "sleep 1000 >/dev/null 2>&1 & echo $! > /tmp/bg")
		if out := h.must("shell", "s1", "kill -0 $(cat /tmp/bg) && echo alive"); !strings.Contains(out, "alive") {
			t.Fatalf("the background process is not there for the next exec: %q", out)
		}
		infos := h.ls("--label", "agent=test")
		if len(infos) != 1 || infos[0].State != "running" || infos[0].Labels["task"] != "42" || infos[0].LastExec.IsZero() {
			t.Fatalf("ls --label agent=test: %+v", infos)
		}
		if got := h.ls("--label", "agent=other"); len(got) != 0 {
			t.Fatalf("ls --label agent=other: %+v", got)
		}
		h.must("stop", "--time", "5s", "s1")
		if st := h.state1("s1"); st != "stopped" {
			t.Fatalf("state after stop: %s", st)
		}
		// Stopped: its processes are gone, its files are not.
		if out := h.must("shell", "s1", "kill -0 $(cat /tmp/bg) 2>/dev/null && echo alive; cat /tmp/count | wc -l; cat /workspace/count | wc -l"); strings.Contains(out, "alive") || strings.Count(out, "100") != 2 {
			t.Fatalf("after stop and the next exec: %q", out)
		}
		if st := h.state1("s1"); st != "running" {
			t.Fatalf("state after the exec that followed a stop: %s", st)
		}
		h.must("stop", "s1")
		h.must("start", "s1")
		if st := h.state1("s1"); st != "running" {
			t.Fatalf("state after start: %s", st)
		}
		if r := h.run("rm", "s1"); r.code != 125 || !strings.Contains(r.stderr, "running") {
			t.Fatalf("rm of a running sandbox without -f: exit %d: %s", r.code, r.stderr)
		}
		h.must("stop", "s1")
		h.must("rm", "s1")
		if got := h.ls(); len(got) != 0 {
			t.Fatalf("ls after rm: %+v", got)
		}
		if r := h.run("exec", "s1", "--", "true"); r.code != 125 || !strings.Contains(r.stderr, "no such sandbox") {
			t.Fatalf("exec after rm: exit %d: %s", r.code, r.stderr)
		}
	})
}

// TestPersistentWritableLayerKept: a sandbox on a root directory keeps
// what its commands write in the root's writable layer, across a stop.
func TestPersistentWritableLayerKept(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		h := newSandboxHost(t, m)
		h.must("create", "--rootfs", rootfsDir, "s1")
		h.must("shell", "s1", "set -e; echo layer > /mark; mkdir -p /opt/x; echo deep > /opt/x/f")
		h.must("stop", "s1")
		if out := h.must("shell", "s1", "cat /mark /opt/x/f"); out != "layer\ndeep\n" {
			t.Fatalf("the writable layer after stop: %q", out)
		}
		if _, err := os.Stat(filepath.Join(rootfsDir, "mark")); err == nil {
			t.Fatal("a write reached the root directory on the host")
		}
	})
}

// TestPersistentExecStatus: exit statuses, stdin, --json, --timeout,
// --env, --workdir and --user are those of jail run.
func TestPersistentExecStatus(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		h := newSandboxHost(t, m)
		h.must("create", "--env", "FROM_CREATE=yes", "s1")
		cases := []struct {
			name   string
			args   []string
			stdin  string
			code   int
			stdout string
		}{
			{"its own status", []string{"shell", "s1", "exit 3"}, "", 3, ""},
			{"a signal is 128+N", []string{"shell", "s1", "kill -TERM $$"}, "", 143, ""},
			{"not found is 127", []string{"exec", "s1", "--", "/nonexistent"}, "", 127, ""},
			{"not executable is 126", []string{"exec", "s1", "--", "/etc/passwd"}, "", 126, ""},
			{"a timeout is 124", []string{"exec", "--timeout", "200ms", "s1", "--", "sleep", "100"}, "", 124, ""},
			{"stdin passes", []string{"exec", "s1", "--", "cat"}, "hello\n", 0, "hello\n"},
			{"the sandbox's env and the exec's", []string{"exec", "--env", "X=1", "s1", "--", "sh", "-c", "echo $FROM_CREATE$X"}, "", 0, "yes1\n"},
			{"workdir", []string{"exec", "--workdir", "/etc", "s1", "--", "pwd"}, "", 0, "/etc\n"},
			{"a bad workdir is 125", []string{"exec", "--workdir", "/nonexistent", "s1", "--", "pwd"}, "", 125, ""},
			{"no command is 125", []string{"exec", "s1"}, "", 125, ""},
			{"a bad name is 125", []string{"exec", "../x", "--", "true"}, "", 125, ""},
			{"a missing sandbox is 125", []string{"exec", "nope", "--", "true"}, "", 125, ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				cmd := h.cmd(c.args...)
				cmd.Stdin = strings.NewReader(c.stdin)
				r := runCmd(t, cmd)
				if r.code != c.code || (c.stdout != "" && r.stdout != c.stdout) {
					t.Fatalf("exit %d (want %d), stdout %q (want %q), stderr %q", r.code, c.code, r.stdout, c.stdout, r.stderr)
				}
				if r.code == 125 && (!strings.HasPrefix(r.stderr, "jail: ") || strings.Count(r.stderr, "\n") != 1) {
					t.Fatalf("not one jail: line: %q", r.stderr)
				}
			})
		}
		var res struct {
			Stdout   string `json:"stdout"`
			ExitCode int    `json:"exit_code"`
			TimedOut bool   `json:"timed_out"`
		}
		out := h.must("exec", "--json", "s1", "--", "echo", "json")
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Stdout != "json\n" || res.ExitCode != 0 {
			t.Fatalf("--json: %v %q", err, out)
		}
		r := h.run("exec", "--json", "--timeout", "100ms", "s1", "--", "sleep", "10")
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 124 || !res.TimedOut || res.ExitCode != 124 {
			t.Fatalf("--json --timeout: exit %d %q", r.code, r.stdout)
		}
		if !m.rootless {
			if out := h.must("exec", "--user", "1000:1000", "s1", "--", "id", "-u"); strings.TrimSpace(out) != "1000" {
				t.Fatalf("--user: %q", out)
			}
		}
	})
}

// TestPersistentConcurrentExecs: execs at once in one sandbox keep their
// own output and status.
func TestPersistentConcurrentExecs(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		h := newSandboxHost(t, m)
		h.must("create", "s1")
		var wg sync.WaitGroup
		errs := make(chan string, 16)
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				r := runCmd(t, h.cmd("shell", "s1", fmt.Sprintf("for j in 1 2 3; do echo %d-$j; sleep 0.01; done; exit %d", i, i%7)))
				want := fmt.Sprintf("%d-1\n%d-2\n%d-3\n", i, i, i)
				if r.stdout != want || r.code != i%7 {
					errs <- fmt.Sprintf("exec %d: exit %d stdout %q stderr %q", i, r.code, r.stdout, r.stderr)
				}
			}(i)
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	})
}

// TestPersistentReuseAndReplace: create --reuse of the same spec returns
// the sandbox; of a changed one replaces it; without --reuse an existing
// name is refused.
func TestPersistentReuseAndReplace(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		h := newSandboxHost(t, m)
		h.must("create", "--memory", "256M", "s1")
		h.must("shell", "s1", "echo kept > /tmp/mark")
		if r := h.run("create", "--memory", "256M", "s1"); r.code != 125 || !strings.Contains(r.stderr, "exists") {
			t.Fatalf("create of an existing name: exit %d: %s", r.code, r.stderr)
		}
		h.must("create", "--reuse", "--memory", "256M", "s1")
		if out := h.must("exec", "s1", "--", "cat", "/tmp/mark"); out != "kept\n" {
			t.Fatalf("reuse of the same spec made a new sandbox: %q", out)
		}
		h.must("create", "--reuse", "--memory", "300M", "s1")
		if r := h.run("exec", "s1", "--", "cat", "/tmp/mark"); r.code == 0 {
			t.Fatalf("a changed spec was served by the old sandbox: %q", r.stdout)
		}
		if n := len(h.ls()); n != 1 {
			t.Fatalf("%d sandboxes after the replacement", n)
		}
	})
}

// TestPersistentTTLAndIdleTimeout: a sandbox with --ttl or --idle-timeout
// is removed by itself, and not before.
func TestPersistentTTLAndIdleTimeout(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		h := newSandboxHost(t, m)
		h.must("create", "--ttl", "1s", "ttl")
		h.must("create", "--idle-timeout", "1s", "idle")
		h.must("create", "keep")
		// A command running keeps an idle timeout from firing.
		h.must("exec", "idle", "--", "sleep", "1.5")
		if st := h.state1("idle"); st != "running" {
			t.Fatalf("idle sandbox right after a command: %s", st)
		}
		waitFor(t, 20*time.Second, "the ttl sandbox removed", func() bool { return h.state1("ttl") == "gone" })
		waitFor(t, 20*time.Second, "the idle sandbox removed", func() bool { return h.state1("idle") == "gone" })
		if st := h.state1("keep"); st != "running" {
			t.Fatalf("a sandbox with neither: %s", st)
		}
		entries, _ := os.ReadDir(filepath.Join(h.state, "sandboxes"))
		if len(entries) != 1 {
			t.Fatalf("state directory after removals: %v", entries)
		}
	})
}

// TestPersistentSurvivesItsCreatorAndKills: a sandbox outlives the CLI
// that made it; a SIGKILLed monitor leaves a dead sandbox that rm
// cleans, and takes no other sandbox with it. (A SIGKILLed jail exec:
// TestPersistentExecKilledMidRunLeavesNothingRunning.)
func TestPersistentSurvivesItsCreatorAndKills(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		h := newSandboxHost(t, m)
		h.must("create", "a")
		h.must("create", "b")
		h.must("shell", "a", "sleep 1000 >/dev/null 2>&1 &")
		if err := syscall.Kill(monitorIn(t, h.state, "a"), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "a shown dead", func() bool { return h.state1("a") == "dead" })
		if r := h.run("exec", "a", "--", "true"); r.code != 125 || !strings.Contains(r.stderr, "dead") {
			t.Fatalf("exec in a dead sandbox: exit %d: %s", r.code, r.stderr)
		}
		if out := h.must("exec", "b", "--", "echo", "b"); out != "b\n" {
			t.Fatalf("the other sandbox: %q", out)
		}
		h.must("rm", "a")
		if st := h.state1("a"); st != "gone" {
			t.Fatalf("after rm of the dead sandbox: %s", st)
		}

	})
}

// TestPersistentSecretsStayHidden: a secret reaches the command's
// environment and nothing else: not ls, logs, the audit log, the state
// directory, the output, or the environ of the init and the monitor.
func TestPersistentSecretsStayHidden(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		h := newSandboxHost(t, m)
		const value = "s3cr3t-v4lue-0123456789"
		cfg := sharedTempDir(t, map[bool]*account{true: rootless}[m.rootless])
		add := h.cmd("secret", "add", "API_TOKEN", "--from-env", "TOKEN_SOURCE")
		add.Env = append(add.Env, "XDG_CONFIG_HOME="+cfg, "TOKEN_SOURCE="+value)
		if r := runCmd(t, add); r.code != 0 {
			t.Fatalf("secret add: %d %s", r.code, r.stderr)
		}
		withConfig := func(args ...string) result {
			cmd := h.cmd(args...)
			cmd.Env = append(cmd.Env, "XDG_CONFIG_HOME="+cfg, "TOKEN_SOURCE="+value)
			return runCmd(t, cmd)
		}
		if r := withConfig("create", "--secret", "API_TOKEN", "--label", "k=v", "s1"); r.code != 0 {
			t.Fatalf("create: %d %s", r.code, r.stderr)
		}
		r := withConfig("exec", "s1", "--", "sh", "-c", `test "$API_TOKEN" = "`+value+`" && echo same; echo "$API_TOKEN"; echo "$API_TOKEN" >&2`)
		if r.code != 0 || !strings.Contains(r.stdout, "same") || strings.Contains(r.stdout+r.stderr, value) || !strings.Contains(r.stdout, "[secret:API_TOKEN]") {
			t.Fatalf("exec: %d %q %q", r.code, r.stdout, r.stderr)
		}
		if r := withConfig("exec", "--secret", "NO_SUCH", "s1", "--", "true"); r.code != 125 || !strings.Contains(r.stderr, "NO_SUCH") {
			t.Fatalf("an unknown secret: %d %s", r.code, r.stderr)
		}
		var seen []string
		check := func(what, text string) {
			if strings.Contains(text, value) {
				seen = append(seen, what)
			}
		}
		check("ls", withConfig("ls", "--json").stdout)
		check("logs", withConfig("logs", "s1").stdout)
		audit, _ := os.ReadFile(h.audit)
		check("audit", string(audit))
		if !strings.Contains(string(audit), `"event":"exec"`) {
			t.Errorf("no exec in the audit log: %s", audit)
		}
		_ = filepath.Walk(h.state, func(path string, info os.FileInfo, err error) error {
			if err == nil && info.Mode().IsRegular() {
				data, _ := os.ReadFile(path)
				check(path, string(data))
			}
			return nil
		})
		monitor := monitorIn(t, h.state, "s1")
		for _, pid := range append([]int{monitor}, childrenOf(monitor)...) {
			env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			check(fmt.Sprintf("environ of %d", pid), string(env))
		}
		if len(seen) > 0 {
			t.Fatalf("the secret's value is in: %v", seen)
		}
	})
}

// childrenOf lists the children of pid.
func childrenOf(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// TestPersistentControlPathFromInside: a command in the sandbox finds no
// way to the control socket, the monitor or the init.
func TestPersistentControlPathFromInside(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		h := newSandboxHost(t, m)
		h.must("create", "s1")
		script := `
ls /proc/self/fd | tr '\n' ' '; echo
find / -xdev -name ctl.sock 2>/dev/null | head -1
find /run /tmp /var/tmp ` + h.state + ` -name ctl.sock 2>/dev/null | head -1
test -e ` + h.state + ` && echo STATE-VISIBLE
kill -9 1 2>/dev/null; kill -KILL -1 2>/dev/null
ls /proc | grep -E '^[0-9]+$' | tr '\n' ' '
`
		r := h.run("shell", "s1", script)
		lines := strings.Split(r.stdout, "\n")
		if len(lines) < 1 || strings.TrimSpace(lines[0]) != "0 1 2 3" {
			t.Errorf("descriptors of a command: %q (want 0 1 2 and ls's own)", lines[0])
		}
		if strings.Contains(r.stdout, "ctl.sock") || strings.Contains(r.stdout, "STATE-VISIBLE") {
			t.Errorf("the control path is visible inside: %q", r.stdout)
		}
		// The kill -1 ended the shell itself; the sandbox serves on.
		if out := h.must("exec", "s1", "--", "echo", "alive"); out != "alive\n" {
			t.Fatalf("after kill -9 1 and kill -1 inside: %q", out)
		}
	})
}

// TestPersistentCLIAndServerShareSandboxes: a sandbox made by the CLI is
// served by jail serve (through curl, a client not written here) and one
// made through the server by the CLI; a server SIGKILLed in the middle of
// an exec takes that exec's command with it and no sandbox, and a new
// server serves them on.
func TestPersistentCLIAndServerShareSandboxes(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		h := newSandboxHost(t, m)
		env := []string{"JAIL_STATE_DIR=" + h.state, "JAIL_AUDIT_LOG=" + h.audit}
		srv := startServeWith(t, m, env)
		curl := func(method, path, body string) string {
			t.Helper()
			args := []string{"-sS", "--max-time", "30", "--unix-socket", srv.socket, "-X", method, "http://jail" + path}
			if body != "" {
				args = append(args, "-H", "Content-Type: application/json", "-d", body)
			}
			out, err := exec.Command("curl", args...).Output()
			if err != nil {
				t.Fatalf("curl %s %s: %v", method, path, err)
			}
			return string(out)
		}
		h.must("create", "--label", "from=cli", "cli")
		if out := curl("POST", "/v1/sandboxes/cli/exec", `{"cmd":"sh","args":["-c","echo via-server > /tmp/f; cat /tmp/f"]}`); !strings.Contains(out, `"stdout":"via-server\n"`) {
			t.Fatalf("exec through the server in the CLI's sandbox: %s", out)
		}
		if out := h.must("exec", "cli", "--", "cat", "/tmp/f"); out != "via-server\n" {
			t.Fatalf("the CLI after the server's exec: %q", out)
		}
		if out := curl("POST", "/v1/sandboxes", `{"name":"api","labels":{"from":"api"}}`); !strings.Contains(out, `"name":"api"`) {
			t.Fatalf("create through the server: %s", out)
		}
		if out := h.must("shell", "api", "echo from-cli"); out != "from-cli\n" {
			t.Fatalf("the CLI in the server's sandbox: %q", out)
		}
		if out := curl("GET", "/v1/sandboxes?label=from=cli", ""); !strings.Contains(out, `"name":"cli"`) || strings.Contains(out, `"name":"api"`) {
			t.Fatalf("the server's list with a label: %s", out)
		}
		if out := curl("GET", "/v1/sandboxes/cli/logs", ""); !strings.Contains(out, "via-server") {
			t.Fatalf("the server's logs of the CLI's sandbox: %q", out)
		}

		// A server killed mid-exec.
		long := exec.Command("curl", "-sS", "--max-time", "30", "--unix-socket", srv.socket, "-d", `{"cmd":"sh","args":["-c","sleep 1000"]}`, "http://jail/v1/sandboxes/cli/exec")
		if err := long.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the long exec running", func() bool {
			return strings.TrimSpace(h.must("shell", "cli", "ps -eo args | grep -c '^sleep 1000' || true")) == "1"
		})
		_ = srv.cmd.Process.Kill()
		_ = srv.cmd.Wait()
		_ = long.Wait()
		waitFor(t, 10*time.Second, "the killed server's exec gone", func() bool {
			return strings.TrimSpace(h.must("shell", "cli", "ps -eo args | grep -c '^sleep 1000' || true")) == "0"
		})
		for _, name := range []string{"cli", "api"} {
			if st := h.state1(name); st != "running" {
				t.Fatalf("%s after the server's SIGKILL: %s", name, st)
			}
		}
		srv2 := startServeWith(t, m, env)
		res, err := srv2.client.Exec(context.Background(), "api", api.ExecRequest{Cmd: "echo", Args: []string{"again"}})
		if err != nil || res.Stdout != "again\n" {
			t.Fatalf("a new server's exec: %v %+v", err, res)
		}
	})
}

// TestPersistentCreateKilledMidway: a jail create SIGKILLed at any moment
// leaves a sandbox that runs (its holder got far enough), a dead one that
// ls shows and rm removes (the creator died before its holder started), or
// nothing; never a process, mount or cgroup that nothing accounts for.
func TestPersistentCreateKilledMidway(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		h := newSandboxHost(t, m)
		for i := 0; i < 12; i++ {
			cmd := h.cmd("create", fmt.Sprintf("k%d", i))
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(i) * 2 * time.Millisecond)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		// Holders whose creator died finish or give up by themselves.
		time.Sleep(2 * time.Second)
		for _, info := range h.ls() {
			switch info.State {
			case "running":
				if out := h.must("exec", info.Name, "--", "echo", "ok"); out != "ok\n" {
					t.Errorf("%s: %q", info.Name, out)
				}
			case "dead":
			default:
				t.Errorf("%s: %s", info.Name, info.State)
			}
			h.must("rm", "-f", info.Name)
		}
		if left := h.ls(); len(left) != 0 {
			t.Fatalf("after rm -f of all: %+v", left)
		}
		entries, _ := os.ReadDir(filepath.Join(h.state, "sandboxes"))
		if len(entries) != 0 {
			t.Fatalf("the state directory keeps %v", entries)
		}
	})
}

// TestPersistentExecOOM: an exec whose command the OOM killer takes ends as
// jail run's would (137, oom_killed, the line), and the sandbox serves on.
func TestPersistentExecOOM(t *testing.T) {
	withCgroups(t, func(t *testing.T, m mode) {
		h := newSandboxHost(t, m)
		h.must("create", "--memory", "64M", "s1")
		r := h.run("exec", "--json", "s1", "--", "sh", "-c", memoryHog)
		var res map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 137 || res["oom_killed"] != true {
			t.Fatalf("exit %d, result %s: want 137 and oom_killed", r.code, r.stdout)
		}
		if !strings.Contains(r.stderr, "jail: killed: out of memory") {
			t.Errorf("stderr %q lacks the OOM line", r.stderr)
		}
		r = h.run("exec", "--json", "s1", "--", "sh", "-c", "kill -KILL $$")
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 137 || res["oom_killed"] != false {
			t.Errorf("a self-kill: exit %d, result %s", r.code, r.stdout)
		}
		if out := h.must("exec", "s1", "--", "echo", "alive"); out != "alive\n" || h.state1("s1") != "running" {
			t.Fatalf("after the OOM kill: %q %s", out, h.state1("s1"))
		}
	})
}
