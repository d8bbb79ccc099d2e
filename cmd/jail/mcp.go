package main

import (
	"flag"
	"io"

	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/internal/programs/server/mcpflags"
)

// mcpCommand is `jail mcp`: a Model Context Protocol server on stdin and
// stdout whose tools run code in sandboxes made from these flags. The MCP
// SDK links net/http, so the server is the server program's (see package
// programs), which jail becomes (same pid) once the flags are checked, as
// for `jail serve`.
func mcpCommand(args []string) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f mcpflags.Flags
	f.Register(fs)
	if code, done := parseFlags(fs, args, mcpflags.Usage); done {
		return code
	}
	if fs.NArg() > 0 {
		return fail("mcp: unexpected argument %q (options come as --name VALUE)", fs.Arg(0))
	}
	if _, err := f.Config(); err != nil {
		return fail("mcp: %v", err)
	}
	err := programs.ExecServer(append([]string{"jail", "mcp"}, args...))
	return fail("mcp: %v", err)
}
