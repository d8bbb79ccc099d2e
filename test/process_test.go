package test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestExitStatus(t *testing.T) {
	cases := []struct {
		name       string
		args       []string
		code       int
		stderrHint string
	}{
		{"the command's own status", []string{"run", "--", "sh", "-c", "exit 3"}, 3, ""},
		{"success", []string{"run", "--", "true"}, 0, ""},
		{"killed by a signal is 128+N", []string{"run", "--", "sh", "-c", "kill -KILL $$"}, 137, ""},
		{"terminated by SIGTERM", []string{"run", "--", "sh", "-c", "kill -TERM $$"}, 143, ""},
		{"command not found", []string{"run", "--", "no-such-command-jail"}, 127, "jail: exec no-such-command-jail: command not found"},
		{"missing path", []string{"run", "--", "/no/such/file"}, 127, "jail: exec /no/such/file"},
		{"not executable", []string{"run", "--", "/etc/passwd"}, 126, "jail: exec /etc/passwd: permission denied"},
		{"a directory", []string{"run", "--", "/usr"}, 126, "permission denied"},
		{"timeout kills the sandbox", []string{"run", "--timeout", "300ms", "--", "sh", "-c", "setsid sleep 1000 & sleep 1000"}, 124, "jail: killed: timeout"},
		{"jail's own failure", []string{"run", "--no-such-flag", "--", "true"}, 125, "jail: "},
	}
	forEachMode(t, func(t *testing.T, m mode) {
		for _, c := range cases {
			r := jail(t, m, c.args...)
			if r.code != c.code {
				t.Errorf("%s: exit %d, want %d (stderr %q)", c.name, r.code, c.code, r.stderr)
			}
			if c.stderrHint != "" && !strings.Contains(r.stderr, c.stderrHint) {
				t.Errorf("%s: stderr %q lacks %q", c.name, r.stderr, c.stderrHint)
			}
		}
	})
}

func TestStdinIsPassedThrough(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		cmd := command(m, "run", "--", "sh", "-c", "cat; echo; wc -c")
		cmd.Stdin = strings.NewReader("hello from stdin\nsecond line\n")
		r := runCmd(t, cmd)
		if !strings.HasPrefix(r.stdout, "hello from stdin\nsecond line\n") {
			t.Errorf("stdout %q", r.stdout)
		}

		f, err := os.Open("/etc/hostname")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		want, _ := os.ReadFile("/etc/hostname")
		cmd = command(m, "run", "--", "cat")
		cmd.Stdin = f
		if r := runCmd(t, cmd); r.stdout != string(want) {
			t.Errorf("stdin from a file: got %q, want %q", r.stdout, want)
		}
	})
}

// TestOutputStreamsBeforeExit: the sandbox prints a line and then waits for
// its stdin to close. If jail buffered output until the command exited, the
// line would never arrive and the test would hang (bounded, not timed).
func TestOutputStreamsBeforeExit(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		cmd := command(m, "run", "--", "sh", "-c", "echo first; echo err-first >&2; read line; echo after-$line")
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		defer cmd.Process.Kill()
		out := bufio.NewReader(stdout)
		if line := readLineWithin(t, out, 30*time.Second); line != "first" {
			t.Fatalf("first stdout line %q", line)
		}
		errs := bufio.NewReader(stderr)
		line := readLineWithin(t, errs, 30*time.Second)
		for strings.HasPrefix(line, "jail: notice:") {
			line = readLineWithin(t, errs, 30*time.Second)
		}
		if line != "err-first" {
			t.Fatalf("first stderr line %q", line)
		}
		io.WriteString(stdin, "go\n")
		stdin.Close()
		if line := readLineWithin(t, out, 30*time.Second); line != "after-go" {
			t.Fatalf("second line %q", line)
		}
	})
}

func TestSignalsReachTheCommand(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			forEachMode(t, func(t *testing.T, m mode) {
				script := `trap 'echo got-signal; exit 7' INT TERM HUP; echo ready; while :; do sleep 0.05; done`
				cmd := command(m, "run", "--", "sh", "-c", script)
				stdout, _ := cmd.StdoutPipe()
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				out := bufio.NewReader(stdout)
				if line := readLineWithin(t, out, 30*time.Second); line != "ready" {
					cmd.Process.Kill()
					t.Fatalf("got %q before the signal", line)
				}
				// setpriv execs jail, so the pid is jail's in both modes.
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				line := readLineWithin(t, out, 30*time.Second)
				cmd.Wait()
				if line != "got-signal" || cmd.ProcessState.ExitCode() != 7 {
					t.Errorf("after %v: output %q, exit %d; want got-signal, 7", sig, line, cmd.ProcessState.ExitCode())
				}
			})
		})
	}
}

// TestSignalsToTheInitAreDropped: the init handles no signal, so the kernel
// drops what is sent to it as a pid namespace's init (only SIGKILL from
// outside ends it), and the sandbox runs on. Signals reach the command from
// jail (TestSignalsReachTheCommand).
func TestSignalsToTheInitAreDropped(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sleeper, initPid := startSleeperAndInit(t, m, "8.25")
		caught, err := strconv.ParseUint(statusOf(t, initPid, "SigCgt"), 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		signals := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}
		for _, sig := range signals {
			if caught&(1<<(sig-1)) != 0 {
				t.Errorf("the init catches %v", sig)
			}
			if err := syscall.Kill(initPid, sig); err != nil {
				t.Fatalf("kill %v: %v", sig, err)
			}
		}
		time.Sleep(200 * time.Millisecond)
		for _, pid := range []int{initPid, sleeper} {
			if err := syscall.Kill(pid, 0); err != nil {
				t.Errorf("process %d is gone after the init was signalled: %v", pid, err)
			}
		}
	})
}

func TestJSONResult(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		r := jail(t, m, "run", "--json", "--", "sh", "-c", `echo out; echo err >&2; printf 'bad\377byte'; exit 4`)
		if r.code != 4 {
			t.Fatalf("exit %d, want 4 (stderr %s)", r.code, r.stderr)
		}
		var res map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("stdout is not one JSON object: %v\n%s", err, r.stdout)
		}
		for _, key := range []string{"stdout", "stderr", "exit_code", "signal", "timed_out", "oom_killed", "truncated", "wall_ms", "cpu_ms", "peak_memory_bytes"} {
			if _, ok := res[key]; !ok {
				t.Errorf("result lacks %q", key)
			}
		}
		if res["stdout"] != "out\nbad\uFFFDbyte" || res["stderr"] != "err\n" || res["exit_code"] != 4.0 || res["truncated"] != false {
			t.Errorf("result %v", res)
		}

		r = jail(t, m, "run", "--json", "--output-limit", "4", "--", "sh", "-c", "echo 0123456789; kill -TERM $$")
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatal(err)
		}
		if res["stdout"] != "0123" || res["truncated"] != true || res["exit_code"] != 143.0 || res["signal"] != 15.0 {
			t.Errorf("truncated/signalled result %v", res)
		}

		r = jail(t, m, "run", "--json", "--timeout", "200ms", "--", "sleep", "100")
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatal(err)
		}
		if r.code != 124 || res["timed_out"] != true || res["exit_code"] != 124.0 {
			t.Errorf("timeout: exit %d, result %v", r.code, res)
		}
	})
}

func TestSIGKILLedJailLeavesNothing(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		cmd := command(m, "run", "--", "sh", "-c", "setsid sleep 1000 & echo ready; sleep 1000")
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if line := readLineWithin(t, bufio.NewReader(stdout), 30*time.Second); line != "ready" {
			t.Fatalf("got %q", line)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		// checkNoLeaks (registered by forEachMode) polls until the init,
		// the shell and both sleeps are gone.
	})
}

// TestOrphanCgroupIsSwept: a sandbox cgroup that no janitor removes (left
// where a supervisor could start none, or its janitor was killed itself;
// made here as an empty, old directory) is removed by the janitor of a
// later run.
func TestOrphanCgroupIsSwept(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: sandbox cgroups of ordinary users are theirs")
	}
	checkNoLeaks(t)
	mustRun(t, asRoot, "run", "--", "true") // jail's parents exist from here on
	// Root's parents: one per v1 hierarchy, or the v2 one below.
	parents, _ := filepath.Glob("/sys/fs/cgroup/*/jail")
	parents = slices.DeleteFunc(parents, func(p string) bool { return strings.Contains(p, "jail-test-") })
	if _, err := os.Stat("/sys/fs/cgroup/jail"); err == nil {
		parents = append(parents, "/sys/fs/cgroup/jail")
	}
	if len(parents) == 0 {
		t.Skip("jail made no cgroups on this host")
	}
	old := time.Now().Add(-2 * time.Minute)
	var orphans []string
	for _, p := range parents {
		dir := filepath.Join(p, fmt.Sprintf("1-orphan%d", os.Getpid()))
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(dir) })
		if err := os.Chtimes(dir, old, old); err != nil {
			t.Fatal(err)
		}
		orphans = append(orphans, dir)
	}
	// Not swept for two minutes: a janitor sweeps at most once a minute.
	for _, p := range parents {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, asRoot, "run", "--", "true")
	// The janitor sweeps after jail has answered.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var left []string
		for _, d := range orphans {
			if _, err := os.Stat(d); err == nil {
				left = append(left, d)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan cgroups still there: %v", left)
		}
	}
}

func TestManyRunsLeaveTheHostAsItWas(t *testing.T) {
	runs := 200
	if os.Getenv("JAIL_TEST_EMULATED") != "" {
		// Under the VM's software emulation a run takes up to a second
		// and this loop was a third of the suite's time there; a run that
		// leaves anything behind shows after the first.
		runs = 50
	}
	forEachMode(t, func(t *testing.T, m mode) {
		for i := 0; i < runs; i++ {
			if r := jail(t, m, "run", "--", "true"); r.code != 0 {
				t.Fatalf("run %d: exit %d: %s", i, r.code, r.stderr)
			}
		}
	})
}

// readLineWithin reads one line or fails the test after d (a guard against
// a hang, not a timing assertion).
func readLineWithin(t *testing.T, r *bufio.Reader, d time.Duration) string {
	t.Helper()
	type line struct {
		s   string
		err error
	}
	ch := make(chan line, 1)
	go func() {
		s, err := r.ReadString('\n')
		ch <- line{strings.TrimRight(s, "\r\n"), err}
	}()
	select {
	case l := <-ch:
		if l.err != nil && l.s == "" {
			t.Fatalf("read: %v", l.err)
		}
		return l.s
	case <-time.After(d):
		t.Fatalf("no line within %s", d)
		return ""
	}
}

// TestLeftoverProcessesEndBeforeJailAnswers: processes the command left
// running, even in a session of their own, are killed and reaped before
// jail reports the exit status, so none of them is alive once jail has
// exited (only the init may still be finishing its own exit).
func TestLeftoverProcessesEndBeforeJailAnswers(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		r := jail(t, m, "run", "--", "sh", "-c", "setsid sleep 1000 & sleep 1000 & echo started")
		if r.code != 0 || strings.TrimSpace(r.stdout) != "started" {
			t.Fatalf("exit %d: %q %q", r.code, r.stdout, r.stderr)
		}
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if p := sandboxProcess(pid); p != "" && !strings.Contains(p, "jail:") && strings.Contains(p, "sleep") {
				t.Errorf("still running after jail exited: %s", p)
			}
		}
	})
}
