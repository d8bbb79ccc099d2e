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

// Error is an answer other than 200: the server refused the request (4xx:
// bad input, nothing was started) or failed (5xx).
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status) }

// Run runs a command in a new sandbox and returns its result. A command
// that ran returns a nil error whatever its exit code; one that could not be
// executed has exit code 126 or 127 and Result.Error set.
func (c *Client) Run(ctx context.Context, req api.RunRequest) (api.Result, error) {
	var res api.Result
	resp, err := c.post(ctx, api.PathRun, req)
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&res)
	return res, err
}

// Stream runs a command as Run does, writing its output to stdout and
// stderr as it comes.
func (c *Client) Stream(ctx context.Context, req api.RunRequest, stdout, stderr io.Writer) (api.Result, error) {
	var res api.Result
	resp, err := c.post(ctx, api.PathRun+"?stream=1", req)
	if err != nil {
		return res, err
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://jail"+api.PathHealth, nil)
	if err != nil {
		return h, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return h, errorOf(resp)
	}
	return h, json.NewDecoder(resp.Body).Decode(&h)
}

func (c *Client) post(ctx context.Context, path string, body any) (*http.Response, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://jail"+path, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, errorOf(resp)
	}
	return resp, nil
}

func errorOf(resp *http.Response) error {
	var body api.Error
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(data, &body) != nil || body.Error == "" {
		body.Error = string(bytes.TrimSpace(data))
	}
	return &Error{Status: resp.StatusCode, Message: body.Error}
}
