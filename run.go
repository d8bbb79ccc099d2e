//go:build linux

package jail

import (
	"context"
	"time"

	"github.com/jail-sandbox/jail/internal/supervisor"
)

// Run runs spec.Command in a new sandbox, streams its output to spec.Stdout
// and spec.Stderr, and returns how it ended. When Run returns, the command
// and every process it started are gone; the init, which killed and reaped
// them before reporting, may still be in the kernel's teardown of the
// namespaces, and its cgroup is removed by the janitor right after.
//
// Cancelling ctx kills the sandbox; Run then returns ctx.Err().
func Run(ctx context.Context, spec Spec) (Result, error) {
	res, _, err := runTimed(ctx, spec)
	return res, err
}

func runTimed(ctx context.Context, spec Spec) (Result, *supervisor.Timings, error) {
	return run(ctx, nil, spec)
}

// run validates and resolves spec, then has a supervisor build the sandbox,
// run the command and tear the sandbox down: in a ready sandbox of pool
// when one fits, or else (and without a pool) in one built now.
func run(ctx context.Context, pool *supervisor.Pool, spec Spec) (Result, *supervisor.Timings, error) {
	t := &supervisor.Timings{Start: time.Now()}
	if err := startedWithoutInit(); err != nil {
		return Result{ExitCode: ExitSetup}, t, err
	}
	p, err := prepare(&spec)
	if err != nil {
		return Result{ExitCode: ExitSetup}, t, err
	}
	t.Prepared = time.Now()
	var res Result
	if pool != nil {
		res, err = pool.Run(ctx, jobOf(&spec), p, t)
	} else {
		res, err = supervisor.Run(ctx, jobOf(&spec), p, t)
	}
	t.Done = time.Now()
	return res, t, err
}

// jobOf is what the supervisor needs of spec beside its plan.
func jobOf(spec *Spec) *supervisor.Job {
	limit := spec.OutputLimit
	if limit == 0 {
		limit = DefaultOutputLimit
	}
	return &supervisor.Job{
		Stdin: spec.Stdin, Stdout: spec.Stdout, Stderr: spec.Stderr, Notices: spec.Notices,
		Capture: spec.Capture, OutputLimit: limit, Timeout: spec.Timeout,
		TTY: spec.TTY, Resize: spec.Resize, Signals: spec.Signals,
	}
}
