package supervisor

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jail-sandbox/jail/cgroups"
)

// TestFailedBootReleasesEverything: a sandbox whose cgroup cannot be made
// fails with the cgroup's SetupError and leaves nothing waiting behind it:
// its pool closes, and no goroutine of its supervisor remains (the readers
// of its output, the release of its janitor, the thread that started its
// init in the cgroup). The kernel refuses the pids limit here; jail's
// validation refuses it too, so it is set on the plan, past those checks,
// as any failure of the cgroup's making would come.
func TestFailedBootReleasesEverything(t *testing.T) {
	if layout, _ := cgroups.Detect(); layout.Version == cgroups.None {
		t.Skip("no cgroups")
	}
	for _, c := range []struct {
		name           string
		pooled, forker bool
	}{
		{"pool, init from its forker", true, true},
		{"pool, init started here", true, false},
		{"one-shot run", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := testPool(t, testSandbox{}, 0)
			if c.forker && pool.forker == nil {
				t.Fatal("the pool has no forker")
			}
			for i := 0; i < 3; i++ {
				job := testJob()
				p := testPlan(t, testSandbox{args: []string{"true"}})
				p.Limits.Pids = math.MaxInt64
				tm := &Timings{Start: time.Now()}
				s := newSupervisor(job, p, tm)
				if c.pooled {
					s = pool.supervisor(job, p, tm)
					if !c.forker {
						s.forker = nil
					}
				}
				_, err := s.runCold(t.Context())
				var se *SetupError
				if !errors.As(err, &se) || se.Step != "cgroup" {
					t.Fatalf("run %d: %v, want the cgroup's SetupError", i, err)
				}
			}
			closed := make(chan error, 1)
			go func() { closed <- pool.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Errorf("Close: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Pool.Close still waits 30 s after runs that failed to boot (a hang, not a timing check)")
			}
			waitNoSupervisorGoroutines(t)
		})
	}
}

// waitNoSupervisorGoroutines fails the test unless every goroutine running
// a supervisor's code is gone within 10 s (they end as the sandboxes'
// teardown ends; a hang guard, not a timing check).
func waitNoSupervisorGoroutines(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		stacks := string(buf[:runtime.Stack(buf, true)])
		var left []string
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "supervisor.(*supervisor)") {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines of a supervisor left:\n%s", len(left), strings.Join(left, "\n\n"))
		}
	}
}
