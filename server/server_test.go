package server

import (
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jail-sandbox/jail"
	"github.com/jail-sandbox/jail/api"
)

// The test binary is the janitor of the server's pool when jail's programs
// are not built in.
func TestMain(m *testing.M) {
	jail.Init()
	os.Exit(m.Run())
}

// TestSpecOf: a request becomes the Spec `jail run` would build from the
// same flags; what a server cannot accept is refused before anything runs.
func TestSpecOf(t *testing.T) {
	for _, c := range []struct {
		name string
		req  api.RunRequest
		want jail.Spec
		err  string
	}{
		{"command and defaults", api.RunRequest{Cmd: "sh", Args: []string{"-c", "true"}},
			jail.Spec{Command: []string{"sh", "-c", "true"}, Profile: "default"}, ""},
		{"options", api.RunRequest{Cmd: "x", Memory: "256M", OutputLimit: "1024", TimeoutS: 1.5, Net: "none",
			Env: map[string]string{"B": "2", "A": "1"}, Mounts: []string{"/srv:/data:rw"}, Workspace: "/w", ReadOnly: true},
			jail.Spec{Command: []string{"x"}, Profile: "default", Memory: 256 << 20, OutputLimit: 1024, Timeout: 1500 * time.Millisecond,
				Env: []string{"A=1", "B=2"}, Mounts: []jail.Mount{{Source: "/srv", Destination: "/data", Writable: true}}, Workspace: "/w", ReadOnly: true}, ""},
		{"an image's own command", api.RunRequest{Image: "busybox"}, jail.Spec{Image: "busybox", Profile: "default"}, ""},
		{"no command", api.RunRequest{}, jail.Spec{}, "cmd: missing"},
		{"arguments without a command", api.RunRequest{Image: "busybox", Args: []string{"x"}}, jail.Spec{}, "cmd: missing"},
		{"relative workspace", api.RunRequest{Cmd: "x", Workspace: "w"}, jail.Spec{}, "must be absolute"},
		{"relative rootfs", api.RunRequest{Cmd: "x", Rootfs: "r"}, jail.Spec{}, "must be absolute"},
		{"relative mount", api.RunRequest{Cmd: "x", Mounts: []string{"src:/dst"}}, jail.Spec{}, "must be absolute"},
		{"bad mount", api.RunRequest{Cmd: "x", Mounts: []string{"/a:/b:rx"}}, jail.Spec{}, "mounts:"},
		{"bad size", api.RunRequest{Cmd: "x", Memory: "lots"}, jail.Spec{}, "memory:"},
		{"negative timeout", api.RunRequest{Cmd: "x", TimeoutS: -1}, jail.Spec{}, "timeout_s:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := specOf(&c.req)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// TestRequestsRefusedBeforeAnyRun: malformed requests, unknown paths and
// methods, and the endpoints not built yet get a JSON error and a 4xx/5xx,
// and no sandbox.
func TestRequestsRefusedBeforeAnyRun(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/v1/health", "", 200},
		{"POST", "/v1/run", `{"cmd":`, 400},
		{"POST", "/v1/run", `{"cmd":"true","nope":1}`, 400},
		{"POST", "/v1/run", `{"cmd":"true"} {"cmd":"true"}`, 400},
		{"POST", "/v1/run", `{"memory":[1]}`, 400},
		{"GET", "/v1/run", "", 405},
		{"GET", "/v1/nothing", "", 404},
		{"GET", "/v1/sandboxes", "", 501},
		{"POST", "/v1/sandboxes/x/exec", `{}`, 501},
	} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(c.method, c.path, strings.NewReader(c.body)))
		body := w.Body.String()
		if w.Code != c.status || !strings.HasPrefix(body, "{") || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s %s %s: %d %q, want %d and JSON", c.method, c.path, c.body, w.Code, body, c.status)
		}
		if c.status >= 400 && !strings.HasPrefix(body, `{"error":"jail: `) {
			t.Errorf("%s %s: error body %q", c.method, c.path, body)
		}
	}
}
