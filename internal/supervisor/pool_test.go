package supervisor

import (
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jail-sandbox/jail/api"
	"github.com/jail-sandbox/jail/cgroups"
)

// TestPoolRebuildsOldSandboxes: a ready sandbox that waited its maximum age
// is replaced by a new one, so no run gets a view of the host older than
// that.
func TestPoolRebuildsOldSandboxes(t *testing.T) {
	pool := testPool(t, testSandbox{}, 0)
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
	pool.WaitReady(5 * time.Second)
	res, tm, err := runIn(t, pool, testSandbox{args: []string{"true"}})
	if err != nil || res.ExitCode != 0 || !tm.Cgroup.IsZero() {
		t.Errorf("run: %v %+v (pooled: %v)", err, res, tm.Cgroup.IsZero())
	}
}

// TestPoolReplacesAStaleSandbox: a ready sandbox that no longer is what the
// template resolves to (the host changed after it was built) is never run:
// the run starts cold, and the pool builds a new one.
func TestPoolReplacesAStaleSandbox(t *testing.T) {
	pool := testPool(t, testSandbox{}, 1)
	defer pool.Close()
	pool.WaitReady(20 * time.Second)
	// As if the template now resolved to another sandbox than the ready
	// one: the host name stands for any change.
	stale := testSandbox{args: []string{"hostname"}, hostname: "changed"}
	p := testPlan(t, stale)
	pool.mu.Lock()
	pool.key = keyOf(p)
	built := pool.built
	pool.mu.Unlock()
	p.Close()
	res, tm, err := runIn(t, pool, stale)
	if err != nil || res.Stdout != "changed\n" || tm.Cgroup.IsZero() && tm.InitStarted.IsZero() {
		t.Fatalf("run: %v %+v (cold: %v)", err, res, !tm.InitStarted.IsZero())
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

// TestPoolFollowsItsTemplate: once the template resolves to another
// sandbox than the ready one (as after an edit of its profile's limits),
// a run of the new template that misses the pool has a filler check the
// template: the stale sandbox goes, one of the new template is built, and
// runs take ready sandboxes again. Ready sandboxes never age out here: only
// the check can replace the stale one.
func TestPoolFollowsItsTemplate(t *testing.T) {
	var mu sync.Mutex
	template := testSandbox{}
	pool := NewPool(testPlan(t, template), func() (*Plan, error) {
		mu.Lock()
		defer mu.Unlock()
		return planOf(template)
	}, 0)
	defer pool.Close()
	pool.maxAge = time.Hour
	pool.start(1)
	pool.WaitReady(20 * time.Second)
	if _, tm, err := runIn(t, pool, template); err != nil || !tm.InitStarted.IsZero() {
		t.Fatalf("run of the template: %v (cold: %v); want a ready sandbox", err, !tm.InitStarted.IsZero())
	}
	pool.WaitReady(20 * time.Second)

	mu.Lock()
	template = testSandbox{memory: 256 << 20}
	edited := template
	mu.Unlock()
	cold := 0
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		res, tm, err := runIn(t, pool, edited)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run of the edited template: %v %+v", err, res)
		}
		if tm.InitStarted.IsZero() {
			t.Logf("%d cold runs before a pooled one", cold)
			break
		}
		cold++
		if time.Now().After(deadline) {
			t.Fatalf("%d runs of the edited template in 20 s, all cold: the pool keeps the sandbox of the old one", cold)
		}
	}
}

// TestPoolKeyFollowsACurrentSandbox: when the pool's key is not what the
// template resolves to while the ready sandbox is (as after a filler that
// resolved the template before an edit finished its build after another's
// check), the check a missed run asks for puts the key back to the
// template's, so that runs take the ready sandbox again. Ready sandboxes
// never age out here: only the check can mend the key.
func TestPoolKeyFollowsACurrentSandbox(t *testing.T) {
	template := testSandbox{}
	pool := NewPool(testPlan(t, template), func() (*Plan, error) { return planOf(template) }, 0)
	defer pool.Close()
	pool.maxAge = time.Hour
	pool.start(1)
	pool.WaitReady(20 * time.Second)
	// The key of a template of the past, written by a late build.
	old := testPlan(t, testSandbox{memory: 256 << 20})
	pool.mu.Lock()
	pool.key = keyOf(old)
	pool.mu.Unlock()
	old.Close()
	cold := 0
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		res, tm, err := runIn(t, pool, template)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run of the template: %v %+v", err, res)
		}
		if tm.InitStarted.IsZero() {
			t.Logf("%d cold runs before a pooled one", cold)
			break
		}
		cold++
		if time.Now().After(deadline) {
			t.Fatalf("%d runs of the template in 20 s, all cold: the pool's key stays that of an older template while its ready sandbox is current", cold)
		}
	}
}

// TestPoolChecksAMissWithinTheSecond: a run that misses the pool within a
// second of the filler's last check (a run of other limits just before the
// template was edited) still has the template checked, once the second is
// over, rather than its request dropped: with no further run, the pool's
// key and its ready sandbox follow the edit. Ready sandboxes never age out
// here: only the check can replace the stale one.
func TestPoolChecksAMissWithinTheSecond(t *testing.T) {
	var mu sync.Mutex
	template := testSandbox{}
	pool := NewPool(testPlan(t, template), func() (*Plan, error) {
		mu.Lock()
		defer mu.Unlock()
		return planOf(template)
	}, 0)
	defer pool.Close()
	pool.maxAge = time.Hour
	pool.start(1)
	pool.WaitReady(20 * time.Second)
	// A run of other limits: the filler checks (the template has not
	// changed) and starts its second.
	if _, _, err := runIn(t, pool, testSandbox{hostname: "other"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	template = testSandbox{memory: 256 << 20}
	edited := template
	mu.Unlock()
	// One run of the edited template, which misses.
	if _, _, err := runIn(t, pool, edited); err != nil {
		t.Fatal(err)
	}
	p := testPlan(t, edited)
	want := keyOf(p)
	p.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		pool.mu.Lock()
		followed := reflect.DeepEqual(pool.key, want)
		pool.mu.Unlock()
		if followed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pool's key is still the old template's 20 s after a run of the edited one missed: its check was dropped")
		}
	}
}

// TestPoolOutlivesItsForker: inits come from the pool's forker; should the
// forker die, the sandboxes it started die with it and the pool goes on,
// starting inits itself.
func TestPoolOutlivesItsForker(t *testing.T) {
	pool := testPool(t, testSandbox{}, 1)
	defer pool.Close()
	if pool.forker == nil {
		t.Fatal("the pool has no forker")
	}
	pool.WaitReady(20 * time.Second)
	if err := pool.forker.Kill(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); pool.forker.Err() == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pool never noticed its forker's end")
		}
	}
	for i := 0; i < 3; i++ {
		res, _, err := runIn(t, pool, testSandbox{args: []string{"sh", "-c", "echo ok"}})
		if err != nil || res.ExitCode != 0 || res.Stdout != "ok\n" {
			t.Errorf("run %d after the forker died: %v %+v", i, err, res)
		}
	}
	if err := pool.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// spareCounts are the cgroups the pool has kept for reuse and handed out
// so far.
func (pool *Pool) spareCounts() (given, taken int) {
	pool.spares.mu.Lock()
	defer pool.spares.mu.Unlock()
	return pool.spares.given, pool.spares.taken
}

// TestPoolRunsCountOnlyTheirOwnUse: a run in a cgroup that an earlier run
// of the pool used reports only its own peak memory, CPU time and OOM
// kills. Each run here takes the cgroup the run before it left (the test
// checks it does: no sandbox is kept ready, so nothing else takes it),
// except on a v2 kernel that cannot restart memory.peak, where none is
// kept (Manager.Reuse).
func TestPoolRunsCountOnlyTheirOwnUse(t *testing.T) {
	layout, _ := cgroups.Detect()
	if layout.Version == cgroups.None {
		t.Skip("no cgroups")
	}
	pool := testPool(t, testSandbox{memory: 64 << 20}, 0)
	defer pool.Close()
	// Whether cgroups are reused here: on v2, whether memory.peak can be
	// written, as the project's parent shows once the first run made it.
	reusable := func() bool {
		if layout.Version != cgroups.V2 {
			return true
		}
		st, err := os.Stat(filepath.Join(layout.Above, cgroups.Parent, "memory.peak"))
		return err == nil && st.Mode().Perm()&0o200 != 0
	}
	run := func(script string) api.Result {
		t.Helper()
		given, taken := pool.spareCounts()
		res, _, err := runIn(t, pool, testSandbox{args: []string{"sh", "-c", script}, memory: 64 << 20})
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		_, nowTaken := pool.spareCounts()
		reuses := reusable()
		if reuses && given > 0 && nowTaken != taken+1 {
			t.Fatalf("%s: did not run in the cgroup of the run before", script)
		}
		// The cgroup is kept once the init is reaped, in the background.
		wait := 3 * time.Second
		if !reuses {
			wait = 300 * time.Millisecond
		}
		kept := false
		for deadline := time.Now().Add(wait); !kept && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			nowGiven, _ := pool.spareCounts()
			kept = nowGiven > given
		}
		if reuses && !kept {
			t.Fatalf("%s: its cgroup was not kept for reuse", script)
		}
		if !reuses && kept {
			t.Fatalf("%s: a cgroup was kept for reuse where memory.peak cannot restart", script)
		}
		return res
	}

	heavy := run("dd if=/dev/zero of=/dev/null bs=40M count=20 2>/dev/null")
	if heavy.PeakMemoryBytes < 40<<20 || heavy.OOMKilled {
		t.Fatalf("40 MB buffer: %+v", heavy)
	}
	light := run("true")
	if light.PeakMemoryBytes > 8<<20 || light.OOMKilled || light.CPUMS >= heavy.CPUMS && heavy.CPUMS > 20 {
		t.Errorf("true after a 40 MB run: peak %d bytes, %d ms CPU (the heavy one: %d ms), OOM %v",
			light.PeakMemoryBytes, light.CPUMS, heavy.CPUMS, light.OOMKilled)
	}
	if killed := run("dd if=/dev/zero of=/dev/null bs=100M count=1 2>/dev/null"); !killed.OOMKilled {
		t.Fatalf("100 MB buffer under a 64 MB limit: %+v", killed)
	}
	if after := run("true"); after.OOMKilled || after.ExitCode != 0 {
		t.Errorf("true after an OOM kill: %+v", after)
	}
}

// fakeCgroup is a cgroup that exists only for spareCgroups' bookkeeping.
type fakeCgroup struct {
	cgroups.Manager
	name     string
	reusable bool
}

func (f *fakeCgroup) Reuse() error {
	if !f.reusable {
		return cgroups.ErrNotReusable
	}
	return nil
}

// TestSpareCgroupsKeepTheLatest: spares are handed out by their limits
// only; past the most kept, the one kept longest goes; a cgroup that cannot
// be readied, or one given after drain, is not kept.
func TestSpareCgroupsKeepTheLatest(t *testing.T) {
	var sp spareCgroups
	v1 := cgroups.Layout{Version: cgroups.V1}
	small, large := cgroups.Limits{Memory: 64 << 20, CPUs: 1, Pids: 64}, cgroups.Limits{Memory: 1 << 30, CPUs: 2, Pids: 256}
	if kept, _ := sp.give(v1, small, &fakeCgroup{name: "v2", reusable: false}); kept {
		t.Error("kept a cgroup that cannot be readied")
	}
	var given []*fakeCgroup
	for i := 0; i <= maxSpareCgroups; i++ {
		cg := &fakeCgroup{name: string(rune('a' + i)), reusable: true}
		given = append(given, cg)
		kept, evicted := sp.give(v1, large, cg)
		if !kept {
			t.Fatalf("spare %d not kept", i)
		}
		if want := i == maxSpareCgroups; (evicted != nil) != want || want && evicted != given[0] {
			t.Fatalf("spare %d: evicted %v", i, evicted)
		}
	}
	if cg := sp.take(v1, small); cg != nil {
		t.Errorf("took a cgroup of other limits: %v", cg)
	}
	if cg := sp.take(cgroups.Layout{Version: cgroups.V2}, large); cg != nil {
		t.Errorf("took a cgroup of another layout: %v", cg)
	}
	if cg := sp.take(v1, large); cg != given[1] {
		t.Errorf("took %v, want the oldest still kept", cg)
	}
	if left := sp.drain(); len(left) != maxSpareCgroups-1 {
		t.Errorf("drained %d, want %d", len(left), maxSpareCgroups-1)
	}
	if kept, _ := sp.give(v1, large, &fakeCgroup{reusable: true}); kept {
		t.Error("kept a cgroup after drain")
	}
}
