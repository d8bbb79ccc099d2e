package jail_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jail-sandbox/jail"
)

// The test binary is the init of the sandboxes it starts, as any embedding
// program is.
func TestMain(m *testing.M) {
	jail.Init()
	// Every test's temporary directory (a persistent sandbox's state
	// directory among them) is under one of this run's own, so that what
	// is left can be told from other packages' tests running meanwhile.
	tmp, err := os.MkdirTemp("", "jail-roottest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("TMPDIR", tmp)
	code := m.Run()
	if left := leftovers(tmp, 5*time.Second); left != "" {
		fmt.Fprintf(os.Stderr, "leak after the tests: %s\n", left)
		code = 1
	}
	os.RemoveAll(tmp)
	os.Exit(code)
}

// leftovers says what the tests left (once within wait nothing is, ""):
// processes (a persistent sandbox's monitor, its init) holding a file or
// working directory under tmp, entries under tmp, and cgroups this process
// made (jail names them after its pid).
func leftovers(tmp string, wait time.Duration) string {
	deadline := time.Now().Add(wait)
	for {
		var left []string
		procs, _ := os.ReadDir("/proc")
		for _, p := range procs {
			if pid, err := strconv.Atoi(p.Name()); err != nil || pid == os.Getpid() {
				continue
			}
			links := []string{"/proc/" + p.Name() + "/cwd"}
			fds, _ := os.ReadDir("/proc/" + p.Name() + "/fd")
			for _, fd := range fds {
				links = append(links, "/proc/"+p.Name()+"/fd/"+fd.Name())
			}
			for _, l := range links {
				if to, err := os.Readlink(l); err == nil && (to == tmp || strings.HasPrefix(to, tmp+"/")) {
					comm, _ := os.ReadFile("/proc/" + p.Name() + "/cmdline")
					left = append(left, fmt.Sprintf("process %s %q holds %s", p.Name(), strings.ReplaceAll(string(comm), "\x00", " "), to))
					break
				}
			}
		}
		if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
			left = append(left, fmt.Sprintf("%d entries in %s (%s first)", len(entries), tmp, entries[0].Name()))
		}
		ours, _ := filepath.Glob(fmt.Sprintf("/sys/fs/cgroup/*/jail/%d-*", os.Getpid()))
		more, _ := filepath.Glob(fmt.Sprintf("/sys/fs/cgroup/jail/%d-*", os.Getpid()))
		for _, cg := range append(ours, more...) {
			left = append(left, "cgroup "+cg)
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return strings.Join(left, "; ")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRunStreamsAndCaptures(t *testing.T) {
	var out bytes.Buffer
	res, err := jail.Run(context.Background(), jail.Spec{
		Command: []string{"sh", "-c", "echo hello; echo oops >&2; exit 3"},
		Stdout:  &out,
		Capture: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "hello\n" || res.Stdout != "hello\n" || res.Stderr != "oops\n" || res.ExitCode != 3 {
		t.Errorf("streamed %q, result %+v", out.String(), res)
	}
	if res.WallMS < 0 || res.PeakMemoryBytes <= 0 {
		t.Errorf("usage not reported: %+v", res)
	}
}

func TestRunErrorsAreTyped(t *testing.T) {
	_, err := jail.Run(context.Background(), jail.Spec{Command: []string{"true"}, Profile: "no-such"})
	var setup *jail.SetupError
	if !errors.As(err, &setup) || jail.ExitCode(err) != jail.ExitSetup {
		t.Errorf("unknown profile: %T %v; want a *SetupError", err, err)
	}
	res, err := jail.Run(context.Background(), jail.Spec{Command: []string{"no-such-command-jail"}})
	var ex *jail.ExecError
	if !errors.As(err, &ex) || ex.Code != jail.ExitNotFound || res.ExitCode != jail.ExitNotFound {
		t.Errorf("missing command: %T %v %+v; want an *ExecError with 127", err, err, res)
	}
	// The command's own failure is not an error.
	res, err = jail.Run(context.Background(), jail.Spec{Command: []string{"false"}})
	if err != nil || res.ExitCode != 1 {
		t.Errorf("false: %v %+v", err, res)
	}
}

func TestRunTimeoutAndCancel(t *testing.T) {
	res, err := jail.Run(context.Background(), jail.Spec{Command: []string{"sleep", "100"}, Timeout: 200 * time.Millisecond})
	if err != nil || !res.TimedOut || res.ExitCode != jail.ExitTimeout {
		t.Errorf("timeout: %v %+v", err, res)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err = jail.Run(ctx, jail.Spec{Command: []string{"sleep", "100"}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancel: %v", err)
	}
}

// TestRunSignalsWaitForTheCommand: a signal sent before Run reaches the
// command once it runs. Whether it was held for the command's pidfd depends
// on timing here; TestCommandHandleKeepsEarlySignals checks the holding.
func TestRunSignalsWaitForTheCommand(t *testing.T) {
	signals := make(chan os.Signal, 1)
	signals <- syscall.SIGTERM
	res, err := jail.Run(context.Background(), jail.Spec{
		Command: []string{"sleep", "30"},
		Signals: signals,
		Timeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.TimedOut || res.Signal != int(syscall.SIGTERM) || res.ExitCode != 143 {
		t.Errorf("result %+v; want the command ended by SIGTERM (143)", res)
	}
}

func TestRunStdin(t *testing.T) {
	res, err := jail.Run(context.Background(), jail.Spec{
		Command: []string{"tr", "a-z", "A-Z"},
		Stdin:   strings.NewReader("shout\n"),
		Capture: true,
	})
	if err != nil || res.Stdout != "SHOUT\n" {
		t.Errorf("%v %+v", err, res)
	}
}

// TestRunLeavesNoDescriptors: a program that embeds jail keeps no
// descriptor of a sandbox once Run has returned (its cgroup included, which
// the janitor removes after the answer).
func TestRunLeavesNoDescriptors(t *testing.T) {
	run := func() {
		if _, err := jail.Run(context.Background(), jail.Spec{Command: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	run() // the runtime's own descriptors (its poller) are open from here on
	before := openDescriptors(t)
	for i := 0; i < 5; i++ {
		run()
	}
	waitForDescriptors(t, before)
}

// waitForDescriptors fails the test unless, within a few seconds, this
// process has no more descriptors open than before: a supervisor's last
// steps (reaping the init) finish in the background.
func waitForDescriptors(t *testing.T, before []string) {
	t.Helper()
	var now []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if now = openDescriptors(t); len(now) <= len(before) {
			return
		}
	}
	t.Errorf("descriptors before: %v; after: %v", before, now)
}

// openDescriptors lists this process's open descriptors, with what each is.
func openDescriptors(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out = append(out, e.Name()+" "+target)
	}
	return out
}
