package gateway

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jail-sandbox/jail/internal/egress/mitm"
)

// TestTunnelHTTPWithOddBytesIsChecked: plain HTTP in a CONNECT or SOCKS
// tunnel is checked request by request even when its first line holds
// bytes a request line should not (obs-text, a control byte), which
// lenient servers still read as a request, or has no HTTP version (0.9).
func TestTunnelHTTPWithOddBytesIsChecked(t *testing.T) {
	for _, first := range []string{
		"GET /\xff HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n",
		"GET /\x0b HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n",
		"GET /\xc3\xa9 HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n",
		"GET /0.9\r\n\r\n",
		"get /\xff HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n",
	} {
		t.Run(strings.Fields(first)[1], func(t *testing.T) {
			e := newEnv(t, testRules)
			c, br := tunnelConn(t, e)
			io.WriteString(c, first)
			b, _ := io.ReadAll(br)
			if strings.Contains(string(b), "host=other.test") {
				t.Fatalf("the upstream served another host through the tunnel: %q", b)
			}
			evs := e.connEvents(ViaProxy)
			if len(evs) != 1 || evs[0].Verdict != Denied {
				t.Fatalf("events %+v, want the tunnel denied", evs)
			}
		})
	}
}

// TestTunnelTLSRecordsBeforeTheClientHello: a TLS record other than a
// handshake before the ClientHello (a warning alert, which servers skip)
// does not carry a ClientHello past its checks.
func TestTunnelTLSRecordsBeforeTheClientHello(t *testing.T) {
	for _, prefix := range [][]byte{
		{21, 3, 1, 0, 2, 1, 90}, // alert: warning, user_canceled
		{20, 3, 1, 0, 1, 1},     // change_cipher_spec
	} {
		e := newEnv(t, testRules)
		c, br, status := connectTunnel(t, e.ls.Proxy, "allowed.test:443", "")
		if status != 200 {
			t.Fatalf("CONNECT: %d", status)
		}
		c.Write(append(append([]byte(nil), prefix...), clientHelloBytes(t, "other.test")...))
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(bufio.NewReader(br))
		if len(b) > 0 {
			t.Errorf("record type %d first: the server answered %d bytes (type %d)", prefix[0], len(b), b[0])
		}
		evs := e.connEvents(ViaProxy)
		if len(evs) != 1 || evs[0].Verdict != Denied {
			t.Errorf("record type %d first: events %+v, want the tunnel denied", prefix[0], evs)
		}
	}
}

// secretsFor binds a secret to allowed.test and returns the Interceptor
// and its placeholder.
func secretsFor(t *testing.T) (*mitm.Secrets, string) {
	t.Helper()
	value := "ghp_" + strings.Repeat("V", 36)
	s, err := mitm.NewSecrets("test", []mitm.Binding{{Name: "TOKEN", Value: &value, Hosts: []string{"allowed.test"}}}, mitm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, ph, _ := strings.Cut(s.Placeholders()[0], "=")
	return s, ph
}

// TestPlaceholderInThePlainRequestTarget: a placeholder in the target of
// a plain-HTTP request to a host its secret is not bound to is refused,
// as in its headers (docs/egress.md), on every plain path.
func TestPlaceholderInThePlainRequestTarget(t *testing.T) {
	s, ph := secretsFor(t)
	encoded := ""
	for i := 0; i < len(ph); i++ {
		encoded += fmt.Sprintf("%%%02X", ph[i])
	}
	for _, tt := range []struct {
		name   string
		open   func(t *testing.T, e *env) (net.Conn, *bufio.Reader)
		target string
		host   string
	}{
		{"proxy, in the query", proxyConn, "http://other.test/?t=" + ph, "other.test"},
		{"proxy, percent-encoded in the path", proxyConn, "http://other.test/" + encoded, "other.test"},
		{"CONNECT tunnel, in the path", func(t *testing.T, e *env) (net.Conn, *bufio.Reader) {
			c, br, status := connectTunnel(t, e.ls.Proxy, "other.test:80", "")
			if status != 200 {
				t.Fatalf("CONNECT: %d", status)
			}
			return c, br
		}, "/" + ph, "other.test"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, testRules, func(c *Config) { c.Interceptor = s })
			c, br := tt.open(t, e)
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", tt.target, tt.host)
			resp, body := readResponse(t, br, "GET")
			if resp.StatusCode != http.StatusForbidden || strings.Contains(body, "host=") {
				t.Fatalf("%d %q, want 403 and no upstream", resp.StatusCode, body)
			}
		})
	}
}

// TestInterceptedRefusalsAreDenials: a request the Interceptor refuses on
// an intercepted connection (a Host of another name, a placeholder of a
// secret bound elsewhere) is on record as a denial, not as an allowed
// connection that merely ended; and every request on it has its own
// record (docs/egress.md: "per HTTP request on a plain or intercepted
// connection").
func TestInterceptedRefusalsAreDenials(t *testing.T) {
	for _, tt := range []struct {
		name    string
		request func(ph, other string) string
		status  int
	}{
		{"a Host of another name", func(ph, other string) string {
			return "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n"
		}, http.StatusMisdirectedRequest},
		{"a placeholder bound to another host", func(ph, other string) string {
			return "GET / HTTP/1.1\r\nHost: allowed.test\r\nAuthorization: Bearer " + other + "\r\n\r\n"
		}, http.StatusForbidden},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, testRules)
			roots := x509.NewCertPool()
			pemBytes, err := os.ReadFile(e.caFile)
			if err != nil {
				t.Fatal(err)
			}
			roots.AppendCertsFromPEM(pemBytes)
			v1, v2 := "ghp_"+strings.Repeat("A", 36), "ghp_"+strings.Repeat("B", 36)
			s, err := mitm.NewSecrets("test", []mitm.Binding{
				{Name: "ONE", Value: &v1, Hosts: []string{"allowed.test"}},
				{Name: "TWO", Value: &v2, Hosts: []string{"other.test"}},
			}, mitm.Options{UpstreamRoots: roots})
			if err != nil {
				t.Fatal(err)
			}
			_, ph, _ := strings.Cut(s.Placeholders()[0], "=")
			_, other, _ := strings.Cut(s.Placeholders()[1], "=")
			e.g.cfg.Interceptor = s
			c, _, status := connectTunnel(t, e.ls.Proxy, "allowed.test:443", "")
			if status != 200 {
				t.Fatalf("CONNECT: %d", status)
			}
			sandboxRoots := x509.NewCertPool()
			sandboxRoots.AppendCertsFromPEM(s.Authority().CertificatePEM())
			tc := tls.Client(c, &tls.Config{ServerName: "allowed.test", RootCAs: sandboxRoots})
			tbr := bufio.NewReader(tc)
			io.WriteString(tc, "GET /first HTTP/1.1\r\nHost: allowed.test\r\nAuthorization: Bearer "+ph+"\r\n\r\n")
			if resp, body := readResponse(t, tbr, "GET"); resp.StatusCode != 200 {
				t.Fatalf("first request: %d %q", resp.StatusCode, body)
			}
			io.WriteString(tc, tt.request(ph, other))
			resp, _ := readResponse(t, tbr, "GET")
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			tc.Close()
			var conns, requests []Event
			for _, ev := range e.allEvents() {
				if ev.Method == "" {
					conns = append(conns, ev)
				} else {
					requests = append(requests, ev)
				}
			}
			if len(conns) != 1 || conns[0].Verdict != Denied {
				t.Fatalf("connection events %+v, want the connection denied", conns)
			}
			// Each request read on the intercepted connection is on
			// record, as on a plain one.
			if len(requests) != 2 || requests[0].Verdict != Allowed || requests[0].Path != "/first" ||
				requests[0].Host != "allowed.test" || requests[0].Port != 443 || requests[0].Rule != "allowed.test" ||
				requests[1].Verdict != Denied || requests[1].Method != "GET" || !strings.Contains(requests[1].Reason, "secret filter") {
				t.Fatalf("request events %+v", requests)
			}
		})
	}
}

// TestSOCKSRefusedCommandRecordsNoRawName: a SOCKS command other than
// CONNECT names its domain as sent; the record (and the denial told on
// the command's terminal) holds only a canonical host, never the
// sandbox's raw bytes (an escape sequence, say).
func TestSOCKSRefusedCommandRecordsNoRawName(t *testing.T) {
	for _, tt := range []struct{ domain, want string }{
		{"\x1b]0;owned\x07evil", ""},
		{"Allowed.Test.", "allowed.test"},
	} {
		e := newEnv(t, testRules)
		socksRequest(t, e, 2, 3, tt.domain, 80, socksCmdNotSupp)
		evs := e.connEvents(ViaSOCKS)
		if len(evs) != 1 || evs[0].Verdict != Denied || evs[0].Host != tt.want {
			t.Errorf("BIND %q: events %+v, want denied with host %q", tt.domain, evs, tt.want)
		}
	}
}

// TestPlaceholderInAPlainRequestTrailer: a placeholder in a trailer field
// of a chunked plain-HTTP request to a host its secret is not bound to
// never reaches that host: trailers are header fields sent last.
func TestPlaceholderInAPlainRequestTrailer(t *testing.T) {
	s, ph := secretsFor(t)
	got := make(chan http.Header, 1)
	up := httptestServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		got <- r.Trailer
	})
	e := newEnv(t, testRules, func(c *Config) { c.Interceptor = s })
	e.dialMu.Lock()
	e.portMap[80] = up
	e.dialMu.Unlock()
	c, br := proxyConn(t, e)
	fmt.Fprintf(c, "POST http://other.test/ HTTP/1.1\r\nHost: other.test\r\nTransfer-Encoding: chunked\r\nTrailer: X-Token\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\nX-Token: %s\r\n\r\n", ph)
	resp, _ := readResponse(t, br, "POST")
	select {
	case tr := <-got:
		if strings.Contains(fmt.Sprint(tr), ph) {
			t.Fatalf("other.test got the placeholder in a trailer: %v", tr)
		}
	default:
	}
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("status %d, want 403", resp.StatusCode)
	}
	var denied int
	for _, ev := range e.allEvents() {
		if ev.Verdict == Denied && strings.Contains(ev.Reason, "secret filter") {
			denied++
		}
	}
	if denied != 2 {
		t.Errorf("%d denials on record, want the request's and the connection's", denied)
		t.Logf("%+v", e.eventsNow())
	}
}

// httptestServer starts a plain HTTP server with handler and returns its
// address.
func httptestServer(t *testing.T, handler http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestInterceptedRedialsHoldNothing: an intercepted connection whose host
// closes after every response is dialled anew for each request; the
// gateway keeps no hold of the upstream connections closed, however many
// requests the one connection makes.
func TestInterceptedRedialsHoldNothing(t *testing.T) {
	e := newEnv(t, testRules)
	roots := x509.NewCertPool()
	pemBytes, err := os.ReadFile(e.caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots.AppendCertsFromPEM(pemBytes)
	v := "ghp_" + strings.Repeat("A", 36)
	s, err := mitm.NewSecrets("test", []mitm.Binding{{Name: "ONE", Value: &v, Hosts: []string{"allowed.test"}}}, mitm.Options{UpstreamRoots: roots})
	if err != nil {
		t.Fatal(err)
	}
	e.g.cfg.Interceptor = s
	c, _, status := connectTunnel(t, e.ls.Proxy, "allowed.test:443", "")
	if status != 200 {
		t.Fatalf("CONNECT: %d", status)
	}
	sandboxRoots := x509.NewCertPool()
	sandboxRoots.AppendCertsFromPEM(s.Authority().CertificatePEM())
	tc := tls.Client(c, &tls.Config{ServerName: "allowed.test", RootCAs: sandboxRoots})
	tbr := bufio.NewReader(tc)
	const requests = 20
	for i := range requests {
		io.WriteString(tc, "GET /close HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
		if resp, body := readResponse(t, tbr, "GET"); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	e.g.mu.Lock()
	held := len(e.g.closers)
	e.g.mu.Unlock()
	// The four listeners, the client's connection, and at most the
	// upstream connection of the last request.
	if held > 6 {
		t.Fatalf("the gateway holds %d connections after %d requests on one", held, requests)
	}
	tc.Close()
}

// TestTunnelHTTP2PrefaceIsRefusedAsSuch: the HTTP/2 preface in a tunnel
// is refused, and recorded, as HTTP/2.
func TestTunnelHTTP2PrefaceIsRefusedAsSuch(t *testing.T) {
	e := newEnv(t, testRules)
	c, br := tunnelConn(t, e)
	io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	io.ReadAll(br)
	evs := e.connEvents(ViaProxy)
	if len(evs) != 1 || evs[0].Verdict != Denied || !strings.Contains(evs[0].Reason, "HTTP/2 prior knowledge") {
		t.Fatalf("events %+v", evs)
	}
}
