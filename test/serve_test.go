package test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jail-sandbox/jail/api"
	"github.com/jail-sandbox/jail/client"
)

// server is a `jail serve` started by a test.
type server struct {
	cmd    *exec.Cmd
	socket string
	client *client.Client
}

// startServe starts `jail serve` in mode m with extra flags, waits until it
// answers, and stops it (SIGTERM) when the test ends.
func startServe(t *testing.T, m mode, flags ...string) *server {
	t.Helper()
	return startServeWith(t, m, nil, flags...)
}

// startServeWith is startServe with extra environment variables.
func startServeWith(t *testing.T, m mode, env []string, flags ...string) *server {
	t.Helper()
	return startServeAt(t, m, filepath.Join(sharedTempDir(t, ownerOf(m)), "jail.sock"), env, flags...)
}

// startServeAt is startServeWith on the socket at path.
func startServeAt(t *testing.T, m mode, socket string, env []string, flags ...string) *server {
	t.Helper()
	cmd := command(m, append([]string{"serve", "--socket", socket}, flags...)...)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, socket: socket, client: clientOf(m, socket)}
	t.Cleanup(func() {
		s.client.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := s.client.Health(ctx)
		cancel()
		if err == nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("jail serve does not answer: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ownerOf is the account that runs jail in mode m (nil: the test's own).
func ownerOf(m mode) *account {
	if m.rootless {
		return rootless
	}
	return nil
}

// clientOf is a client of the server that runs in mode m: the test runs as
// root and talks to the rootless user's server too, which it trusts.
func clientOf(m mode, socket string) *client.Client {
	if m.rootless {
		return client.New(socket, client.ServerUser(rootless.uid))
	}
	return client.New(socket)
}

// stop sends the server SIGTERM and waits until it is gone, failing the
// test unless it exits 0 within a minute (its grace period is 10 s; a hang
// guard, not a timing check).
func (s *server) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("jail serve after SIGTERM: %v", err)
		}
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Kill()
		<-done
		t.Fatal("jail serve did not stop within a minute of SIGTERM")
	}
}

// waitReady waits until the server has n sandboxes ready (a guard against a
// hang, not a timing assertion).
func (s *server) waitReady(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h, err := s.client.Health(context.Background())
		if err == nil && h.Ready >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d sandboxes ready: %+v %v", n, h, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestServeRunsIsolatedSandboxes: a run through the API, from a ready
// sandbox or a cold one, is isolated as `jail run` is, and no run sees what
// another left.
func TestServeRunsIsolatedSandboxes(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := startServe(t, m, "--pool", "2")
		script := `set -e
test ! -e /tmp/mark; touch /tmp/mark
echo "pids $(ls /proc | grep -c '^[0-9]')"
echo "ifaces $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')"
echo "host $(hostname) uid $(id -u) v=$V"
if touch /etc/jail-serve-probe 2>/dev/null || touch /usr/jail-serve-probe 2>/dev/null; then echo wrote; fi
cat`
		for i := 0; i < 6; i++ {
			if i < 2 {
				s.waitReady(t, 2-i)
			}
			res, err := s.client.Run(context.Background(), api.RunRequest{
				Cmd: "sh", Args: []string{"-c", script}, Env: map[string]string{"V": "x"},
				Stdin: "input\n", TimeoutS: 30,
			})
			if err != nil {
				t.Fatalf("run %d: %v", i, err)
			}
			if res.ExitCode != 0 {
				t.Fatalf("run %d: exit %d: %s", i, res.ExitCode, res.Stderr)
			}
			lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
			pids, _ := strconv.Atoi(strings.TrimPrefix(lines[0], "pids "))
			if len(lines) != 4 || pids < 2 || pids > 8 || lines[1] != "ifaces lo " || lines[2] != "host jail uid 0 v=x" || lines[3] != "input" {
				t.Errorf("run %d: %q", i, res.Stdout)
			}
		}
		for _, p := range []string{"/etc/jail-serve-probe", "/usr/jail-serve-probe"} {
			if _, err := os.Stat(p); err == nil {
				os.Remove(p)
				t.Errorf("a sandbox wrote %s on the host", p)
			}
		}
	})
}

// TestServeAnswersAsTheCLIExits: exit codes, timeouts and commands that
// cannot run come back as `jail run --json` reports them; bad requests are
// refused with a 4xx and a JSON error, and change nothing.
func TestServeAnswersAsTheCLIExits(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := startServe(t, m, "--pool", "1")
		ctx := context.Background()
		run := func(req api.RunRequest) api.Result {
			t.Helper()
			res, err := s.client.Run(ctx, req)
			if err != nil {
				t.Fatalf("%+v: %v", req, err)
			}
			return res
		}
		if res := run(api.RunRequest{Cmd: "sh", Args: []string{"-c", "kill -TERM $$"}}); res.ExitCode != 143 || res.Signal != 15 {
			t.Errorf("signal: %+v", res)
		}
		if res := run(api.RunRequest{Cmd: "sleep", Args: []string{"100"}, TimeoutS: 0.3}); res.ExitCode != 124 || !res.TimedOut {
			t.Errorf("timeout: %+v", res)
		}
		if res := run(api.RunRequest{Cmd: "no-such-command-jail"}); res.ExitCode != 127 || !strings.HasPrefix(res.Error, "jail: ") {
			t.Errorf("missing command: %+v", res)
		}
		if res := run(api.RunRequest{Cmd: "hostname", Hostname: "other", Memory: "64M", ReadOnly: true}); res.ExitCode != 0 || res.Stdout != "other\n" {
			t.Errorf("options: %+v", res)
		}
		for _, bad := range []api.RunRequest{
			{},
			{Cmd: "true", Profile: "no-such-profile"},
			{Cmd: "true", Image: "no-such-image:1", Pull: api.PullNever},
			{Cmd: "true", Workspace: "relative/dir"},
			{Cmd: "true", Workspace: "/no/such/workspace"},
			{Cmd: "true", Mounts: []string{"/etc/shadow:/x"}},
			{Cmd: "true", Memory: "lots"},
			{Cmd: "true", Hostname: strings.Repeat("h", 100)},
		} {
			_, err := s.client.Run(ctx, bad)
			var e *client.Error
			if !errors.As(err, &e) || e.Status != 400 || !strings.HasPrefix(e.Message, "jail: ") || strings.Contains(e.Message, "\n") {
				t.Errorf("%+v: %v; want a one-line 400", bad, err)
			}
		}
		for _, c := range []struct {
			method, path, body string
			status             int
		}{
			{"POST", "/v1/run", `{"cmd": "true", "unknown": 1}`, 400},
			{"POST", "/v1/run", `{"cmd": `, 400},
			{"GET", "/v1/run", ``, 405},
			{"GET", "/v1/nothing", ``, 404},
			{"GET", "/v1/sandboxes/..%2Frun", ``, 400},
			{"POST", "/v1/sandboxes/x/exec", `{"cmd": "true", "image": "x"}`, 400},
			{"GET", "/v1/sandboxes/x/exec", ``, 405},
		} {
			status, body := rawRequest(t, s.socket, c.method, c.path, c.body)
			if status != c.status || !strings.HasPrefix(body, `{"error":`) {
				t.Errorf("%s %s %s: %d %q, want %d", c.method, c.path, c.body, status, body, c.status)
			}
		}
	})
}

// rawRequest sends one request by hand, as any HTTP client could.
func rawRequest(t *testing.T, socket, method, path, body string) (int, string) {
	t.Helper()
	args := []string{"-s", "--unix-socket", socket, "-X", method, "-w", "\n%{http_code}"}
	if body != "" {
		args = append(args, "--data-binary", body)
	}
	out, err := exec.Command("curl", append(args, "http://jail"+path)...).Output()
	if err != nil {
		t.Fatalf("curl: %v", err)
	}
	text := strings.TrimSpace(string(out))
	i := strings.LastIndex(text, "\n")
	status, _ := strconv.Atoi(text[i+1:])
	return status, strings.TrimSpace(text[:max(i, 0)])
}

// TestServeStreamsOutput: with ?stream=1, output arrives while the command
// still runs, and the result ends the answer.
func TestServeStreamsOutput(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := startServe(t, m, "--pool", "1")
		r, w := io.Pipe()
		done := make(chan api.Result, 1)
		go func() {
			res, err := s.client.Stream(context.Background(), api.RunRequest{
				Cmd: "sh", Args: []string{"-c", "echo first; sleep 1; echo late >&2; exit 4"},
			}, w, io.Discard)
			if err != nil {
				t.Errorf("stream: %v", err)
			}
			w.Close()
			done <- res
		}()
		if line := readLineWithin(t, bufio.NewReader(r), 30*time.Second); line != "first" {
			t.Errorf("first line %q", line)
		}
		select {
		case res := <-done:
			t.Errorf("the result came with the first line: %+v", res)
		default:
		}
		go io.Copy(io.Discard, r)
		if res := <-done; res.ExitCode != 4 {
			t.Errorf("result %+v", res)
		}
	})
}

// TestServeShowsTheCommandTyped: once serving (from its own program), the
// server's command line is the `jail serve` command that started it, so ps
// shows it and pkill -f finds it, and its name says what it is.
func TestServeShowsTheCommandTyped(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := startServe(t, m, "--pool", "1")
		pid := s.cmd.Process.Pid // setpriv execs jail, which execs the server
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Join([]string{"jail", "serve", "--socket", s.socket, "--pool", "1"}, "\x00") + "\x00"
		if string(cmdline) != want {
			t.Errorf("command line %q, want %q", cmdline, want)
		}
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "jail-server" {
			t.Errorf("process name %q (%v), want jail-server", comm, err)
		}
	})
}

// TestServeSocketIsPrivate: the socket is the owner's alone.
func TestServeSocketIsPrivate(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to try another user")
	}
	checkNoLeaks(t)
	s := startServe(t, asRoot, "--pool", "0")
	st, err := os.Stat(s.socket)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || st.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket mode %v, want 0600", st.Mode())
	}
	connect := exec.Command("setpriv", "--reuid", strconv.Itoa(rootless.uid), "--regid", strconv.Itoa(rootless.gid), "--clear-groups", "--",
		"/usr/bin/python3", "-c", "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])", s.socket)
	if out, err := connect.CombinedOutput(); err == nil || !strings.Contains(string(out), "PermissionError") {
		t.Errorf("another user connected: %v %s", err, out)
	}
	// A second server on the same socket is refused; the first goes on.
	second := command(asRoot, "serve", "--socket", s.socket)
	if out, err := second.CombinedOutput(); err == nil || !strings.HasPrefix(string(out), "jail: ") {
		t.Errorf("second server: %v %s", err, out)
	}
	if _, err := s.client.Health(context.Background()); err != nil {
		t.Errorf("first server: %v", err)
	}
}

// TestSIGKILLedServeLeavesNothing: killing the server outright ends its
// ready sandboxes and the runs in progress, and removes their cgroups,
// those its pools keep for reuse (after the runs before) included.
func TestSIGKILLedServeLeavesNothing(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := startServe(t, m, "--pool", "2")
		s.waitReady(t, 2)
		for i := 0; i < 3; i++ {
			if res, err := s.client.Run(context.Background(), api.RunRequest{Cmd: "true"}); err != nil || res.ExitCode != 0 {
				t.Fatalf("run %d: %v %+v", i, err, res)
			}
		}
		r, w := io.Pipe()
		go func() {
			_, _ = s.client.Stream(context.Background(), api.RunRequest{
				Cmd: "sh", Args: []string{"-c", "setsid sleep 1000 & echo ready; sleep 1000"},
			}, w, io.Discard)
			w.Close()
		}()
		if line := readLineWithin(t, bufio.NewReader(r), 30*time.Second); line != "ready" {
			t.Fatalf("got %q", line)
		}
		go io.Copy(io.Discard, r)
		if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = s.cmd.Wait()
		// checkNoLeaks (registered by forEachMode) polls until the ready
		// sandboxes, the running one and their cgroups are gone.
	})
}

// TestServeRefusesBadFlags: bad flags, and no place for the socket, are one
// `jail: ` line and exit status 125, and leave no socket behind.
func TestServeRefusesBadFlags(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		dir := sharedTempDir(t, nil)
		cases := [][]string{
			{"serve", "--pool", "-1", "--socket", filepath.Join(dir, "a.sock")},
			{"serve", "--max-runs", "-2", "--socket", filepath.Join(dir, "b.sock")},
			{"serve", "--socket", filepath.Join(dir, "c.sock"), "extra"},
			{"serve", "--bogus"},
		}
		if m.rootless {
			// Without XDG_RUNTIME_DIR there is no default socket.
			cases = append(cases, []string{"serve"})
		}
		for _, args := range cases {
			r := jail(t, m, args...)
			if r.code != 125 || !strings.HasPrefix(r.stderr, "jail: ") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
			}
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
}
