package jail

import (
	"testing"
	"time"
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
