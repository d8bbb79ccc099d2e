// Package mcpserver is `jail mcp`: a Model Context Protocol server whose
// tools run code in jail's persistent sandboxes, made and reached through
// a jail.Manager in this process (no `jail serve` needed) on the user's
// own state directory, so that `jail ls` sees them.
//
// Invariants:
//   - Every sandbox is made from the one spec the server was started with
//     (mcpflags.Config.Sandbox: root, profile, network, mounts, workspace,
//     limits). A tool argument names a sandbox, a command, labels and a
//     timeout no longer than the server's, nothing else: an argument the
//     tool does not define is refused, never ignored, so that a client
//     cannot believe it widened a sandbox.
//   - The tools reach only sandboxes this server's configuration made
//     (label jail.mcp.scope, a digest of that spec): never a sandbox the
//     user made with wider options, nor another session's own.
//   - run_python and run_shell share one sandbox per MCP session, made on
//     first use and removed when the session ends (its input's end, the
//     server's context cancelled); one left by a server killed outright
//     goes after the idle timeout, which its init enforces.
//   - A refused or failed call is a tool error whose text is jail's one
//     line ("jail: ..."); a command's own failure is a result.
package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jail-sandbox/jail"
	"github.com/jail-sandbox/jail/internal/oneline"
	"github.com/jail-sandbox/jail/internal/programs/server/mcpflags"
)

// Labels jail mcp puts on its sandboxes. Keys under "jail." are refused in
// a client's labels.
const (
	// ScopeLabel holds the digest of the configuration a sandbox was made
	// with: the tools reach only sandboxes of their server's.
	ScopeLabel = "jail.mcp.scope"
	// SessionLabel marks a session's own sandbox (run_python, run_shell)
	// with the session's id.
	SessionLabel   = "jail.mcp.session"
	reservedLabels = "jail."
)

// Bounds on what a tool call brings.
const (
	// maxCodeBytes bounds run_python's code, which goes on the
	// interpreter's standard input.
	maxCodeBytes = 1 << 20
	// maxScriptBytes bounds run_shell's script, an argument of /bin/sh -c
	// (the kernel takes at most 128 KiB per argument).
	maxScriptBytes = 100 << 10
	// maxClientLabels bounds sandbox_create's labels.
	maxClientLabels = 16
	// defaultLogLines is sandbox_logs' tail when none is asked.
	defaultLogLines = 100
)

// Server serves jail's tools to MCP clients. Its methods may be called
// from several goroutines, and one Server may serve several sessions.
type Server struct {
	m     *jail.Manager
	cfg   mcpflags.Config
	scope string
	mcp   *mcp.Server

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*session
	creating sync.Mutex // held while sandbox_create counts and makes
}

// session is one MCP session's own sandbox.
type session struct {
	id string     // of its current sandbox, mcp-ID; guarded by the Server's mu
	mu sync.Mutex // guards what follows; held while its sandbox is made or removed
	sb *jail.Sandbox
	// ended: the session is over; no sandbox is made for it any more.
	ended bool
}

// New returns a Server whose sandboxes m makes from cfg.
func New(m *jail.Manager, cfg mcpflags.Config) *Server {
	s := &Server{m: m, cfg: cfg, scope: scopeOf(cfg.Sandbox), sessions: map[*mcp.ServerSession]*session{}}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "jail", Title: "jail: Linux sandboxes", Version: jail.Version}, &mcp.ServerOptions{
		Instructions: s.instructions(),
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	s.addTools()
	return s
}

// Scope is the value of ScopeLabel on this server's sandboxes.
func (s *Server) Scope() string { return s.scope }

// scopeOf digests the options that make a sandbox what it is: servers
// started with the same flags reach each other's sandboxes, and no other.
func scopeOf(spec jail.Spec) string {
	key := struct {
		Image, Rootfs, Profile, Workspace, Net string
		NetLimits                              jail.NetLimits
		Memory                                 int64
		CPUs                                   float64
		Pids                                   int
		Mounts                                 []jail.Mount
		Env, Secrets                           []string
		ReadOnly                               bool
		Timeout                                time.Duration
	}{spec.Image, spec.Rootfs, spec.ProfileName(), spec.Workspace, spec.Net, spec.NetLimits, spec.Memory, spec.CPUs,
		spec.Pids, spec.Mounts, spec.Env, spec.Secrets, spec.ReadOnly, spec.Timeout}
	b, _ := json.Marshal(key)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func (s *Server) instructions() string {
	root := "the host's system, read-only"
	if s.cfg.Sandbox.Image != "" {
		root = "the image " + s.cfg.Sandbox.Image
	} else if s.cfg.Sandbox.Rootfs != "" {
		root = "the directory " + s.cfg.Sandbox.Rootfs
	}
	network := "no network"
	if s.cfg.Sandbox.Net != "" {
		network = "network only to the hosts its operator allowed"
	}
	ws := ""
	if s.cfg.Sandbox.Workspace != "" {
		ws = " The user's project is at /workspace (read-write)."
	}
	return fmt.Sprintf("Runs code in isolated Linux sandboxes (jail): root filesystem from %s, %s, limited memory and CPU. "+
		"run_python and run_shell share one sandbox for this session: files (e.g. in /tmp) and installed state carry from call to call. "+
		"Each command is killed after %s unless a shorter timeout is given; each stream is cut at %d bytes.%s",
		root, network, s.cfg.Timeout, s.cfg.OutputLimit, ws)
}

// Serve serves one session over t until the client ends it or ctx is
// done, then removes the session's sandbox.
func (s *Server) Serve(ctx context.Context, t mcp.Transport) error {
	ss, err := s.mcp.Connect(ctx, t, nil)
	if err != nil {
		return err
	}
	waited := make(chan error, 1)
	go func() { waited <- ss.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		ss.Close()
		<-waited
		err = nil
	}
	if rerr := s.endSession(ss); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// endSession removes ss's sandbox, if it has one, and makes none after:
// its entry stays, marked ended, for a call still under way.
func (s *Server) endSession(ss *mcp.ServerSession) error {
	sess := s.sessionOf(ss)
	sess.mu.Lock()
	defer sess.mu.Unlock()
	sess.ended = true
	if sess.sb == nil {
		return nil
	}
	name := sess.sb.Name()
	sess.sb = nil
	if err := s.m.Remove(name, true); err != nil && !errors.Is(err, jail.ErrNotFound) {
		return err
	}
	return nil
}

// sessionOf returns the session state of ss, made on first use.
func (s *Server) sessionOf(ss *mcp.ServerSession) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess := s.sessions[ss]; sess != nil {
		return sess
	}
	sess := &session{}
	s.sessions[ss] = sess
	return sess
}

func randomID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// sessionSandbox returns the session's sandbox, made now if it has none
// or if the one it had is gone (removed by a client, or by its idle
// timeout): its files are then lost, which the next result cannot hide.
func (s *Server) sessionSandbox(ctx context.Context, sess *session) (*jail.Sandbox, error) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.ended {
		return nil, errors.New("the MCP session has ended")
	}
	if sess.sb != nil {
		info, err := sess.sb.Info()
		if err == nil && info.State != jail.StateDead {
			return sess.sb, nil
		}
		if err != nil && !errors.Is(err, jail.ErrNotFound) {
			return nil, err
		}
		if err == nil {
			_ = s.m.Remove(sess.sb.Name(), true)
		}
		sess.sb = nil
	}
	// A new name each time: one made by a client meanwhile is not taken
	// for the session's.
	id, err := randomID()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	sess.id = id
	s.mu.Unlock()
	sb, err := s.m.Create(ctx, s.spec("mcp-"+id, map[string]string{SessionLabel: id}))
	if err != nil {
		return nil, err
	}
	sess.sb = sb
	return sb, nil
}

// spec is the spec of a sandbox of this server's: its configuration,
// with name and labels (the scope's added).
func (s *Server) spec(name string, labels map[string]string) jail.Spec {
	spec := s.cfg.Sandbox
	spec.Name = name
	spec.IdleTimeout = s.cfg.IdleTimeout
	spec.Labels = map[string]string{ScopeLabel: s.scope}
	for k, v := range labels {
		spec.Labels[k] = v
	}
	// Slices are the configuration's: Create must not share them.
	spec.Mounts = append([]jail.Mount(nil), spec.Mounts...)
	spec.Env = append([]string(nil), spec.Env...)
	spec.Secrets = append([]string(nil), spec.Secrets...)
	return spec
}

// sessionID is the id of the calling session's sandbox ("": none yet).
func (s *Server) sessionID(ss *mcp.ServerSession) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess := s.sessions[ss]; sess != nil {
		return sess.id
	}
	return ""
}

// visible tells whether a client of the session whose sandbox is session
// may see the sandbox info: one made by this server's configuration, and
// not another session's own.
func (s *Server) visible(info jail.SandboxInfo, session string) bool {
	if info.Labels[ScopeLabel] != s.scope {
		return false
	}
	other, ok := info.Labels[SessionLabel]
	return !ok || other == session
}

// owned returns the sandbox name if the calling session may reach it
// (visible).
func (s *Server) owned(req *mcp.CallToolRequest, name string) (*jail.Sandbox, error) {
	sb, err := s.m.Get(name)
	if err != nil {
		return nil, err
	}
	info, err := sb.Info()
	if err != nil {
		return nil, err
	}
	if !s.visible(info, s.sessionID(req.Session)) {
		return nil, fmt.Errorf("sandbox %s: %w among this MCP server's (it reaches only the sandboxes it made, and no other session's own)", name, jail.ErrNotFound)
	}
	return sb, nil
}

// ExecOutput is what a command's tool returns.
type ExecOutput struct {
	Stdout    string `json:"stdout" jsonschema:"the command's standard output (cut at the server's limit: see truncated)"`
	Stderr    string `json:"stderr" jsonschema:"the command's standard error (cut at the server's limit: see truncated)"`
	ExitCode  int    `json:"exit_code" jsonschema:"the exit status: 0 for success; 124 when killed at its timeout; 128+N when killed by signal N; 126 or 127 when the command could not be run or found"`
	Truncated bool   `json:"truncated" jsonschema:"true when stdout or stderr was cut at the server's output limit"`
	TimedOut  bool   `json:"timed_out" jsonschema:"true when the command was killed at its timeout"`
	OOMKilled bool   `json:"oom_killed" jsonschema:"true when the command was killed for exceeding the sandbox's memory limit"`
	Sandbox   string `json:"sandbox" jsonschema:"the sandbox the command ran in"`
}

// text renders o for a model that reads text only.
func (o *ExecOutput) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit code: %d", o.ExitCode)
	switch {
	case o.TimedOut:
		b.WriteString(" (killed: timeout)")
	case o.OOMKilled:
		b.WriteString(" (killed: out of memory)")
	}
	b.WriteString("\n")
	for _, stream := range []struct{ name, data string }{{"stdout", o.Stdout}, {"stderr", o.Stderr}} {
		if stream.data == "" {
			continue
		}
		fmt.Fprintf(&b, "--- %s ---\n%s", stream.name, stream.data)
		if !strings.HasSuffix(stream.data, "\n") {
			b.WriteString("\n")
		}
	}
	if o.Truncated {
		b.WriteString("(output truncated: each stream is cut at the server's limit)\n")
	}
	return b.String()
}

// exec runs p in sb and returns its result, or a refusal.
func (s *Server) exec(ctx context.Context, sb *jail.Sandbox, p jail.Process, timeout float64) (*ExecOutput, error) {
	d, err := s.timeout(timeout)
	if err != nil {
		return nil, err
	}
	p.Timeout, p.Capture, p.OutputLimit = d, true, s.cfg.OutputLimit
	res, err := sb.Exec(ctx, p)
	var ee *jail.ExecError
	if err != nil && !errors.As(err, &ee) {
		return nil, err
	}
	out := &ExecOutput{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode, Truncated: res.Truncated,
		TimedOut: res.TimedOut, OOMKilled: res.OOMKilled, Sandbox: sb.Name()}
	if ee != nil {
		out.ExitCode = ee.Code
		out.Stderr += "jail: " + oneline.Escape(ee.Error()) + "\n"
	}
	return out, nil
}

// timeout is a call's timeout in seconds (0: the server's), at most the
// server's.
func (s *Server) timeout(seconds float64) (time.Duration, error) {
	if seconds == 0 {
		return s.cfg.Timeout, nil
	}
	if seconds < 0 {
		return 0, fmt.Errorf("timeout %v: must be a positive number of seconds", seconds)
	}
	if seconds > s.cfg.Timeout.Seconds() {
		return 0, fmt.Errorf("timeout %vs: at most %v (jail mcp --timeout)", seconds, s.cfg.Timeout.Seconds())
	}
	return time.Duration(seconds * float64(time.Second)), nil
}

// runInSession runs p in the session's sandbox.
func (s *Server) runInSession(ctx context.Context, req *mcp.CallToolRequest, p jail.Process, timeout float64) (*ExecOutput, error) {
	if _, err := s.timeout(timeout); err != nil {
		return nil, err
	}
	sb, err := s.sessionSandbox(ctx, s.sessionOf(req.Session))
	if err != nil {
		return nil, err
	}
	return s.exec(ctx, sb, p, timeout)
}

// Tool arguments.

// RunPythonInput is run_python's arguments.
type RunPythonInput struct {
	Code    string  `json:"code" jsonschema:"a complete Python 3 program, run with python3; print what you want to see. It runs in this session's sandbox, so files written (e.g. under /tmp) are there for the next call"`
	Timeout float64 `json:"timeout,omitempty" jsonschema:"seconds before the program is killed (default and most: the server's limit)"`
}

// RunShellInput is run_shell's arguments.
type RunShellInput struct {
	Script  string  `json:"script" jsonschema:"a POSIX shell script, run with /bin/sh -c in this session's sandbox, which keeps its files (e.g. under /tmp) from call to call"`
	Timeout float64 `json:"timeout,omitempty" jsonschema:"seconds before the script is killed (default and most: the server's limit)"`
}

// CreateInput is sandbox_create's arguments.
type CreateInput struct {
	Name   string            `json:"name" jsonschema:"the new sandbox's name: 1 to 63 of a-z A-Z 0-9 _ . -, starting with a letter or digit"`
	Labels map[string]string `json:"labels,omitempty" jsonschema:"labels to find it by, as key: value (keys of letters, digits, _ . / -; keys starting with jail. are reserved)"`
}

// ExecInput is sandbox_exec's arguments.
type ExecInput struct {
	Name    string   `json:"name" jsonschema:"the sandbox, as sandbox_create named it"`
	Command string   `json:"command" jsonschema:"the program to run, e.g. python3 or /bin/ls (looked up in the sandbox's PATH)"`
	Args    []string `json:"args,omitempty" jsonschema:"its arguments"`
	Timeout float64  `json:"timeout,omitempty" jsonschema:"seconds before the command is killed (default and most: the server's limit)"`
}

// NameInput is the arguments of the tools that take only a sandbox.
type NameInput struct {
	Name string `json:"name" jsonschema:"the sandbox's name"`
}

// LogsInput is sandbox_logs' arguments.
type LogsInput struct {
	Name string `json:"name" jsonschema:"the sandbox's name"`
	Tail int    `json:"tail,omitempty" jsonschema:"how many of the last lines to return (default 100)"`
}

// ListInput is sandbox_list's arguments.
type ListInput struct {
	Labels map[string]string `json:"labels,omitempty" jsonschema:"only sandboxes with all of these labels"`
}

// Tool results.

// SandboxOutput describes one sandbox.
type SandboxOutput struct {
	Name     string            `json:"name" jsonschema:"its name"`
	State    string            `json:"state" jsonschema:"running, stopped or dead"`
	Labels   map[string]string `json:"labels,omitempty" jsonschema:"its labels"`
	Created  string            `json:"created" jsonschema:"when it was made (RFC 3339)"`
	LastExec string            `json:"last_exec,omitempty" jsonschema:"when its last command started (RFC 3339)"`
	Session  bool              `json:"session" jsonschema:"true for the sandbox of this session's run_python and run_shell"`
}

// CreateOutput is sandbox_create's result.
type CreateOutput struct {
	Sandbox SandboxOutput `json:"sandbox" jsonschema:"the sandbox made"`
}

// ListOutput is sandbox_list's result.
type ListOutput struct {
	Sandboxes []SandboxOutput `json:"sandboxes" jsonschema:"this server's sandboxes, by name"`
}

// RemoveOutput is sandbox_remove's result.
type RemoveOutput struct {
	Removed string `json:"removed" jsonschema:"the sandbox removed"`
}

// LogsOutput is sandbox_logs' result.
type LogsOutput struct {
	Logs      string `json:"logs" jsonschema:"the combined output of the sandbox's commands, oldest first"`
	Truncated bool   `json:"truncated" jsonschema:"true when only the end of what was asked fits the server's output limit"`
}

func (s *Server) addTools() {
	addTool(s, &mcp.Tool{
		Name:  "run_python",
		Title: "Run Python",
		Description: "Run a Python 3 program in an isolated Linux sandbox and return its stdout, stderr and exit code. " +
			"All run_python and run_shell calls of this session share one sandbox: files written (e.g. in /tmp) stay for later calls, " +
			"but each call is a new process (variables do not carry over; save them to a file).",
	}, s.runPython)
	addTool(s, &mcp.Tool{
		Name:  "run_shell",
		Title: "Run a shell script",
		Description: "Run a POSIX shell script (/bin/sh -c) in an isolated Linux sandbox and return its stdout, stderr and exit code. " +
			"It shares this session's sandbox with run_python: files stay from call to call.",
	}, s.runShell)
	addTool(s, &mcp.Tool{
		Name:  "sandbox_create",
		Title: "Create a sandbox",
		Description: "Make a named, persistent sandbox (kept after this session, until sandbox_remove" + s.idleNote() + ") to run commands in with sandbox_exec. " +
			"Its root filesystem, network, mounts and limits are the server's own and cannot be chosen.",
	}, s.create)
	addTool(s, &mcp.Tool{
		Name:        "sandbox_exec",
		Title:       "Run a command in a sandbox",
		Description: "Run a command with arguments (no shell: give /bin/sh and [\"-c\", script] for one) in a sandbox made by sandbox_create, and return its stdout, stderr and exit code.",
	}, s.execTool)
	addTool(s, &mcp.Tool{
		Name:        "sandbox_list",
		Title:       "List sandboxes",
		Description: "List the sandboxes of this server: their names, states, labels and times.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.list)
	destructive := true
	addTool(s, &mcp.Tool{
		Name:        "sandbox_remove",
		Title:       "Remove a sandbox",
		Description: "Remove a sandbox: its processes are killed and its files deleted.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive},
	}, s.remove)
	addTool(s, &mcp.Tool{
		Name:        "sandbox_logs",
		Title:       "A sandbox's output",
		Description: "Return the combined output of the commands run in a sandbox so far, its last lines.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.logs)
}

// idleNote says when an unused sandbox goes, for a tool's description.
func (s *Server) idleNote() string {
	if s.cfg.IdleTimeout <= 0 {
		return ""
	}
	return fmt.Sprintf(" or %s unused", s.cfg.IdleTimeout)
}

// texter is a result with a text rendering of its own.
type texter interface{ text() string }

// addTool adds a tool whose arguments are In and result Out, with schemas
// derived from them. Its arguments are decoded here, not by the SDK, so
// that what is refused says why in jail's words; an argument In does not
// define is refused.
func addTool[In, Out any](s *Server, t *mcp.Tool, handle func(context.Context, *mcp.CallToolRequest, *In) (*Out, error)) {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: input schema: %v", t.Name, err)) // a programming error, found by every test
	}
	out, err := jsonschema.For[Out](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: output schema: %v", t.Name, err))
	}
	t.InputSchema, t.OutputSchema = in, out
	name := t.Name
	s.mcp.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args In
		if err := decodeArgs(req.Params.Arguments, &args); err != nil {
			return toolError(name, err), nil
		}
		res, err := handle(ctx, req, &args)
		if err != nil {
			return toolError(name, err), nil
		}
		var text string
		if tx, ok := any(res).(texter); ok {
			text = tx.text()
		} else {
			b, _ := json.MarshalIndent(res, "", "  ")
			text = string(b)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: res}, nil
	})
}

// decodeArgs decodes a tool's arguments into v, refusing what v does not
// define: an image, a network or a mount asked of a tool is refused, so
// that no client believes it got one.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return fmt.Errorf("unknown argument %s: a sandbox's image, profile, network, mounts, workspace and limits are fixed by jail mcp's flags, not by a tool call", field)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("argument %s: must be %s", te.Field, jsonType(te.Type.Kind().String()))
		}
		return fmt.Errorf("arguments: %v", err)
	}
	return nil
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "float64", "int":
		return "a number"
	case "slice":
		return "an array of strings"
	case "map":
		return "an object of strings"
	}
	return "of another type"
}

// toolError is a tool's refusal or failure as jail's one line.
func toolError(tool string, err error) *mcp.CallToolResult {
	msg := "jail: " + oneline.Escape(err.Error())
	if !strings.HasPrefix(err.Error(), tool+":") && !strings.HasPrefix(err.Error(), "sandbox ") {
		msg = "jail: " + tool + ": " + oneline.Escape(err.Error())
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
	res.IsError = true
	return res
}

func required(field, value string) error {
	if value == "" {
		return fmt.Errorf("argument %s: required", field)
	}
	return nil
}

func (s *Server) runPython(ctx context.Context, req *mcp.CallToolRequest, in *RunPythonInput) (*ExecOutput, error) {
	if err := required("code", in.Code); err != nil {
		return nil, err
	}
	if len(in.Code) > maxCodeBytes {
		return nil, fmt.Errorf("code: at most %d KiB", maxCodeBytes>>10)
	}
	// The program comes on standard input: no argument's size limit, and
	// the audit log records "python3 -", not the program.
	return s.runInSession(ctx, req, jail.Process{Command: []string{"python3", "-"}, Stdin: strings.NewReader(in.Code)}, in.Timeout)
}

func (s *Server) runShell(ctx context.Context, req *mcp.CallToolRequest, in *RunShellInput) (*ExecOutput, error) {
	if err := required("script", in.Script); err != nil {
		return nil, err
	}
	if len(in.Script) > maxScriptBytes {
		return nil, fmt.Errorf("script: at most %d KiB (write a longer one to a file with run_python)", maxScriptBytes>>10)
	}
	return s.runInSession(ctx, req, jail.Process{Command: []string{"/bin/sh", "-c", in.Script}}, in.Timeout)
}

func (s *Server) create(ctx context.Context, req *mcp.CallToolRequest, in *CreateInput) (*CreateOutput, error) {
	if err := required("name", in.Name); err != nil {
		return nil, err
	}
	if len(in.Labels) > maxClientLabels {
		return nil, fmt.Errorf("labels: at most %d", maxClientLabels)
	}
	for k := range in.Labels {
		if strings.HasPrefix(k, reservedLabels) {
			return nil, fmt.Errorf("label %q: keys starting with %q are jail's", k, reservedLabels)
		}
	}
	s.creating.Lock()
	defer s.creating.Unlock()
	mine, err := s.m.List(map[string]string{ScopeLabel: s.scope})
	if err != nil {
		return nil, err
	}
	made := 0
	for _, info := range mine {
		if _, ok := info.Labels[SessionLabel]; !ok {
			made++
		}
	}
	if made >= s.cfg.MaxSandboxes {
		return nil, fmt.Errorf("at most %d sandboxes (jail mcp --max-sandboxes): remove one with sandbox_remove first", s.cfg.MaxSandboxes)
	}
	sb, err := s.m.Create(ctx, s.spec(in.Name, in.Labels))
	if err != nil {
		return nil, err
	}
	info, err := sb.Info()
	if err != nil {
		return nil, err
	}
	return &CreateOutput{Sandbox: s.describe(info, "")}, nil
}

// describe is info as a tool shows it; session is the id of the calling
// session's sandbox ("": none).
func (s *Server) describe(info jail.SandboxInfo, session string) SandboxOutput {
	out := SandboxOutput{Name: info.Name, State: info.State, Labels: info.Labels, Created: info.Created.UTC().Format(time.RFC3339)}
	if !info.LastExec.IsZero() {
		out.LastExec = info.LastExec.UTC().Format(time.RFC3339)
	}
	if session != "" && info.Labels[SessionLabel] == session {
		out.Session = true
	}
	return out
}

func (s *Server) execTool(ctx context.Context, req *mcp.CallToolRequest, in *ExecInput) (*ExecOutput, error) {
	if err := required("name", in.Name); err != nil {
		return nil, err
	}
	if err := required("command", in.Command); err != nil {
		return nil, err
	}
	if _, err := s.timeout(in.Timeout); err != nil {
		return nil, err
	}
	sb, err := s.owned(req, in.Name)
	if err != nil {
		return nil, err
	}
	return s.exec(ctx, sb, jail.Process{Command: append([]string{in.Command}, in.Args...)}, in.Timeout)
}

func (s *Server) list(ctx context.Context, req *mcp.CallToolRequest, in *ListInput) (*ListOutput, error) {
	want := map[string]string{}
	for k, v := range in.Labels {
		want[k] = v
	}
	want[ScopeLabel] = s.scope
	infos, err := s.m.List(want)
	if err != nil {
		return nil, err
	}
	id := s.sessionID(req.Session)
	out := &ListOutput{Sandboxes: []SandboxOutput{}}
	for _, info := range infos {
		if s.visible(info, id) {
			out.Sandboxes = append(out.Sandboxes, s.describe(info, id))
		}
	}
	sort.Slice(out.Sandboxes, func(i, j int) bool { return out.Sandboxes[i].Name < out.Sandboxes[j].Name })
	return out, nil
}

func (s *Server) remove(ctx context.Context, req *mcp.CallToolRequest, in *NameInput) (*RemoveOutput, error) {
	if err := required("name", in.Name); err != nil {
		return nil, err
	}
	if _, err := s.owned(req, in.Name); err != nil {
		return nil, err
	}
	if err := s.m.Remove(in.Name, true); err != nil {
		return nil, err
	}
	return &RemoveOutput{Removed: in.Name}, nil
}

func (s *Server) logs(ctx context.Context, req *mcp.CallToolRequest, in *LogsInput) (*LogsOutput, error) {
	if err := required("name", in.Name); err != nil {
		return nil, err
	}
	tail := in.Tail
	if tail == 0 {
		tail = defaultLogLines
	}
	if tail < 0 {
		return nil, fmt.Errorf("tail %d: must be positive", in.Tail)
	}
	sb, err := s.owned(req, in.Name)
	if err != nil {
		return nil, err
	}
	b, err := sb.Logs(tail)
	if err != nil {
		return nil, err
	}
	out := &LogsOutput{}
	if int64(len(b)) > s.cfg.OutputLimit {
		b, out.Truncated = b[int64(len(b))-s.cfg.OutputLimit:], true
	}
	out.Logs = string(b)
	return out, nil
}

// LogsOutput renders as the logs themselves.
func (o *LogsOutput) text() string {
	if o.Truncated {
		return "(only the end fits the output limit)\n" + o.Logs
	}
	return o.Logs
}
