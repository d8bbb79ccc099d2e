// Command server is the server program of jail (see package programs): `jail
// serve`, the HTTP API on a unix socket, and `jail mcp`, the Model Context
// Protocol server on stdio (package mcpserver), both of which link net/http.
// jail checks the flags and then execs it, so it keeps jail's pid; it is
// embedded in jail at build time and never installed on its own.
//
//	jail serve [--socket PATH] [--pool N] [--max-runs N]   as jail serve got them
//	jail mcp [FLAGS]                                       as jail mcp got them
package main

import (
	"fmt"
	"os"

	"github.com/jail-sandbox/jail"
	"github.com/jail-sandbox/jail/internal/oneline"
	"github.com/jail-sandbox/jail/internal/procname"
	"github.com/jail-sandbox/jail/internal/programs"
)

func main() {
	// Its pool starts its forker and its cgroup janitor from this binary,
	// re-executed, and sandboxes the holder of an id-mapping namespace.
	jail.Init()
	// The tools program jail handed over (image pulls, user profiles).
	programs.AdoptTools()
	if len(os.Args) > 1 && os.Args[1] == "mcp" {
		procname.Set("jail-mcp")
		os.Exit(mcpCommand(os.Args[1:]))
	}
	procname.Set("jail-server")
	os.Exit(serve(os.Args[1:]))
}

// fail prints a one-line error (its control characters escaped) as jail does and returns jail's status for
// its own failures.
func fail(format string, args ...any) int {
	fmt.Fprintln(os.Stderr, "jail: "+oneline.Escape(fmt.Sprintf(format, args...)))
	return jail.ExitSetup
}
