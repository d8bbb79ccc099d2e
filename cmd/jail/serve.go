package main

import (
	"flag"
	"io"

	"github.com/jail-sandbox/jail/internal/programs"
)

// serveCommand is `jail serve`: the HTTP API on a unix socket until SIGINT
// or SIGTERM. The server is a program of its own (see package programs),
// which jail becomes (same pid) once the flags are checked: net/http stays
// out of the jail binary, whose every start it would slow.
func serveCommand(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("socket", "", "unix socket to listen on (default /run/jail/jail.sock for root, $XDG_RUNTIME_DIR/jail/jail.sock otherwise)")
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
	// The server gets the command line as typed (flags checked), which is
	// what ps and pkill -f then show for it.
	err := programs.Exec(programs.Server, append([]string{"jail", "serve"}, args...))
	return fail("serve: %v", err)
}
