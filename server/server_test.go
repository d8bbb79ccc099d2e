package server

import (
	"context"
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
			jail.Spec{Command: []string{"sh", "-c", "true"}}, ""},
		{"options", api.RunRequest{Cmd: "x", Memory: "256M", OutputLimit: "1024", TimeoutS: 1.5, Net: "none",
			Env: map[string]string{"B": "2", "A": "1"}, Mounts: []string{"/srv:/data:rw"}, Workspace: "/w", ReadOnly: true},
			jail.Spec{Command: []string{"x"}, Memory: 256 << 20, OutputLimit: 1024, Timeout: 1500 * time.Millisecond,
				Env: []string{"A=1", "B=2"}, Mounts: []jail.Mount{{Source: "/srv", Destination: "/data", Writable: true}}, Workspace: "/w", ReadOnly: true}, ""},
		{"an image's own command", api.RunRequest{Image: "busybox"}, jail.Spec{Image: "busybox"}, ""},
		{"an image pulled always", api.RunRequest{Image: "busybox", Pull: "always"}, jail.Spec{Image: "busybox", Pull: jail.PullAlways}, ""},
		{"an unknown pull policy", api.RunRequest{Image: "busybox", Pull: "sometimes"}, jail.Spec{}, `pull: "sometimes": must be never, missing or always`},
		{"no command", api.RunRequest{}, jail.Spec{}, "cmd: missing"},
		{"arguments without a command", api.RunRequest{Image: "busybox", Args: []string{"x"}}, jail.Spec{}, "cmd: missing"},
		{"relative workspace", api.RunRequest{Cmd: "x", Workspace: "w"}, jail.Spec{}, "must be absolute"},
		{"relative rootfs", api.RunRequest{Cmd: "x", Rootfs: "r"}, jail.Spec{}, "must be absolute"},
		{"relative mount", api.RunRequest{Cmd: "x", Mounts: []string{"src:/dst"}}, jail.Spec{}, "must be absolute"},
		{"bad mount", api.RunRequest{Cmd: "x", Mounts: []string{"/a:/b:rx"}}, jail.Spec{}, "mounts:"},
		{"bad size", api.RunRequest{Cmd: "x", Memory: "lots"}, jail.Spec{}, "memory:"},
		{"negative timeout", api.RunRequest{Cmd: "x", TimeoutS: -1}, jail.Spec{}, "timeout_s:"},
		{"the most output kept", api.RunRequest{Cmd: "x", OutputLimit: "64M"},
			jail.Spec{Command: []string{"x"}, OutputLimit: 64 << 20}, ""},
		{"more output kept than a server holds", api.RunRequest{Cmd: "x", OutputLimit: "64G"}, jail.Spec{}, "output_limit: \"64G\": must be at most 64M"},
		{"a byte too many", api.RunRequest{Cmd: "x", OutputLimit: "67108865"}, jail.Spec{}, "output_limit:"},
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
// methods get a JSON error and a 4xx, and no sandbox.
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
		{"POST", "/v1/run", `{"cmd":"true","output_limit":"64G"}`, 400},
		{"POST", "/v1/run", `{"cmd":"true","pids":9223372036854775807}`, 400},
		{"POST", "/v1/run", `{"cmd":"true","workdir":"/tmp\u0000x"}`, 400},
		{"POST", "/v1/run", `{"cmd":"true","mounts":["/tmp:/d\u0000x"]}`, 400},
		{"POST", "/v1/run", `{"cmd":"true","mounts":["/tmp\u0000x:/d"]}`, 400},
		{"POST", "/v1/run", `{"cmd":"true","rootfs":"/tmp\u0000x"}`, 400},
		{"POST", "/v1/run", `{"cmd":"true","hostname":"a\u0000b"}`, 400},
		{"POST", "/v1/run", `{"cmd":"true","image":"a\u0000b"}`, 400},
		{"POST", "/v1/run", `{"cmd":"true","profile":"a\u0000b"}`, 400},
		{"POST", "/v1/run", `{"cmd":"tr\u0000ue"}`, 400},
		{"POST", "/v1/run", `{"cmd":"true","env":{"A=B":"c"}}`, 400},
		{"GET", "/v1/run", "", 405},
		{"GET", "/v1/nothing", "", 404},
		{"POST", "/v1/sandboxes/x/exec", `{}`, 400},
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

// post sends a run request to s as a client would and returns the status
// and the body.
func post(s *Server, ctx context.Context, body string) (int, string) {
	return request(s, ctx, "POST", "/v1/run", body)
}

func request(s *Server, ctx context.Context, method, path, body string) (int, string) {
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)).WithContext(ctx))
	return w.Code, w.Body.String()
}

// answeredWithin answers the request unless ctx ends first: a handler
// that hangs fails the test rather than hang it.
func answeredWithin(t *testing.T, ctx context.Context, s *Server, method, path, body string) (int, string) {
	t.Helper()
	type answer struct {
		status int
		body   string
	}
	got := make(chan answer, 1)
	go func() {
		status, body := request(s, ctx, method, path, body)
		got <- answer{status, body}
	}()
	select {
	case a := <-got:
		return a.status, a.body
	case <-ctx.Done():
		t.Fatalf("%s %s %s: no answer in a minute (a hang guard, not a timing check)", method, path, body)
		return 0, ""
	}
}

// TestMakingAPoolHoldsUpNothing: while a pool is being made for as long as
// its preparing takes (forever, here: a hostile image's /etc/passwd that is
// a FIFO no one writes, say), the health check answers, runs of that very
// key and of others run (cold), and Close returns: no lock is held across
// the making, and nothing waits for it (SECURITY-LESSONS row 29).
func TestMakingAPoolHoldsUpNothing(t *testing.T) {
	entered, release := make(chan struct{}, 8), make(chan struct{})
	made := make(chan *jail.Pool, 8)
	s := New(Options{PoolSize: 1, newPool: func(spec jail.Spec, size int) (*jail.Pool, error) {
		if spec.Profile == "strict" {
			entered <- struct{}{}
			<-release
		}
		p, err := jail.NewPool(spec, size)
		if err == nil {
			made <- p
		}
		return p, err
	}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard
	defer cancel()

	for i := 0; i < 2; i++ {
		status, body := answeredWithin(t, ctx, s, "POST", "/v1/run", `{"cmd":"echo","args":["strict"],"profile":"strict"}`)
		if status != 200 || !strings.Contains(body, `"stdout":"strict\n"`) {
			t.Fatalf("run %d of the key whose pool is being made: %d %s", i, status, body)
		}
		if i == 0 {
			select {
			case <-entered:
			case <-ctx.Done():
				t.Fatal("the pool of the key asked for was never being made")
			}
		}
	}
	if status, body := answeredWithin(t, ctx, s, "GET", "/v1/health", ""); status != 200 {
		t.Errorf("health while a pool is being made: %d %s", status, body)
	}
	if status, body := answeredWithin(t, ctx, s, "POST", "/v1/run", `{"cmd":"echo","args":["other"]}`); status != 200 || !strings.Contains(body, `"stdout":"other\n"`) {
		t.Errorf("run of another key while a pool is being made: %d %s", status, body)
	}

	done := make(chan struct{})
	go func() {
		s.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Close waited for a pool being made")
	}
	// The pool made once the server is closed is closed by its maker.
	close(release)
	s.making.Wait()
	s.mu.Lock()
	left := len(s.pools)
	s.mu.Unlock()
	if left != 0 {
		t.Errorf("%d pools kept after Close", left)
	}
	for len(made) > 0 {
		if p := <-made; p.Ready() != 0 {
			t.Errorf("a pool made after Close keeps %d sandboxes ready", p.Ready())
		}
	}
}

// TestCapturedOutputIsBounded: a run that keeps its output reserves its
// output limit per stream from the server's budget, and waits while the
// runs in progress hold it; the reservation is given back with the answer.
func TestCapturedOutputIsBounded(t *testing.T) {
	b := newBudget(3 << 20)
	ctx := context.Background()
	first, err := b.take(ctx, 2<<20)
	if err != nil || first != 2<<20 {
		t.Fatalf("take: %d %v", first, err)
	}
	// No room for a second: a request that cannot wait is refused...
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.take(cancelled, 2<<20); err == nil {
		t.Error("a cancelled request took from a spent budget")
	}
	// ... and one that can gets it once the first gives it back.
	got := make(chan error, 1)
	go func() {
		_, err := b.take(ctx, 2<<20)
		got <- err
	}()
	b.give(first)
	if err := <-got; err != nil {
		t.Errorf("take after give: %v", err)
	}
	// More than the whole budget waits for the whole budget.
	if n, err := newBudget(1<<20).take(ctx, 1<<40); err != nil || n != 1<<20 {
		t.Errorf("took %d (%v) of a budget of %d", n, err, 1<<20)
	}

	// Through the handler: the budget is whole again after each answer.
	s := New(Options{MaxCapture: 4 << 20})
	defer s.Close()
	for _, body := range []string{`{"cmd":"echo","args":["a"]}`, `{"cmd":"echo","args":["b"],"output_limit":"2M"}`, `{"cmd":"true","output_limit":"64M"}`} {
		if status, out := post(s, ctx, body); status != 200 {
			t.Errorf("%s: %d %s", body, status, out)
		}
		if s.capture.left != 4<<20 {
			t.Errorf("%s: %d bytes of the budget left after the answer, want all %d", body, s.capture.left, 4<<20)
		}
	}
}

// TestResultIsWrittenAsEncodingJSONWould: the answer of a run, written a
// piece of its output at a time, is byte for byte what encoding/json
// writes, whatever the output holds where the pieces meet (runes cut in
// two, bytes that are no UTF-8, control bytes, HTML characters).
func TestResultIsWrittenAsEncodingJSONWould(t *testing.T) {
	long := func(unit string) string { return strings.Repeat(unit, (40<<10)/len(unit)+1) }
	outputs := []string{
		"", "plain\n", "<a href=\"x\">&</a>\t\x00\x01\x1f\x7f", "\u2028\u2029",
		long("€"), long("a€"), long("aa€"), long("𝄞"), long("a𝄞"), long("aa𝄞"), long("aaa𝄞"),
		long("\xe2\x82"), long("\xff"), long("\x80"), long("a\xf0\x9d\x84"), long("\x00é"),
		strings.Repeat("x", 16<<10-1) + "€" + "tail", strings.Repeat("x", 16<<10-2) + "\xf0\x9d\x84\x9e",
	}
	for i, out := range outputs {
		res := api.Result{Stdout: out, Stderr: outputs[len(outputs)-1-i], ExitCode: 3, Truncated: true, WallMS: 7, Error: "jail: x"}
		want := httptest.NewRecorder()
		writeJSON(want, 200, res)
		got := httptest.NewRecorder()
		writeResult(got, res)
		if got.Body.String() != want.Body.String() || got.Code != 200 || got.Header().Get("Content-Type") != "application/json" {
			t.Errorf("output %d (%d bytes): written differently from encoding/json", i, len(out))
		}
	}
}
