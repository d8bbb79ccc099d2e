package gateway

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jail-sandbox/jail/internal/egress/rules"
)

// testNames are the names the tests' resolver knows, and what they resolve
// to. The upstream servers all listen on 127.0.0.1; the test dialer maps
// the ports the gateway dials (80, 443) to theirs.
var testNames = map[string][]netip.Addr{
	"allowed.test":  {netip.MustParseAddr("127.0.0.1")},
	"other.test":    {netip.MustParseAddr("127.0.0.1")},
	"denied.test":   {netip.MustParseAddr("127.0.0.1")},
	"rebind.test":   {netip.MustParseAddr("127.0.0.1")},
	"metadata.test": {netip.MustParseAddr("169.254.169.254")},
	"mapped.test":   {netip.MustParseAddr("::ffff:127.0.0.1")},
	"mixed.test":    {netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("127.0.0.1")},
}

// testRules allow allowed.test and other.test, and 127.0.0.1 as an
// address of theirs (the upstreams are on loopback).
const testRules = "allowed.test,other.test,127.0.0.1"

// env is a gateway under test, its upstream servers, and what it did.
type env struct {
	t       *testing.T
	g       *Gateway
	ls      Listeners
	httpURL string // the plain upstream, as served on 127.0.0.1
	tlsSrv  *httptest.Server
	caFile  string
	dialMu  sync.Mutex
	dialed  []netip.AddrPort
	portMap map[uint16]string // port dialed -> the upstream's real address
	evMu    sync.Mutex
	events  []Event
	served  chan error
}

// upstreamHandler answers with what it was asked, so tests see what the
// upstream received.
func upstreamHandler(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/big":
		w.Write(make([]byte, 1<<20))
		return
	case r.URL.Path == "/close":
		w.Header().Set("Connection", "close")
		io.WriteString(w, "closing")
		return
	case r.URL.Path == "/echo":
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
		return
	}
	fmt.Fprintf(w, "host=%s path=%s ua=%q", r.Host, r.URL.Path, r.Header.Get("User-Agent"))
}

type envOption func(*Config)

// newEnv starts the upstreams (plain and TLS, certified for allowed.test
// and other.test) and a gateway with all four listeners on 127.0.0.1; the
// captured ones stand for allowed.test (NameOf knows 127.0.0.1 only).
func newEnv(t *testing.T, ruleText string, opts ...envOption) *env {
	t.Helper()
	return newEnvOn(t, ruleText, Listeners{}, opts...)
}

// newEnvOn is newEnv serving the listeners given in preset (the others
// made).
func newEnvOn(t *testing.T, ruleText string, preset Listeners, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, portMap: map[uint16]string{}, served: make(chan error, 1)}
	plain := httptest.NewServer(http.HandlerFunc(upstreamHandler))
	t.Cleanup(plain.Close)
	e.httpURL = plain.URL
	certPEM, cert := testCert(t, "allowed.test", "other.test")
	e.caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(e.caFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	e.tlsSrv = httptest.NewUnstartedServer(http.HandlerFunc(upstreamHandler))
	e.tlsSrv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	// The refused and hand-built handshakes are the tests' own doing.
	e.tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0)
	e.tlsSrv.StartTLS()
	t.Cleanup(e.tlsSrv.Close)
	e.portMap[80] = strings.TrimPrefix(plain.URL, "http://")
	e.portMap[443] = e.tlsSrv.Listener.Addr().String()

	r, err := rules.Parse(ruleText)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Rules: r,
		NameOf: func(a netip.Addr) (string, bool) {
			if a == netip.MustParseAddr("127.0.0.1") {
				return "allowed.test", true
			}
			return "", false
		},
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			if a, ok := testNames[host]; ok {
				return a, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		},
		Dial: func(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, error) {
			e.dialMu.Lock()
			e.dialed = append(e.dialed, ap)
			real, ok := e.portMap[ap.Port()]
			e.dialMu.Unlock()
			if !ok || ap.Addr() != netip.MustParseAddr("127.0.0.1") {
				// Only ever loopback: anything else is a test failure.
				return nil, fmt.Errorf("test dialer: %s is not a test upstream", ap)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, real)
		},
		OnEvent: func(ev Event) {
			e.evMu.Lock()
			e.events = append(e.events, ev)
			e.evMu.Unlock()
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.g = g
	e.ls = preset
	for _, l := range []*net.Listener{&e.ls.Proxy, &e.ls.SOCKS, &e.ls.HTTP, &e.ls.TLS} {
		if *l == nil {
			*l = listen(t)
		}
	}
	go func() { e.served <- g.Serve(e.ls) }()
	t.Cleanup(e.close)
	return e
}

// close closes the gateway and checks Serve ended as it should.
func (e *env) close() {
	e.g.Close()
	select {
	case err := <-e.served:
		if !errors.Is(err, ErrClosed) {
			e.t.Errorf("Serve returned %v, want ErrClosed", err)
		}
	default:
		// Serve returned already and was read, or Close waited for it.
		select {
		case err := <-e.served:
			if !errors.Is(err, ErrClosed) {
				e.t.Errorf("Serve returned %v, want ErrClosed", err)
			}
		case <-time.After(10 * time.Second):
			e.t.Errorf("Serve did not return after Close")
		}
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func addrOf(l net.Listener) string { return l.Addr().String() }

func portOf(l net.Listener) string {
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p
}

// dialedAddrs is what the gateway dialed so far.
func (e *env) dialedAddrs() []netip.AddrPort {
	e.dialMu.Lock()
	defer e.dialMu.Unlock()
	return append([]netip.AddrPort(nil), e.dialed...)
}

// eventsNow is the events so far; after Close they are all there.
func (e *env) eventsNow() []Event {
	e.evMu.Lock()
	defer e.evMu.Unlock()
	return append([]Event(nil), e.events...)
}

// allEvents closes the gateway (every connection ends, and its event is
// emitted) and returns the events.
func (e *env) allEvents() []Event {
	e.g.Close()
	return e.eventsNow()
}

// connEvent is the one connection event (Method "") for via, or fails.
func (e *env) connEvents(via string) []Event {
	var out []Event
	for _, ev := range e.allEvents() {
		if ev.Via == via && ev.Method == "" {
			out = append(out, ev)
		}
	}
	return out
}

// curl runs curl with args and returns its stdout and exit code.
func curl(t *testing.T, args ...string) (string, int) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	all := append([]string{"-sS", "--noproxy", "", "--max-time", "30"}, args...)
	cmd := exec.CommandContext(ctx, "curl", all...)
	// The host's proxy settings must not matter to either end.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("curl: %v", err)
		}
		code = ee.ExitCode()
	}
	t.Logf("curl %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr.String())
	return string(out), code
}

// rawConn dials a listener of the gateway.
func rawConn(t *testing.T, l net.Listener) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addrOf(l))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return c, bufio.NewReader(c)
}

// readResponse reads one response (and its body).
func readResponse(t *testing.T, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading a response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// connectTunnel sends CONNECT target and returns the status.
func connectTunnel(t *testing.T, l net.Listener, target, hostHeader string) (net.Conn, *bufio.Reader, int) {
	t.Helper()
	c, br := rawConn(t, l)
	if hostHeader == "" {
		hostHeader = target
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, hostHeader)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
	}
	return c, br, resp.StatusCode
}

// expectClosed checks the server ends the connection without answering
// with anything but (at most) what is allowed.
func expectClosed(t *testing.T, br *bufio.Reader) {
	t.Helper()
	b, err := io.ReadAll(br)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("reading until the end: %v", err)
	}
	if len(b) != 0 {
		t.Fatalf("got %q, want the connection closed", b)
	}
}

// testCert makes a self-signed certificate for names.
func testCert(t *testing.T, names ...string) ([]byte, tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: names[0]},
		DNSNames:              names,
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, cert
}

// clientHelloBytes is the ClientHello crypto/tls sends for serverName.
func clientHelloBytes(t testing.TB, serverName string) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		c := tls.Client(a, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == ""})
		c.Handshake()
	}()
	b.SetReadDeadline(time.Now().Add(10 * time.Second))
	raw, _, err := readClientHello(b)
	if err != nil {
		t.Fatalf("reading crypto/tls's ClientHello: %v", err)
	}
	return raw
}
