package mitm

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
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// upstreamRoots is the test CA the upstream servers' certificates come
// from; TestMain points SSL_CERT_FILE at it, so Secrets made with nil
// UpstreamRoots trust it as they would the system's roots.
var upstreamRoots *testCA

func TestMain(m *testing.M) {
	ca, err := newTestCA("jail mitm test upstream CA")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "mitm-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	path := filepath.Join(dir, "upstream-ca.pem")
	if err := os.WriteFile(path, ca.pem, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("SSL_CERT_FILE", path)
	os.Unsetenv("SSL_CERT_DIR")
	upstreamRoots = ca
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testCA is an ordinary CA for the upstream servers (and for forging).
type testCA struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	pem  []byte
}

func newTestCA(cn string) (*testCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &testCA{key, cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// signLeaf signs a server certificate for names (IP literals become IP
// SANs; cn, when not empty, is the common name) with parent's key.
func signLeaf(t testing.TB, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// recorded is what an upstream server received.
type recorded struct {
	Method, Host, Target, RemoteAddr string
	Header, Trailer                  http.Header
	Body                             []byte
}

// upstream is a real HTTPS server on loopback that records requests.
type upstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []recorded
	// release, when set, is waited on by /stream between its two parts.
	release chan struct{}
}

func newUpstream(t *testing.T, names ...string) *upstream {
	t.Helper()
	u := newUpstreamDeferred(t, names...)
	u.srv.StartTLS()
	return u
}

func (u *upstream) addr() string { return u.srv.Listener.Addr().String() }

func (u *upstream) requests() []recorded {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]recorded(nil), u.reqs...)
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.reqs = append(u.reqs, recorded{r.Method, r.Host, r.RequestURI, r.RemoteAddr, r.Header.Clone(), r.Trailer.Clone(), body})
	u.mu.Unlock()
	if r.Method == http.MethodTrace {
		// TRACE as RFC 9110 9.3.8 has it: the request, as received, in
		// the body.
		w.Header().Set("Content-Type", "message/http")
		r.Header.Write(w)
		return
	}
	switch r.URL.Path {
	case "/echo":
		// Echoes the request's Authorization and X-Api-Key, as some
		// hosts do in errors.
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		w.Header().Set("X-Echo-Api-Key", r.Header.Get("X-Api-Key"))
		fmt.Fprintf(w, "echo")
	case "/early-echo":
		// Echoes the Authorization in a 103 Early Hints before the answer.
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("X-Echo-Authorization")
		fmt.Fprintf(w, "early")
	case "/ws-echo":
		// Echoes the Authorization in its 101.
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Echo-Authorization: " + r.Header.Get("Authorization") + "\r\n\r\n")
		brw.Flush()
		brw.ReadString('\n')
	case "/stream":
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "first\n")
		w.(http.Flusher).Flush()
		<-u.release
		fmt.Fprint(w, "second\n")
	case "/ws":
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "not an upgrade", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		line, err := brw.ReadString('\n')
		if err != nil {
			return
		}
		brw.WriteString("echo:" + line)
		brw.Flush()
	case "/big":
		w.Write([]byte(strings.Repeat("x", 1<<20)))
	default:
		fmt.Fprintf(w, "%s %s body=%d", r.Method, r.URL.Path, len(body))
	}
}

// result is what ServeTLS returned for one connection.
type result struct {
	up, down int64
	err      error
}

// harness plays the gateway: it accepts on loopback and hands every
// connection to ServeTLS for host, dialling upstreamAddr.
type harness struct {
	ln      net.Listener
	results chan result
	mu      sync.Mutex
	records []Request // every request's record
}

// requestRecords is the records so far.
func (h *harness) requestRecords() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Request(nil), h.records...)
}

func startHarness(t *testing.T, s *Secrets, host, upstreamAddr string) *harness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{ln: ln, results: make(chan result, 100)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				up, down, err := s.ServeTLS(ctx, c, host, 443, func(ctx context.Context) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "tcp", upstreamAddr)
				}, func(r Request) {
					h.mu.Lock()
					h.records = append(h.records, r)
					h.mu.Unlock()
				})
				h.results <- result{up, down, err}
			}()
		}
	}()
	t.Cleanup(func() {
		cancel()
		ln.Close()
		wg.Wait()
	})
	return h
}

func (h *harness) addr() string { return h.ln.Addr().String() }

func (h *harness) port() string {
	_, p, _ := net.SplitHostPort(h.addr())
	return p
}

// dialTLS opens a TLS connection to the harness trusting the authority.
func (h *harness) dialTLS(t *testing.T, s *Secrets, sni string, alpn ...string) (*tls.Conn, error) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(s.Authority().Certificate())
	if alpn == nil {
		alpn = []string{"http/1.1"}
	}
	return tls.Dial("tcp", h.addr(), &tls.Config{RootCAs: pool, ServerName: sni, NextProtos: alpn})
}

// client is an http.Client whose every connection goes to the harness.
func (h *harness) client(s *Secrets) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(s.Authority().Certificate())
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", h.addr())
		},
	}}
}

// readResponses reads n responses from br (bodies read whole).
func readResponses(t *testing.T, br *bufio.Reader, methods ...string) []string {
	t.Helper()
	var out []string
	for _, m := range methods {
		resp, err := http.ReadResponse(br, &http.Request{Method: m})
		if err != nil {
			t.Fatalf("reading response %d: %v", len(out)+1, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("reading body %d: %v", len(out)+1, err)
		}
		out = append(out, fmt.Sprintf("%d %s", resp.StatusCode, body))
	}
	return out
}

// testSecrets binds TOKEN to api.test and OTHER to other.test.
const (
	tokenValue = "ghp_RealValueOfTheToken0123456789abcdef"
	otherValue = "sk-otherRealValue0123456789ABCDEFGHIJKLMNOPQRSTUV"
)

func newTestSecrets(t testing.TB, opts Options) *Secrets {
	t.Helper()
	s, err := NewSecrets("test-sandbox", []Binding{
		{Name: "TOKEN", Value: ptr(tokenValue), Hosts: []string{"api.test"}},
		{Name: "OTHER", Value: ptr(otherValue), Hosts: []string{"other.test"}},
	}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func placeholderOf(t testing.TB, s *Secrets, name string) string {
	t.Helper()
	for _, kv := range s.Placeholders() {
		if n, p, _ := strings.Cut(kv, "="); n == name {
			return p
		}
	}
	t.Fatalf("no placeholder for %s", name)
	return ""
}
