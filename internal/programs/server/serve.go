package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/jail-sandbox/jail/server"
)

// serve is `jail serve` once jail has checked its flags: SOCKET POOL
// MAX-RUNS, SOCKET empty for the default. It serves until SIGINT or
// SIGTERM.
func serve(args []string) int {
	if len(args) != 3 {
		return fail("serve: want SOCKET POOL MAX-RUNS, got %d arguments", len(args))
	}
	path := args[0]
	pool, perr := strconv.Atoi(args[1])
	maxRuns, merr := strconv.Atoi(args[2])
	if perr != nil || merr != nil {
		return fail("serve: bad POOL or MAX-RUNS: %q %q", args[1], args[2])
	}
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
	if err := server.Serve(ctx, l, server.Options{PoolSize: pool, MaxRuns: maxRuns}, 10*time.Second); err != nil {
		return fail("serve: %v", err)
	}
	return 0
}
