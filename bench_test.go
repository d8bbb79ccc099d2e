package jail

import (
	"context"
	"testing"
	"time"
)

// BenchmarkRun starts and ends a sandbox running /bin/true on the default
// root, as `jail run -- /bin/true` does, and reports each step's share in
// milliseconds: prepare (validation, profile, filter), cgroup (create),
// start (clone into the namespaces and exec of the init program), runtime
// (from the exec until the init's own code runs: for the C init, the
// kernel's exec and the C library's start), root (the init builds the root filesystem), setup (the rest of the
// init's work: loopback, privileges, filter, fork of the command), command
// (until the init reports its exit) and teardown (until Run returns). A
// step's share runs from the end of the step that ended before it: on v1
// the init starts first and the cgroup is made while it starts up. A
// regression shows in the step that grew.
func BenchmarkRun(b *testing.B) {
	benchRun(b, Spec{Command: []string{"/bin/true"}})
}

// BenchmarkRunReadOnly is the same with no writable root layer.
func BenchmarkRunReadOnly(b *testing.B) {
	benchRun(b, Spec{Command: []string{"/bin/true"}, ReadOnly: true})
}

func benchRun(b *testing.B, spec Spec) {
	steps := []string{"prepare", "cgroup", "start", "runtime", "root", "setup", "command", "teardown"}
	sums := make([]time.Duration, len(steps))
	for i := 0; i < b.N; i++ {
		res, t, err := runTimed(context.Background(), spec)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("run: %v (exit %d)", err, res.ExitCode)
		}
		// The end of each step, in the order of steps.
		ends := []time.Time{t.Prepared, t.Cgroup, t.InitStarted, t.InitRunning, t.RootBuilt, t.CommandStarted, t.ExitReported, t.Done}
		for s, end := range ends {
			if end.IsZero() {
				continue
			}
			from := t.Start
			for _, e := range ends {
				if e.Before(end) && e.After(from) {
					from = e
				}
			}
			sums[s] += end.Sub(from)
		}
	}
	for s, name := range steps {
		b.ReportMetric(float64(sums[s].Microseconds())/1000/float64(b.N), name+"-ms")
	}
}

// BenchmarkPoolRun is BenchmarkRun through a Pool whose sandbox is ready
// when the run asks (the benchmark waits, untimed, for the refill): the
// latency of a run that a ready sandbox fits. "pooled" is the share of runs
// that got one; setup and start are 0 for those.
func BenchmarkPoolRun(b *testing.B) {
	pool, err := NewPool(Spec{}, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	steps := []string{"prepare", "command", "teardown"}
	sums := make([]time.Duration, len(steps))
	pooled := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		pool.waitReady(5 * time.Second)
		b.StartTimer()
		res, t, err := pool.runTimed(context.Background(), Spec{Command: []string{"/bin/true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("run: %v (exit %d)", err, res.ExitCode)
		}
		if t.Cgroup.IsZero() && t.InitStarted.IsZero() {
			pooled++
		}
		at := []time.Time{t.Start, t.Prepared, t.ExitReported, t.Done}
		for s := range steps {
			if !at[s].IsZero() && !at[s+1].IsZero() {
				sums[s] += at[s+1].Sub(at[s])
			}
		}
	}
	for s, name := range steps {
		b.ReportMetric(float64(sums[s].Microseconds())/1000/float64(b.N), name+"-ms")
	}
	b.ReportMetric(float64(pooled)/float64(b.N), "pooled")
}

// BenchmarkRunParallel runs sandboxes two at a time (GOMAXPROCS on the
// reference machine): 1e9/ns-per-op is the throughput in runs per second.
func BenchmarkRunParallel(b *testing.B) {
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if res, err := Run(context.Background(), Spec{Command: []string{"/bin/true"}}); err != nil || res.ExitCode != 0 {
				b.Errorf("run: %v (exit %d)", err, res.ExitCode)
				return
			}
		}
	})
}

// BenchmarkPoolRunParallel is the same through a Pool of two.
func BenchmarkPoolRunParallel(b *testing.B) {
	pool, err := NewPool(Spec{}, 2)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	pool.waitReady(5 * time.Second)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if res, err := pool.Run(context.Background(), Spec{Command: []string{"/bin/true"}}); err != nil || res.ExitCode != 0 {
				b.Errorf("run: %v (exit %d)", err, res.ExitCode)
				return
			}
		}
	})
}
