package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jail-sandbox/jail/internal/egress/rules"
)

// errHeadTooLarge is a head that does not end within MaxHead bytes.
var errHeadTooLarge = fmt.Errorf("a head larger than %d bytes", MaxHead)

// peekHead waits until br holds a whole HTTP head (up to and including the
// empty line that ends it) and returns it, without consuming it. br's
// buffer must be MaxHead bytes.
func peekHead(br *bufio.Reader) ([]byte, error) {
	n := 1
	for {
		_, err := br.Peek(n)
		// Everything buffered, which may be more than n.
		buf, _ := br.Peek(br.Buffered())
		if end := headEnd(buf); end > 0 {
			return buf[:end], nil
		}
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return nil, errHeadTooLarge
			}
			return nil, err
		}
		if len(buf) == br.Size() {
			return nil, errHeadTooLarge
		}
		n = len(buf) + 1
	}
}

// headEnd is the length of the head at the start of buf, through the
// empty line that ends it (CRLF or a bare LF, as Go's reader takes), or 0
// when buf holds no whole head.
func headEnd(buf []byte) int {
	pos := 0
	for first := true; ; first = false {
		i := bytes.IndexByte(buf[pos:], '\n')
		if i < 0 {
			return 0
		}
		line := buf[pos : pos+i]
		pos += i + 1
		if !first && (len(line) == 0 || len(line) == 1 && line[0] == '\r') {
			return pos
		}
	}
}

// headerValues returns the values of the header name in a raw head
// (case-insensitive name), and whether the head has a line folded onto
// the one before it (obs-fold), which the gateway refuses.
func headerValues(head []byte, name string) (values []string, folded bool) {
	lines := strings.Split(string(head), "\n")
	for _, line := range lines[1:] {
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			folded = true
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(k, name) {
			values = append(values, strings.Trim(v, " \t"))
		}
	}
	return values, folded
}

// request is an HTTP request read from the client, and the Host header(s)
// it came with (which net/http drops).
type request struct {
	*http.Request
	hostHeaders []string
	start       int64 // c.consumed() when its head began
}

// consumed is how many bytes of the client's have been taken out of the
// buffer: read and parsed.
func (c *conn) consumed() int64 {
	return c.client.up.Load() - int64(c.br.Buffered())
}

// readRequest reads the client's next request head. idle is how long to
// wait for its first byte; the rest must come within the head timeout.
func (c *conn) readRequest(idle time.Duration) (*request, error) {
	if c.br.Buffered() == 0 {
		if err := c.setDeadline(idle); err != nil {
			return nil, err
		}
		if _, err := c.br.Peek(1); err != nil {
			return nil, err
		}
	}
	if err := c.setDeadline(c.g.headTimeout); err != nil {
		return nil, err
	}
	head, err := peekHead(c.br)
	if err != nil {
		return nil, err
	}
	start := c.consumed()
	hosts, folded := headerValues(head, "Host")
	if folded {
		return nil, errors.New("a header folded over lines (obs-fold)")
	}
	req, err := http.ReadRequest(c.br)
	if err != nil {
		return nil, err
	}
	// The body streams as it comes; an idle upload is the client's.
	if err := c.setDeadline(0); err != nil {
		return nil, err
	}
	return &request{Request: req, hostHeaders: hosts, start: start}, nil
}

// httpTarget is where the requests of an HTTP connection go: fixed (a
// captured name, a CONNECT tunnel) or per request (the proxy).
type httpSession struct {
	c   *conn
	via string
	// fixedHost and fixedPort: every request must name fixedHost; ""
	// for the proxy, where each request names its own target.
	fixedHost string
	fixedPort int
	// up is the upstream of the current target, if one is open.
	up     net.Conn
	upBr   *bufio.Reader
	upHost string
	upPort int
	upDial dialed
}

// closeUpstream closes the current upstream connection, if any.
func (s *httpSession) closeUpstream() {
	if s.up != nil {
		s.c.g.untrack(s.up)
		s.up, s.upBr = nil, nil
	}
}

// refuse answers status with a one-line body and ends the connection.
func (c *conn) refuse(status int, msg string) {
	body := "jail: net: " + msg + "\n"
	fmt.Fprintf(c.client, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	c.lingerClose()
}

// requestEvent is the start of the Event of one HTTP request.
func (s *httpSession) requestEvent(req *request) Event {
	ev := Event{
		Time: time.Now(), Via: s.via, Client: s.c.ev.Client, Local: s.c.ev.Local,
		Method: req.Method, Verdict: Allowed,
	}
	path := req.RequestURI
	if len(path) > maxPathInEvent {
		path = path[:maxPathInEvent]
	}
	ev.Path = path
	return ev
}

// serve serves the requests of the connection in turn until it ends or
// one is refused. first says no request has been read on it yet.
func (s *httpSession) serve(first bool) {
	defer s.closeUpstream()
	for {
		idle := s.c.g.idleTimeout
		if first {
			idle = s.c.g.headTimeout
		}
		req, err := s.c.readRequest(idle)
		if err != nil {
			s.readFailed(err, first)
			return
		}
		first = false
		if s.fixedHost == "" && req.Method == http.MethodConnect {
			s.closeUpstream()
			s.c.connect(req)
			return
		}
		if !s.one(req) {
			return
		}
	}
}

// readFailed ends the connection after a failed read of a request head.
func (s *httpSession) readFailed(err error, first bool) {
	switch {
	case errors.Is(err, io.EOF) && !first:
		s.c.ended("closed by the client")
	case errors.Is(err, io.EOF):
		s.c.ended("closed by the client before a request")
	case s.c.g.isClosed():
		s.c.ended("the gateway closed")
	case isTimeout(err):
		s.c.deny("", "no complete request head in time")
		s.c.client.Close()
	case errors.Is(err, errHeadTooLarge):
		s.c.deny("", "request head larger than the limit")
		s.c.refuse(http.StatusRequestHeaderFieldsTooLarge, err.Error())
	case errors.Is(err, errByteLimit), errors.Is(err, net.ErrClosed), errors.Is(err, errClosing):
		s.c.ended(err.Error())
	default:
		s.c.deny("", "malformed request: "+oneLine(err.Error()))
		s.c.refuse(http.StatusBadRequest, "malformed request")
	}
}

// oneLine keeps an error text to one short line for the audit.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// one checks and forwards one request; false ends the connection.
func (s *httpSession) one(req *request) bool {
	ev := s.requestEvent(req)
	down0 := s.c.client.down.Load()
	finish := func() {
		ev.BytesUp = s.c.consumed() - req.start
		ev.BytesDown = s.c.client.down.Load() - down0
		ev.Duration = time.Since(ev.Time)
		s.c.g.emit(ev)
	}
	deny := func(status int, rule, reason string) bool {
		ev.Verdict, ev.Reason = Denied, reason
		if rule != "" {
			ev.Rule = rule
		}
		s.c.target(ev.Host, ev.Port, dialed{})
		s.c.deny(rule, reason)
		target := ev.Host
		if ev.Port != 0 {
			target = net.JoinHostPort(ev.Host, strconv.Itoa(ev.Port))
		}
		if target == "" {
			target = "request"
		}
		s.c.refuse(status, fmt.Sprintf("denied %s (%s)", target, reason))
		finish()
		return false
	}
	host, port, status, reason := s.targetOf(req)
	ev.Host, ev.Port = host, port
	if reason != "" {
		return deny(status, "", reason)
	}
	if reason := h2Refusal(req); reason != "" {
		return deny(http.StatusForbidden, "", reason)
	}
	d := s.c.g.rules.Decide(host, port)
	ev.Rule = d.Rule
	if !d.Allowed {
		return deny(http.StatusForbidden, d.Rule, d.Reason)
	}
	if ic := s.c.g.cfg.Interceptor; ic != nil {
		if err := ic.RewriteRequest(host, req.RequestURI, req.Header); err != nil {
			return deny(http.StatusForbidden, d.Rule, "refused by the secret filter: "+oneLine(err.Error()))
		}
	}
	if s.up == nil || s.upHost != host || s.upPort != port {
		s.closeUpstream()
		up, err := s.c.g.dialChecked(s.c.g.ctx, host, port)
		if err != nil {
			var r *refusal
			if errors.As(err, &r) {
				return deny(http.StatusForbidden, r.rule, r.reason)
			}
			ev.Verdict, ev.Reason = Denied, "upstream: "+oneLine(err.Error())
			s.c.deny(ev.Rule, ev.Reason)
			s.c.refuse(http.StatusBadGateway, fmt.Sprintf("could not reach %s", net.JoinHostPort(host, strconv.Itoa(port))))
			finish()
			return false
		}
		s.up, s.upBr, s.upHost, s.upPort, s.upDial = up.conn, bufio.NewReaderSize(up.conn, MaxHead), host, port, up
	}
	ev.Address = s.upDial.addr
	s.c.target(host, port, s.upDial)
	keep, reason, refused := s.forward(req, host, port)
	if refused != nil {
		ev.Verdict, ev.Reason = Denied, "refused by the secret filter: "+oneLine(refused.Error())
		s.c.deny(d.Rule, ev.Reason)
		finish()
		return false
	}
	ev.Reason = reason
	if reason == "" {
		ev.Reason = d.Reason
	}
	finish()
	return keep
}

// targetOf is the host and port a request is for, checked against its
// Host header and the connection's fixed target; a reason says why not
// (with the status to answer).
func (s *httpSession) targetOf(req *request) (host string, port int, status int, reason string) {
	bad := func(format string, args ...any) (string, int, int, string) {
		return host, port, http.StatusBadRequest, fmt.Sprintf(format, args...)
	}
	mismatch := func(format string, args ...any) (string, int, int, string) {
		return host, port, http.StatusForbidden, fmt.Sprintf(format, args...)
	}
	if req.ProtoMajor != 1 {
		return mismatch("HTTP/%d.%d: only HTTP/1 is relayed on plain connections", req.ProtoMajor, req.ProtoMinor)
	}
	if len(req.hostHeaders) > 1 {
		return bad("more than one Host header")
	}
	var hostHeader string
	if len(req.hostHeaders) == 1 {
		h, _, err := rules.SplitHostPort(req.hostHeaders[0], 0)
		if err != nil {
			return bad("Host header: %s", oneLine(err.Error()))
		}
		if hostHeader, err = rules.CanonicalHost(h); err != nil {
			return bad("Host header: %s", oneLine(err.Error()))
		}
	} else if req.ProtoMinor >= 1 {
		return bad("an HTTP/1.1 request without a Host header")
	}
	var urlHost string
	urlPort := 80
	if req.URL.Host != "" || req.URL.Scheme != "" {
		if req.URL.Scheme != "http" {
			return bad("scheme %q: a proxy relays http:// requests; use CONNECT for https", req.URL.Scheme)
		}
		if req.URL.User != nil {
			return bad("user information in the request URL")
		}
		h, p, err := rules.SplitHostPort(req.URL.Host, 80)
		if err != nil {
			return bad("request URL: %s", oneLine(err.Error()))
		}
		if urlHost, err = rules.CanonicalHost(h); err != nil {
			return bad("request URL: %s", oneLine(err.Error()))
		}
		urlPort = p
	}
	switch {
	case s.fixedHost == "":
		// The proxy: an absolute-form request names its target.
		if urlHost == "" {
			return bad("not a proxy request: the request URL must be absolute (http://HOST/...)")
		}
		host, port = urlHost, urlPort
	case urlHost != "":
		host, port = urlHost, urlPort
		if urlHost != s.fixedHost || urlPort != s.fixedPort {
			return mismatch("the request URL names %s, but this connection is to %s",
				net.JoinHostPort(urlHost, strconv.Itoa(urlPort)), net.JoinHostPort(s.fixedHost, strconv.Itoa(s.fixedPort)))
		}
	default:
		host, port = s.fixedHost, s.fixedPort
	}
	if hostHeader != "" && hostHeader != host {
		return mismatch("the Host header names %s, but the request is for %s", hostHeader, host)
	}
	if s.fixedHost != "" && host != s.fixedHost {
		return mismatch("the request names %s, but this connection is to %s", host, s.fixedHost)
	}
	if req.URL.Host == "" && req.Method != http.MethodOptions && !strings.HasPrefix(req.RequestURI, "/") {
		return bad("request target %q", oneLine(req.RequestURI))
	}
	return host, port, 0, ""
}

// h2Refusal says why a request must not pass as an HTTP/2 upgrade (h2c),
// or "" when it is not one: on a plain connection HTTP/2 streams could
// name other hosts unseen.
func h2Refusal(req *request) string {
	for _, v := range req.Header.Values("Upgrade") {
		for tok := range strings.SplitSeq(v, ",") {
			if t := strings.ToLower(strings.TrimSpace(tok)); t == "h2c" || strings.HasPrefix(t, "h2") {
				return "an upgrade to HTTP/2 (h2c) is refused: its streams could name other hosts"
			}
		}
	}
	if _, ok := req.Header["Http2-Settings"]; ok {
		return "an HTTP2-Settings header (h2c) is refused"
	}
	return ""
}

// hopHeaders are the headers of one hop, never forwarded (RFC 9110 7.6.1).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authorization", "Proxy-Authenticate", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHopHeaders removes the hop-by-hop headers and those Connection
// names.
func removeHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for tok := range strings.SplitSeq(v, ",") {
			if t := strings.TrimSpace(tok); t != "" {
				h.Del(t)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// isWebSocket reports whether req asks to upgrade to WebSocket, the one
// upgrade relayed: after it the connection carries only that host's
// frames.
func isWebSocket(h http.Header) bool {
	for _, v := range h.Values("Upgrade") {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "websocket") {
				return true
			}
		}
	}
	return false
}

// eofReader notes whether its reader was read to its end. atEOF, when
// set, checks the request's trailer once the body ended (it is read with
// the body's end): an error is returned instead of io.EOF, so that the
// trailer is never sent, and kept in refused; stop is then called.
type eofReader struct {
	io.ReadCloser
	eof     atomic.Bool
	atEOF   func() error
	stop    func()
	refused atomic.Pointer[error]
}

func (r *eofReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err == io.EOF {
		if r.atEOF != nil {
			if cerr := r.atEOF(); cerr != nil {
				r.refused.Store(&cerr)
				r.stop()
				return n, cerr
			}
		}
		r.eof.Store(true)
	}
	return n, err
}

// forward writes req to the upstream and relays its response. keep says
// the connection may carry another request; reason says why not. refused
// is the secret filter's refusal of the request's trailer (the response
// then is the refusal's, and the connection ends).
func (s *httpSession) forward(req *request, host string, port int) (keep bool, reason string, refused error) {
	websocket := isWebSocket(req.Header) && req.Method == http.MethodGet
	removeHopHeaders(req.Header)
	if websocket {
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // net/http would add its own
	}
	// Origin form, to the host that was checked.
	req.Host = host
	if port != 80 {
		req.Host = net.JoinHostPort(host, strconv.Itoa(port))
	}
	req.URL.Scheme, req.URL.Host = "", ""
	body := &eofReader{ReadCloser: req.Body}
	if ic := s.c.g.cfg.Interceptor; ic != nil {
		up := s.up
		body.atEOF = func() error {
			// Read when the body ended, which fills it in.
			if len(req.Trailer) == 0 {
				return nil
			}
			return ic.RewriteRequest(host, "", req.Trailer)
		}
		// The body's last chunk is not sent, nor the trailer: the
		// upstream is to wait for them no more.
		body.stop = func() { up.Close() }
	}
	req.Body = body
	if req.Body != nil && req.ContentLength == 0 && len(req.TransferEncoding) == 0 {
		body.eof.Store(true)
	}
	upW := bufio.NewWriter(s.up)
	wrote := make(chan error, 1)
	go func() {
		err := req.Write(upW)
		if err == nil {
			err = upW.Flush()
		}
		wrote <- err
	}()
	fail := func(why string) (bool, string, error) {
		s.c.client.Close()
		s.closeUpstream()
		<-wrote
		return false, why, nil
	}
	// refusal is the trailer's refusal, once the upstream failed for it.
	refusal := func() (bool, string, error, bool) {
		p := body.refused.Load()
		if p == nil {
			return false, "", nil, false
		}
		s.c.refuse(http.StatusForbidden, "refused by the secret filter: "+oneLine((*p).Error()))
		s.closeUpstream()
		<-wrote
		return false, "", *p, true
	}
	var resp *http.Response
	for {
		// The whole head first: net/http's reader has no bound of its own.
		if _, err := peekHead(s.upBr); err != nil {
			if keep, reason, err, ok := refusal(); ok {
				return keep, reason, err
			}
			s.c.refuse(http.StatusBadGateway, "no response from "+host)
			return fail("upstream: " + oneLine(err.Error()))
		}
		var err error
		resp, err = http.ReadResponse(s.upBr, req.Request)
		if err != nil {
			if keep, reason, err, ok := refusal(); ok {
				return keep, reason, err
			}
			s.c.refuse(http.StatusBadGateway, "a malformed response from "+host)
			return fail("upstream: " + oneLine(err.Error()))
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		// 100 Continue, 103 Early Hints: relayed as they are, the final
		// response still to come.
		if err := writeInterim(s.c.client, resp); err != nil {
			return fail(err.Error())
		}
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		if !websocket || !isWebSocket(resp.Header) {
			s.c.refuse(http.StatusBadGateway, "an upgrade not asked for, from "+host)
			return fail("upstream switched protocols unasked")
		}
		if err := <-wrote; err != nil {
			return fail(oneLine(err.Error()))
		}
		if err := writeInterim(s.c.client, resp); err != nil {
			return fail(err.Error())
		}
		s.c.splice(s.up, s.upBr)
		return false, "a WebSocket relayed", nil
	}
	removeHopHeaders(resp.Header)
	closeAfter := req.Close || resp.Close
	resp.Close = closeAfter
	cw := bufio.NewWriter(s.c.client)
	werr := resp.Write(cw)
	if werr == nil {
		werr = cw.Flush()
	}
	resp.Body.Close()
	if werr != nil {
		return fail("relaying the response: " + oneLine(werr.Error()))
	}
	if !body.eof.Load() {
		// The response came before the request's body was all sent: the
		// connection cannot carry another request.
		return fail("the response came before the request's body ended")
	}
	if err := <-wrote; err != nil {
		s.c.client.Close()
		s.closeUpstream()
		return false, "sending the request: " + oneLine(err.Error()), nil
	}
	if closeAfter {
		s.closeUpstream()
		_ = s.c.client.CloseWrite()
		return false, "", nil
	}
	return true, "", nil
}

// writeInterim writes an interim (1xx) response head as it came.
func writeInterim(w io.Writer, resp *http.Response) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %03d %s\r\n", resp.StatusCode, http.StatusText(resp.StatusCode))
	if err := resp.Header.Write(&b); err != nil {
		return err
	}
	b.WriteString("\r\n")
	_, err := w.Write(b.Bytes())
	return err
}

// sameHost compares a host as sent (an SNI) with a canonical one.
func sameHost(sent, canonical string) bool {
	h, err := rules.CanonicalHost(sent)
	return err == nil && h == canonical
}
