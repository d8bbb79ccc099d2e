package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/jail-sandbox/jail/api"
)

// The persistent sandboxes (/v1/sandboxes*): what jail.Manager and
// jail.Sandbox do, through a server. A name is checked (api.CheckName)
// before any request is sent, so that no name can make the request's path
// another endpoint's.

// sandboxPath is the path of the sandbox name's endpoint action ("": the
// sandbox itself).
func sandboxPath(name, action string) (string, error) {
	if err := api.CheckName(name); err != nil {
		return "", fmt.Errorf("jail: %w", err)
	}
	p := api.PathSandboxes + "/" + url.PathEscape(name)
	if action != "" {
		p += "/" + action
	}
	return p, nil
}

// CreateSandbox creates the sandbox req.Name and returns its description
// once it is ready for commands. With req.Reuse, an existing sandbox of
// that name made from the same options is returned (and reused says so),
// and one made from others replaced; without, an existing one is an *Error
// for which IsConflict holds.
func (c *Client) CreateSandbox(ctx context.Context, req api.CreateRequest) (info api.SandboxInfo, reused bool, err error) {
	if err := api.CheckName(req.Name); err != nil {
		return info, false, fmt.Errorf("jail: %w", err)
	}
	status, err := c.call(ctx, http.MethodPost, api.PathSandboxes, req, &info)
	return info, status == http.StatusOK, err
}

// ListSandboxes describes the sandboxes of the server's user that carry
// every label of labels (nil: all of them), by name.
func (c *Client) ListSandboxes(ctx context.Context, labels map[string]string) ([]api.SandboxInfo, error) {
	path := api.PathSandboxes
	if len(labels) > 0 {
		q := url.Values{}
		for k, v := range labels {
			q.Add("label", k+"="+v)
		}
		path += "?" + q.Encode()
	}
	var list []api.SandboxInfo
	_, err := c.call(ctx, http.MethodGet, path, nil, &list)
	return list, err
}

// GetSandbox describes the sandbox name.
func (c *Client) GetSandbox(ctx context.Context, name string) (api.SandboxInfo, error) {
	var info api.SandboxInfo
	path, err := sandboxPath(name, "")
	if err != nil {
		return info, err
	}
	_, err = c.call(ctx, http.MethodGet, path, nil, &info)
	return info, err
}

// RemoveSandbox removes the sandbox name: a stopped or dead one, or with
// force a running one too (its processes are killed).
func (c *Client) RemoveSandbox(ctx context.Context, name string, force bool) error {
	path, err := sandboxPath(name, "")
	if err != nil {
		return err
	}
	if force {
		path += "?force=1"
	}
	_, err = c.call(ctx, http.MethodDelete, path, nil, nil)
	return err
}

// Exec runs a command in the sandbox name (starting it first if stopped)
// and returns its result, as Run does.
func (c *Client) Exec(ctx context.Context, name string, req api.ExecRequest) (api.Result, error) {
	var res api.Result
	path, err := sandboxPath(name, "exec")
	if err != nil {
		return res, err
	}
	_, err = c.call(ctx, http.MethodPost, path, req, &res)
	return res, err
}

// ExecStream runs a command in the sandbox name as Exec does, writing its
// output to stdout and stderr as it comes.
func (c *Client) ExecStream(ctx context.Context, name string, req api.ExecRequest, stdout, stderr io.Writer) (api.Result, error) {
	path, err := sandboxPath(name, "exec")
	if err != nil {
		return api.Result{}, err
	}
	resp, err := c.do(ctx, http.MethodPost, path+"?stream=1", req)
	if err != nil {
		return api.Result{}, err
	}
	defer resp.Body.Close()
	return readStream(resp.Body, stdout, stderr)
}

// StopSandbox sends SIGTERM to every process in the sandbox name, and
// SIGKILL to what is left after grace (0: the server's default, 10 s); it
// returns once they have ended. The sandbox's files are kept.
func (c *Client) StopSandbox(ctx context.Context, name string, grace time.Duration) error {
	path, err := sandboxPath(name, "stop")
	if err != nil {
		return err
	}
	_, err = c.call(ctx, http.MethodPost, path, api.StopRequest{TimeoutS: grace.Seconds()}, nil)
	return err
}

// StartSandbox brings a stopped sandbox back; a running one is left as it
// is.
func (c *Client) StartSandbox(ctx context.Context, name string) error {
	path, err := sandboxPath(name, "start")
	if err != nil {
		return err
	}
	_, err = c.call(ctx, http.MethodPost, path, nil, nil)
	return err
}

// KillSandbox sends SIGKILL to every process in the sandbox name, keeping
// its files.
func (c *Client) KillSandbox(ctx context.Context, name string) error {
	path, err := sandboxPath(name, "kill")
	if err != nil {
		return err
	}
	_, err = c.call(ctx, http.MethodPost, path, nil, nil)
	return err
}

// Logs returns the combined output of the commands run in the sandbox
// name: its last tail lines (0: all that is kept).
func (c *Client) Logs(ctx context.Context, name string, tail int) ([]byte, error) {
	path, err := sandboxPath(name, "logs")
	if err != nil {
		return nil, err
	}
	if tail > 0 {
		path += "?tail=" + strconv.Itoa(tail)
	}
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}
