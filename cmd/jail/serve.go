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

	"github.com/jail-sandbox/jail/server"
)

// serveCommand is `jail serve`: the HTTP API on a unix socket until SIGINT
// or SIGTERM.
func serveCommand(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	socket := fs.String("socket", "", "unix socket to listen on (default /run/jail/jail.sock for root, $XDG_RUNTIME_DIR/jail/jail.sock otherwise)")
	pool := fs.Int("pool", 2, "sandboxes kept ready per (image, root, profile); 0 for none")
	maxRuns := fs.Int("max-runs", 0, "runs at once; later requests wait (default 16 per CPU)")
	if code, done := parseFlags(fs, args, "jail serve [--socket PATH] [--pool N] [--max-runs N]"); done {
		return code
	}
	if fs.NArg() > 0 {
		return fail("serve: unexpected argument %q", fs.Arg(0))
	}
	if *pool < 0 || *pool > 64 {
		return fail("serve: --pool %d: must be between 0 and 64", *pool)
	}
	if *maxRuns < 0 {
		return fail("serve: --max-runs %d: must be positive", *maxRuns)
	}
	path := *socket
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
	if err := server.Serve(ctx, l, server.Options{PoolSize: *pool, MaxRuns: *maxRuns}, 10*time.Second); err != nil {
		return fail("serve: %v", err)
	}
	return 0
}
