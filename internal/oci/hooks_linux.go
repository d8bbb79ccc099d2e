package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// runHooks runs hooks in order, in the runtime's namespaces, as runc does:
// each with the container's state (JSON) on stdin, its args (args[0] is
// its argv[0]) and env, killed after its timeout (seconds) if it has one.
// The first that fails stops the rest.
func runHooks(kind string, hooks []specs.Hook, state specs.State) error {
	if len(hooks) == 0 {
		return nil
	}
	data, err := json.Marshal(state)
	if err != nil {
		return err
	}
	for i, h := range hooks {
		if err := runHook(h, data); err != nil {
			return fmt.Errorf("%s hook #%d (%s): %w", kind, i, h.Path, err)
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
