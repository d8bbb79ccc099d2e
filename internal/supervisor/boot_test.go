package supervisor

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/cgroups"
	"github.com/jail-sandbox/jail/internal/config"
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

// TestTheInitsReasonIsTheError: an init that fails while it builds the
// root (here a mount source that is not the inode jail checked) reports
// why and exits, and that report is the run's error every time, even when
// the init is gone before the supervisor's next message to it (on v1 the
// cgroup's tasks files follow the description) and that send breaks on a
// closed socket: never "broken pipe".
func TestTheInitsReasonIsTheError(t *testing.T) {
	if layout, _ := cgroups.Detect(); layout.Version == cgroups.None {
		t.Skip("no cgroups")
	}
	dir := t.TempDir()
	// Searchable by the init's user, which may be no id of the caller's.
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	for _, forker := range []bool{false, true} {
		t.Run(fmt.Sprintf("forker=%v", forker), func(t *testing.T) {
			pool := testPool(t, testSandbox{}, 0)
			defer pool.Close()
			for i := 0; i < 20; i++ {
				job := testJob()
				p := testPlan(t, testSandbox{args: []string{"true"}})
				p.Config.Mounts = []config.Mount{{
					Source: dir, SourceDev: st.Dev, SourceIno: st.Ino + 1, SourceIsDir: true,
					SourceUID: int(st.Uid), SourceGID: int(st.Gid), Destination: "/mnt/jail-test", FD: -1,
				}}
				s := pool.supervisor(job, p, &Timings{Start: time.Now()})
				if !forker {
					s.forker = nil
				}
				_, err := s.runCold(t.Context())
				var se *SetupError
				if !errors.As(err, &se) || !strings.HasPrefix(se.Step, "open mount source") || !strings.Contains(err.Error(), "changed after it was checked") {
					t.Fatalf("run %d: %v, want the init's report that the mount source changed", i, err)
				}
			}
		})
	}
}
