package mcpserver_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jail-sandbox/jail"
	"github.com/jail-sandbox/jail/internal/programs/server/mcpflags"
	"github.com/jail-sandbox/jail/internal/programs/server/mcpserver"
)

// The handlers' tests: the MCP SDK's own client over an in-memory
// transport drives a Server whose sandboxes are real ones, in a state
// directory of the test's. The jail command's (root and rootless, with
// another SDK's client) are in test/mcp_test.go.

func TestMain(m *testing.M) {
	jail.Init()
	os.Exit(m.Run())
}

// serving is a Server serving one client session.
type serving struct {
	m      *jail.Manager
	srv    *mcpserver.Server
	client *mcp.ClientSession
	done   chan error // Serve's return
}

func config(t *testing.T) mcpflags.Config {
	t.Helper()
	var f mcpflags.Flags
	fs := flagSet(&f)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func flagSet(f *mcpflags.Flags) *flag.FlagSet {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	f.Register(fs)
	return fs
}

func start(t *testing.T, cfg mcpflags.Config) *serving {
	t.Helper()
	if os.Geteuid() != 0 {
		// Rootless runs of the same tools: test/mcp_test.go.
		t.Skip("these tests make sandboxes as root; the integration suite runs them rootless")
	}
	m, err := jail.NewManager(jail.ManagerOptions{StateDir: t.TempDir(), AuditLog: "-"})
	if err != nil {
		t.Fatal(err)
	}
	s := &serving{m: m, srv: mcpserver.New(m, cfg), done: make(chan error, 1)}
	serverT, clientT := mcp.NewInMemoryTransports()
	go func() { s.done <- s.srv.Serve(context.Background(), serverT) }()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	if s.client, err = client.Connect(context.Background(), clientT, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.close(t)
		// Whatever the test made and left is removed with the state
		// directory's sandboxes.
		infos, _ := m.List(nil)
		for _, info := range infos {
			_ = m.Remove(info.Name, true)
		}
		m.Close()
	})
	return s
}

// close ends the client's session and waits for Serve to return.
func (s *serving) close(t *testing.T) {
	if s.client == nil {
		return
	}
	s.client.Close()
	s.client = nil
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		t.Fatal("Serve did not return within 60s of the client's end (a hang, not a timing check)")
	}
}

// call calls a tool and returns its result.
func (s *serving) call(t *testing.T, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := s.client.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// ok calls a tool that must succeed and decodes its structured result.
func ok[T any](t *testing.T, s *serving, tool string, args any) T {
	t.Helper()
	res := s.call(t, tool, args)
	var out T
	if res.IsError {
		t.Fatalf("%s %v: tool error %s", tool, args, text(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", tool, b, err)
	}
	return out
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestToolsHaveSchemasThatRefuseOtherArguments: the seven tools are
// listed with descriptions, input schemas that name their required
// arguments and admit no others, and output schemas.
func TestToolsHaveSchemasThatRefuseOtherArguments(t *testing.T) {
	s := start(t, config(t))
	res, err := s.client.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"run_python": {"code"}, "run_shell": {"script"}, "sandbox_create": {"name"},
		"sandbox_exec": {"name", "command"}, "sandbox_list": nil, "sandbox_remove": {"name"}, "sandbox_logs": {"name"},
	}
	got := map[string]bool{}
	for _, tool := range res.Tools {
		got[tool.Name] = true
		req, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %s", tool.Name)
			continue
		}
		if tool.Description == "" || tool.OutputSchema == nil {
			t.Errorf("%s: no description or output schema", tool.Name)
		}
		b, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Type                 string          `json:"type"`
			Required             []string        `json:"required"`
			AdditionalProperties json.RawMessage `json:"additionalProperties"`
		}
		if err := json.Unmarshal(b, &schema); err != nil {
			t.Fatal(err)
		}
		if schema.Type != "object" || strings.Join(schema.Required, ",") != strings.Join(req, ",") || string(schema.AdditionalProperties) != "false" {
			t.Errorf("%s: input schema %s; want required %v, additionalProperties false", tool.Name, b, req)
		}
	}
	if len(got) != len(want) {
		t.Errorf("tools %v; want %d", got, len(want))
	}
}

// TestSessionSandboxKeepsFilesAndGoesWithTheSession: run_python and
// run_shell share one sandbox, whose /tmp carries a file from call to
// call; it is labelled with the server's scope and the session, and is
// removed when the client ends the session.
func TestSessionSandboxKeepsFilesAndGoesWithTheSession(t *testing.T) {
	s := start(t, config(t))
	first := ok[mcpserver.ExecOutput](t, s, "run_python", map[string]any{"code": "x = 6 * 7\nopen('/tmp/state', 'w').write(str(x))\nprint('wrote', x)"})
	if first.ExitCode != 0 || first.Stdout != "wrote 42\n" {
		t.Fatalf("first run_python: %+v", first)
	}
	second := ok[mcpserver.ExecOutput](t, s, "run_python", map[string]any{"code": "print(int(open('/tmp/state').read()) + 1)"})
	if second.Stdout != "43\n" || second.Sandbox != first.Sandbox {
		t.Fatalf("second run_python: %+v (first in %s)", second, first.Sandbox)
	}
	shell := ok[mcpserver.ExecOutput](t, s, "run_shell", map[string]any{"script": "cat /tmp/state; echo err >&2; exit 3"})
	if shell.Stdout != "42" || shell.Stderr != "err\n" || shell.ExitCode != 3 || shell.Sandbox != first.Sandbox {
		t.Fatalf("run_shell: %+v", shell)
	}
	infos, err := s.m.List(map[string]string{mcpserver.ScopeLabel: s.srv.Scope()})
	if err != nil || len(infos) != 1 || infos[0].Name != first.Sandbox || infos[0].Labels[mcpserver.SessionLabel] == "" {
		t.Fatalf("sandboxes %+v, %v; want the session's, labelled", infos, err)
	}
	list := ok[mcpserver.ListOutput](t, s, "sandbox_list", map[string]any{})
	if len(list.Sandboxes) != 1 || !list.Sandboxes[0].Session {
		t.Errorf("sandbox_list: %+v; want the session's sandbox, marked", list)
	}
	s.close(t)
	if infos, _ := s.m.List(nil); len(infos) != 0 {
		t.Fatalf("after the session: %+v; want no sandbox", infos)
	}
}

// TestSessionSandboxRemovedByTheClientIsMadeAgain: the session's sandbox,
// removed with sandbox_remove, is made anew by the next run_shell.
func TestSessionSandboxRemovedByTheClientIsMadeAgain(t *testing.T) {
	s := start(t, config(t))
	first := ok[mcpserver.ExecOutput](t, s, "run_shell", map[string]any{"script": "touch /tmp/a"})
	ok[mcpserver.RemoveOutput](t, s, "sandbox_remove", map[string]any{"name": first.Sandbox})
	again := ok[mcpserver.ExecOutput](t, s, "run_shell", map[string]any{"script": "test -e /tmp/a && echo kept || echo fresh"})
	if again.Stdout != "fresh\n" || again.Sandbox == first.Sandbox {
		t.Fatalf("after removal: %+v", again)
	}
}

// TestTimeoutAndTruncation: a command is killed at the call's timeout
// (exit 124, timed_out), and each stream is cut at the server's output
// limit (truncated).
func TestTimeoutAndTruncation(t *testing.T) {
	cfg := config(t)
	cfg.OutputLimit = 1000
	s := start(t, cfg)
	slow := ok[mcpserver.ExecOutput](t, s, "run_shell", map[string]any{"script": "echo started; sleep 30", "timeout": 1})
	if !slow.TimedOut || slow.ExitCode != jail.ExitTimeout || slow.Stdout != "started\n" {
		t.Errorf("timed out: %+v", slow)
	}
	big := ok[mcpserver.ExecOutput](t, s, "run_python", map[string]any{"code": "import sys\nsys.stdout.write('x' * 100000)\nsys.stderr.write('y' * 10)"})
	if !big.Truncated || len(big.Stdout) != 1000 || big.Stderr != "yyyyyyyyyy" || big.ExitCode != 0 {
		t.Errorf("truncated: %d bytes of stdout, %+v", len(big.Stdout), big.Stderr)
	}
	res := s.call(t, "run_python", map[string]any{"code": "print('x' * 5000)"})
	if !strings.Contains(text(res), "truncated") {
		t.Errorf("the text rendering does not say the output was cut: %q", text(res))
	}
}

// TestRefusedCalls: what a tool call cannot ask (an image, a network, a
// mount, a profile, a longer timeout, jail's labels, a sandbox the server
// did not make) is a tool error with jail's one line, and makes nothing.
func TestRefusedCalls(t *testing.T) {
	cfg := config(t)
	cfg.MaxSandboxes = 1
	s := start(t, cfg)
	// A sandbox of the user's, made with other options: out of reach.
	if _, err := s.m.Create(context.Background(), jail.Spec{Name: "users-own"}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"run_python", map[string]any{"code": "print(1)", "image": "python:3.11-slim"}, `jail: run_python: unknown argument "image"`},
		{"run_shell", map[string]any{"script": "true", "net": "allow=*"}, `jail: run_shell: unknown argument "net"`},
		{"sandbox_create", map[string]any{"name": "a", "mounts": []string{"/:/host:rw"}}, `jail: sandbox_create: unknown argument "mounts"`},
		{"sandbox_create", map[string]any{"name": "a", "profile": "unconfined"}, `jail: sandbox_create: unknown argument "profile"`},
		{"sandbox_create", map[string]any{"name": "a", "labels": map[string]string{"jail.mcp.scope": "x"}}, `jail: sandbox_create: label "jail.mcp.scope": keys starting with "jail." are jail's`},
		{"sandbox_create", map[string]any{"name": "../x"}, "jail: sandbox_create: name: \"../x\""},
		{"sandbox_create", map[string]any{}, "jail: sandbox_create: argument name: required"},
		{"run_shell", map[string]any{"script": "true", "timeout": 3600}, "jail: run_shell: timeout 3600s: at most 60"},
		{"run_shell", map[string]any{"script": 7}, "jail: run_shell: argument script: must be a string"},
		{"run_python", map[string]any{"code": ""}, "jail: run_python: argument code: required"},
		{"sandbox_exec", map[string]any{"name": "users-own", "command": "id"}, "jail: sandbox users-own: no such sandbox among this MCP server's"},
		{"sandbox_logs", map[string]any{"name": "users-own"}, "jail: sandbox users-own: no such sandbox among this MCP server's"},
		{"sandbox_remove", map[string]any{"name": "users-own"}, "jail: sandbox users-own: no such sandbox among this MCP server's"},
		{"sandbox_exec", map[string]any{"name": "nonesuch", "command": "id"}, "jail: sandbox nonesuch: no such sandbox"},
	}
	for _, c := range cases {
		res := s.call(t, c.tool, c.args)
		if got := text(res); !res.IsError || !strings.HasPrefix(got, c.want) || strings.Contains(got, "\n") {
			t.Errorf("%s %v: error %v, %q; want a one-line tool error starting %q", c.tool, c.args, res.IsError, got, c.want)
		}
	}
	// The user's sandbox is still there, and nothing else was made.
	infos, _ := s.m.List(nil)
	if len(infos) != 1 || infos[0].Name != "users-own" {
		t.Fatalf("sandboxes after the refusals: %+v", infos)
	}
	// --max-sandboxes 1: a second sandbox_create is refused.
	ok[mcpserver.CreateOutput](t, s, "sandbox_create", map[string]any{"name": "first"})
	res := s.call(t, "sandbox_create", map[string]any{"name": "second"})
	if !res.IsError || !strings.Contains(text(res), "at most 1 sandboxes") {
		t.Errorf("second sandbox_create: %q", text(res))
	}
}

// TestNamedSandboxLifecycle: sandbox_create, sandbox_exec (with its
// arguments, and a command that is not there), sandbox_list (by label),
// sandbox_logs and sandbox_remove on one named sandbox, which outlives
// the session until removed.
func TestNamedSandboxLifecycle(t *testing.T) {
	s := start(t, config(t))
	made := ok[mcpserver.CreateOutput](t, s, "sandbox_create", map[string]any{"name": "work", "labels": map[string]string{"task": "t1"}})
	if made.Sandbox.Name != "work" || made.Sandbox.State != jail.StateRunning || made.Sandbox.Labels["task"] != "t1" {
		t.Fatalf("sandbox_create: %+v", made)
	}
	out := ok[mcpserver.ExecOutput](t, s, "sandbox_exec", map[string]any{"name": "work", "command": "/bin/sh", "args": []string{"-c", "echo hello $0", "there"}})
	if out.Stdout != "hello there\n" || out.ExitCode != 0 || out.Sandbox != "work" {
		t.Fatalf("sandbox_exec: %+v", out)
	}
	missing := ok[mcpserver.ExecOutput](t, s, "sandbox_exec", map[string]any{"name": "work", "command": "/no/such/program"})
	if missing.ExitCode != 127 || !strings.HasPrefix(missing.Stderr, "jail: ") {
		t.Errorf("a missing program: %+v", missing)
	}
	list := ok[mcpserver.ListOutput](t, s, "sandbox_list", map[string]any{"labels": map[string]string{"task": "t1"}})
	if len(list.Sandboxes) != 1 || list.Sandboxes[0].Name != "work" || list.Sandboxes[0].Session {
		t.Errorf("sandbox_list: %+v", list)
	}
	logs := ok[mcpserver.LogsOutput](t, s, "sandbox_logs", map[string]any{"name": "work", "tail": 5})
	if !strings.Contains(logs.Logs, "hello there") {
		t.Errorf("sandbox_logs: %+v", logs)
	}
	s.close(t)
	if _, err := s.m.Get("work"); err != nil {
		t.Fatalf("a named sandbox went with the session: %v", err)
	}
	// A new server of the same configuration reaches it, and removes it.
	s2 := session(t, s.m, mcpserver.New(s.m, config(t)))
	ok[mcpserver.RemoveOutput](t, s2, "sandbox_remove", map[string]any{"name": "work"})
	if infos, _ := s.m.List(nil); len(infos) != 0 {
		t.Fatalf("after sandbox_remove: %+v", infos)
	}
}

// session connects a new client session to srv.
func session(t *testing.T, m *jail.Manager, srv *mcpserver.Server) *serving {
	t.Helper()
	s := &serving{m: m, srv: srv, done: make(chan error, 1)}
	serverT, clientT := mcp.NewInMemoryTransports()
	go func() { s.done <- srv.Serve(context.Background(), serverT) }()
	var err error
	if s.client, err = mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), clientT, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.close(t) })
	return s
}

// TestSessionsDoNotReachEachOthersSandbox: two sessions of one server
// each get a sandbox of their own; neither lists, runs in, reads or
// removes the other's, while both reach a named one.
func TestSessionsDoNotReachEachOthersSandbox(t *testing.T) {
	a := start(t, config(t))
	b := session(t, a.m, a.srv)
	inA := ok[mcpserver.ExecOutput](t, a, "run_shell", map[string]any{"script": "echo a > /tmp/who"})
	inB := ok[mcpserver.ExecOutput](t, b, "run_shell", map[string]any{"script": "cat /tmp/who 2>/dev/null || echo none"})
	if inB.Sandbox == inA.Sandbox || inB.Stdout != "none\n" {
		t.Fatalf("session b ran in %s (%q); a in %s", inB.Sandbox, inB.Stdout, inA.Sandbox)
	}
	ok[mcpserver.CreateOutput](t, a, "sandbox_create", map[string]any{"name": "shared"})
	list := ok[mcpserver.ListOutput](t, b, "sandbox_list", map[string]any{})
	var names []string
	for _, sb := range list.Sandboxes {
		names = append(names, sb.Name)
	}
	if strings.Join(names, ",") != strings.Join(sortedPair(inB.Sandbox, "shared"), ",") {
		t.Errorf("session b lists %v; want its own and shared", names)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"sandbox_exec", map[string]any{"name": inA.Sandbox, "command": "cat", "args": []string{"/tmp/who"}}},
		{"sandbox_logs", map[string]any{"name": inA.Sandbox}},
		{"sandbox_remove", map[string]any{"name": inA.Sandbox}},
	} {
		res := b.call(t, c.tool, c.args)
		if !res.IsError || !strings.Contains(text(res), "no such sandbox among this MCP server's") {
			t.Errorf("session b: %s on a's sandbox: %q", c.tool, text(res))
		}
	}
	ok[mcpserver.ExecOutput](t, b, "sandbox_exec", map[string]any{"name": "shared", "command": "true"})
	if _, err := a.m.Get(inA.Sandbox); err != nil {
		t.Fatalf("a's sandbox: %v", err)
	}
}

func sortedPair(x, y string) []string {
	if x > y {
		x, y = y, x
	}
	return []string{x, y}
}
