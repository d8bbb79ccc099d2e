package main

import (
	"flag"
	"io"

	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/internal/serveflags"
)

// serveCommand is `jail serve`: the HTTP API on a unix socket until SIGINT
// or SIGTERM. The server is a program of its own (see package programs),
// which jail becomes (same pid) once the flags are checked: net/http stays
// out of the jail binary, whose every start it would slow.
func serveCommand(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f serveflags.Flags
	f.Register(fs)
	if code, done := parseFlags(fs, args, serveflags.Usage); done {
		return code
	}
	if fs.NArg() > 0 {
		return fail("serve: unexpected argument %q", fs.Arg(0))
	}
	if err := f.Check(); err != nil {
		return fail("serve: %v", err)
	}
	// The server gets the command line as typed (flags checked), which is
	// what ps and pkill -f then show for it.
	// It gets the tools program too, for image pulls and user profiles.
	err := programs.ExecServer(append([]string{"jail", "serve"}, args...))
	return fail("serve: %v", err)
}
