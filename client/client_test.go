package client

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jail-sandbox/jail/api"
)

// TestBadNamesAreNeverSent: a sandbox name that is not one (a path, an
// escaped path, a name the server would refuse) is refused by the client
// before it connects, so that no name makes a request another endpoint's
// (".." would make /v1/sandboxes/../exec the server's /v1/exec). The
// socket here does not exist: a request that was sent fails to connect.
func TestBadNamesAreNeverSent(t *testing.T) {
	c := New(filepath.Join(t.TempDir(), "none.sock"))
	defer c.Close()
	ctx := context.Background()
	for _, name := range []string{"", ".", "..", "../run", "a/b", "a%2Fb", "a?force=1", "a#b", "-a", "a\x00", strings.Repeat("a", 64)} {
		calls := map[string]func() error{
			"CreateSandbox": func() error { _, _, err := c.CreateSandbox(ctx, api.CreateRequest{Name: name}); return err },
			"GetSandbox":    func() error { _, err := c.GetSandbox(ctx, name); return err },
			"RemoveSandbox": func() error { return c.RemoveSandbox(ctx, name, true) },
			"Exec":          func() error { _, err := c.Exec(ctx, name, api.ExecRequest{Cmd: "true"}); return err },
			"ExecStream": func() error {
				_, err := c.ExecStream(ctx, name, api.ExecRequest{Cmd: "true"}, nil, nil)
				return err
			},
			"StopSandbox":  func() error { return c.StopSandbox(ctx, name, 0) },
			"StartSandbox": func() error { return c.StartSandbox(ctx, name) },
			"KillSandbox":  func() error { return c.KillSandbox(ctx, name) },
			"Logs":         func() error { _, err := c.Logs(ctx, name, 1); return err },
		}
		for call, f := range calls {
			err := f()
			if err == nil || !strings.HasPrefix(err.Error(), "jail: sandbox name ") {
				t.Errorf("%s(%q): %v, want the name refused before anything is sent", call, name, err)
			}
		}
	}
	// A good name is sent (and fails to connect here).
	if _, err := c.GetSandbox(ctx, "a.b_c-1"); err == nil || !strings.Contains(err.Error(), "server socket") {
		t.Errorf("GetSandbox of a good name: %v, want a failure to connect", err)
	}
}

// TestIsNotFound tells a 404 from other answers and errors.
func TestIsNotFound(t *testing.T) {
	for _, c := range []struct {
		err                error
		notFound, conflict bool
	}{
		{&Error{Status: 404, Message: "jail: no such sandbox"}, true, false},
		{fmt.Errorf("get: %w", &Error{Status: 404}), true, false},
		{&Error{Status: 409}, false, true},
		{&Error{Status: 400}, false, false},
		{fmt.Errorf("404"), false, false},
		{nil, false, false},
	} {
		if IsNotFound(c.err) != c.notFound || IsConflict(c.err) != c.conflict {
			t.Errorf("%v: IsNotFound %v, IsConflict %v", c.err, IsNotFound(c.err), IsConflict(c.err))
		}
	}
}
