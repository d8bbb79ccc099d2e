package test

import (
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestKilledAtRandomMomentsLeavesNothing SIGKILLs `jail run` at random
// moments of its first 30 ms (the cgroup's making, the janitor's start, the
// init's start, the command's) and checks that, 10 s after the last, nothing
// of any run remains: no cgroup, process, mount or temporary file. Each run
// is killed alone, with its whole process group, or as the leader of its
// own session with that session's group (as a terminal's or a CI runner's
// kill does), which also takes any helper that did not leave the group.
func TestKilledAtRandomMomentsLeavesNothing(t *testing.T) {
	runs, scale := 200, time.Duration(1)
	if os.Getenv("JAIL_TEST_EMULATED") != "" {
		// Under the VM's software emulation a run's start takes ten
		// times as long, and each run up to a second.
		runs, scale = 50, 10
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, m := range modes() {
		t.Run(m.name, func(t *testing.T) {
			before := snapshot()
			type run struct {
				after time.Duration
				how   int // 0: jail alone, 1: its process group, 2: its session
				sleep bool
			}
			plan := make([]run, runs)
			for i := range plan {
				// Two in three in the first 10 ms, where a cold run
				// makes its cgroup and starts its helpers (a little later
				// with four at once); the rest up to 30 ms.
				window := 10 * time.Millisecond * scale
				if i%3 == 2 {
					window = 30 * time.Millisecond * scale
				}
				plan[i] = run{after: time.Duration(rng.Int64N(int64(window))), how: rng.IntN(3), sleep: rng.IntN(2) == 0}
			}
			work := make(chan run)
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := range work {
						args := []string{"run", "--", "true"}
						if r.sleep {
							args = []string{"run", "--", "sleep", "1000"}
						}
						cmd := command(m, args...)
						switch r.how {
						case 1:
							cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
						case 2:
							cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
						}
						if err := cmd.Start(); err != nil {
							t.Error(err)
							continue
						}
						time.Sleep(r.after)
						if r.how == 0 {
							_ = cmd.Process.Signal(syscall.SIGKILL)
						} else {
							// setpriv (rootless) execs jail: the group's
							// and the session's leader is jail.
							_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
						}
						_ = cmd.Wait()
					}
				}()
			}
			for _, r := range plan {
				work <- r
			}
			close(work)
			wg.Wait()
			// What a killed run leaves is the janitor's to remove: all of
			// it, within seconds, not at a later run's sweep.
			deadline := time.Now().Add(10 * time.Second)
			for {
				d := before.diff(snapshot())
				if d == "" {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("10 s after the last of %d runs killed at random moments: %s", runs, d)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}
