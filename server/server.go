// Package server is jail's HTTP API, `jail serve`: JSON over HTTP/1.1 on a
// unix socket (see package api for the bodies).
//
// A long-lived server is what lets an agent server or a CI runner start
// sandboxes without paying for a process of jail each time, and it keeps a
// jail.Pool per (image, root, profile) asked for, so a run that fits one of
// their ready sandboxes costs about a fork and an exec.
//
// Invariants: the socket is created with mode 0600 in a directory only its
// owner may change (Listen refuses any other), so only that user (and root)
// reaches the API, and no one else can take the socket's place; every
// sandbox runs with the identity it would have under `jail run` by that
// user; every request is validated as the CLI's flags are, and host paths
// must be absolute (the server's working directory means nothing to a
// client); no run outlives the request that asked for it: a client that
// goes away cancels its run, which kills the sandbox; no lock is held
// across I/O, and a pool is made in the background, so no request (a
// hostile image whose preparing never ends, say) holds up another, the
// health check or the server's stop; what the server keeps of the runs'
// output is bounded, per run (jail.MaxOutputLimit) and for all the runs at
// once (Options.MaxCapture).
package server

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
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jail-sandbox/jail"
	"github.com/jail-sandbox/jail/api"
)

// Options configure a Server.
type Options struct {
	// PoolSize is how many ready sandboxes each pool keeps; 0 keeps none,
	// and every run is started cold.
	PoolSize int
	// MaxPools bounds the pools kept at once (0: 4); requests for other
	// (image, root, profile) combinations start cold.
	MaxPools int
	// MaxRuns bounds the runs at once (0: 16 per CPU); later requests wait
	// for a slot.
	MaxRuns int
	// MaxCapture bounds the output kept for the answers of all the runs
	// in progress, in bytes (0: DefaultMaxCapture). A run that captures
	// reserves its output limit for each of its two streams before it
	// starts, and waits while that would exceed MaxCapture.
	MaxCapture int64
	// Sandboxes configures the server's jail.Manager, which answers
	// /v1/sandboxes*: the user's state directory, audit log and secrets.
	Sandboxes jail.ManagerOptions

	// newPool makes a pool (nil: jail.NewPool); tests slow it down.
	newPool func(jail.Spec, int) (*jail.Pool, error)
}

// DefaultMaxCapture is the default of Options.MaxCapture: room for two
// runs that keep the most output a run may (jail.MaxOutputLimit per
// stream), or 128 runs that keep the default 1 MiB per stream.
const DefaultMaxCapture = 4 * jail.MaxOutputLimit

// maxRequestBytes bounds a request body: arguments and environment are
// limited to 1 MiB by the kernel, stdin may take the rest.
const maxRequestBytes = 16 << 20

// Server answers the HTTP API.
type Server struct {
	opts    Options
	runs    chan struct{} // one token per run in progress
	capture *budget       // of the output kept for the answers
	mux     *http.ServeMux

	mu sync.Mutex
	// pools are the pools kept, by what their sandboxes are built from;
	// nil while one is being made (by makePool, which holds no lock).
	pools map[poolKey]*jail.Pool
	// making counts the pools being made (for tests).
	making sync.WaitGroup
	// cold runs what no pool is for, with no sandbox ready but with the
	// janitor it shares (nil when it could not be made).
	cold   *jail.Pool
	closed bool

	// sandboxes answers /v1/sandboxes*; nil, with sandboxesErr, when its
	// state directory could not be opened (the runs are still served).
	sandboxes    *jail.Manager
	sandboxesErr error
}

// poolKey is what a pool's sandboxes are built from.
type poolKey struct {
	image, rootfs, profile string
}

// New returns a server. When opts.PoolSize > 0 it starts building the
// default sandbox (host tree, default profile) at once.
func New(opts Options) *Server {
	if opts.MaxPools <= 0 {
		opts.MaxPools = 4
	}
	if opts.MaxRuns <= 0 {
		opts.MaxRuns = 16 * runtime.NumCPU()
	}
	if opts.MaxCapture <= 0 {
		opts.MaxCapture = DefaultMaxCapture
	}
	if opts.newPool == nil {
		opts.newPool = jail.NewPool
	}
	s := &Server{opts: opts, runs: make(chan struct{}, opts.MaxRuns), capture: newBudget(opts.MaxCapture), pools: map[poolKey]*jail.Pool{}}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET "+api.PathHealth, s.health)
	s.mux.HandleFunc(api.PathRun, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, "jail: "+r.Method+" "+api.PathRun+": only POST")
			return
		}
		s.run(w, r)
	})
	s.mux.HandleFunc(api.PathSandboxes, s.sandboxesRoot)
	s.mux.HandleFunc(api.PathSandboxes+"/", s.sandbox)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("jail: no endpoint %s %s", r.Method, r.URL.Path))
	})
	s.cold, _ = jail.NewPool(jail.Spec{}, 0)
	s.sandboxes, s.sandboxesErr = jail.NewManager(opts.Sandboxes)
	if opts.PoolSize > 0 {
		s.poolFor(poolKey{profile: jail.DefaultProfile})
	}
	return s
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close ends the pools' ready sandboxes and lets go of the persistent
// ones, which live on. Runs in progress are ended by their requests' end
// (see http.Server.Shutdown). A pool still being made is not waited for:
// its maker closes it once made.
func (s *Server) Close() {
	if s.sandboxes != nil {
		_ = s.sandboxes.Close()
	}
	s.mu.Lock()
	s.closed = true
	var pools []*jail.Pool
	for _, p := range s.pools {
		if p != nil {
			pools = append(pools, p)
		}
	}
	s.pools = map[poolKey]*jail.Pool{}
	if s.cold != nil {
		pools = append(pools, s.cold)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range pools {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.Close()
		}()
	}
	wg.Wait()
}

// poolFor returns the pool of key when it is made; otherwise it starts
// making it, if there is room, and returns the pool of cold runs (or nil).
// It never waits: making a pool prepares a sandbox, which reads the host
// and the image, for as long as that takes, and a run for a key whose pool
// is not there yet is started cold, as the first run of a new pool would
// be.
func (s *Server) poolFor(key poolKey) *jail.Pool {
	if s.opts.PoolSize <= 0 {
		return s.cold
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, known := s.pools[key]
	switch {
	case p != nil:
		return p
	case known || s.closed || len(s.pools) >= s.opts.MaxPools:
		// Being made, or no room.
		return s.cold
	}
	s.pools[key] = nil // takes the slot while it is made
	s.making.Add(1)
	go s.makePool(key)
	return s.cold
}

// makePool makes the pool of key, whose slot poolFor took.
func (s *Server) makePool(key poolKey) {
	defer s.making.Done()
	p, err := s.opts.newPool(jail.Spec{Image: key.image, Rootfs: key.rootfs, Profile: key.profile}, s.opts.PoolSize)
	s.mu.Lock()
	if err != nil || s.closed {
		// No pool: the slot is free again, and the runs report the
		// error themselves. Or the server closed meanwhile.
		if s.pools[key] == nil {
			delete(s.pools, key)
		}
		s.mu.Unlock()
		if p != nil {
			p.Close()
		}
		return
	}
	s.pools[key] = p
	s.mu.Unlock()
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	h := api.Health{Status: "ok", Version: jail.Version}
	s.mu.Lock()
	for _, p := range s.pools {
		if p != nil { // nil: being made
			h.Ready += p.Ready()
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, h)
}

func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	var req api.RunRequest
	if !decodeBody(w, r, &req, false) {
		return
	}
	spec, err := specOf(&req)
	if err != nil {
		writeError(w, http.StatusBadRequest, "jail: "+err.Error())
		return
	}
	s.runCommand(w, r, spec.OutputLimit, func(stdout, stderr io.Writer, capture bool) (jail.Result, error) {
		spec.Stdout, spec.Stderr, spec.Capture = stdout, stderr, capture
		run := jail.Run
		if p := s.poolFor(poolKey{image: spec.Image, rootfs: spec.Rootfs, profile: spec.ProfileName()}); p != nil {
			run = p.Run
		}
		return run(r.Context(), spec)
	})
}

// decodeBody reads the request's body, one JSON object with no field v
// does not have, of at most maxRequestBytes, into v; an empty body too
// when emptyOK. It answers 400 and returns false otherwise.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if err == io.EOF && emptyOK {
			return true
		}
		writeError(w, http.StatusBadRequest, "jail: request body: "+err.Error())
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "jail: request body: more than one JSON object")
		return false
	}
	return true
}

// runCommand answers a request that runs a command (POST /v1/run, POST
// /v1/sandboxes/{name}/exec) as start says, with the result object, or
// with ?stream=1 the output as events as it comes and the result last. It
// waits for a run slot, and without a stream for room in the capture
// budget for outputLimit (0: the default) per stream; start gets the
// writers to stream to, and whether to capture.
func (s *Server) runCommand(w http.ResponseWriter, r *http.Request, outputLimit int64,
	start func(stdout, stderr io.Writer, capture bool) (jail.Result, error)) {
	stream := r.URL.Query().Get("stream") == "1"
	if !s.takeSlot(r.Context()) {
		return
	}
	defer s.giveSlot()
	if !stream {
		// Kept until the answer is written.
		kept, err := s.capture.take(r.Context(), 2*outputLimitOr(outputLimit))
		if err != nil {
			return
		}
		defer s.capture.give(kept)
	}

	var events *eventWriter
	var stdout, stderr io.Writer
	if stream {
		events = &eventWriter{w: w}
		stdout, stderr = events.stream("stdout"), events.stream("stderr")
	}
	res, err := start(stdout, stderr, !stream)
	var exec *jail.ExecError
	switch {
	case err == nil:
	case errors.As(err, &exec):
		res.Error = "jail: " + exec.Error()
	case r.Context().Err() != nil:
		return // the client went away: no one to answer
	default:
		if events != nil && events.started() {
			events.last(api.Error{Error: "jail: " + err.Error()})
			return
		}
		writeFailure(w, err)
		return
	}
	if events != nil {
		events.last(res)
		return
	}
	writeResult(w, res)
}

// takeSlot waits for one of the Options.MaxRuns slots of the runs, execs
// and creations in progress; false when the request ended first.
func (s *Server) takeSlot(ctx context.Context) bool {
	select {
	case s.runs <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Server) giveSlot() { <-s.runs }

// statusOf is the status of an answer that failed with err: the request's
// own fault (a refused spec, no such sandbox, a name taken) or the
// server's.
func statusOf(err error) int {
	var setup *jail.SetupError
	switch {
	case errors.Is(err, jail.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, jail.ErrExists), errors.Is(err, jail.ErrRunning):
		return http.StatusConflict
	case errors.As(err, &setup) && setup.Refused:
		return http.StatusBadRequest
	default:
		return http.StatusInternalServerError
	}
}

// writeFailure answers err with its status.
func writeFailure(w http.ResponseWriter, err error) {
	writeError(w, statusOf(err), "jail: "+err.Error())
}

// specOf turns a run request into a Spec, checking what only a server
// must: the rest is checked by jail.Run as for the CLI.
func specOf(req *api.RunRequest) (jail.Spec, error) {
	switch {
	case req.Cmd != "":
	case req.Image == "" || len(req.Args) > 0:
		return jail.Spec{}, errors.New("cmd: missing (only an image's own command may be left out)")
	}
	opts := req.Options()
	spec, err := specOfOptions(&opts)
	if err != nil {
		return spec, err
	}
	if req.Cmd != "" {
		spec.Command = append([]string{req.Cmd}, req.Args...)
	}
	if req.Stdin != "" {
		spec.Stdin = strings.NewReader(req.Stdin)
	}
	return spec, nil
}

// specOfOptions turns the RUN OPTIONS of a request into a Spec, checking
// what only a server must.
func specOfOptions(req *api.RunOptions) (jail.Spec, error) {
	spec := jail.Spec{
		Image: req.Image, Pull: req.Pull, Rootfs: req.Rootfs, Profile: req.Profile,
		CPUs: req.CPUs, Pids: req.Pids, Net: req.Net, Workspace: req.Workspace,
		User: req.User, Workdir: req.Workdir, Hostname: req.Hostname, ReadOnly: req.ReadOnly,
	}
	if spec.Net == "none" {
		spec.Net = ""
	}
	switch req.Pull {
	case "", api.PullNever, api.PullMissing, api.PullAlways:
	default:
		return spec, fmt.Errorf("pull: %q: must be %s, %s or %s", truncate(req.Pull), api.PullNever, api.PullMissing, api.PullAlways)
	}
	var err error
	if spec.NetLimits, err = jail.ParseNetLimits(req.NetLimit); err != nil {
		return spec, fmt.Errorf("net_limit: %v", err)
	}
	if req.Memory != "" {
		if spec.Memory, err = jail.ParseSize(string(req.Memory)); err != nil {
			return spec, fmt.Errorf("memory: %v", err)
		}
	}
	if spec.OutputLimit, err = outputLimitOf(req.OutputLimit); err != nil {
		return spec, err
	}
	if spec.Timeout, err = seconds("timeout_s", req.TimeoutS); err != nil {
		return spec, err
	}
	for _, path := range []struct{ name, value string }{{"rootfs", req.Rootfs}, {"workspace", req.Workspace}} {
		if path.value != "" && !filepath.IsAbs(path.value) {
			return spec, fmt.Errorf("%s: %q: host paths must be absolute", path.name, path.value)
		}
	}
	for _, m := range req.Mounts {
		mount, err := jail.ParseMount(m)
		if err != nil {
			return spec, fmt.Errorf("mounts: %v", err)
		}
		if !filepath.IsAbs(mount.Source) {
			return spec, fmt.Errorf("mounts: %q: host paths must be absolute", m)
		}
		spec.Mounts = append(spec.Mounts, mount)
	}
	if spec.Env, err = envOf(req.Env); err != nil {
		return spec, err
	}
	return spec, nil
}

// outputLimitOf reads an output_limit: at most jail.MaxOutputLimit, which
// is what a server keeps of a stream at most.
func outputLimitOf(size api.Size) (int64, error) {
	if size == "" {
		return 0, nil
	}
	n, err := jail.ParseSize(string(size))
	if err != nil {
		return 0, fmt.Errorf("output_limit: %v", err)
	}
	if n > jail.MaxOutputLimit {
		return 0, fmt.Errorf("output_limit: %q: must be at most %dM", size, jail.MaxOutputLimit>>20)
	}
	return n, nil
}

// seconds reads the duration field name, a number of seconds.
func seconds(name string, s float64) (time.Duration, error) {
	if s < 0 || s > 1e9 {
		return 0, fmt.Errorf("%s: %g: must be positive", name, s)
	}
	return time.Duration(s * float64(time.Second)), nil
}

// envOf turns an env object into K=V entries, in the order of the keys.
func envOf(env map[string]string) ([]string, error) {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var entries []string
	for _, k := range keys {
		if strings.ContainsRune(k, '=') {
			// K=V would set another variable than the one named.
			return nil, fmt.Errorf("env: %q: a variable name holds no '='", k)
		}
		entries = append(entries, k+"="+env[k])
	}
	return entries, nil
}

// outputLimitOr is what a run keeps of each stream at most: limit, or the
// default.
func outputLimitOr(limit int64) int64 {
	if limit > 0 {
		return limit
	}
	return jail.DefaultOutputLimit
}

// eventWriter writes a streamed answer: one JSON event per write of the
// command's output, flushed at once.
type eventWriter struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	written bool
}

func (e *eventWriter) started() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.written
}

func (e *eventWriter) write(v any) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.written {
		e.w.Header().Set("Content-Type", "application/x-ndjson")
		e.w.WriteHeader(http.StatusOK)
		e.written = true
	}
	if err := json.NewEncoder(e.w).Encode(v); err != nil {
		return err
	}
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

// last writes the final line.
func (e *eventWriter) last(v any) { _ = e.write(v) }

func (e *eventWriter) stream(name string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		if err := e.write(api.Event{Stream: name, Data: string(p)}); err != nil {
			return 0, err
		}
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeResult writes the answer of a run, the bytes writeJSON would, without
// building it whole in memory first: the output in it, up to the output
// limit per stream, may take up to six times its size once escaped (a
// control byte is \u00XX), which is what encoding/json would hold.
func writeResult(w http.ResponseWriter, out api.Result) {
	const head = `{"stdout":"","stderr":"",`
	rest := out
	rest.Stdout, rest.Stderr = "", ""
	tail, err := json.Marshal(rest)
	if err != nil || !bytes.HasPrefix(tail, []byte(head)) {
		writeJSON(w, http.StatusOK, out) // api.Result no longer starts so
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString(`{"stdout":`)
	writeJSONString(bw, out.Stdout)
	bw.WriteString(`,"stderr":`)
	writeJSONString(bw, out.Stderr)
	bw.WriteByte(',')
	bw.Write(tail[len(head):])
	bw.WriteByte('\n')
	_ = bw.Flush()
}

// writeJSONString writes s as encoding/json quotes it, a piece at a time.
// A piece never ends inside a rune, which encoding/json would otherwise
// replace, byte by byte, with U+FFFD.
func writeJSONString(w *bufio.Writer, s string) {
	const piece = 16 << 10
	w.WriteByte('"')
	for len(s) > 0 {
		n := min(piece, len(s))
		if n < len(s) {
			// A rune is at most 4 bytes: its start is at most 3
			// back.
			for back := 0; back < utf8.UTFMax-1 && n > 1 && !utf8.RuneStart(s[n]); back++ {
				n--
			}
		}
		quoted, _ := json.Marshal(s[:n]) // a string always encodes
		w.Write(quoted[1 : len(quoted)-1])
		s = s[n:]
	}
	w.WriteByte('"')
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, api.Error{Error: msg})
}

// Serve answers on l until ctx is cancelled, then stops taking requests,
// lets the runs in progress finish (up to grace, after which they are
// cancelled and their sandboxes killed) and ends the ready sandboxes.
func Serve(ctx context.Context, l net.Listener, opts Options, grace time.Duration) error {
	s := New(opts)
	base, cancelRuns := context.WithCancel(context.Background())
	defer cancelRuns()
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(l) }()
	var err error
	select {
	case err = <-served:
	case <-ctx.Done():
	}
	deadline := time.Now().Add(grace)
	shutdown, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if hs.Shutdown(shutdown) != nil {
		cancelRuns()
		_ = hs.Close()
	}
	// The pools end their ready sandboxes. One that cannot close by the
	// deadline (a filler still preparing a sandbox, say, of an image whose
	// reading never ends) is left to what ends a server killed outright:
	// its sandboxes die with it, and their janitors remove their cgroups.
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	wait := time.NewTimer(max(time.Until(deadline), closeSlack))
	defer wait.Stop()
	select {
	case <-closed:
	case <-wait.C:
	}
	return err
}

// closeSlack is how long Serve waits for the pools to close when the
// grace period is over: the runs cancelled then take a few milliseconds to
// end.
const closeSlack = 2 * time.Second

// budget is a number of bytes that runs take and give back; take waits
// while there are too few left.
type budget struct {
	mu          sync.Mutex
	total, left int64
	// freed is closed, and replaced, when bytes are given back.
	freed chan struct{}
}

func newBudget(n int64) *budget { return &budget{total: n, left: n, freed: make(chan struct{})} }

// take takes n bytes, or the whole budget when n is more, waiting until
// they are there or ctx is done, and returns what it took.
func (b *budget) take(ctx context.Context, n int64) (int64, error) {
	n = min(n, b.total)
	for {
		b.mu.Lock()
		if b.left >= n {
			b.left -= n
			b.mu.Unlock()
			return n, nil
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// give gives back n bytes taken.
func (b *budget) give(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.left += n
	close(b.freed)
	b.freed = make(chan struct{})
}
