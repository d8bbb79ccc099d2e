package jail

import (
	"testing"
	"time"

	"github.com/jail-sandbox/jail/cgroups"
)

// TestPoolRebuildsOldSandboxes: a ready sandbox that waited its maximum age
// is replaced by a new one, so no run gets a view of the host older than
// that.
func TestPoolRebuildsOldSandboxes(t *testing.T) {
	pool, err := NewPool(Spec{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pool.maxAge = 150 * time.Millisecond
	pool.start(1)
	deadline := time.Now().Add(20 * time.Second)
	for {
		pool.mu.Lock()
		built, err := pool.built, pool.lastErr
		pool.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if built >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sandboxes built in 20 s with a maximum age of 150 ms", built)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// And a run still gets a ready one.
	pool.waitReady(5 * time.Second)
	res, tm, err := pool.runTimed(t.Context(), Spec{Command: []string{"true"}})
	if err != nil || res.ExitCode != 0 || !tm.cgroup.IsZero() {
		t.Errorf("run: %v %+v (pooled: %v)", err, res, tm.cgroup.IsZero())
	}
}

// TestPoolReplacesAStaleSandbox: a ready sandbox that no longer is what the
// template resolves to (the host changed after it was built) is never run:
// the run starts cold, and the pool builds a new one.
func TestPoolReplacesAStaleSandbox(t *testing.T) {
	pool, err := NewPool(Spec{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pool.waitReady(20 * time.Second)
	// As if the template now resolved to another sandbox than the ready
	// one: the host name stands for any change.
	stale := Spec{Command: []string{"hostname"}, Hostname: "changed", Capture: true}
	p, err := prepare(&stale)
	if err != nil {
		t.Fatal(err)
	}
	pool.mu.Lock()
	pool.key = keyOf(p)
	built := pool.built
	pool.mu.Unlock()
	p.close()
	res, tm, err := pool.runTimed(t.Context(), stale)
	if err != nil || res.Stdout != "changed\n" || tm.cgroup.IsZero() && tm.initStarted.IsZero() {
		t.Fatalf("run: %v %+v (cold: %v)", err, res, !tm.initStarted.IsZero())
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		pool.mu.Lock()
		n := pool.built
		pool.mu.Unlock()
		if n > built {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no new sandbox built after the stale one was dropped")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPoolOutlivesItsForker: inits come from the pool's forker; should the
// forker die, the sandboxes it started die with it and the pool goes on,
// starting inits itself.
func TestPoolOutlivesItsForker(t *testing.T) {
	pool, err := NewPool(Spec{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if pool.forker == nil {
		t.Fatal("the pool has no forker")
	}
	pool.waitReady(20 * time.Second)
	if err := pool.forker.Kill(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); pool.forker.Err() == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pool never noticed its forker's end")
		}
	}
	for i := 0; i < 3; i++ {
		res, err := pool.Run(t.Context(), Spec{Command: []string{"sh", "-c", "echo ok"}, Capture: true})
		if err != nil || res.ExitCode != 0 || res.Stdout != "ok\n" {
			t.Errorf("run %d after the forker died: %v %+v", i, err, res)
		}
	}
	if err := pool.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// spareCount is how many cgroups the pool keeps for reuse.
func (pool *Pool) spareCount() int {
	pool.spares.mu.Lock()
	defer pool.spares.mu.Unlock()
	return len(pool.spares.kept)
}

// TestPoolRunsCountOnlyTheirOwnUse: a run in a cgroup that an earlier run
// of the pool used reports only its own peak memory, CPU time and OOM
// kills. On cgroup v1 the cgroups are reused (the test checks they are);
// on v2 they are not (Manager.Reuse), and none is kept.
func TestPoolRunsCountOnlyTheirOwnUse(t *testing.T) {
	layout, _ := cgroups.Detect()
	if layout.Version == cgroups.None {
		t.Skip("no cgroups")
	}
	pool, err := NewPool(Spec{Memory: 64 << 20}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pool.waitReady(5 * time.Second)
	run := func(script string) Result {
		t.Helper()
		res, err := pool.Run(t.Context(), Spec{Command: []string{"sh", "-c", script}, Memory: 64 << 20})
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		return res
	}
	// A spare is kept once the run's init is reaped, in the background.
	spareKept := func() bool {
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if pool.spareCount() > 0 {
				return true
			}
		}
		return false
	}
	checkReuse := func(after string) {
		t.Helper()
		kept := spareKept()
		if layout.Version == cgroups.V1 && !kept {
			t.Fatalf("no cgroup kept for reuse after %s", after)
		}
		if layout.Version == cgroups.V2 && kept {
			t.Fatalf("a v2 cgroup kept for reuse after %s", after)
		}
	}

	heavy := run("dd if=/dev/zero of=/dev/null bs=40M count=20 2>/dev/null")
	if heavy.PeakMemoryBytes < 40<<20 || heavy.OOMKilled {
		t.Fatalf("40 MB buffer: %+v", heavy)
	}
	t.Logf("40 MB run: peak %d, cpu %d ms", heavy.PeakMemoryBytes, heavy.CPUMS)
	checkReuse("a 40 MB run")
	for i := 0; i < 3; i++ {
		light := run("true")
		if light.PeakMemoryBytes > 8<<20 || light.OOMKilled || light.CPUMS >= heavy.CPUMS && heavy.CPUMS > 20 {
			t.Errorf("true after a 40 MB run: peak %d bytes, %d ms CPU (the heavy one: %d ms), OOM %v",
				light.PeakMemoryBytes, light.CPUMS, heavy.CPUMS, light.OOMKilled)
		}
	}

	if killed := run("dd if=/dev/zero of=/dev/null bs=100M count=1 2>/dev/null"); !killed.OOMKilled {
		t.Fatalf("100 MB buffer under a 64 MB limit: %+v", killed)
	}
	checkReuse("an OOM kill")
	if after := run("true"); after.OOMKilled || after.ExitCode != 0 {
		t.Errorf("true after an OOM kill: %+v", after)
	}
}
