package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// runHooks runs hooks in order, in the runtime's namespaces, as runc does:
// each with the container's state (JSON) on stdin, its args (args[0] is
// its argv[0]) and env, killed after its timeout (seconds) if it has one.
// The first that fails stops the rest.
func runHooks(kind string, hooks []specs.Hook, state specs.State) error {
	return eachHook(kind, hooks, state, func(err error) error { return err })
}

// runHooksWarning runs every hook in order, as the spec asks of poststop
// hooks: one that fails is reported to warn and the rest still run.
func runHooksWarning(kind string, hooks []specs.Hook, state specs.State, warn func(string)) {
	_ = eachHook(kind, hooks, state, func(err error) error { warn(err.Error()); return nil })
}

// eachHook runs hooks in order and hands each failure to failed, which
// returns the error that stops the rest, or nil to go on.
func eachHook(kind string, hooks []specs.Hook, state specs.State, failed func(error) error) error {
	if len(hooks) == 0 {
		return nil
	}
	data, err := json.Marshal(state)
	if err != nil {
		return failed(fmt.Errorf("%s hooks: state: %w", kind, err))
	}
	for i, h := range hooks {
		if err := runHook(h, data); err != nil {
			if err := failed(fmt.Errorf("%s hook #%d (%s): %w", kind, i, h.Path, err)); err != nil {
				return err
			}
		}
	}
	return nil
}

func runHook(h specs.Hook, state []byte) error {
	ctx := context.Background()
	if h.Timeout != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(*h.Timeout)*time.Second)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, h.Path)
	if len(h.Args) > 0 {
		cmd.Args = h.Args
	}
	cmd.Env = h.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Stdin = bytes.NewReader(state)
	// A hook ends with this process: a create or delete the shim kills
	// must not leave its hooks running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("timed out after %ds", *h.Timeout)
	}
	if err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 512 {
			msg = msg[:512] + "..."
		}
		if msg != "" {
			return fmt.Errorf("%v: %s", err, msg)
		}
		return err
	}
	return nil
}
