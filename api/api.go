// Package api defines the JSON bodies of jail's HTTP API (`jail serve`), so
// that the server and the client SDK agree on them without the client
// linking the sandbox code.
//
// The API is JSON over HTTP/1.1 on a unix socket whose mode is 0600: only
// its owner (and root) can reach it, and the sandboxes it starts run as that
// owner would start them with `jail run`.
package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Paths of the endpoints.
const (
	PathRun       = "/v1/run"
	PathHealth    = "/v1/health"
	PathSandboxes = "/v1/sandboxes"
)

// RunRequest is the body of POST /v1/run: a command and the RUN OPTIONS of
// `jail run`, named as in the CLI. Host paths must be absolute. Cmd may be
// left out with an image, whose Entrypoint and Cmd then run.
type RunRequest struct {
	Cmd  string   `json:"cmd"`
	Args []string `json:"args,omitempty"`

	Image string `json:"image,omitempty"`
	// Pull says when to pull Image from its registry first: PullNever,
	// PullMissing (the default, "") or PullAlways.
	Pull      string            `json:"pull,omitempty"`
	Rootfs    string            `json:"rootfs,omitempty"`
	Profile   string            `json:"profile,omitempty"`
	Memory    Size              `json:"memory,omitempty"`
	CPUs      float64           `json:"cpus,omitempty"`
	Pids      int               `json:"pids,omitempty"`
	TimeoutS  float64           `json:"timeout_s,omitempty"`
	Net       string            `json:"net,omitempty"`
	NetLimit  string            `json:"net_limit,omitempty"` // conns=N,bytes=SIZE,rate=SIZE
	Workspace string            `json:"workspace,omitempty"`
	Mounts    []string          `json:"mounts,omitempty"` // SRC:DST[:ro|:rw]
	Env       map[string]string `json:"env,omitempty"`
	User      string            `json:"user,omitempty"`
	Workdir   string            `json:"workdir,omitempty"`
	Hostname  string            `json:"hostname,omitempty"`
	ReadOnly  bool              `json:"read_only,omitempty"`
	// Stdin is the whole input of the command; none when empty.
	Stdin       string `json:"stdin,omitempty"`
	OutputLimit Size   `json:"output_limit,omitempty"`
}

// RunOptions are the RUN OPTIONS of RunRequest, which POST /v1/sandboxes
// takes as POST /v1/run does: the same names, types and meanings.
// RunRequest keeps fields of its own rather than embedding these, so that
// its Go literals (api.RunRequest{Cmd: ..., Memory: ...}) stay valid;
// Options gives them, and a test holds the two lists to each other.
type RunOptions struct {
	Image string `json:"image,omitempty"`
	// Pull says when to pull Image from its registry first: PullNever,
	// PullMissing (the default, "") or PullAlways.
	Pull      string            `json:"pull,omitempty"`
	Rootfs    string            `json:"rootfs,omitempty"`
	Profile   string            `json:"profile,omitempty"`
	Memory    Size              `json:"memory,omitempty"`
	CPUs      float64           `json:"cpus,omitempty"`
	Pids      int               `json:"pids,omitempty"`
	TimeoutS  float64           `json:"timeout_s,omitempty"`
	Net       string            `json:"net,omitempty"`
	NetLimit  string            `json:"net_limit,omitempty"` // conns=N,bytes=SIZE,rate=SIZE
	Workspace string            `json:"workspace,omitempty"`
	Mounts    []string          `json:"mounts,omitempty"` // SRC:DST[:ro|:rw]
	Env       map[string]string `json:"env,omitempty"`
	User      string            `json:"user,omitempty"`
	Workdir   string            `json:"workdir,omitempty"`
	Hostname  string            `json:"hostname,omitempty"`
	ReadOnly  bool              `json:"read_only,omitempty"`
	// OutputLimit bounds what a run keeps of each stream. An exec in a
	// sandbox has its own (ExecRequest.OutputLimit).
	OutputLimit Size `json:"output_limit,omitempty"`
}

// Options are the RUN OPTIONS of r.
func (r *RunRequest) Options() RunOptions {
	return RunOptions{
		Image: r.Image, Pull: r.Pull, Rootfs: r.Rootfs, Profile: r.Profile, Memory: r.Memory,
		CPUs: r.CPUs, Pids: r.Pids, TimeoutS: r.TimeoutS, Net: r.Net, NetLimit: r.NetLimit,
		Workspace: r.Workspace, Mounts: r.Mounts, Env: r.Env, User: r.User,
		Workdir: r.Workdir, Hostname: r.Hostname, ReadOnly: r.ReadOnly,
		OutputLimit: r.OutputLimit,
	}
}

// CreateRequest is the body of POST /v1/sandboxes: the RUN OPTIONS, and
// what only a persistent sandbox has. No command: the sandbox is left idle
// until an exec.
type CreateRequest struct {
	// Name is the sandbox's (see CheckName).
	Name string `json:"name"`
	RunOptions
	// Labels are free-form K=V pairs, shown and filtered on by the list
	// (see CheckLabels).
	Labels map[string]string `json:"labels,omitempty"`
	// Reuse returns an existing sandbox of that name made from the same
	// options (200 rather than 201), and replaces one made from others.
	Reuse bool `json:"reuse,omitempty"`
	// TTLS and IdleTimeoutS stop and remove the sandbox this many seconds
	// after its creation, or after this long with no command running (0:
	// never).
	TTLS         float64 `json:"ttl_s,omitempty"`
	IdleTimeoutS float64 `json:"idle_timeout_s,omitempty"`
	// Secrets are logical secret names, given to the commands as
	// environment variables of those names; never their values.
	Secrets []string `json:"secrets,omitempty"`
}

// Values of RunOptions.Pull.
const (
	PullNever   = "never"
	PullMissing = "missing"
	PullAlways  = "always"
)

// ExecRequest is the body of POST /v1/sandboxes/{name}/exec: a command
// run in the sandbox, with its root, limits and filter. What is left out
// is the sandbox's own (its working directory, user, output limit).
type ExecRequest struct {
	Cmd      string            `json:"cmd"`
	Args     []string          `json:"args,omitempty"`
	TimeoutS float64           `json:"timeout_s,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Workdir  string            `json:"workdir,omitempty"`
	User     string            `json:"user,omitempty"`
	// Stdin is the whole input of the command; none when empty.
	Stdin       string   `json:"stdin,omitempty"`
	OutputLimit Size     `json:"output_limit,omitempty"`
	Secrets     []string `json:"secrets,omitempty"`
}

// StopRequest is the body of POST /v1/sandboxes/{name}/stop, which may
// also be empty: TimeoutS is the grace period between SIGTERM and SIGKILL
// (0: the default, 10 s).
type StopRequest struct {
	TimeoutS float64 `json:"timeout_s,omitempty"`
}

// SandboxInfo describes a persistent sandbox: an element of the answer of
// GET /v1/sandboxes, the answer of GET and POST /v1/sandboxes/{name}, and
// what `jail ls --json` shows (jail.SandboxInfo is this type).
type SandboxInfo struct {
	Name   string            `json:"name"`
	State  string            `json:"state"`
	Image  string            `json:"image,omitempty"`
	Rootfs string            `json:"rootfs,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Created and LastExec (zero: none yet) are wall-clock times.
	Created  time.Time `json:"created"`
	LastExec time.Time `json:"last_exec,omitzero"`
	// CPUMs and PeakMemoryBytes are the sandbox's so far (its cgroup's),
	// 0 when not known (a dead or stopped sandbox).
	CPUMs           int64 `json:"cpu_ms"`
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`
	// TTL and IdleTimeout as created (0: none).
	TTLSeconds         float64 `json:"ttl_s,omitempty"`
	IdleTimeoutSeconds float64 `json:"idle_timeout_s,omitempty"`
}

// MaxNameLen is the longest sandbox name.
const MaxNameLen = 63

// CheckName refuses what is not a sandbox name: a letter or digit, then
// up to 62 letters, digits, '_', '.' or '-'. A name is so always one path
// component, never "." or "..", and needs no escaping in a URL.
func CheckName(name string) error {
	ok := name != "" && len(name) <= MaxNameLen
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		alnum := ('0' <= c && c <= '9') || ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z')
		ok = alnum || (i > 0 && (c == '_' || c == '.' || c == '-'))
	}
	if !ok {
		return fmt.Errorf("sandbox name %q: must be a letter or digit, then at most %d letters, digits, '_', '.' or '-'", short(name), MaxNameLen-1)
	}
	return nil
}

// Size is a size in bytes. In JSON it is a number of bytes or a string as
// the CLI takes it ("256M").
type Size string

// UnmarshalJSON accepts a number or a string.
func (s *Size) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		*s = Size(n.String())
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("a size is a number of bytes or a string such as \"256M\"")
	}
	*s = Size(str)
	return nil
}

// Exit statuses that jail itself gives, beside the command's own.
const (
	ExitTimeout       = 124 // the run's timeout expired
	ExitSetup         = 125 // jail could not build or start the sandbox
	ExitNotExecutable = 126 // the command could not be executed
	ExitNotFound      = 127 // the command was not found
)

// Result is how a command ended: the result object of `jail run --json`,
// of the HTTP API and of the Go API (jail.Result is this type). Error is
// set by the server, beside exit code 126 or 127, when the command could
// not be executed.
type Result struct {
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	ExitCode        int    `json:"exit_code"`
	Signal          int    `json:"signal"`
	TimedOut        bool   `json:"timed_out"`
	OOMKilled       bool   `json:"oom_killed"`
	Truncated       bool   `json:"truncated"`
	WallMS          int64  `json:"wall_ms"`
	CPUMS           int64  `json:"cpu_ms"`
	PeakMemoryBytes int64  `json:"peak_memory_bytes"`
	Error           string `json:"error,omitempty"`
}

// Event is one line of a streamed answer (?stream=1): output as it comes.
// The last line is the Result, or an Error.
type Event struct {
	Stream string `json:"stream"` // "stdout" or "stderr"
	Data   string `json:"data"`
}

// Error is the body of every 4xx and 5xx answer.
type Error struct {
	Error string `json:"error"`
}

// Health is the body of GET /v1/health.
type Health struct {
	Status  string `json:"status"` // "ok"
	Version string `json:"version"`
	// Ready counts the sandboxes built ahead of need, waiting for a run.
	Ready int `json:"ready"`
}

// Bounds on labels: they are shown by `jail ls` and written into the audit
// log with every command, so a few short lines' worth.
const (
	MaxLabels     = 64
	MaxLabelBytes = 1024 // key and value together
)

// CheckLabels refuses labels beyond the bounds above, a key that is not
// letters, digits, '_', '.', '/' and '-' (as Kubernetes' keys; so a K=V
// filter always names it), and a value that holds a control character (it
// is printed on terminals).
func CheckLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("labels: %d: at most %d", len(labels), MaxLabels)
	}
	for k, v := range labels {
		if k == "" || len(k)+len(v) > MaxLabelBytes {
			return fmt.Errorf("labels: %q: a label is K=V, K not empty, at most %d bytes", short(k), MaxLabelBytes)
		}
		for _, c := range k {
			if !(c == '_' || c == '.' || c == '/' || c == '-' || ('0' <= c && c <= '9') || ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z')) {
				return fmt.Errorf("labels: %q: a label's key is letters, digits, _ . / -", short(k))
			}
		}
		if strings.ContainsFunc(v, unicode.IsControl) {
			return fmt.Errorf("labels: %q: its value holds a control character", short(k))
		}
	}
	return nil
}

// short shortens what a client gave, quoted in an error.
func short(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}
