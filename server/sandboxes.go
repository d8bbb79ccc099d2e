package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/jail-sandbox/jail"
	"github.com/jail-sandbox/jail/api"
)

// The persistent sandboxes, /v1/sandboxes*: the server's jail.Manager
// behind JSON. Every name is checked (api.CheckName) and every body
// decoded as POST /v1/run's is (one object, no unknown field, bounded)
// before the Manager is asked anything. Creating a sandbox and running a
// command in one take a run slot, as a run does; an exec's captured
// output is kept within the capture budget as a run's.

// Actions on one sandbox, the last element of /v1/sandboxes/{name}/ACTION,
// and the method each takes.
var sandboxActions = map[string]string{
	"":      "", // /v1/sandboxes/{name}: GET or DELETE
	"exec":  http.MethodPost,
	"stop":  http.MethodPost,
	"start": http.MethodPost,
	"kill":  http.MethodPost,
	"logs":  http.MethodGet,
}

// maxTail bounds ?tail=N of the logs: more lines than the logs a sandbox
// keeps on disk could hold.
const maxTail = 1 << 20

// sandboxesRoot answers /v1/sandboxes: POST creates, GET lists.
func (s *Server) sandboxesRoot(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		s.createSandbox(w, r)
	case http.MethodGet:
		s.listSandboxes(w, r)
	default:
		methodNotAllowed(w, r, http.MethodGet, http.MethodPost)
	}
}

// sandbox answers /v1/sandboxes/{name} and /v1/sandboxes/{name}/ACTION.
// The path is split on its escaped form, so that a name holding an
// escaped '/' is a bad name, not another path.
func (s *Server) sandbox(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), api.PathSandboxes+"/")
	escaped, action, _ := strings.Cut(rest, "/")
	method, known := sandboxActions[action]
	if rest == "" || !known || strings.Contains(action, "/") || (action == "" && strings.HasSuffix(rest, "/")) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("jail: no endpoint %s %s", r.Method, r.URL.Path))
		return
	}
	switch {
	case action == "" && r.Method != http.MethodGet && r.Method != http.MethodDelete:
		methodNotAllowed(w, r, http.MethodGet, http.MethodDelete)
		return
	case action != "" && r.Method != method:
		methodNotAllowed(w, r, method)
		return
	}
	name, err := url.PathUnescape(escaped)
	if err == nil {
		err = api.CheckName(name)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "jail: "+err.Error())
		return
	}
	switch {
	case action == "" && r.Method == http.MethodGet:
		s.getSandbox(w, r, name)
	case action == "":
		s.removeSandbox(w, r, name)
	case action == "exec":
		s.execSandbox(w, r, name)
	case action == "stop":
		s.stopSandbox(w, r, name)
	case action == "start":
		s.startSandbox(w, r, name)
	case action == "kill":
		s.killSandbox(w, r, name)
	case action == "logs":
		s.sandboxLogs(w, r, name)
	}
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allowed ...string) {
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("jail: %s %s: only %s", r.Method, r.URL.Path, strings.Join(allowed, " or ")))
}

// manager is the server's Manager, or answers 500 and returns nil when it
// could not be made.
func (s *Server) manager(w http.ResponseWriter) *jail.Manager {
	if s.sandboxes == nil {
		writeError(w, http.StatusInternalServerError, "jail: persistent sandboxes: "+s.sandboxesErr.Error())
	}
	return s.sandboxes
}

// lookup returns the sandbox name, or answers 404 (or the failure) and
// returns nil.
func (s *Server) lookup(w http.ResponseWriter, name string) *jail.Sandbox {
	m := s.manager(w)
	if m == nil {
		return nil
	}
	sb, err := m.Get(name)
	if err != nil {
		writeFailure(w, err)
		return nil
	}
	return sb
}

// createSandbox answers POST /v1/sandboxes: 201 and the new sandbox's
// description, or, with reuse, 200 and the description of the one that
// was there, made from the same options.
func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req api.CreateRequest
	if !decodeBody(w, r, &req, false) {
		return
	}
	spec, err := specOfCreate(&req)
	if err != nil {
		writeError(w, http.StatusBadRequest, "jail: "+err.Error())
		return
	}
	m := s.manager(w)
	if m == nil {
		return
	}
	// Building a sandbox costs what a run's does.
	if !s.takeSlot(r.Context()) {
		return
	}
	defer s.giveSlot()
	// What was there before, to tell a sandbox reused from one made (or
	// made anew, its options having changed): the one reused is the
	// one created then.
	var before api.SandboxInfo
	if req.Reuse {
		if old, err := m.Get(req.Name); err == nil {
			before, _ = old.Info()
		}
	}
	sb, err := m.Create(r.Context(), spec)
	if err != nil {
		if r.Context().Err() == nil {
			writeFailure(w, err)
		}
		return
	}
	info, err := sb.Info()
	if err != nil {
		writeError(w, statusOf(err), fmt.Sprintf("jail: sandbox %s created, but: %v", req.Name, err))
		return
	}
	status := http.StatusCreated
	if req.Reuse && !before.Created.IsZero() && before.Created.Equal(info.Created) {
		status = http.StatusOK
	}
	writeJSON(w, status, info)
}

// specOfCreate turns a create request into a Spec, checking what only a
// server must: the rest is checked by the Manager as for the CLI.
func specOfCreate(req *api.CreateRequest) (jail.Spec, error) {
	if err := api.CheckName(req.Name); err != nil {
		return jail.Spec{}, err
	}
	spec, err := specOfOptions(&req.RunOptions)
	if err != nil {
		return spec, err
	}
	spec.Name, spec.Reuse, spec.Secrets = req.Name, req.Reuse, req.Secrets
	if spec.TTL, err = seconds("ttl_s", req.TTLS); err != nil {
		return spec, err
	}
	if spec.IdleTimeout, err = seconds("idle_timeout_s", req.IdleTimeoutS); err != nil {
		return spec, err
	}
	if err := api.CheckLabels(req.Labels); err != nil {
		return spec, err
	}
	spec.Labels = req.Labels
	return spec, nil
}

// listSandboxes answers GET /v1/sandboxes[?label=K=V...]: the user's
// sandboxes that carry every label given, by name.
func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	var filter map[string]string
	for _, kv := range r.URL.Query()["label"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("jail: label: %q: must be K=V", truncate(kv)))
			return
		}
		if old, dup := filter[k]; dup && old != v {
			// No sandbox could match both: a mistake, not a filter.
			writeError(w, http.StatusBadRequest, fmt.Sprintf("jail: label: %q given twice", truncate(k)))
			return
		}
		if filter == nil {
			filter = map[string]string{}
		}
		filter[k] = v
	}
	if err := api.CheckLabels(filter); err != nil {
		writeError(w, http.StatusBadRequest, "jail: "+err.Error())
		return
	}
	m := s.manager(w)
	if m == nil {
		return
	}
	list, err := m.List(filter)
	if err != nil {
		writeFailure(w, err)
		return
	}
	if list == nil {
		list = []jail.SandboxInfo{} // [], not null
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request, name string) {
	sb := s.lookup(w, name)
	if sb == nil {
		return
	}
	info, err := sb.Info()
	if err != nil {
		writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// removeSandbox answers DELETE /v1/sandboxes/{name}[?force=1]: 204, or 409
// for a running sandbox without force.
func (s *Server) removeSandbox(w http.ResponseWriter, r *http.Request, name string) {
	force, ok := boolParam(w, r, "force")
	if !ok {
		return
	}
	if s.lookup(w, name) == nil {
		return
	}
	if err := s.sandboxes.Remove(name, force); err != nil {
		writeFailure(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// execSandbox answers POST /v1/sandboxes/{name}/exec as POST /v1/run
// answers: the result object, or with ?stream=1 the output as events and
// the result last.
func (s *Server) execSandbox(w http.ResponseWriter, r *http.Request, name string) {
	var req api.ExecRequest
	if !decodeBody(w, r, &req, false) {
		return
	}
	p, err := processOf(&req)
	if err != nil {
		writeError(w, http.StatusBadRequest, "jail: "+err.Error())
		return
	}
	sb := s.lookup(w, name)
	if sb == nil {
		return
	}
	s.runCommand(w, r, p.OutputLimit, func(stdout, stderr io.Writer, capture bool) (jail.Result, error) {
		p.Stdout, p.Stderr, p.Capture = stdout, stderr, capture
		return sb.Exec(r.Context(), p)
	})
}

// processOf turns an exec request into a Process, checking what only a
// server must: the rest is checked by the sandbox as for the CLI.
func processOf(req *api.ExecRequest) (jail.Process, error) {
	if req.Cmd == "" {
		return jail.Process{}, errors.New("cmd: missing")
	}
	p := jail.Process{
		Command: append([]string{req.Cmd}, req.Args...),
		Secrets: req.Secrets, Workdir: req.Workdir, User: req.User,
	}
	var err error
	if p.Timeout, err = seconds("timeout_s", req.TimeoutS); err != nil {
		return p, err
	}
	if p.OutputLimit, err = outputLimitOf(req.OutputLimit); err != nil {
		return p, err
	}
	if p.Env, err = envOf(req.Env); err != nil {
		return p, err
	}
	if req.Stdin != "" {
		p.Stdin = strings.NewReader(req.Stdin)
	}
	return p, nil
}

// stopSandbox answers POST /v1/sandboxes/{name}/stop, whose body (a
// StopRequest) may be empty: 204 once every process in it has ended.
func (s *Server) stopSandbox(w http.ResponseWriter, r *http.Request, name string) {
	var req api.StopRequest
	if !decodeBody(w, r, &req, true) {
		return
	}
	grace, err := seconds("timeout_s", req.TimeoutS)
	if err != nil {
		writeError(w, http.StatusBadRequest, "jail: "+err.Error())
		return
	}
	s.act(w, r, name, func(ctx context.Context, sb *jail.Sandbox) error { return sb.Stop(ctx, grace) })
}

// startSandbox answers POST /v1/sandboxes/{name}/start (an empty body, or
// {}): 204 once it is ready for commands.
func (s *Server) startSandbox(w http.ResponseWriter, r *http.Request, name string) {
	if !decodeBody(w, r, &struct{}{}, true) {
		return
	}
	s.act(w, r, name, func(ctx context.Context, sb *jail.Sandbox) error { return sb.Start(ctx) })
}

// killSandbox answers POST /v1/sandboxes/{name}/kill (an empty body, or
// {}): 204 once SIGKILL is sent to every process in it.
func (s *Server) killSandbox(w http.ResponseWriter, r *http.Request, name string) {
	if !decodeBody(w, r, &struct{}{}, true) {
		return
	}
	s.act(w, r, name, func(_ context.Context, sb *jail.Sandbox) error { return sb.Kill() })
}

// act does what one of stop, start and kill does to the sandbox name, and
// answers 204.
func (s *Server) act(w http.ResponseWriter, r *http.Request, name string, do func(context.Context, *jail.Sandbox) error) {
	sb := s.lookup(w, name)
	if sb == nil {
		return
	}
	if err := do(r.Context(), sb); err != nil {
		if r.Context().Err() == nil {
			writeFailure(w, err)
		}
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// sandboxLogs answers GET /v1/sandboxes/{name}/logs[?tail=N]: the combined
// output of its commands, as text, its last N lines (0 or none: all that
// is kept).
func (s *Server) sandboxLogs(w http.ResponseWriter, r *http.Request, name string) {
	tail := 0
	if t := r.URL.Query().Get("tail"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 || n > maxTail {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("jail: tail: %q: must be a number of lines from 0 to %d", truncate(t), maxTail))
			return
		}
		tail = n
	}
	sb := s.lookup(w, name)
	if sb == nil {
		return
	}
	logs, err := sb.Logs(tail)
	if err != nil {
		writeFailure(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(logs)
}

// boolParam reads the query parameter name: absent, "0" or "1" (and what
// strconv.ParseBool takes); a 400 otherwise.
func boolParam(w http.ResponseWriter, r *http.Request, name string) (value, ok bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, true
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("jail: %s: %q: must be 0 or 1", name, truncate(v)))
		return false, false
	}
	return b, true
}

// truncate shortens what a client gave, quoted in an error.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}
