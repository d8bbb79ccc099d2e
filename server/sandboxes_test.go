package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSandboxRequestsRefusedBeforeTheManager: a bad name, a bad body (not
// JSON, more than one object, an unknown field, a value out of range, too
// big), a bad query, a wrong method or an unknown path under /v1/sandboxes
// gets its 4xx and a JSON error before the Manager is asked anything: the
// server here has none, and any request that reached for it would be
// answered 500.
func TestSandboxRequestsRefusedBeforeTheManager(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	if s.sandboxes != nil {
		s.sandboxes.Close()
	}
	s.sandboxes, s.sandboxesErr = nil, errors.New("the Manager was asked")

	long := strings.Repeat("a", 64)
	var labels []string
	for i := range 65 {
		labels = append(labels, fmt.Sprintf(`"k%d":"v"`, i))
	}
	manyLabels := strings.Join(labels, ",")
	huge := `{"name":"a","env":{"A":"` + strings.Repeat("x", maxRequestBytes) + `"}}`
	for _, c := range []struct {
		name, method, path, body string
		status                   int
	}{
		// Create.
		{"create: not JSON", "POST", "/v1/sandboxes", `{"name":`, 400},
		{"create: no body", "POST", "/v1/sandboxes", ``, 400},
		{"create: two objects", "POST", "/v1/sandboxes", `{"name":"a"} {"name":"b"}`, 400},
		{"create: unknown field", "POST", "/v1/sandboxes", `{"name":"a","nope":1}`, 400},
		{"create: a command", "POST", "/v1/sandboxes", `{"name":"a","cmd":"true"}`, 400},
		{"create: stdin", "POST", "/v1/sandboxes", `{"name":"a","stdin":"x"}`, 400},
		{"create: no name", "POST", "/v1/sandboxes", `{"image":"busybox"}`, 400},
		{"create: name is a path", "POST", "/v1/sandboxes", `{"name":"../x"}`, 400},
		{"create: name is dot-dot", "POST", "/v1/sandboxes", `{"name":".."}`, 400},
		{"create: name with a slash", "POST", "/v1/sandboxes", `{"name":"a/b"}`, 400},
		{"create: name with a NUL", "POST", "/v1/sandboxes", `{"name":"a\u0000b"}`, 400},
		{"create: name with a newline", "POST", "/v1/sandboxes", `{"name":"a\nb"}`, 400},
		{"create: name starting with a dash", "POST", "/v1/sandboxes", `{"name":"-rf"}`, 400},
		{"create: name too long", "POST", "/v1/sandboxes", `{"name":"` + long + `"}`, 400},
		{"create: name not a string", "POST", "/v1/sandboxes", `{"name":1}`, 400},
		{"create: unknown pull", "POST", "/v1/sandboxes", `{"name":"a","pull":"sometimes"}`, 400},
		{"create: negative ttl", "POST", "/v1/sandboxes", `{"name":"a","ttl_s":-1}`, 400},
		{"create: negative idle timeout", "POST", "/v1/sandboxes", `{"name":"a","idle_timeout_s":-1}`, 400},
		{"create: endless timeout", "POST", "/v1/sandboxes", `{"name":"a","timeout_s":1e300}`, 400},
		{"create: label key with =", "POST", "/v1/sandboxes", `{"name":"a","labels":{"a=b":"c"}}`, 400},
		{"create: empty label key", "POST", "/v1/sandboxes", `{"name":"a","labels":{"":"c"}}`, 400},
		{"create: too many labels", "POST", "/v1/sandboxes", `{"name":"a","labels":{` + manyLabels + `}}`, 400},
		{"create: label too long", "POST", "/v1/sandboxes", `{"name":"a","labels":{"k":"` + strings.Repeat("v", 1024) + `"}}`, 400},
		{"create: label key not a name", "POST", "/v1/sandboxes", `{"name":"a","labels":{"é":"v"}}`, 400},
		{"create: label value with a terminal escape", "POST", "/v1/sandboxes", `{"name":"a","labels":{"k":"\u001b]0;x\u0007"}}`, 400},
		{"create: label key with a newline", "POST", "/v1/sandboxes", `{"name":"a","labels":{"a\nb":"v"}}`, 400},
		{"create: labels not strings", "POST", "/v1/sandboxes", `{"name":"a","labels":{"a":1}}`, 400},
		{"create: env key with =", "POST", "/v1/sandboxes", `{"name":"a","env":{"A=B":"c"}}`, 400},
		{"create: output kept beyond the server's bound", "POST", "/v1/sandboxes", `{"name":"a","output_limit":"64G"}`, 400},
		{"create: bad memory", "POST", "/v1/sandboxes", `{"name":"a","memory":[1]}`, 400},
		{"create: relative workspace", "POST", "/v1/sandboxes", `{"name":"a","workspace":"w"}`, 400},
		{"create: relative mount", "POST", "/v1/sandboxes", `{"name":"a","mounts":["w:/w"]}`, 400},
		{"create: secrets not names", "POST", "/v1/sandboxes", `{"name":"a","secrets":"X"}`, 400},
		{"create: body too big", "POST", "/v1/sandboxes", huge, 400},
		// List.
		{"list: label without =", "GET", "/v1/sandboxes?label=a", "", 400},
		{"list: label without key", "GET", "/v1/sandboxes?label==v", "", 400},
		{"list: one key, two values", "GET", "/v1/sandboxes?label=a=1&label=a=2", "", 400},
		{"list: label with a control character", "GET", "/v1/sandboxes?label=a=%1b", "", 400},
		{"list: wrong method", "PUT", "/v1/sandboxes", "", 405},
		{"list: delete them all", "DELETE", "/v1/sandboxes", "", 405},
		// Paths.
		{"no name", "GET", "/v1/sandboxes/", "", 404},
		{"trailing slash", "GET", "/v1/sandboxes/a/", "", 404},
		{"unknown action", "POST", "/v1/sandboxes/a/nothing", "{}", 404},
		{"path below an action", "POST", "/v1/sandboxes/a/exec/more", `{"cmd":"true"}`, 404},
		{"name with an escaped slash", "GET", "/v1/sandboxes/a%2Fb", "", 400},
		{"name with an escaped slash, exec", "POST", "/v1/sandboxes/..%2Frun/exec", `{"cmd":"true"}`, 400},
		{"name escaped dot-dot", "POST", "/v1/sandboxes/%2E%2E/exec", `{"cmd":"true"}`, 400},
		{"name with an escaped NUL", "GET", "/v1/sandboxes/a%00b", "", 400},
		{"name with a space", "GET", "/v1/sandboxes/a%20b", "", 400},
		{"name starting with a dot", "DELETE", "/v1/sandboxes/.a", "", 400},
		{"name too long", "GET", "/v1/sandboxes/" + long, "", 400},
		{"name too long, logs", "GET", "/v1/sandboxes/" + long + "/logs", "", 400},
		// Methods.
		{"exec by GET", "GET", "/v1/sandboxes/a/exec", "", 405},
		{"stop by GET", "GET", "/v1/sandboxes/a/stop", "", 405},
		{"start by DELETE", "DELETE", "/v1/sandboxes/a/start", "", 405},
		{"kill by PUT", "PUT", "/v1/sandboxes/a/kill", "", 405},
		{"logs by POST", "POST", "/v1/sandboxes/a/logs", "", 405},
		{"a sandbox by POST", "POST", "/v1/sandboxes/a", "{}", 405},
		{"a sandbox by PUT", "PUT", "/v1/sandboxes/a", "{}", 405},
		{"wrong method and bad name", "GET", "/v1/sandboxes/..%2F/exec", "", 405},
		// Exec.
		{"exec: no command", "POST", "/v1/sandboxes/a/exec", `{}`, 400},
		{"exec: no body", "POST", "/v1/sandboxes/a/exec", ``, 400},
		{"exec: not JSON", "POST", "/v1/sandboxes/a/exec", `{"cmd":`, 400},
		{"exec: two objects", "POST", "/v1/sandboxes/a/exec", `{"cmd":"true"} {"cmd":"true"}`, 400},
		{"exec: a run option", "POST", "/v1/sandboxes/a/exec", `{"cmd":"true","image":"busybox"}`, 400},
		{"exec: unknown field", "POST", "/v1/sandboxes/a/exec", `{"cmd":"true","nope":1}`, 400},
		{"exec: negative timeout", "POST", "/v1/sandboxes/a/exec", `{"cmd":"true","timeout_s":-1}`, 400},
		{"exec: env key with =", "POST", "/v1/sandboxes/a/exec", `{"cmd":"true","env":{"A=B":"c"}}`, 400},
		{"exec: output kept beyond the server's bound", "POST", "/v1/sandboxes/a/exec", `{"cmd":"true","output_limit":"67108865"}`, 400},
		{"exec: args not a list", "POST", "/v1/sandboxes/a/exec", `{"cmd":"true","args":"x"}`, 400},
		{"exec: bad name", "POST", "/v1/sandboxes/-a/exec", `{"cmd":"true"}`, 400},
		// Stop, start, kill.
		{"stop: negative grace", "POST", "/v1/sandboxes/a/stop", `{"timeout_s":-1}`, 400},
		{"stop: unknown field", "POST", "/v1/sandboxes/a/stop", `{"grace":1}`, 400},
		{"stop: not an object", "POST", "/v1/sandboxes/a/stop", `[]`, 400},
		{"start: a field", "POST", "/v1/sandboxes/a/start", `{"x":1}`, 400},
		{"kill: a field", "POST", "/v1/sandboxes/a/kill", `{"signal":9}`, 400},
		{"kill: two objects", "POST", "/v1/sandboxes/a/kill", `{} {}`, 400},
		// Logs, remove.
		{"logs: negative tail", "GET", "/v1/sandboxes/a/logs?tail=-1", "", 400},
		{"logs: tail not a number", "GET", "/v1/sandboxes/a/logs?tail=x", "", 400},
		{"logs: tail overflows", "GET", "/v1/sandboxes/a/logs?tail=99999999999999999999", "", 400},
		{"logs: tail beyond the bound", "GET", "/v1/sandboxes/a/logs?tail=1048577", "", 400},
		{"remove: force neither 0 nor 1", "DELETE", "/v1/sandboxes/a?force=maybe", "", 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest(c.method, c.path, strings.NewReader(c.body)))
			body := w.Body.String()
			if w.Code != c.status || w.Header().Get("Content-Type") != "application/json" || !strings.HasPrefix(body, `{"error":"jail: `) {
				t.Errorf("%s %s: %d %q, want %d and a JSON error", c.method, c.path, w.Code, truncate(body), c.status)
			}
			if strings.Count(body, "\n") != 1 || len(body) > 1024 {
				t.Errorf("%s %s: error of %d bytes, %d lines, want one short line", c.method, c.path, len(body), strings.Count(body, "\n"))
			}
			if c.status == http.StatusMethodNotAllowed && w.Header().Get("Allow") == "" {
				t.Errorf("%s %s: 405 without Allow", c.method, c.path)
			}
		})
	}
}

// TestSandboxRequestsReachTheManager: a request that is well formed is
// handed to the Manager (here, one that could not be made: 500 with its
// error), with an empty body where one is optional.
func TestSandboxRequestsReachTheManager(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	if s.sandboxes != nil {
		s.sandboxes.Close()
	}
	s.sandboxes, s.sandboxesErr = nil, errors.New("the Manager was asked")
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/sandboxes", `{"name":"a","image":"busybox","labels":{"k":"v"},"reuse":true,"ttl_s":60,"idle_timeout_s":5,"secrets":["TOKEN"],"pull":"never"}`},
		{"POST", "/v1/sandboxes", `{"name":"` + strings.Repeat("z", 63) + `"}`},
		{"GET", "/v1/sandboxes", ""},
		{"GET", "/v1/sandboxes?label=a=1&label=b=&label=a=1", ""},
		{"GET", "/v1/sandboxes/a.b_c-1", ""},
		{"DELETE", "/v1/sandboxes/a?force=1", ""},
		{"POST", "/v1/sandboxes/a/exec", `{"cmd":"true","args":["x"],"env":{"A":"1"},"timeout_s":1,"stdin":"in","output_limit":"64M","secrets":["T"],"workdir":"/tmp","user":"1000"}`},
		{"POST", "/v1/sandboxes/a/exec?stream=1", `{"cmd":"true"}`},
		{"POST", "/v1/sandboxes/a/stop", ""},
		{"POST", "/v1/sandboxes/a/stop", `{"timeout_s":0.5}`},
		{"POST", "/v1/sandboxes/a/start", ""},
		{"POST", "/v1/sandboxes/a/kill", "{}"},
		{"GET", "/v1/sandboxes/a/logs?tail=10", ""},
	} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(c.method, c.path, strings.NewReader(c.body)))
		if w.Code != 500 || !strings.Contains(w.Body.String(), "the Manager was asked") {
			t.Errorf("%s %s %s: %d %q, want it handed to the Manager", c.method, c.path, c.body, w.Code, w.Body.String())
		}
	}
}
