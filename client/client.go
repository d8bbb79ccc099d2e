// Package client is the Go SDK of jail's HTTP API (`jail serve`). It links
// only the standard library and package api, so a program that drives
// sandboxes through a server stays small.
//
// A request carries what the caller gives the sandbox (environment, stdin),
// and its answer is believed: the client sends it only to a server of a
// user it trusts (itself and root, and whom ServerUser names), through a
// socket in a directory no one else can change (see internal/socketdir),
// and checks the peer's credentials on every connection it makes.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"

	"github.com/jail-sandbox/jail/api"
)

// Client talks to one server. It is safe for concurrent use, and keeps its
// connections open between requests.
type Client struct {
	http *http.Client
}

// New returns a client of the server listening on the unix socket at path.
func New(socket string, opts ...Option) *Client {
	trust := trusted{uids: []int{0, os.Geteuid()}}
	for _, o := range opts {
		o(&trust)
	}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dial(ctx, socket, trust.uids)
		},
		MaxIdleConnsPerHost: 64,
	}
	return &Client{http: &http.Client{Transport: transport}}
}

// Option is an option of New.
type Option func(*trusted)

// trusted are the users whose server the client talks to.
type trusted struct{ uids []int }

// ServerUser trusts the server of the user uid, and the directory of its
// socket that this user owns, with the requests (the client trusts only
// its own user's and root's otherwise): for a program that runs as root and
// drives the server of another user.
func ServerUser(uid int) Option {
	return func(t *trusted) { t.uids = append(t.uids, uid) }
}

// Close lets go of idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Error is an answer other than 2xx: the server refused the request (4xx:
// bad input, nothing was started; 404: no such sandbox; 409: a sandbox of
// that name exists, or runs and was removed without force) or
// failed (5xx).
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status) }

// IsNotFound tells an answer 404, which the sandbox endpoints give for a
// sandbox that does not exist.
func IsNotFound(err error) bool { return hasStatus(err, http.StatusNotFound) }

// IsConflict tells an answer 409: CreateSandbox of a name taken without
// Reuse, RemoveSandbox of a running sandbox without force.
func IsConflict(err error) bool { return hasStatus(err, http.StatusConflict) }

func hasStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

// Run runs a command in a new sandbox and returns its result. A command
// that ran returns a nil error whatever its exit code; one that could not be
// executed has exit code 126 or 127 and Result.Error set.
func (c *Client) Run(ctx context.Context, req api.RunRequest) (api.Result, error) {
	var res api.Result
	_, err := c.call(ctx, http.MethodPost, api.PathRun, req, &res)
	return res, err
}

// Stream runs a command as Run does, writing its output to stdout and
// stderr as it comes.
func (c *Client) Stream(ctx context.Context, req api.RunRequest, stdout, stderr io.Writer) (api.Result, error) {
	resp, err := c.do(ctx, http.MethodPost, api.PathRun+"?stream=1", req)
	if err != nil {
		return api.Result{}, err
	}
	defer resp.Body.Close()
	return readStream(resp.Body, stdout, stderr)
}

// readStream reads a streamed answer: events, whose data it writes to
// stdout and stderr, and the result last (or an error).
func readStream(body io.Reader, stdout, stderr io.Writer) (api.Result, error) {
	var res api.Result
	lines := bufio.NewScanner(body)
	lines.Buffer(make([]byte, 64<<10), 64<<20)
	for lines.Scan() {
		var line struct {
			api.Event
			api.Result
			ExitCode *int `json:"exit_code"` // only the result has one
		}
		if err := json.Unmarshal(lines.Bytes(), &line); err != nil {
			return res, fmt.Errorf("stream: %w", err)
		}
		switch {
		case line.Stream == "stdout" && stdout != nil:
			io.WriteString(stdout, line.Data)
		case line.Stream == "stderr" && stderr != nil:
			io.WriteString(stderr, line.Data)
		case line.Stream != "":
		case line.ExitCode != nil:
			res = line.Result
			res.ExitCode = *line.ExitCode
			return res, nil
		default:
			return res, &Error{Status: http.StatusInternalServerError, Message: line.Result.Error}
		}
	}
	if err := lines.Err(); err != nil {
		return res, err
	}
	return res, errors.New("stream ended before the result")
}

// Health asks whether the server is up.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	_, err := c.call(ctx, http.MethodGet, api.PathHealth, nil, &h)
	return h, err
}

// do sends a request, with body as JSON unless nil, and returns the
// answer when its status is 2xx; otherwise the *Error it is.
func (c *Client) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var data io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		data = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://jail"+path, data)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, errorOf(resp)
	}
	return resp, nil
}

// call sends a request as do does and reads its JSON answer into out,
// unless nil. It returns the answer's status.
func (c *Client) call(ctx context.Context, method, path string, body, out any) (int, error) {
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp.StatusCode, fmt.Errorf("jail: answer of %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func errorOf(resp *http.Response) error {
	var body api.Error
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(data, &body) != nil || body.Error == "" {
		body.Error = string(bytes.TrimSpace(data))
	}
	return &Error{Status: resp.StatusCode, Message: body.Error}
}
