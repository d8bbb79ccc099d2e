package test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testAuthority is a certificate authority the egress tests' HTTPS servers
// use; its certificate is in a file the gateway trusts (SSL_CERT_FILE of
// jail) and that the sandbox can be given.
type testAuthority struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	pemFile string
}

func newTestAuthority(t *testing.T, dir string) *testAuthority {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "jail egress tests CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(dir, "test-ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return &testAuthority{cert: cert, key: key, pemFile: file}
}

// serverConfig is a TLS configuration for the names.
func (a *testAuthority) serverConfig(t *testing.T, names ...string) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		DNSNames: names, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{"http/1.1"}}
}

// seenRequest is what a test server was asked.
type seenRequest struct {
	Host, Method, Path, Authorization, Token string
	TLS                                      bool
}

// testSite is one host's HTTP (port 80) and HTTPS (port 443) server in an
// egress test's network namespace, answering "NAME PATH" and recording
// what it was asked.
type testSite struct {
	name string
	mu   sync.Mutex
	seen []seenRequest
}

func (s *testSite) requests() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.seen...)
}

// serveSite starts name's servers on addr (in 127.0.0.0/8) ports 80 and
// 443, with extra handlers by path prefix.
func (n *egressNet) serveSite(ca *testAuthority, name, addr string, extra map[string]http.Handler) *testSite {
	n.t.Helper()
	site := &testSite{name: name}
	mux := http.NewServeMux()
	for prefix, h := range extra {
		mux.Handle(prefix, h)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		site.mu.Lock()
		site.seen = append(site.seen, seenRequest{Host: r.Host, Method: r.Method, Path: r.URL.Path,
			Authorization: r.Header.Get("Authorization"), Token: r.Header.Get("X-Token"), TLS: r.TLS != nil})
		site.mu.Unlock()
		if r.Body != nil {
			_, _ = io.Copy(io.Discard, r.Body)
		}
		fmt.Fprintf(w, "%s %s\n", name, r.URL.Path)
	})
	for _, port := range []int{80, 443} {
		l := n.listen("tcp", fmt.Sprintf("%s:%d", addr, port))
		if port == 443 {
			l = tls.NewListener(l, ca.serverConfig(n.t, name))
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
		go func() { _ = srv.Serve(l) }()
		n.t.Cleanup(func() { _ = srv.Close() })
	}
	return site
}

// lines splits output into its non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}
