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

	Image     string            `json:"image,omitempty"`
	Rootfs    string            `json:"rootfs,omitempty"`
	Profile   string            `json:"profile,omitempty"`
	Memory    Size              `json:"memory,omitempty"`
	CPUs      float64           `json:"cpus,omitempty"`
	Pids      int               `json:"pids,omitempty"`
	TimeoutS  float64           `json:"timeout_s,omitempty"`
	Net       string            `json:"net,omitempty"`
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
