package main

import (
	"context"
	"flag"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jail-sandbox/jail"
	"github.com/jail-sandbox/jail/internal/programs/server/mcpflags"
	"github.com/jail-sandbox/jail/internal/programs/server/mcpserver"
)

// mcpCommand is `jail mcp` once jail has checked its flags, which it passes
// on as they were given: args are "mcp" and the flags. It serves one MCP
// session on stdin and stdout until the client closes stdin or SIGINT,
// SIGTERM or SIGHUP comes, then removes the session's sandbox.
func mcpCommand(args []string) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f mcpflags.Flags
	f.Register(fs)
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
		return fail("mcp: bad arguments %q", args[1:])
	}
	cfg, err := f.Config()
	if err != nil {
		return fail("mcp: %v", err)
	}
	// A client gone while an answer is written: the write fails (EPIPE)
	// rather than SIGPIPE ending the server before it removes its
	// sandbox. Notify, not Ignore: an ignored signal would stay ignored
	// in the processes the server starts.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	// The user's own sandboxes (`jail ls` shows them), and secrets from
	// JAIL_SECRET_<NAME> in the environment an MCP client's configuration
	// gives, as jail serve takes them. Notices go to stderr: stdout is
	// the protocol's.
	m, err := jail.NewManager(jail.ManagerOptions{SecretEnv: os.Getenv, Notices: os.Stderr})
	if err != nil {
		return fail("mcp: %v", err)
	}
	defer m.Close()
	if err := mcpserver.New(m, cfg).Serve(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil && !isEndOfInput(err) {
		return fail("mcp: %v", err)
	}
	return 0
}

// isEndOfInput: the client closed the connection, which ends a session.
func isEndOfInput(err error) bool {
	return err == io.EOF || err.Error() == "EOF" || err.Error() == "connection closed"
}
