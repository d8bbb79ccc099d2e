package jail_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jail-sandbox/jail"
)

// newManager is a Manager on a state directory and audit log of the
// test's own; everything it made is removed when the test ends.
func newManager(t *testing.T) *jail.Manager {
	t.Helper()
	dir := t.TempDir()
	m, err := jail.NewManager(jail.ManagerOptions{StateDir: dir + "/state", AuditLog: dir + "/audit/audit.log"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if infos, err := m.List(nil); err == nil {
			for _, i := range infos {
				_ = m.Remove(i.Name, true)
			}
		}
		m.Close()
	})
	return m
}

// TestManagerRunsCommandsInOneSandbox: the Go API of persistent
// sandboxes, as an embedding program uses it.
func TestManagerRunsCommandsInOneSandbox(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	sb, err := m.Create(ctx, jail.Spec{Name: "api", Labels: map[string]string{"k": "v"}, Env: []string{"FROM=create"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, jail.Spec{Name: "api"}); !errors.Is(err, jail.ErrExists) {
		t.Fatalf("Create of a taken name: %v; want ErrExists", err)
	}
	if _, err := m.Get("nope"); !errors.Is(err, jail.ErrNotFound) {
		t.Fatalf("Get of a missing sandbox: %v; want ErrNotFound", err)
	}
	var out bytes.Buffer
	res, err := sb.Shell(ctx, "echo $FROM > /tmp/f; cat /tmp/f; exit 2", jail.Process{Stdout: &out, Capture: true})
	if err != nil || res.ExitCode != 2 || res.Stdout != "create\n" || out.String() != "create\n" {
		t.Fatalf("Shell: %v %+v %q", err, res, out.String())
	}
	res, err = sb.Exec(ctx, jail.Process{Command: []string{"cat", "/tmp/f"}, Capture: true})
	if err != nil || res.Stdout != "create\n" {
		t.Fatalf("the next Exec: %v %+v", err, res)
	}
	_, err = sb.Exec(ctx, jail.Process{Command: []string{"no-such-program"}})
	var ee *jail.ExecError
	if !errors.As(err, &ee) || ee.Code != jail.ExitNotFound {
		t.Fatalf("a missing program: %v; want an ExecError 127", err)
	}
	_, err = sb.Exec(ctx, jail.Process{Command: []string{"true"}, Workdir: "relative"})
	var se *jail.SetupError
	if !errors.As(err, &se) || !se.Refused {
		t.Fatalf("a relative workdir: %v; want a refused SetupError", err)
	}
	res, err = sb.Exec(ctx, jail.Process{Command: []string{"sleep", "10"}, Timeout: 100 * time.Millisecond})
	if err != nil || !res.TimedOut || res.ExitCode != jail.ExitTimeout {
		t.Fatalf("a timeout: %v %+v", err, res)
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	if _, err := sb.Exec(cctx, jail.Process{Command: []string{"sleep", "10"}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled exec: %v", err)
	}

	// Several at once.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := sb.Exec(ctx, jail.Process{Command: []string{"sh", "-c", "echo $0", string(rune('a' + i))}, Capture: true})
			if err != nil || res.Stdout != string(rune('a'+i))+"\n" {
				t.Errorf("concurrent exec %d: %v %+v", i, err, res)
			}
		}(i)
	}
	wg.Wait()

	info, err := sb.Info()
	if err != nil || info.State != jail.StateRunning || info.Labels["k"] != "v" || info.LastExec.IsZero() {
		t.Fatalf("Info: %v %+v", err, info)
	}
	if err := sb.Stop(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if info, _ := sb.Info(); info.State != jail.StateStopped {
		t.Fatalf("after Stop: %s", info.State)
	}
	if err := m.Remove("api", false); err != nil {
		t.Fatalf("Remove of a stopped sandbox: %v", err)
	}
	if infos, _ := m.List(nil); len(infos) != 0 {
		t.Fatalf("List after Remove: %+v", infos)
	}
}

// TestManagerRefusesBadSpecs: what Create refuses, before anything runs.
func TestManagerRefusesBadSpecs(t *testing.T) {
	m := newManager(t)
	for _, spec := range []jail.Spec{
		{Name: ""},
		{Name: "../x"},
		{Name: ".hidden"},
		{Name: strings.Repeat("a", 64)},
		{Name: "ok", TTY: true},
		{Name: "ok", TTL: -time.Second},
		{Name: "ok", Labels: map[string]string{"bad key": "v"}},
		{Name: "ok", Labels: map[string]string{"k": "line\nbreak"}},
		{Name: "ok", Memory: 1},
		{Name: "ok", Secrets: []string{"not-a-name"}},
	} {
		_, err := m.Create(context.Background(), spec)
		var se *jail.SetupError
		if !errors.As(err, &se) || !se.Refused {
			t.Errorf("Create(%+v): %v; want a refused SetupError", spec, err)
		}
	}
	if infos, _ := m.List(nil); len(infos) != 0 {
		t.Fatalf("a refused Create left %+v", infos)
	}
}
