package mitm

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jail-sandbox/jail/internal/egress/rules"
)

// Request is the record of one request read on an intercepted
// connection, for the audit: record is called with it once the request
// was refused, or forwarded and its response relayed (or failed).
type Request struct {
	Time   time.Time // when its head was read
	Method string
	Target string // as sent
	// Refused is why the request was refused (not forwarded), nil when
	// it was forwarded.
	Refused *RefusedError
	// Err is why forwarding it or relaying its response failed, if it
	// did.
	Err error
	// Up and Down are the bytes read from and written to the sandbox
	// (TLS records) from the end of the request before to the end of
	// this one.
	Up, Down int64
}

// ServeTLS takes over client, a TLS connection from the sandbox meant for
// host:port (its Read replays the ClientHello the gateway peeked), and
// closes it when done. It terminates the TLS with a leaf for host (a
// ClientHello naming another server, or offering only protocols other
// than http/1.1, fails the handshake), then for each request on the
// connection, kept alive or pipelined: checks that its Host is host
// (else 421 and the connection ends), applies the secrets (a placeholder
// of a secret not bound to host: 403 and the end), and forwards it over
// TLS to host, dialled with dial on the first request (and again after
// the host closed its end) and verified against Options.UpstreamRoots or
// the system's roots, streaming bodies both ways (Content-Length,
// chunked with trailers, Expect: 100-continue relayed). A WebSocket
// upgrade is passed through once the host answers 101: the connection
// then carries frames between the sandbox and that same host and nothing
// more is read as HTTP; any other Upgrade is removed from the request.
//
// up and down count the bytes read from and written to client (TLS
// records, as a passed-through connection would count them). err is nil
// when the sandbox ended the connection between requests, a
// *RefusedError (wrapped) when a request was refused, and the failure
// otherwise.
//
// A value the host echoes in a response header comes back as its
// placeholder; one it echoes in a response body is not looked for.
//
// record, when not nil, is called once for every request read (Request),
// from ServeTLS's goroutine.
func (s *Secrets) ServeTLS(ctx context.Context, client net.Conn, host string, port int, dial func(ctx context.Context) (net.Conn, error), record func(Request)) (up, down int64, err error) {
	counted := &countingConn{Conn: client}
	defer func() { up, down = counted.read.Load(), counted.written.Load() }()
	defer func() { _ = client.Close() }()
	if !s.Intercepts(host) {
		return 0, 0, fmt.Errorf("mitm: no secret is bound to %s", host)
	}
	var sniRefusal error
	conf := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if hello.ServerName != "" {
				if c, err := rules.CanonicalHost(hello.ServerName); err != nil || c != host {
					sniRefusal = &RefusedError{Host: host, Reason: fmt.Sprintf("the TLS server name %q is not the host", shorten(hello.ServerName))}
					return nil, sniRefusal
				}
			}
			return s.auth.Leaf(host)
		},
	}
	tc := tls.Server(counted, conf)
	p := s.newProxy(host, tc, client, func(ctx context.Context) (io.ReadWriteCloser, net.Conn, error) {
		return s.dialUpstream(ctx, host, dial)
	})
	stop := context.AfterFunc(ctx, p.abort)
	defer stop()
	defer p.closeUpstream()
	if err := tc.HandshakeContext(ctx); err != nil {
		if sniRefusal != nil {
			return 0, 0, fmt.Errorf("mitm: %w", sniRefusal)
		}
		return 0, 0, fmt.Errorf("mitm: TLS handshake with the sandbox for %s: %w", host, err)
	}
	if proto := tc.ConnectionState().NegotiatedProtocol; proto != "" && proto != "http/1.1" {
		// Not reached while NextProtos is http/1.1 alone; kept so that
		// no other protocol is ever served unread.
		return 0, 0, fmt.Errorf("mitm: %w", &RefusedError{Host: host, Reason: "protocol " + proto + " is not HTTP/1.1"})
	}
	p.record, p.counted = record, counted
	return 0, 0, p.serve(ctx)
}

// dialUpstream dials host with dial and starts TLS to it, verified.
func (s *Secrets) dialUpstream(ctx context.Context, host string, dial func(ctx context.Context) (net.Conn, error)) (io.ReadWriteCloser, net.Conn, error) {
	raw, err := dial(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("mitm: dial %s: %w", host, err)
	}
	tc := tls.Client(raw, &tls.Config{
		ServerName: host,
		RootCAs:    s.opts.UpstreamRoots,
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, nil, fmt.Errorf("mitm: TLS to %s: %w", host, err)
	}
	if proto := tc.ConnectionState().NegotiatedProtocol; proto != "" && proto != "http/1.1" {
		_ = raw.Close()
		return nil, nil, fmt.Errorf("mitm: TLS to %s: it chose %q, not http/1.1", host, proto)
	}
	return tc, raw, nil
}

// proxy serves one intercepted connection.
type proxy struct {
	s    *Secrets
	host string
	max  int

	client    io.ReadWriter // the sandbox's side, decrypted
	rawClient net.Conn      // closed to abort
	cr        *bufio.Reader
	climit    *headerLimit
	cw        *bufio.Writer

	connect func(ctx context.Context) (io.ReadWriteCloser, net.Conn, error)
	buf     []byte

	record           func(Request) // nil: no record
	counted          *countingConn // the client's bytes, for the record
	upSeen, downSeen int64         // of counted, at the last record

	mu      sync.Mutex // guards up, upRaw and aborted against abort
	up      io.ReadWriteCloser
	upRaw   net.Conn
	aborted bool
	ur      *bufio.Reader
	ulimit  *headerLimit
	uw      *bufio.Writer
}

func (s *Secrets) newProxy(host string, client io.ReadWriter, raw net.Conn, connect func(ctx context.Context) (io.ReadWriteCloser, net.Conn, error)) *proxy {
	cl := &headerLimit{r: client}
	return &proxy{
		s: s, host: host, max: s.opts.MaxHeaderBytes,
		client: client, rawClient: raw,
		cr: bufio.NewReader(cl), climit: cl, cw: bufio.NewWriter(client),
		connect: connect,
		buf:     make([]byte, 32<<10),
	}
}

// abort closes both sides: ctx is done.
func (p *proxy) abort() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.aborted = true
	_ = p.rawClient.Close()
	if p.upRaw != nil {
		_ = p.upRaw.Close()
	}
}

func (p *proxy) closeUpstream() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.upRaw != nil {
		_ = p.upRaw.Close()
	}
	p.up, p.upRaw, p.ur, p.uw, p.ulimit = nil, nil, nil, nil, nil
}

func (p *proxy) ensureUpstream(ctx context.Context) error {
	if p.up != nil {
		return nil
	}
	up, raw, err := p.connect(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.aborted {
		_ = raw.Close()
		return context.Cause(ctx)
	}
	ul := &headerLimit{r: up}
	p.up, p.upRaw, p.ur, p.ulimit, p.uw = up, raw, bufio.NewReader(ul), ul, bufio.NewWriter(up)
	return nil
}

// serve reads and forwards requests until the sandbox ends the
// connection or a request ends it.
func (p *proxy) serve(ctx context.Context) error {
	for {
		p.climit.limit(p.max)
		req, err := http.ReadRequest(p.cr)
		if err != nil {
			switch {
			case err == io.EOF:
				return nil
			case p.climit.hit:
				return p.refuse(&RefusedError{Status: http.StatusRequestHeaderFieldsTooLarge, Host: p.host,
					Reason: fmt.Sprintf("a request header over %d bytes", p.max)})
			case errors.Is(err, io.ErrUnexpectedEOF) || isNetError(err):
				return fmt.Errorf("mitm: reading a request to %s: %w", p.host, err)
			}
			return p.refuse(&RefusedError{Status: http.StatusBadRequest, Host: p.host, Reason: "a malformed request: " + shorten(err.Error())})
		}
		p.climit.unlimit()
		start := time.Now()
		keep, err := p.handle(ctx, req)
		p.recordRequest(start, req, err)
		if err != nil || !keep {
			return err
		}
	}
}

// recordRequest hands the record of req, which err ended (nil: served),
// to p.record.
func (p *proxy) recordRequest(start time.Time, req *http.Request, err error) {
	if p.record == nil {
		return
	}
	r := Request{Time: start, Method: req.Method, Target: req.RequestURI}
	var re *RefusedError
	if errors.As(err, &re) {
		r.Refused = re
	} else {
		r.Err = err
	}
	if p.counted != nil {
		up, down := p.counted.read.Load(), p.counted.written.Load()
		r.Up, r.Down = up-p.upSeen, down-p.downSeen
		p.upSeen, p.downSeen = up, down
	}
	p.record(r)
}

func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed)
}

// refuse answers the request with e's status and ends the connection.
func (p *proxy) refuse(e *RefusedError) error {
	p.writeError(e.Status, "jail: "+e.Error())
	return fmt.Errorf("mitm: %w", e)
}

func (p *proxy) writeError(status int, msg string) {
	body := msg + "\n"
	fmt.Fprintf(p.cw, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	_ = p.cw.Flush()
}

// handle forwards one request and its response; keep says whether the
// connection goes on.
func (p *proxy) handle(ctx context.Context, req *http.Request) (keep bool, err error) {
	// req.Body is never closed: closing drains it, which a refused
	// request must not cost.
	switch {
	case req.ProtoMajor != 1:
		return false, p.refuse(&RefusedError{Status: http.StatusHTTPVersionNotSupported, Host: p.host, Reason: "only HTTP/1.x is served, not " + shorten(req.Proto)})
	case req.Method == http.MethodTrace:
		// A host that answers TRACE echoes the request, the value put in
		// it with it, in a body this package does not filter.
		return false, p.refuse(&RefusedError{Status: http.StatusMethodNotAllowed, Host: p.host, Reason: "TRACE, which echoes the request (and a secret's value in it) back"})
	case req.Method == http.MethodConnect:
		return false, p.refuse(&RefusedError{Status: http.StatusMethodNotAllowed, Host: p.host, Reason: "CONNECT inside an intercepted connection"})
	case req.Host == "":
		return false, p.refuse(&RefusedError{Status: http.StatusBadRequest, Host: p.host, Reason: "a request without a Host"})
	}
	if h, err := canonicalRequestHost(req.Host); err != nil || h != p.host {
		return false, p.refuse(&RefusedError{Status: http.StatusMisdirectedRequest, Host: p.host,
			Reason: fmt.Sprintf("the request names host %q on a connection to", shorten(req.Host))})
	}
	upgrade := takeUpgrade(req.Header)
	target := req.RequestURI
	if !strings.HasPrefix(target, "/") && target != "*" {
		target = req.URL.RequestURI() // absolute-form: the host was checked above
	}
	if err := p.s.rewrite(p.host, req.RequestURI, req.Header, true); err != nil {
		var re *RefusedError
		if errors.As(err, &re) {
			return false, p.refuse(re)
		}
		return false, err
	}
	if err := checkHeader(req.Header); err != nil {
		// Go's reader lets through names a writer must not send.
		return false, p.refuse(&RefusedError{Status: http.StatusBadRequest, Host: p.host, Reason: err.Error()})
	}
	if err := p.ensureUpstream(ctx); err != nil {
		p.writeError(http.StatusBadGateway, "jail: cannot reach "+p.host)
		return false, err
	}

	chunked := len(req.TransferEncoding) > 0
	hasBody := chunked || req.ContentLength > 0
	if hasBody && strings.EqualFold(strings.TrimSpace(req.Header.Get("Expect")), "100-continue") {
		// Answered here rather than relayed: a host that ignores Expect
		// and waits for the body would otherwise hang both sides. The
		// cost is a body sent that the host may refuse.
		req.Header.Del("Expect")
		p.cw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		if err := p.cw.Flush(); err != nil {
			return false, err
		}
	}
	if err := p.writeRequestHead(req, target, chunked); err != nil {
		return p.upstreamFailed(req, err)
	}
	if hasBody {
		trailer := func() (http.Header, error) {
			if err := p.s.rewrite(p.host, "", req.Trailer, true); err != nil {
				return nil, err
			}
			return req.Trailer, nil
		}
		if err := copyBody(p.uw, req.Body, chunked, p.buf, trailer); err != nil {
			var we *writeError
			if errors.As(err, &we) {
				return p.upstreamFailed(req, err)
			}
			return false, fmt.Errorf("mitm: request body to %s: %w", p.host, err)
		}
	} else if err := p.uw.Flush(); err != nil {
		return p.upstreamFailed(req, err)
	}

	resp, err := p.readResponse(req)
	if err != nil {
		return false, err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		if !upgrade {
			p.writeError(http.StatusBadGateway, "jail: "+p.host+" switched protocols unasked")
			return false, fmt.Errorf("mitm: %s answered 101 to a request without Upgrade", p.host)
		}
		return false, p.splice(req, resp)
	}
	return p.forwardResponse(req, resp, false)
}

// upstreamFailed handles a failed write to the host: it may have answered
// early (and closed); that answer is forwarded, else 502.
func (p *proxy) upstreamFailed(req *http.Request, err error) (bool, error) {
	if p.ur != nil {
		if resp, rerr := http.ReadResponse(p.ur, req); rerr == nil && resp.StatusCode >= 200 {
			_, ferr := p.forwardResponse(req, resp, true)
			p.closeUpstream()
			return false, ferr
		}
	}
	p.closeUpstream()
	p.writeError(http.StatusBadGateway, "jail: the connection to "+p.host+" failed")
	return false, fmt.Errorf("mitm: forwarding to %s: %w", p.host, err)
}

// readResponse reads the host's response to req: informational answers
// other than 101 are forwarded and skipped; the first other answer is
// returned.
func (p *proxy) readResponse(req *http.Request) (*http.Response, error) {
	for {
		p.ulimit.limit(p.max)
		resp, err := http.ReadResponse(p.ur, req)
		if err != nil {
			hit := p.ulimit.hit
			p.closeUpstream()
			p.writeError(http.StatusBadGateway, "jail: a bad response from "+p.host)
			if hit {
				return nil, fmt.Errorf("mitm: a response header over %d bytes from %s", p.max, p.host)
			}
			return nil, fmt.Errorf("mitm: reading the response of %s: %w", p.host, err)
		}
		p.ulimit.unlimit()
		if resp.StatusCode/100 != 1 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
		if req.ProtoMinor == 0 {
			continue // an HTTP/1.0 client is sent no 1xx
		}
		if err := p.writeResponseHead(req, resp, "", false); err != nil {
			return nil, err
		}
		if err := p.cw.Flush(); err != nil {
			return nil, err
		}
	}
}

// forwardResponse writes resp and its body to the sandbox. keep says
// whether the sandbox's connection goes on; the host's is closed when
// it asked or its body ended with the connection.
func (p *proxy) forwardResponse(req *http.Request, resp *http.Response, end bool) (bool, error) {
	// resp.Body is read to its end or the host's connection closed:
	// never closed, which would drain a stalled host. (writeResponseHead
	// redacts the head.)
	bodyless := req.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified
	chunked, untilClose := false, false
	switch {
	case bodyless:
	case len(resp.TransferEncoding) > 0 && req.ProtoMinor >= 1:
		chunked = true
		resp.Header.Del("Content-Length")
	case resp.ContentLength >= 0:
		resp.Header.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	default:
		untilClose = true
		resp.Header.Del("Content-Length")
	}
	end = end || req.Close || untilClose
	framing := ""
	if chunked {
		framing = "Transfer-Encoding: chunked\r\n"
	}
	if err := p.writeResponseHead(req, resp, framing, end); err != nil {
		return false, err
	}
	if bodyless {
		if err := p.cw.Flush(); err != nil {
			return false, err
		}
	} else {
		trailer := func() (http.Header, error) {
			p.s.redact(p.host, resp.Trailer)
			return resp.Trailer, nil
		}
		if err := copyBody(p.cw, resp.Body, chunked, p.buf, trailer); err != nil {
			p.closeUpstream()
			return false, fmt.Errorf("mitm: response body of %s: %w", p.host, err)
		}
	}
	if resp.Close || untilClose {
		p.closeUpstream()
	}
	return !end, nil
}

// splice passes bytes both ways after a 101 until either side ends.
func (p *proxy) splice(req *http.Request, resp *http.Response) error {
	if err := p.writeResponseHead(req, resp, "", false); err != nil {
		return err
	}
	if err := p.cw.Flush(); err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(p.up, p.cr)
		p.abort()
	}()
	_, _ = io.Copy(p.client, p.ur)
	p.abort()
	wg.Wait()
	return nil
}

// takeUpgrade removes from h an Upgrade to anything but WebSocket (h2c
// would carry HTTP/2 streams this package does not read) and says
// whether a WebSocket upgrade is asked for.
func takeUpgrade(h http.Header) bool {
	if len(h["Upgrade"]) == 0 {
		return false
	}
	if len(h["Upgrade"]) == 1 && strings.EqualFold(strings.TrimSpace(h["Upgrade"][0]), "websocket") && connectionHas(h, "upgrade") {
		return true
	}
	h.Del("Upgrade")
	h.Del("Http2-Settings")
	var kept []string
	for _, v := range h["Connection"] {
		var tokens []string
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" && !strings.EqualFold(t, "upgrade") && !strings.EqualFold(t, "http2-settings") {
				tokens = append(tokens, t)
			}
		}
		if len(tokens) > 0 {
			kept = append(kept, strings.Join(tokens, ", "))
		}
	}
	if kept == nil {
		h.Del("Connection")
	} else {
		h["Connection"] = kept
	}
	return false
}

func connectionHas(h http.Header, token string) bool {
	for _, v := range h["Connection"] {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

func (p *proxy) writeRequestHead(req *http.Request, target string, chunked bool) error {
	w := p.uw
	w.WriteString(req.Method + " " + target + " HTTP/1." + strconv.Itoa(req.ProtoMinor) + "\r\n")
	w.WriteString("Host: " + req.Host + "\r\n")
	h := req.Header
	cl := h["Content-Length"]
	delete(h, "Content-Length")
	defer func() {
		if cl != nil {
			h["Content-Length"] = cl
		}
	}()
	if err := writeHeader(w, h); err != nil {
		return err
	}
	switch {
	case chunked:
		w.WriteString("Transfer-Encoding: chunked\r\n")
	case req.ContentLength > 0 || cl != nil:
		w.WriteString("Content-Length: " + strconv.FormatInt(req.ContentLength, 10) + "\r\n")
	}
	_, err := w.WriteString("\r\n")
	return err
}

// writeResponseHead writes the head of resp, final, informational (1xx)
// or switching (101) alike, with the values of the secrets bound to the
// host redacted from its headers and reason phrase.
func (p *proxy) writeResponseHead(req *http.Request, resp *http.Response, framing string, end bool) error {
	w := p.cw
	p.s.redact(p.host, resp.Header)
	reason := strings.TrimPrefix(resp.Status, strconv.Itoa(resp.StatusCode))
	reason = strings.TrimSpace(reason)
	if !validFieldValue(reason) || p.s.holdsValue(p.host, reason) {
		reason = http.StatusText(resp.StatusCode)
	}
	fmt.Fprintf(w, "HTTP/1.1 %03d %s\r\n", resp.StatusCode, reason)
	if end {
		resp.Header.Set("Connection", "close")
	}
	if err := writeHeader(w, resp.Header); err != nil {
		return err
	}
	w.WriteString(framing)
	_, err := w.WriteString("\r\n")
	return err
}

// checkHeader refuses a name or value that would break the message.
func checkHeader(h http.Header) error {
	for k, vs := range h {
		if !validFieldName(k) {
			return fmt.Errorf("header name %q is not a token", shorten(k))
		}
		for _, v := range vs {
			if !validFieldValue(v) {
				return fmt.Errorf("header %s: a control character in its value", shorten(k))
			}
		}
	}
	return nil
}

// writeHeader writes h's fields in the order of their names, refusing a
// name or value that would break the message.
func writeHeader(w *bufio.Writer, h http.Header) error {
	if err := checkHeader(h); err != nil {
		return err
	}
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range h[k] {
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(v)
			w.WriteString("\r\n")
		}
	}
	return nil
}

// validFieldName: an RFC 9110 token.
func validFieldName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// writeError marks a failure to write where copyBody copies to.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// copyBody copies a body from src (already de-chunked) to dst, chunked
// again when chunked (with the trailer trailer gives once src ends),
// flushing after each read so that a streamed body streams.
func copyBody(dst *bufio.Writer, src io.Reader, chunked bool, buf []byte, trailer func() (http.Header, error)) error {
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if chunked {
				dst.WriteString(strconv.FormatInt(int64(n), 16) + "\r\n")
			}
			dst.Write(buf[:n])
			if chunked {
				dst.WriteString("\r\n")
			}
			if err := dst.Flush(); err != nil {
				return &writeError{err}
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if chunked {
		dst.WriteString("0\r\n")
		t, err := trailer()
		if err != nil {
			return err
		}
		if err := writeHeader(dst, t); err != nil {
			return err
		}
		dst.WriteString("\r\n")
	}
	if err := dst.Flush(); err != nil {
		return &writeError{err}
	}
	return nil
}

// headerLimit bounds what a header may pull through the buffered reader
// above it: past the limit it reads as the end, and hit says so.
type headerLimit struct {
	r       io.Reader
	limited bool
	left    int
	hit     bool
}

// limit allows n bytes and the reader's buffer's worth more (what it may
// read ahead of a header that fits).
func (l *headerLimit) limit(n int) { l.limited, l.left, l.hit = true, n+4096, false }
func (l *headerLimit) unlimit()    { l.limited = false }

func (l *headerLimit) Read(b []byte) (int, error) {
	if !l.limited {
		return l.r.Read(b)
	}
	if l.left <= 0 {
		l.hit = true
		return 0, io.EOF
	}
	if len(b) > l.left {
		b = b[:l.left]
	}
	n, err := l.r.Read(b)
	l.left -= n
	return n, err
}

// countingConn counts the bytes read and written.
type countingConn struct {
	net.Conn
	read, written atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written.Add(int64(n))
	return n, err
}

// shorten bounds text from the sandbox quoted in an error.
func shorten(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
