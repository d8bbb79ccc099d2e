package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jail-sandbox/jail/internal/egress/mitm"
	"github.com/jail-sandbox/jail/internal/egress/rules"
)

// serveProxy serves one connection of the HTTP proxy listener.
func (g *Gateway) serveProxy(nc net.Conn) {
	c := g.newConn(nc, ViaProxy)
	defer c.finish()
	s := &httpSession{c: c, via: ViaProxy}
	s.serve(true)
}

// connect serves a CONNECT request: the target decided, dialed, and the
// tunnel relayed under watch.
func (c *conn) connect(req *request) {
	host, port, err := rules.SplitHostPort(req.RequestURI, 0)
	if err == nil && port == 0 {
		err = errors.New("CONNECT needs HOST:PORT")
	}
	if err == nil {
		host, err = rules.CanonicalHost(host)
	}
	if err != nil {
		reason := "CONNECT target: " + oneLine(err.Error())
		c.deny("", reason)
		c.refuse(http.StatusBadRequest, reason)
		return
	}
	c.target(host, port, dialed{})
	if len(req.hostHeaders) > 1 {
		c.deny("", "more than one Host header")
		c.refuse(http.StatusBadRequest, "more than one Host header")
		return
	}
	if len(req.hostHeaders) == 1 {
		h, _, err := rules.SplitHostPort(req.hostHeaders[0], 0)
		if err == nil {
			h, err = rules.CanonicalHost(h)
		}
		if err != nil || h != host {
			reason := fmt.Sprintf("the Host header %q is not the CONNECT target %s", oneLine(req.hostHeaders[0]), host)
			c.deny("", reason)
			c.refuse(http.StatusForbidden, "denied: "+reason)
			return
		}
	}
	target := net.JoinHostPort(host, strconv.Itoa(port))
	up, err := c.g.dialChecked(c.g.ctx, host, port)
	c.target(host, port, up)
	if err != nil {
		var r *refusal
		if errors.As(err, &r) {
			c.deny(r.rule, r.reason)
			c.refuse(http.StatusForbidden, fmt.Sprintf("denied %s (%s)", target, r.reason))
			return
		}
		c.deny(up.rule, "upstream: "+oneLine(err.Error()))
		c.refuse(http.StatusBadGateway, "could not reach "+target)
		return
	}
	defer c.g.untrack(up.conn)
	if _, err := io.WriteString(c.client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		c.ended("closed by the client")
		return
	}
	c.tunnel(host, port, up)
}

// tunnel relays a CONNECT or SOCKS tunnel to host:port, already dialed,
// after looking at what the client sends first: a TLS ClientHello must
// name host (when it names one) and not hide it (ECH); plain HTTP is
// relayed request by request, each of which must name host; anything else
// passes through, as does a connection where the server speaks first
// (SSH, SMTP: no HTTP or TLS server does).
func (c *conn) tunnel(host string, port int, up dialed) {
	upBr := bufio.NewReaderSize(up.conn, MaxHead)
	clientFirst, err := c.firstSpeaker(upBr, up.conn)
	if err != nil {
		if isTimeout(err) {
			c.deny(up.rule, "nothing sent in the tunnel in time")
		} else {
			c.ended("closed before anything was sent")
		}
		return
	}
	if !clientFirst {
		if err := c.setDeadline(0); err != nil {
			return
		}
		c.ended("relayed (the server spoke first)")
		c.splice(up.conn, upBr)
		return
	}
	if err := c.setDeadline(c.g.headTimeout); err != nil {
		return
	}
	kind, err := sniff(c.br)
	if err != nil {
		c.deny(up.rule, "nothing recognisable sent in time: "+oneLine(err.Error()))
		return
	}
	switch kind {
	case sniffTLS:
		raw, ok := c.checkHello(host, up.rule)
		if !ok {
			return
		}
		if ic := c.g.cfg.Interceptor; ic != nil && ic.Intercepts(host) {
			c.intercept(host, port, raw, &up)
			return
		}
		if err := c.setDeadline(0); err != nil {
			return
		}
		c.ended("TLS relayed")
		if _, err := up.conn.Write(raw); err != nil {
			return
		}
		c.splice(up.conn, upBr)
	case sniffHTTP:
		s := &httpSession{c: c, via: c.ev.Via, fixedHost: host, fixedPort: port,
			up: up.conn, upBr: upBr, upHost: host, upPort: port, upDial: up}
		// The session closes the upstream when it ends; so does the
		// caller's untrack, which is harmless twice.
		s.serve(false)
	case sniffH2:
		c.deny(up.rule, "HTTP/2 prior knowledge (the connection preface) is refused: its streams could name other hosts")
		c.client.Close()
	default:
		if err := c.setDeadline(0); err != nil {
			return
		}
		c.ended("relayed (neither TLS nor HTTP)")
		c.splice(up.conn, upBr)
	}
}

// firstSpeaker waits for the first bytes of the tunnel and says whose
// they are: the client's (true), or the server's (false), which then
// wait in upBr. The client has the head timeout; the server as long.
func (c *conn) firstSpeaker(upBr *bufio.Reader, up net.Conn) (bool, error) {
	if c.br.Buffered() > 0 {
		return true, nil
	}
	if err := c.setDeadline(c.g.headTimeout); err != nil {
		return false, err
	}
	upSpoke := make(chan error, 1)
	go func() {
		_, err := upBr.Peek(1)
		if err == nil || !isTimeout(err) {
			// The server spoke (or ended): stop waiting for the client.
			_ = c.client.SetReadDeadline(time.Now())
		}
		upSpoke <- err
	}()
	_, cerr := c.br.Peek(1)
	// Stop waiting for the server, then let it be read again.
	_ = up.SetReadDeadline(time.Now())
	uerr := <-upSpoke
	_ = up.SetReadDeadline(time.Time{})
	if cerr == nil {
		return true, nil
	}
	if uerr == nil {
		return false, nil
	}
	if isTimeout(cerr) && !isTimeout(uerr) {
		return false, uerr // the server ended first
	}
	return false, cerr
}

// sniffed is what a tunnel's first bytes are.
type sniffed int

const (
	sniffOther sniffed = iota
	sniffTLS
	sniffHTTP
	sniffH2
)

// sniff classifies what the client sends first: TLS by its record type
// (any TLS record type: a server skips a warning alert or a
// change_cipher_spec before the ClientHello, which must not carry one
// past its checks); HTTP by a first line that begins with a method (an
// upper-case token and a space) or says HTTP/ anywhere (any such line is
// taken for HTTP and must then parse as a request: a lenient server
// would take it for one, odd bytes and all); anything else, or a line
// with a control byte and neither of those, passes through.
func sniff(br *bufio.Reader) (sniffed, error) {
	n := 1
	for {
		_, err := br.Peek(n)
		buf, _ := br.Peek(br.Buffered())
		if len(buf) > 0 && isTLSRecordType(buf[0]) {
			return sniffTLS, nil
		}
		if len(buf) > 0 {
			line := buf
			// Leading empty lines: some servers skip them.
			line = bytes.TrimLeft(line, "\r\n")
			// (PRI is HTTP/2's preface, told apart below.)
			if startsWithMethod(line) && !bytes.HasPrefix(line, []byte("PRI ")) {
				return sniffHTTP, nil
			}
			end := bytes.IndexByte(line, '\n')
			if end >= 0 {
				line = line[:end]
			}
			for _, b := range line {
				// obs-text (0x80 and above) is part of a line: lenient
				// servers take it in a request target.
				if b != '\r' && b != '\t' && (b < ' ' || b == 0x7f) {
					return sniffOther, nil
				}
			}
			if end >= 0 || len(buf) == br.Size() {
				upper := strings.ToUpper(string(line))
				switch {
				case strings.HasPrefix(upper, "PRI * HTTP/2"):
					return sniffH2, nil
				case strings.Contains(upper, "HTTP/"):
					return sniffHTTP, nil
				case end < 0:
					// A line of MaxHead printable bytes: not worth a guess.
					return sniffHTTP, nil
				}
				return sniffOther, nil
			}
		}
		if err != nil {
			return sniffOther, err
		}
		n = len(buf) + 1
	}
}

// isTLSRecordType reports whether b is the content type of a TLS record
// (RFC 8446 5.1, with heartbeat): change_cipher_spec, alert, handshake,
// application_data, heartbeat.
func isTLSRecordType(b byte) bool { return b >= 20 && b <= 24 }

// startsWithMethod reports whether line begins with an upper-case token
// and a space, as a request line does ("GET ").
func startsWithMethod(line []byte) bool {
	for i, b := range line {
		if b == ' ' {
			return i > 0
		}
		if b < 'A' || b > 'Z' {
			return false
		}
	}
	return false
}

// checkHello reads the client's ClientHello and checks it names host (if
// it names any) and does not hide its name; it returns the bytes read, to
// replay. false: refused, and the connection closed.
func (c *conn) checkHello(host, rule string) ([]byte, bool) {
	if err := c.setDeadline(c.g.headTimeout); err != nil {
		return nil, false
	}
	raw, hello, err := readClientHello(c.br)
	if err != nil {
		if isTimeout(err) {
			c.deny(rule, "no complete ClientHello in time")
		} else {
			c.deny(rule, "not a valid TLS ClientHello: "+oneLine(err.Error()))
		}
		c.client.Close()
		return nil, false
	}
	if hello.ech {
		c.deny(rule, "TLS encrypted_client_hello (ECH) is refused: it hides the name connected to")
		c.client.Close()
		return nil, false
	}
	if hello.serverName != "" && !sameHost(hello.serverName, host) {
		c.deny(rule, fmt.Sprintf("the TLS server name %q is not %s", oneLine(hello.serverName), host))
		c.client.Close()
		return nil, false
	}
	return raw, true
}

// intercept hands a TLS connection to the Interceptor. up, when it holds a
// connection already dialed, is what the first dial returns; each further
// dial is checked and dialed anew.
func (c *conn) intercept(host string, port int, raw []byte, up *dialed) {
	if err := c.setDeadline(0); err != nil {
		return
	}
	client := &replayConn{Conn: c.client, r: io.MultiReader(bytes.NewReader(raw), c.br)}
	var mu sync.Mutex // the Interceptor may dial from several goroutines
	// The upstream connections handed out and not closed yet: each is
	// forgotten (untracked) when the Interceptor closes it, so that a
	// long connection re-dialling its host holds none it closed.
	opened := make(map[net.Conn]bool)
	handOut := func(conn net.Conn) net.Conn {
		mu.Lock()
		opened[conn] = true
		mu.Unlock()
		return &untrackOnClose{Conn: conn, close: func() {
			mu.Lock()
			delete(opened, conn)
			mu.Unlock()
			c.g.untrack(conn)
		}}
	}
	dial := func(ctx context.Context) (net.Conn, error) {
		mu.Lock()
		if up != nil && up.conn != nil {
			conn := up.conn
			up.conn = nil
			mu.Unlock()
			return handOut(conn), nil
		}
		mu.Unlock()
		d, err := c.g.dialChecked(ctx, host, port)
		c.target(host, port, d)
		if err != nil {
			return nil, err
		}
		return handOut(d.conn), nil
	}
	_, _, err := c.g.cfg.Interceptor.ServeTLS(c.g.ctx, client, host, port, dial, func(r mitm.Request) {
		c.recordIntercepted(host, port, r)
	})
	mu.Lock()
	left := make([]net.Conn, 0, len(opened))
	for o := range opened {
		left = append(left, o)
	}
	if up != nil && up.conn != nil {
		left = append(left, up.conn)
	}
	mu.Unlock()
	for _, o := range left {
		c.g.untrack(o)
	}
	if err != nil {
		var r *refusal
		if errors.As(err, &r) {
			c.deny(r.rule, r.reason)
			return
		}
		var ir interceptorRefusal
		if errors.As(err, &ir) {
			c.deny("", "refused by the secret filter: "+oneLine(ir.Refusal()))
			return
		}
		c.ended("TLS terminated: " + oneLine(err.Error()))
		return
	}
	c.ended("TLS terminated")
}

// recordIntercepted emits the Event of one request read on an
// intercepted connection to host:port.
func (c *conn) recordIntercepted(host string, port int, r mitm.Request) {
	c.mu.Lock()
	ev := Event{
		Time: r.Time, Via: c.ev.Via, Client: c.ev.Client, Local: c.ev.Local,
		Host: host, Port: port, Address: c.ev.Address, Rule: c.ev.Rule,
		Method: r.Method, Verdict: Allowed, Reason: "TLS terminated: forwarded",
		BytesUp: r.Up, BytesDown: r.Down, Duration: time.Since(r.Time),
	}
	c.mu.Unlock()
	ev.Path = r.Target
	if len(ev.Path) > maxPathInEvent {
		ev.Path = ev.Path[:maxPathInEvent]
	}
	switch {
	case r.Refused != nil:
		ev.Verdict, ev.Reason = Denied, "refused by the secret filter: "+oneLine(r.Refused.Error())
	case r.Err != nil:
		var rf *refusal
		if errors.As(r.Err, &rf) {
			ev.Verdict, ev.Reason = Denied, rf.reason
			if rf.rule != "" {
				ev.Rule = rf.rule
			}
		} else {
			ev.Reason = "TLS terminated: " + oneLine(r.Err.Error())
		}
	}
	c.g.emit(ev)
}

// untrackOnClose is an upstream connection handed to the Interceptor:
// its Close (the first) is close.
type untrackOnClose struct {
	net.Conn
	once  sync.Once
	close func()
}

func (u *untrackOnClose) Close() error {
	u.once.Do(u.close)
	return nil
}

// replayConn is a client connection whose Read first replays what was
// read of it already.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (r *replayConn) Read(p []byte) (int, error) { return r.r.Read(p) }

// CloseWrite half-closes the connection beneath.
func (r *replayConn) CloseWrite() error { return closeWrite(r.Conn) }
