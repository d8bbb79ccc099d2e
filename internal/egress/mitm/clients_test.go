package mitm

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Real clients through a harness that plays the gateway: curl with
// --cacert, Python's urllib with SSL_CERT_FILE, Node's fetch with
// NODE_EXTRA_CA_CERTS, each trusting the sandbox's authority as the
// sandbox's trust store would make it. Each maps the test names to
// 127.0.0.1 itself (curl --resolve, a wrapped getaddrinfo, a wrapped
// dns.lookup): no resolver is involved.

const pythonClient = `
import socket, sys, urllib.request
port, host, path, header, value = sys.argv[1:6]
real = socket.getaddrinfo
def local(h, *a, **k):
    return real("127.0.0.1" if h == host else h, *a, **k)
socket.getaddrinfo = local
req = urllib.request.Request("https://%s:%s%s" % (host, port, path), headers={header: value})
try:
    with urllib.request.urlopen(req) as r:
        print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
`

const nodeClient = `
const dns = require('dns');
const real = dns.lookup;
const [port, host, path, header, value] = process.argv.slice(-5);
dns.lookup = (h, o, cb) => {
  if (typeof o === 'function') { cb = o; o = {}; }
  if (h !== host) return real(h, o, cb);
  return o && o.all ? cb(null, [{address: '127.0.0.1', family: 4}]) : cb(null, '127.0.0.1', 4);
};
fetch('https://' + host + ':' + port + path, {headers: {[header]: value}})
  .then(async r => console.log(r.status, await r.text()))
  .catch(e => { console.error(String(e.cause || e)); process.exit(1); });
`

// clientEnv is the test's environment without what would send a client
// elsewhere or make it trust something else.
func clientEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
			"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "NODE_OPTIONS":
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

type realClient struct {
	name string
	bin  string
	run  func(caFile, host, port, path, header, value string) *exec.Cmd
}

func realClients() []realClient {
	return []realClient{
		{"curl", "curl", func(caFile, host, port, path, header, value string) *exec.Cmd {
			return exec.Command("curl", "-sS", "--cacert", caFile, "--resolve", host+":"+port+":127.0.0.1",
				"-w", "\n%{http_code}", "-H", header+": "+value, "https://"+host+":"+port+path)
		}},
		{"python urllib", "python3", func(caFile, host, port, path, header, value string) *exec.Cmd {
			c := exec.Command("python3", "-c", pythonClient, port, host, path, header, value)
			c.Env = clientEnv("SSL_CERT_FILE=" + caFile)
			return c
		}},
		{"node fetch", "node", func(caFile, host, port, path, header, value string) *exec.Cmd {
			c := exec.Command("node", "-e", nodeClient, port, host, path, header, value)
			c.Env = clientEnv("NODE_EXTRA_CA_CERTS=" + caFile)
			return c
		}},
	}
}

func (c realClient) command(t *testing.T, caFile, host, port, path, header, value string) *exec.Cmd {
	if _, err := exec.LookPath(c.bin); err != nil {
		t.Skipf("no %s", c.bin)
	}
	cmd := c.run(caFile, host, port, path, header, value)
	if cmd.Env == nil {
		cmd.Env = clientEnv()
	}
	return cmd
}

func writeAuthorityPEM(t *testing.T, s *Secrets) string {
	f := filepath.Join(t.TempDir(), "sandbox-ca.pem")
	if err := os.WriteFile(f, s.Authority().CertificatePEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRealClientsThroughServeTLS(t *testing.T) {
	s := newTestSecrets(t, Options{})
	ph, other := placeholderOf(t, s, "TOKEN"), placeholderOf(t, s, "OTHER")
	caFile := writeAuthorityPEM(t, s)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+ph))
	tests := []struct {
		name, header, value string
		wantStatus          string
		wantUpstream        string // the header's value as the upstream got it
	}{
		{"bearer", "Authorization", "Bearer " + ph, "200", "Bearer " + tokenValue},
		{"custom header", "X-Api-Key", ph, "200", tokenValue},
		{"basic auth", "Authorization", basic, "200", "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+tokenValue))},
		{"unbound placeholder", "Authorization", "Bearer " + other, "403", ""},
	}
	for _, client := range realClients() {
		for _, tc := range tests {
			t.Run(client.name+"/"+tc.name, func(t *testing.T) {
				u := newUpstream(t, "api.test")
				h := startHarness(t, s, "api.test", u.addr())
				out, err := client.command(t, caFile, "api.test", h.port(), "/client", tc.header, tc.value).CombinedOutput()
				if err != nil {
					t.Fatalf("%v: %s", err, out)
				}
				if !strings.Contains(string(out), tc.wantStatus) {
					t.Fatalf("output %q, want status %s", out, tc.wantStatus)
				}
				if bytes.Contains(out, []byte(tokenValue)) || bytes.Contains(out, []byte(otherValue)) {
					t.Errorf("a value reached the client: %s", out)
				}
				reqs := u.requests()
				if tc.wantUpstream == "" {
					if len(reqs) != 0 {
						t.Errorf("a refused request reached the upstream")
					}
					return
				}
				if len(reqs) != 1 || reqs[0].Header.Get(tc.header) != tc.wantUpstream {
					t.Errorf("upstream got %+v", reqs)
				}
			})
		}
	}
}

func TestCurlUploadsThroughServeTLS(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	s := newTestSecrets(t, Options{})
	ph := placeholderOf(t, s, "TOKEN")
	caFile := writeAuthorityPEM(t, s)
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	// Over 1 MiB: curl sends Expect: 100-continue.
	if err := os.WriteFile(big, bytes.Repeat([]byte("u"), 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a large body with Expect", []string{"--data-binary", "@" + big}, fmt.Sprintf("POST /up body=%d", 3<<20)},
		{"a chunked body", []string{"-H", "Transfer-Encoding: chunked", "--data-binary", "@" + big}, fmt.Sprintf("POST /up body=%d", 3<<20)},
		{"http2 asked, http/1.1 given", []string{"--http2"}, "GET /up body=0"},
		{"two requests on one connection", []string{"--next", "--cacert", caFile, "--resolve", "api.test:PORT:127.0.0.1", "-H", "X-Api-Key: " + ph, "https://api.test:PORT/second"}, "GET /second body=0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, "api.test")
			h := startHarness(t, s, "api.test", u.addr())
			args := []string{"-sS", "--cacert", caFile, "--resolve", "api.test:" + h.port() + ":127.0.0.1", "-H", "X-Api-Key: " + ph, "https://api.test:" + h.port() + "/up"}
			for _, a := range tc.args {
				args = append(args, strings.ReplaceAll(a, "PORT", h.port()))
			}
			cmd := exec.Command("curl", args...)
			cmd.Env = clientEnv()
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("output %q, want %q", out, tc.want)
			}
			for _, r := range u.requests() {
				if r.Header.Get("X-Api-Key") != tokenValue {
					t.Errorf("upstream got X-Api-Key %q", r.Header.Get("X-Api-Key"))
				}
				if r.RemoteAddr != u.requests()[0].RemoteAddr {
					t.Errorf("a second upstream connection")
				}
			}
		})
	}
}

// TestRealClientsHonourTheNameConstraints serves certificates signed with
// the authority's key, as a thief of the key would: the clients accept
// the one for the bound host and refuse the one for another name.
func TestRealClientsHonourTheNameConstraints(t *testing.T) {
	s := newTestSecrets(t, Options{})
	caFile := writeAuthorityPEM(t, s)
	a := s.Authority()
	tests := []struct {
		host   string
		wantOK bool
	}{
		{"api.test", true},
		{"evil.test", false},
		{"sub.api.test", false},
	}
	for _, client := range realClients() {
		for _, tc := range tests {
			t.Run(client.name+"/"+tc.host, func(t *testing.T) {
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.WriteString(w, "reached")
				}))
				srv.Config.ErrorLog = log.New(io.Discard, "", 0)
				srv.TLS = &tls.Config{Certificates: []tls.Certificate{signLeaf(t, a.cert, a.key, tc.host, tc.host)}}
				srv.StartTLS()
				defer srv.Close()
				_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
				out, err := client.command(t, caFile, tc.host, port, "/", "X-Test", "1").CombinedOutput()
				reached := err == nil && strings.Contains(string(out), "reached")
				if reached != tc.wantOK {
					t.Fatalf("reached %v (%v: %s), want %v", reached, err, out, tc.wantOK)
				}
				if !tc.wantOK && !strings.Contains(string(out), "subtree violation") {
					t.Errorf("refused for another reason: %s", out)
				}
			})
		}
	}
}
