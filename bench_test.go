package jail

import (
	"context"
	"testing"
	"time"
)

// BenchmarkRun starts and ends a sandbox running /bin/true on the default
// root, as `jail run -- /bin/true` does, and reports each step's share in
// milliseconds: prepare (validation, profile, filter), cgroup (create),
// start (clone into the namespaces and exec of the stage program), setup
// (the init: root filesystem, loopback, privileges, filter, fork of the
// command), command (until the init reports its exit) and teardown (until
// Run returns). A regression shows in the step that grew.
func BenchmarkRun(b *testing.B) {
	benchRun(b, Spec{Command: []string{"/bin/true"}})
}

// BenchmarkRunReadOnly is the same with no writable root layer.
func BenchmarkRunReadOnly(b *testing.B) {
	benchRun(b, Spec{Command: []string{"/bin/true"}, ReadOnly: true})
}

func benchRun(b *testing.B, spec Spec) {
	steps := []string{"prepare", "cgroup", "start", "setup", "command", "teardown"}
	sums := make([]time.Duration, len(steps))
	for i := 0; i < b.N; i++ {
		res, t, err := runTimed(context.Background(), spec)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("run: %v (exit %d)", err, res.ExitCode)
		}
		at := []time.Time{t.start, t.prepared, t.cgroup, t.initStarted, t.commandStarted, t.exitReported, t.done}
		for s := range steps {
			if !at[s].IsZero() && !at[s+1].IsZero() {
				sums[s] += at[s+1].Sub(at[s])
			}
		}
	}
	for s, name := range steps {
		b.ReportMetric(float64(sums[s].Microseconds())/1000/float64(b.N), name+"-ms")
	}
}
