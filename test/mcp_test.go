package test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// `jail mcp`, the Model Context Protocol server, driven over stdio by real
// MCP clients: the official TypeScript SDK's (from the npm registry, run
// with node), and the official Go SDK's.

// mcpTypeScriptSDK is the version of @modelcontextprotocol/sdk the test
// installs, pinned so that a new release changes nothing unseen.
const mcpTypeScriptSDK = "1.32.2"

var (
	mcpNodeOnce sync.Once
	mcpNodeDir  string // holds node_modules and client.mjs
	mcpNodeErr  string // why there is none
)

// mcpNodeClient returns the directory of the TypeScript client
// (mcpclient/client.mjs beside the SDK's node_modules), installed with npm
// into the suite's directory once per run; it skips the test when node or
// npm is missing or the package cannot be fetched: TestMCPGoClient drives
// the same server with the Go SDK's client then.
func mcpNodeClient(t *testing.T) string {
	t.Helper()
	mcpNodeOnce.Do(func() {
		// The cgroup v2 VM (which hands the suite its binaries) has no
		// network to fetch the client from: npm would wait its whole
		// timeout there. The host's run covers it.
		if os.Getenv("JAIL_TEST_BINARIES") != "" {
			mcpNodeErr = "this run (the cgroup v2 VM's) has no network to fetch it"
			return
		}
		if _, err := os.Stat("mcpclient/client.mjs"); err != nil {
			mcpNodeErr = "its script is not here (" + err.Error() + "): it runs from a checkout"
			return
		}
		for _, tool := range []string{"node", "npm"} {
			if _, err := exec.LookPath(tool); err != nil {
				mcpNodeErr = tool + " is not installed (apt-get install nodejs npm)"
				return
			}
		}
		dir := filepath.Join(workDir, "mcp-node")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			mcpNodeErr = err.Error()
			return
		}
		install := exec.Command("npm", "install", "--no-audit", "--no-fund", "--no-save", "--loglevel=error", "--fetch-retries=1", "--fetch-timeout=30000", "@modelcontextprotocol/sdk@"+mcpTypeScriptSDK)
		install.Dir = dir
		done := make(chan struct{})
		var out []byte
		var err error
		go func() { out, err = install.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Minute):
			_ = install.Process.Kill()
			<-done
			err = context.DeadlineExceeded
		}
		if err != nil {
			mcpNodeErr = "npm install @modelcontextprotocol/sdk: " + err.Error() + ": " + string(bytes.TrimSpace(out))
			return
		}
		script, err := os.ReadFile("mcpclient/client.mjs")
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "client.mjs"), script, 0o644)
		}
		if err != nil {
			mcpNodeErr = err.Error()
			return
		}
		mcpNodeDir = dir
	})
	if mcpNodeDir == "" {
		t.Skipf("the TypeScript MCP client is not available (%s); TestMCPGoClient covers jail mcp with the Go SDK's", mcpNodeErr)
	}
	return mcpNodeDir
}

// TestMCPTypeScriptClient: the official TypeScript SDK's client starts
// `jail mcp --workspace DIR --output-limit 4K`, as root and as the
// unprivileged user, lists the tools and their schemas, and calls each
// (mcpclient/client.mjs holds the checks): run_python twice with state
// carried in /tmp, run_shell writing to the workspace, no network, a
// timeout, truncation, refused arguments (an image, a network, a profile,
// a mount, a longer timeout, jail's labels), and a named sandbox made,
// run in, listed, read and removed. When the client closes, no sandbox of
// the user's is left (and the leak check finds no process, mount or
// cgroup).
func TestMCPTypeScriptClient(t *testing.T) {
	dir := mcpNodeClient(t)
	forEachMode(t, func(t *testing.T, m mode) {
		h := newSandboxHost(t, m)
		workspace := sharedTempDir(t, rootless)
		server := h.cmd("mcp", "--workspace", workspace, "--output-limit", "4K")
		env := map[string]string{}
		for _, e := range server.Env {
			k, v, _ := strings.Cut(e, "=")
			env[k] = v
		}
		envJSON, _ := json.Marshal(env)
		node := exec.Command("node", append([]string{"client.mjs"}, server.Args...)...)
		node.Args[2] = server.Path
		node.Dir = dir
		node.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "MCP_TEST_ENV=" + string(envJSON), "MCP_TEST_WORKSPACE=" + workspace}
		r := runCmd(t, node)
		if r.code != 0 {
			t.Fatalf("the TypeScript client failed (exit %d):\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		if !strings.HasPrefix(r.stdout, "ok mcp-") {
			t.Fatalf("client output %q", r.stdout)
		}
		if left := h.ls(); len(left) != 0 {
			t.Fatalf("sandboxes left after the client closed: %+v", left)
		}
	})
}

// TestMCPGoClient: the Go SDK's client starts `jail mcp` over stdio, runs
// Python and shell in the session's sandbox, and ends the session the
// ways a session ends, its stdin closed or SIGTERM; each time the
// session's sandbox is removed and the server exits.
func TestMCPGoClient(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, end := range []string{"stdin closed", "SIGTERM"} {
			t.Run(strings.ReplaceAll(end, " ", "-"), func(t *testing.T) {
				h := newSandboxHost(t, m)
				server := h.cmd("mcp")
				var stderr bytes.Buffer
				server.Stderr = &stderr
				client := mcp.NewClient(&mcp.Implementation{Name: "jail-test", Version: "1"}, nil)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				session, err := client.Connect(ctx, &mcp.CommandTransport{Command: server}, nil)
				if err != nil {
					t.Fatalf("connect: %v\n%s", err, stderr.String())
				}
				res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "open('/tmp/f', 'w').write('kept')"}})
				if err != nil || res.IsError {
					t.Fatalf("run_python: %v %+v\n%s", err, res, stderr.String())
				}
				res, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "run_shell", Arguments: map[string]any{"script": "cat /tmp/f"}})
				if err != nil || res.IsError {
					t.Fatalf("run_shell: %v %+v", err, res)
				}
				b, _ := json.Marshal(res.StructuredContent)
				var out struct {
					Stdout  string `json:"stdout"`
					Sandbox string `json:"sandbox"`
				}
				if json.Unmarshal(b, &out); out.Stdout != "kept" {
					t.Fatalf("run_shell: %s", b)
				}
				if infos := h.ls(); len(infos) != 1 || infos[0].Name != out.Sandbox || infos[0].Labels["jail.mcp.session"] == "" {
					t.Fatalf("jail ls during the session: %+v; want %s, labelled with the session", infos, out.Sandbox)
				}
				if end == "SIGTERM" {
					if err := server.Process.Signal(syscall.SIGTERM); err != nil {
						t.Fatal(err)
					}
					_ = session.Wait()
				}
				session.Close()
				if server.ProcessState == nil {
					t.Fatal("the server still runs after the session's end")
				}
				if code := server.ProcessState.ExitCode(); code != 0 {
					t.Errorf("jail mcp exited %d; want 0\n%s", code, stderr.String())
				}
				if left := h.ls(); len(left) != 0 {
					t.Fatalf("sandboxes left after the session ended (%s): %+v", end, left)
				}
			})
		}
	})
}

// TestMCPBadFlags: `jail mcp` refuses bad flags before serving, as one
// line and status 125.
func TestMCPBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--timeout", "0s"}, "jail: mcp: --timeout 0s: must be positive"},
		{[]string{"--output-limit", "128M"}, "jail: mcp: --output-limit 128M: must be between 1 and 64M"},
		{[]string{"--max-sandboxes", "-1"}, "jail: mcp: --max-sandboxes -1: must be between 0 and 1024"},
		{[]string{"--memory", "lots"}, "jail: mcp: --memory:"},
		{[]string{"--bogus"}, "jail: mcp: unknown option --bogus"},
		{[]string{"extra"}, `jail: mcp: unexpected argument "extra"`},
	} {
		r := jail(t, asRootless, append([]string{"mcp"}, c.args...)...)
		if r.code != 125 || !strings.HasPrefix(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
			t.Errorf("jail mcp %v: exit %d, %q; want 125 and one line starting %q", c.args, r.code, r.stderr, c.want)
		}
	}
}
