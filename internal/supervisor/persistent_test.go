package supervisor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jail-sandbox/jail/cgroups"
	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/control"

	"github.com/jail-sandbox/jail/internal/asuser"
)

// rootlessUser is the unprivileged account the rootless runs use, as in
// the integration suite.
const rootlessUser = "jail-test"

// rootlessChild marks a run of this test binary as rootlessUser, started
// by a root run of the same test.
const rootlessChild = "JAIL_TEST_PERSISTENT_ROOTLESS"

// TestPersistentSandboxRunsCommandsInOneSandbox boots one persistent
// sandbox and runs commands in it one after another and at once: what one
// writes in /tmp the next reads, a process one leaves running the next
// sees, and each gets its own stdio and its own exit status (a code, a
// signal, 127 for a missing program, a kill when its context ends). As
// root it runs again, with TestPersistentInitRefusesMalformedRequests, as
// an unprivileged user.
func TestPersistentSandboxRunsCommandsInOneSandbox(t *testing.T) {
	t.Run("as the caller", testPersistentSandbox)
	if os.Getuid() != 0 || os.Getenv(rootlessChild) != "" {
		return
	}
	t.Run("rootless", func(t *testing.T) {
		out, err := asuser.Rerun(t, []string{"-test.run", "^TestPersistent", "-test.v", "-test.count=1"}, rootlessChild+"=1")
		if err != nil || !strings.Contains(string(out), "--- PASS: TestPersistentSandboxRunsCommandsInOneSandbox/as_the_caller") ||
			!strings.Contains(string(out), "--- PASS: TestPersistentInitRefusesMalformedRequests") {
			t.Fatalf("as %s: %v\n%s", asuser.Account, err, out)
		}
	})
}

// persistentPlan is testPlan's plan, or, where the caller has no cgroup
// (rootless on cgroup v1), the same bounded by rlimits as jail bounds it
// then.
func persistentPlan(t *testing.T) *Plan {
	t.Helper()
	if layout, _ := cgroups.Detect(); layout.Version != cgroups.None {
		return testPlan(t, testSandbox{})
	}
	p, err := planOf(testSandbox{})
	if err != nil {
		t.Fatal(err)
	}
	l := &p.Config.Limits
	l.RlimitData, l.RlimitNproc, l.RlimitStack = p.Limits.Memory, p.Limits.Pids, p.Limits.Memory
	return p
}

func testPersistentSandbox(t *testing.T) {
	plan := persistentPlan(t)
	proc := plan.Config.Process
	ps, err := BootPersistent(testJob(), plan, &Timings{Start: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()

	type result struct {
		code, signal   int
		err            error
		stdout, stderr string
	}
	run := func(ctx context.Context, stdin string, asUser bool, args ...string) result {
		p := proc
		p.Args = args
		if asUser {
			p.SwitchUser, p.UID, p.GID = true, 65534, 65534
		}
		in, inW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		errR, errW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var stdout, stderr bytes.Buffer
		wg.Add(3)
		go func() { defer wg.Done(); _, _ = io.Copy(&stdout, outR); outR.Close() }()
		go func() { defer wg.Done(); _, _ = io.Copy(&stderr, errR); errR.Close() }()
		go func() { defer wg.Done(); _, _ = io.WriteString(inW, stdin); inW.Close() }()
		var r result
		r.code, r.signal, r.err = ps.Exec(ctx, &p, in, outW, errW)
		in.Close()
		outW.Close()
		errW.Close()
		wg.Wait()
		r.stdout, r.stderr = stdout.String(), stderr.String()
		return r
	}

	for _, c := range []struct {
		name         string
		stdin        string
		args         []string
		code, signal int
		stdout       string
		execErr      bool
		// asUser runs the command as uid and gid 65534: its process
		// changes its ids before its execve, and so may not share the
		// init's memory on a host whose fs.suid_dumpable is 1 (spawn).
		asUser bool
	}{
		{name: "writes a file in /tmp", args: []string{"sh", "-c", "echo kept >/tmp/shared"}},
		{name: "the next reads it", args: []string{"cat", "/tmp/shared"}, stdout: "kept\n"},
		{name: "stdin comes through", stdin: "in\n", args: []string{"cat"}, stdout: "in\n"},
		{name: "its own exit code", args: []string{"sh", "-c", "exit 7"}, code: 7},
		{name: "killed by a signal", args: []string{"sh", "-c", "kill -TERM $$"}, code: 143, signal: 15},
		{name: "leaves a process running", args: []string{"sh", "-c", "sleep 1000 </dev/null >/dev/null 2>&1 & echo $! >/tmp/bg"}},
		{name: "the next sees it", args: []string{"sh", "-c", "kill -0 $(cat /tmp/bg) && echo alive"}, stdout: "alive\n"},
		{name: "a missing program", args: []string{"/no/such/program"}, code: 127, execErr: true},
		{name: "runs in the sandbox's pid namespace", args: []string{"sh", "-c", "cat /proc/1/comm 2>/dev/null || echo hidden"}, stdout: "hidden\n"},
		{name: "writes a file that is no program", args: []string{"sh", "-c", "echo junk >/tmp/junk; chmod 755 /tmp/junk"}},
		{name: "an exec that fails in the command's process", args: []string{"/tmp/junk"}, code: 126, execErr: true},
		{name: "as another user", args: []string{"sh", "-c", "id -u; id -g"}, stdout: "65534\n65534\n", asUser: true},
		{name: "as another user, an exec that fails in the command's process", args: []string{"/tmp/junk"}, code: 126, execErr: true, asUser: true},
		{name: "as another user, the init stays hidden", args: []string{"sh", "-c", "cat /proc/1/comm 2>/dev/null || echo hidden"}, stdout: "hidden\n", asUser: true},
		{name: "and as the caller again", args: []string{"sh", "-c", "id -u"}, stdout: fmt.Sprintf("%d\n", proc.UID)},
	} {
		if c.asUser && os.Getuid() != 0 {
			// A rootless sandbox maps one id: the switch fails in the
			// command's process, and is that exec's error.
			c.code, c.stdout, c.execErr = 126, "", true
		}
		t.Run(c.name, func(t *testing.T) {
			r := run(t.Context(), c.stdin, c.asUser, c.args...)
			var ee *ExecError
			if c.execErr != errors.As(r.err, &ee) || (!c.execErr && r.err != nil) {
				t.Fatalf("err %v, want an ExecError: %v", r.err, c.execErr)
			}
			if r.code != c.code || r.signal != c.signal || r.stdout != c.stdout {
				t.Errorf("code %d signal %d stdout %q (stderr %q), want %d %d %q", r.code, r.signal, r.stdout, r.stderr, c.code, c.signal, c.stdout)
			}
		})
	}

	t.Run("commands at once keep their own output and status", func(t *testing.T) {
		const n = 8
		results := make([]result, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = run(t.Context(), "", false, "sh", "-c", fmt.Sprintf("echo %d >/tmp/at-once-%d; echo %d; exit %d", i, i, i, i))
			}()
		}
		wg.Wait()
		for i, r := range results {
			if r.err != nil || r.code != i || r.stdout != fmt.Sprintf("%d\n", i) {
				t.Errorf("command %d: code %d stdout %q err %v", i, r.code, r.stdout, r.err)
			}
		}
		r := run(t.Context(), "", false, "sh", "-c", "cat /tmp/at-once-*")
		if got := strings.Fields(r.stdout); len(got) != n {
			t.Errorf("files the commands wrote: %q", r.stdout)
		}
	})

	// As the caller, and (where ids other than the caller's are mapped)
	// as another user, whose processes the init must still be able to
	// signal.
	users := []bool{false}
	if os.Getuid() == 0 {
		users = append(users, true)
	}
	for _, asUser := range users {
		name := "a command whose context ends is killed with what it started"
		if asUser {
			name += ", as another user"
		}
		t.Run(name, func(t *testing.T) {
			null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer null.Close()
			outR, outW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer outR.Close()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			p := proc
			if asUser {
				p.SwitchUser, p.UID, p.GID = true, 65534, 65534
			}
			// The background sleep holds the output too: the output ends
			// only once both are gone.
			p.Args = []string{"sh", "-c", "sleep 1000 & echo started; wait"}
			type result struct {
				code, signal int
				err          error
			}
			done := make(chan result, 1)
			go func() {
				code, signal, err := ps.Exec(ctx, &p, null, outW, null)
				done <- result{code, signal, err}
			}()
			out := bufio.NewReader(outR)
			if line, err := out.ReadString('\n'); line != "started\n" {
				t.Fatalf("output %q, %v", line, err)
			}
			cancel()
			r := <-done
			outW.Close()
			if !errors.Is(r.err, context.Canceled) || r.signal != 9 {
				t.Errorf("code %d signal %d err %v, want SIGKILL and context.Canceled", r.code, r.signal, r.err)
			}
			ended := make(chan error, 1)
			go func() { _, err := io.Copy(io.Discard, out); ended <- err }()
			select {
			case <-ended:
			case <-time.After(30 * time.Second):
				// Not a measure of speed: a sleep that survived holds the
				// output for 1000 s. The sandbox's Close kills it.
				t.Fatal("the output is still held: the command's background process outlived its cancel")
			}
		})
	}

	t.Run("a command whose context ends is killed", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		// Whenever the cancel comes, before the command's start or
		// after, the command is killed.
		go func() {
			time.Sleep(50 * time.Millisecond)
			cancel()
		}()
		r := run(ctx, "", false, "sleep", "1000")
		if !errors.Is(r.err, context.Canceled) || r.signal != 9 {
			t.Errorf("code %d signal %d err %v, want SIGKILL and context.Canceled", r.code, r.signal, r.err)
		}
	})

}

// TestPersistentInitRefusesMalformedRequests: the init of a persistent
// sandbox answers an exec it cannot run (no stdio, a terminal asked for)
// with an error about that exec and goes on serving; a message that breaks
// the protocol (a release, an exec with no id) ends the sandbox with
// everything in it. And a command never holds the control socket: its
// descriptors are its stdio only.
func TestPersistentInitRefusesMalformedRequests(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	boot := func(t *testing.T) (*Persistent, config.Process) {
		plan := persistentPlan(t)
		proc := plan.Config.Process
		ps, err := BootPersistent(testJob(), plan, &Timings{Start: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ps.Close)
		return ps, proc
	}
	// raw sends msg as the supervisor would, under a new exec id, and
	// returns the init's first answer to it.
	raw := func(t *testing.T, ps *Persistent, msg control.Message, files ...*os.File) control.Message {
		id, replies := ps.s.execs.open()
		defer ps.s.execs.forget(id)
		msg.Exec = id
		if err := ps.s.conn.Send(msg, files...); err != nil {
			t.Fatal(err)
		}
		r := <-replies
		for _, f := range r.files {
			f.Close()
		}
		return r.msg
	}
	works := func(t *testing.T, ps *Persistent, proc config.Process) error {
		proc.Args = []string{"/bin/true"}
		_, _, err := ps.Exec(t.Context(), &proc, null, null, null)
		return err
	}

	ps, proc := boot(t)
	withTTY := proc
	withTTY.Args, withTTY.TTY = []string{"/bin/true"}, true
	noArgs := proc
	noArgs.Args = nil
	for _, c := range []struct {
		name  string
		msg   control.Message
		files []*os.File
	}{
		{"an exec with no stdio", control.Message{Kind: control.KindExec, Process: &proc}, nil},
		{"an exec with one descriptor", control.Message{Kind: control.KindExec, Process: &proc}, []*os.File{null}},
		{"an exec that asks for a terminal", control.Message{Kind: control.KindExec, Process: &withTTY}, []*os.File{null, null, null}},
		{"an exec with no process", control.Message{Kind: control.KindExec}, []*os.File{null, null, null}},
		{"an exec with no command", control.Message{Kind: control.KindExec, Process: &noArgs}, []*os.File{null, null, null}},
	} {
		t.Run(c.name, func(t *testing.T) {
			answer := raw(t, ps, c.msg, c.files...)
			if answer.Kind != control.KindError {
				t.Errorf("answer %+v, want an error about this exec", answer)
			}
			if err := works(t, ps, proc); err != nil {
				t.Errorf("the sandbox no longer serves: %v", err)
			}
		})
	}

	t.Run("a command holds no socket", func(t *testing.T) {
		p := proc
		p.Args = []string{"sh", "-c", "for f in /proc/$$/fd/*; do readlink $f || true; done"}
		outR, outW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer outR.Close()
		code, _, err := ps.Exec(t.Context(), &p, null, outW, null)
		outW.Close()
		out, _ := io.ReadAll(outR)
		if err != nil || code != 0 || strings.Contains(string(out), "socket:") || len(strings.Fields(string(out))) != 3 {
			t.Errorf("exit %d, err %v; the command's descriptors:\n%s", code, err, out)
		}
	})

	t.Run("a signal for a command not running is dropped", func(t *testing.T) {
		if err := ps.send(control.Message{Kind: control.KindSignal, Exec: 1 << 40, Signal: 9}); err != nil {
			t.Fatal(err)
		}
		if err := works(t, ps, proc); err != nil {
			t.Errorf("the sandbox no longer serves: %v", err)
		}
	})

	stdio := []*os.File{null, null, null}
	for _, c := range []struct {
		name  string
		msg   control.Message
		files []*os.File
	}{
		{"a release", control.Message{Kind: control.KindRelease, Process: &proc}, stdio},
		{"an exec with no id", control.Message{Kind: control.KindExec, Process: &proc}, stdio},
		{"a signal with no id", control.Message{Kind: control.KindSignal, Signal: 9}, nil},
		{"a signal 0", control.Message{Kind: control.KindSignal, Exec: 1 << 40}, nil},
		{"a signal past the last", control.Message{Kind: control.KindSignal, Exec: 1 << 40, Signal: 65}, nil},
		{"a signal with descriptors", control.Message{Kind: control.KindSignal, Exec: 1 << 40, Signal: 9}, stdio},
	} {
		t.Run(c.name+" ends the sandbox", func(t *testing.T) {
			ps, proc := boot(t)
			if err := ps.s.conn.Send(c.msg, c.files...); err != nil {
				t.Fatal(err)
			}
			<-ps.s.reaped // a hang here is the failure
			var se *SetupError
			if err := works(t, ps, proc); !errors.As(err, &se) {
				t.Errorf("an exec after it: %v, want a SetupError", err)
			}
		})
	}
}
