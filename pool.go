//go:build linux

package jail

import (
	"context"
	"time"

	"github.com/jail-sandbox/jail/internal/supervisor"
)

// Pool keeps sandboxes built ahead of need: their cgroup made, their init
// started in fresh namespaces, the root filesystem mounted, waiting for a
// command. A run that such a sandbox fits then costs about a fork and an
// exec; the pool builds a replacement in the background.
//
// Every sandbox still runs exactly one command and is torn down after it:
// nothing is shared between runs but the emptied cgroup (on v2 only from
// Linux 6.12). A sandbox fits a request when the request would build the
// very same sandbox (same root, mounts, limits, profile, identity and host
// name); only the command, its environment and working directory, stdin
// and the run's timeout and output options may differ. The comparison is
// made on the resolved description, so a profile edited or an image
// replaced after the pool built its sandboxes is never run in a stale one.
// Runs that do not fit, and runs with a terminal, are started cold, as Run
// does. A ready sandbox is at most 30 s old: masks of host paths that
// appeared since it was built, for one, are only in newer ones.
type Pool struct {
	sandboxes *supervisor.Pool
}

// NewPool starts keeping size sandboxes built from template, which is
// checked as Run would check it. Close ends them. With size 0 no sandbox is
// kept ready, but the runs still share one cgroup janitor, which saves a
// process per run.
func NewPool(template Spec, size int) (*Pool, error) {
	if err := startedWithoutInit(); err != nil {
		return nil, err
	}
	if template.TTY || template.Stdin != nil {
		return nil, invalid("pool", "a pool's template cannot have a terminal or stdin: each run brings its own")
	}
	if len(template.Command) == 0 {
		// Never run: a ready sandbox gets its command when handed out.
		template.Command = []string{"/bin/true"}
	}
	// Each plan is prepared from a copy: prepare fills in what the
	// profile and the image decide (limits, environment, user), which
	// must be read afresh for every sandbox, not kept from the first.
	spec := template
	first, err := prepare(&spec)
	if err != nil {
		return nil, err
	}
	resolve := func() (*supervisor.Plan, error) {
		spec := template
		return prepare(&spec)
	}
	return &Pool{sandboxes: supervisor.NewPool(first, resolve, size)}, nil
}

// Ready counts the sandboxes built and waiting for a run.
func (pool *Pool) Ready() int { return pool.sandboxes.Ready() }

// Err is why the pool could not build its last sandbox, or nil. Runs go
// on, started cold, while it cannot.
func (pool *Pool) Err() error { return pool.sandboxes.Err() }

// Run runs spec's command as Run does, in a ready sandbox when one fits.
func (pool *Pool) Run(ctx context.Context, spec Spec) (Result, error) {
	res, _, err := pool.runTimed(ctx, spec)
	return res, err
}

func (pool *Pool) runTimed(ctx context.Context, spec Spec) (Result, *supervisor.Timings, error) {
	return run(ctx, pool.sandboxes, spec)
}

// waitReady waits up to limit for a ready sandbox (for benchmarks).
func (pool *Pool) waitReady(limit time.Duration) { pool.sandboxes.WaitReady(limit) }

// Close ends the ready sandboxes, stops building, and waits until the runs
// in progress are over and every sandbox of the pool is gone from the host.
// Run still works after Close, cold.
func (pool *Pool) Close() error { return pool.sandboxes.Close() }
