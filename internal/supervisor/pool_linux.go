package supervisor

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"time"

	"github.com/jail-sandbox/jail/api"
	"github.com/jail-sandbox/jail/cgroups"
	"github.com/jail-sandbox/jail/cgroups/janitor"
	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/forker"
	"github.com/jail-sandbox/jail/namespaces"
)

// Pool is the machinery of a jail.Pool (see its documentation): the
// fillers that build sandboxes ahead of need, the hand-out of a ready one
// that fits a run, and what the pool's sandboxes share (a cgroup janitor,
// a forker of inits, spare cgroups).
type Pool struct {
	// resolve makes the plan of the next sandbox the pool builds: the
	// template's, resolved afresh.
	resolve func() (*Plan, error)
	// watch is the one cgroup janitor of all the pool's sandboxes (nil
	// without cgroups, or when it could not start: each then has its own),
	// and forker the process that starts their inits (nil when it could
	// not start: the pool's own process does), both the running binary
	// re-executed (jail.Init runs them).
	watch  *janitor.Watch
	forker *forker.Forker
	// active counts the pool's sandboxes not yet gone from the host.
	active   sync.WaitGroup
	ready    chan *supervisor
	stop     chan struct{}
	fillers  sync.WaitGroup
	stopOnce sync.Once
	// recheck asks a filler holding a ready sandbox whether the template
	// still resolves to it: a run missed the pool (see take).
	recheck chan struct{}

	// maxAge is how long a ready sandbox waits before it is rebuilt.
	maxAge time.Duration

	mu      sync.Mutex
	built   int        // sandboxes built so far
	closed  bool       // new sandboxes are no longer the pool's
	waiting int        // fillers holding a ready sandbox
	key     sandboxKey // of the sandbox built last
	lastErr error      // why the last build failed, nil once one succeeds

	// spares are cgroups of the pool's ended sandboxes, readied for the
	// next ones (with a janitor shared by the pool's sandboxes only).
	spares spareCgroups
}

// spareCgroups keeps the cgroups of ended sandboxes for the next sandboxes
// with the same limits. Making a cgroup and removing it cost about 1.3 ms
// of machine CPU per sandbox on cgroup v1 here (the server's writes, the
// kernel's setup and teardown of four cgroups), which held the throughput
// of `jail serve` below bubblewrap's; a reused one costs a few writes.
// Only the cgroup is kept: no process, file or mount of a sandbox outlives
// it, Manager.Reuse refuses a cgroup that still holds a task or more than
// the kernel's reserves of memory, and it starts the counters afresh, so
// each run reports its own use.
type spareCgroups struct {
	mu     sync.Mutex
	closed bool
	kept   []spareCgroup
	// given and taken count the cgroups kept and handed out so far (for
	// tests).
	given, taken int
}

type spareCgroup struct {
	layout cgroups.Layout
	limits cgroups.Limits
	cgroup cgroups.Manager
}

// maxSpareCgroups bounds the spares kept: about as many as sandboxes of a
// pool run at once.
const maxSpareCgroups = 4

// take returns a spare cgroup made with layout and limits, or nil.
func (sp *spareCgroups) take(layout cgroups.Layout, limits cgroups.Limits) cgroups.Manager {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for i, k := range sp.kept {
		if k.layout == layout && k.limits == limits {
			sp.kept = append(sp.kept[:i], sp.kept[i+1:]...)
			sp.taken++
			return k.cgroup
		}
	}
	return nil
}

// give readies cg, whose sandbox is gone, for reuse and keeps it; false
// means the caller removes it: it cannot be reused, or the pool is
// closing. When enough are kept, the one kept longest goes (evicted, for
// the caller to remove), so the limits asked for lately win over those of
// a burst long past.
func (sp *spareCgroups) give(layout cgroups.Layout, limits cgroups.Limits, cg cgroups.Manager) (kept bool, evicted cgroups.Manager) {
	sp.mu.Lock()
	closed := sp.closed
	sp.mu.Unlock()
	if closed || !readied(cg) {
		return false, nil
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		return false, nil
	}
	if len(sp.kept) >= maxSpareCgroups {
		evicted = sp.kept[0].cgroup
		sp.kept = sp.kept[1:]
	}
	sp.kept = append(sp.kept, spareCgroup{layout: layout, limits: limits, cgroup: cg})
	sp.given++
	return true, evicted
}

// readied readies cg for reuse. The kernel frees what a sandbox's
// namespaces held (its mounts, its network namespace) in the background
// after the last task is gone, within about 20 ms here, and until then
// it is still charged to the cgroup: once more, a little later, before
// giving up on it.
func readied(cg cgroups.Manager) bool {
	err := cg.Reuse()
	if errors.Is(err, cgroups.ErrStillCharged) {
		time.Sleep(25 * time.Millisecond)
		err = cg.Reuse()
	}
	return err == nil
}

// removeWatched removes cg, which w watches, and has w forget it.
func removeWatched(w *janitor.Watch, cg cgroups.Manager) error {
	err := cg.Destroy()
	if err == nil {
		_ = w.Forget(cg.Paths())
	}
	return err
}

// drain takes every spare and keeps no more.
func (sp *spareCgroups) drain() []cgroups.Manager {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.closed = true
	var out []cgroups.Manager
	for _, k := range sp.kept {
		out = append(out, k.cgroup)
	}
	sp.kept = nil
	return out
}

// maxReadyAge bounds how long a sandbox waits for a run before it is
// rebuilt. What the init decided while building (which host paths exist to
// be masked, the top-level entries of the host tree) is as old as the
// sandbox: a run must not get a view of the host older than this, as a
// sandbox started this long ago would have.
const maxReadyAge = 30 * time.Second

// NewPool starts keeping size sandboxes built from the plans resolve
// makes; first is one such plan, which NewPool closes. Close ends them.
func NewPool(first *Plan, resolve func() (*Plan, error), size int) *Pool {
	size = max(size, 0)
	p := first
	pool := &Pool{resolve: resolve, key: keyOf(p), maxAge: maxReadyAge, ready: make(chan *supervisor), stop: make(chan struct{}), recheck: make(chan struct{}, 1)}
	if p.Cgroup.Version != cgroups.None {
		pool.watch, _ = janitor.StartWatch("/proc/self/exe")
	}
	pool.forker, _ = forker.Start("/proc/self/exe")
	p.Close()
	pool.start(size)
	return pool
}

// start starts size fillers.
func (pool *Pool) start(size int) {
	for i := 0; i < size; i++ {
		pool.fillers.Add(1)
		go pool.fill()
	}
}

// fill builds sandboxes and offers them until the pool closes; each filler
// holds at most one ready sandbox.
func (pool *Pool) fill() {
	defer pool.fillers.Done()
	backoff := 10 * time.Millisecond
	for {
		s, err := pool.build()
		pool.mu.Lock()
		pool.lastErr = err
		if err == nil {
			pool.key = keyOf(s.plan)
			pool.built++
		}
		pool.mu.Unlock()
		if err != nil {
			select {
			case <-pool.stop:
				return
			case <-time.After(backoff):
				backoff = min(2*backoff, 5*time.Second)
				continue
			}
		}
		backoff = 10 * time.Millisecond
		pool.setWaiting(+1)
		expired := time.NewTimer(pool.maxAge)
		// checked is when the filler last checked s against the
		// template; due, when set, fires once a second after it, for a
		// check asked for before then.
		var checked time.Time
		var due <-chan time.Time
		for offered := false; !offered; {
			offered = true
			check := false
			select {
			case <-pool.recheck:
				// At most one check a second per filler: under runs that
				// mostly miss (a server's requests of other limits), a
				// check per miss would resolve the template as often. One
				// asked for sooner is made when the second is over, not
				// dropped: it may be the one run of an edited template.
				if wait := time.Second - time.Since(checked); wait > 0 {
					if due == nil {
						due = time.After(wait)
					}
					offered = false
					continue
				}
				check = true
			case <-due:
				check = true
			case pool.ready <- s:
				expired.Stop()
				pool.setWaiting(-1)
				// The next one is built once this run is over, not beside
				// it: building takes the CPU the run needs.
				select {
				case <-s.finished:
				case <-pool.stop:
					return
				}
			case <-s.reaped:
				// The init died while it waited: build another.
				pool.setWaiting(-1)
				s.discard()
			case <-expired.C:
				pool.setWaiting(-1)
				s.discard()
			case <-pool.stop:
				expired.Stop()
				pool.setWaiting(-1)
				s.discard()
				return
			}
			if check {
				checked, due = time.Now(), nil
				if pool.current(s) {
					offered = false // still the template's: offer it on
					continue
				}
				// The template resolves to another sandbox now (a profile
				// edited, an image replaced): no run would take this one.
				expired.Stop()
				pool.setWaiting(-1)
				s.discard()
			}
		}
	}
}

func (pool *Pool) setWaiting(delta int) {
	pool.mu.Lock()
	pool.waiting += delta
	pool.mu.Unlock()
}

// Ready counts the sandboxes built and waiting for a run.
func (pool *Pool) Ready() int {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	return pool.waiting
}

// WaitReady waits up to limit for a ready sandbox (for benchmarks).
func (pool *Pool) WaitReady(limit time.Duration) {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		pool.mu.Lock()
		n := pool.waiting
		pool.mu.Unlock()
		if n > 0 {
			return
		}
	}
}

// build boots one sandbox of the template.
func (pool *Pool) build() (*supervisor, error) {
	p, err := pool.resolve()
	if err != nil {
		return nil, err
	}
	// Built for no run yet: the run's job comes with its handout.
	s := pool.supervisor(&Job{}, p, &Timings{Start: time.Now()})
	if err := s.boot(); err != nil {
		s.close()
		return nil, err
	}
	// Offered only once its init waits for the command: a run must not
	// wait for the root filesystem, nor share the CPU with its building.
	select {
	case <-s.ready:
		return s, nil
	case <-s.reaped:
		rep := <-s.reports
		s.discard()
		if rep.setupErr != nil {
			return nil, rep.setupErr
		}
		return nil, &SetupError{Step: "init", Err: errors.New("ended before it was ready")}
	}
}

// Err is why the pool could not build its last sandbox, or nil. Runs go
// on, started cold, while it cannot.
func (pool *Pool) Err() error {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	return pool.lastErr
}

// Run runs job's command in the sandbox p describes: in a ready one when
// one fits, or else in one built now, as the package's Run does. It takes
// over p.
func (pool *Pool) Run(ctx context.Context, job *Job, p *Plan, t *Timings) (api.Result, error) {
	if s := pool.take(p); s != nil {
		process := p.Config.Process
		p.Close()
		s.times = t
		return s.finish(ctx, job, &process)
	}
	return pool.supervisor(job, p, t).runCold(ctx)
}

// supervisor makes a supervisor whose cgroup the pool's janitor watches.
func (pool *Pool) supervisor(job *Job, p *Plan, t *Timings) *supervisor {
	s := newSupervisor(job, p, t)
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if !pool.closed {
		s.watch, s.forker = pool.watch, pool.forker
		if pool.watch != nil {
			s.spares = &pool.spares
		}
		pool.active.Add(1)
		s.onDone = pool.active.Done
	}
	return s
}

// current reports whether the template still resolves to ready sandbox s.
// Either way the pool's key becomes that of what it resolves to now, so
// that runs of the template take the sandboxes built for it: a filler
// whose build began before an edit sets the key of the old template when
// it ends, after another's check, and only a check mends that.
func (pool *Pool) current(s *supervisor) bool {
	p, err := pool.resolve()
	if err != nil {
		// Runs of the template fail as this did, before they reach the
		// pool; s stays until its age or a later check.
		return true
	}
	key := keyOf(p)
	p.Close()
	pool.mu.Lock()
	pool.key = key
	pool.mu.Unlock()
	return reflect.DeepEqual(key, keyOf(s.plan))
}

// take returns a ready sandbox that is the one p describes, or nil.
func (pool *Pool) take(p *Plan) *supervisor {
	if p.Config.Process.TTY {
		return nil
	}
	want := keyOf(p)
	// A request for another sandbox than the template's goes cold
	// without touching the ready ones.
	pool.mu.Lock()
	fits := reflect.DeepEqual(want, pool.key)
	pool.mu.Unlock()
	if !fits {
		// Either a run of another sandbox, or the template resolves
		// otherwise than when the pool last built (a profile edited):
		// a filler checks, off this run's path, so that the pool does
		// not go on building sandboxes no run takes. One check waits
		// at most.
		select {
		case pool.recheck <- struct{}{}:
		default:
		}
		return nil
	}
	for {
		select {
		case s := <-pool.ready:
			if !s.ended() && reflect.DeepEqual(keyOf(s.plan), want) {
				return s
			}
			// Built before the host changed under it (a profile, an
			// image, a mount source): never used.
			go s.discard()
		default:
			return nil
		}
	}
}

// Close ends the ready sandboxes, stops building, and waits until the runs
// in progress are over and every sandbox of the pool is gone from the host
// (jail.Pool.Close).
func (pool *Pool) Close() error {
	pool.stopOnce.Do(func() { close(pool.stop) })
	pool.fillers.Wait()
	pool.mu.Lock()
	pool.closed = true
	pool.mu.Unlock()
	pool.active.Wait()
	var errs []error
	for _, cg := range pool.spares.drain() {
		errs = append(errs, removeWatched(pool.watch, cg))
	}
	if pool.forker != nil {
		errs = append(errs, pool.forker.Close())
	}
	if pool.watch != nil {
		errs = append(errs, pool.watch.Close())
	}
	return errors.Join(errs...)
}

// sandboxKey is everything that makes one sandbox differ from another,
// that is a plan without its command.
type sandboxKey struct {
	cfg     config.Init
	id      namespaces.Identity
	cgroup  cgroups.Layout
	limits  cgroups.Limits
	notices []string
	files   int
}

func keyOf(p *Plan) sandboxKey {
	k := sandboxKey{cfg: p.Config, id: p.Identity, cgroup: p.Cgroup, limits: p.Limits, notices: p.Notices, files: len(p.Files)}
	k.cfg.Process.Args, k.cfg.Process.Env, k.cfg.Process.Cwd = nil, nil, ""
	return k
}
