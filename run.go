//go:build linux

package jail

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/jail-sandbox/jail/internal/egress/protocol"
	"github.com/jail-sandbox/jail/internal/secrets"
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
	// Secrets' values are read now, go into the command's environment
	// only (a secret bound to hosts: to the gateway only), and are
	// replaced by [secret:NAME] in what comes out.
	var values secrets.Values
	var bound []protocol.Secret
	if len(spec.Secrets) > 0 {
		if err := validate(&spec); err != nil {
			return Result{ExitCode: ExitSetup}, t, err
		}
		var err error
		var env []string
		if values, env, bound, err = readSecrets(spec.Secrets, spec.SecretEnv); err != nil {
			return Result{ExitCode: ExitSetup}, t, err
		}
		spec.Env = append(append([]string(nil), spec.Env...), env...)
		var flush func()
		spec.Stdout, spec.Stderr, flush = redactWriters(spec.Stdout, spec.Stderr, values)
		defer flush()
	}
	p, err := preparePulling(&spec)
	if err != nil {
		return Result{ExitCode: ExitSetup}, t, err
	}
	job := jobOf(&spec)
	// The egress gateway (--net allow=, or the profile's network).
	if rules, ok := egressRules(spec.Net); ok {
		// A pooled sandbox has no gateway's sockets.
		pool = nil
		done, err := egressJob(job, &p.Config, &spec, rules, bound, p.Users)
		if err != nil {
			p.Close()
			return Result{ExitCode: ExitSetup}, t, redactError(err, values)
		}
		defer done()
	}
	t.Prepared = time.Now()
	var res Result
	if pool != nil {
		res, err = pool.Run(ctx, job, p, t)
	} else {
		res, err = supervisor.Run(ctx, job, p, t)
	}
	t.Done = time.Now()
	if values.Len() > 0 {
		res.Stdout, res.Stderr = values.Redact(res.Stdout), values.Redact(res.Stderr)
		if err != nil {
			err = redactError(err, values)
		}
	}
	return res, t, err
}

// redactWriters wraps stdout and stderr (nil stays nil) in redactors of
// values; flush writes what they hold back.
func redactWriters(stdout, stderr io.Writer, values secrets.Values) (io.Writer, io.Writer, func()) {
	var rs []*secrets.Redactor
	wrap := func(w io.Writer) io.Writer {
		if w == nil {
			return nil
		}
		r := secrets.NewRedactor(w, values)
		rs = append(rs, r)
		return r
	}
	out, errw := wrap(stdout), wrap(stderr)
	return out, errw, func() {
		for _, r := range rs {
			_ = r.Flush()
		}
	}
}

// redactError replaces secrets' values in err's text, keeping its type.
func redactError(err error, values secrets.Values) error {
	var se *SetupError
	var ee *ExecError
	switch {
	case errors.As(err, &ee):
		return &ExecError{Code: ee.Code, Reason: values.Redact(ee.Reason)}
	case errors.As(err, &se):
		return &SetupError{Step: values.Redact(se.Step), Err: errors.New(values.Redact(se.Err.Error())), Refused: se.Refused}
	}
	return err
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
