package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jail-sandbox/jail"
	"github.com/jail-sandbox/jail/internal/serveflags"
	"github.com/jail-sandbox/jail/server"
)

// serve is `jail serve` once jail has checked its flags, which it passes on
// as they were given (so that ps and pkill -f see the command the user
// typed): args are "serve" and the flags. It serves until SIGINT or
// SIGTERM.
func serve(args []string) int {
	if len(args) == 0 || args[0] != "serve" {
		return fail("serve: this program is started by jail serve only")
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f serveflags.Flags
	f.Register(fs)
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
		return fail("serve: bad arguments %q", args[1:])
	}
	if err := f.Check(); err != nil {
		return fail("serve: %v", err)
	}
	path := f.Socket
	if path == "" {
		var err error
		if path, err = server.DefaultSocket(); err != nil {
			return fail("serve: %v", err)
		}
	}
	l, err := server.Listen(path)
	if err != nil {
		return fail("serve: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "jail: serving on %s\n", path)
	// The persistent sandboxes are the user's own (the CLI's too), and
	// the secrets they name may come from JAIL_SECRET_<NAME> here.
	opts := server.Options{PoolSize: f.Pool, MaxRuns: f.MaxRuns, Sandboxes: jail.ManagerOptions{SecretEnv: os.Getenv}}
	if err := server.Serve(ctx, l, opts, 10*time.Second); err != nil {
		return fail("serve: %v", err)
	}
	return 0
}
