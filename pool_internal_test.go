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
