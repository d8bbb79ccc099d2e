package test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// egressCase is one attempt a script in the sandbox makes, printed as
// "NAME: OUTPUT" so that the test can read each apart.
type egressCase struct {
	name, script string
	// want is what the case's output must contain.
	want string
}

// runCases runs the cases in one sandbox with the given jail options, and
// returns each case's output.
func (n *egressNet) runCases(m mode, env []string, opts []string, cases []egressCase) map[string]string {
	n.t.Helper()
	var script strings.Builder
	for _, c := range cases {
		fmt.Fprintf(&script, "out=$( { %s ; } 2>&1 | tr '\\n' ' '); echo %q: \"$out\"\n", c.script, c.name)
	}
	args := append(append([]string{"run"}, opts...), "--", "sh", "-c", script.String())
	cmd := n.command(m, args...)
	cmd.Env = append(cmd.Env, env...)
	r := runCmd(n.t, cmd)
	if r.code != 0 {
		n.t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	got := map[string]string{}
	for _, l := range lines(r.stdout) {
		if name, out, ok := strings.Cut(l, ": "); ok {
			got[name] = out
		}
	}
	for _, c := range cases {
		if out, ok := got[c.name]; !ok || !strings.Contains(out, c.want) {
			n.t.Errorf("%s: %q\n\tscript: %s\n\twant it to contain %q", c.name, out, c.script, c.want)
		}
	}
	return got
}

// TestEgressReachesAllowedHostsOnly: through the proxy, SOCKS and the
// captured ports, an allowed name is reached and nothing else is: denied
// names, IP literals, names resolving to loopback or the metadata address,
// IPv4-mapped forms, the gateway itself, the sandbox's own addresses, a
// Host that differs from the name, a second host on a kept-alive or
// pipelined connection, an SNI that differs from the CONNECT target, and
// UDP and raw sockets. The audit log has the allowed and the denied.
func TestEgressReachesAllowedHostsOnly(t *testing.T) {
	for _, tool := range []string{"curl", "python3", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	forEachMode(t, func(t *testing.T, m mode) {
		n := newEgressNet(t, m, map[string]string{
			"allowed.test": "127.0.0.2", "other.test": "127.0.0.3",
			"loop.test": "127.0.0.1", "meta.test": "169.254.169.254",
		})
		caDir := sharedTempDir(t, nil)
		ca := newTestAuthority(t, caDir)
		allowed := n.serveSite(ca, "allowed.test", "127.0.0.2", nil)
		other := n.serveSite(ca, "other.test", "127.0.0.3", nil)
		const cacert = "--cacert /opt/ca/test-ca.pem"
		const proxy = "-x http://127.0.0.1:3128"
		pipelined := `python3 -c '
import socket
s = socket.create_connection(("allowed.test", 80))
s.sendall(b"GET /pipe1 HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET /pipe2 HTTP/1.1\r\nHost: other.test\r\n\r\n")
s.settimeout(10)
data = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
except OSError:
    pass
print("ok", data.count(b"allowed.test /pipe1"), "second", data.count(b"other.test /pipe2"))
'`
		udp := `python3 -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.sendto(b"x", ("192.0.2.1", 53))
    print("sent")
except OSError as e:
    print("udp errno", e.errno)
'`
		raw := `python3 -c '
import socket
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.sendto(b"\x08\x00\xf7\xff\x00\x00\x00\x00", ("192.0.2.1", 0))
    print("sent")
except OSError as e:
    print("raw errno", e.errno)
'`
		cases := []egressCase{
			{"proxy http", "curl -sS http://allowed.test/p1", "allowed.test /p1"},
			{"proxy https", "curl -sS " + cacert + " https://allowed.test/p2", "allowed.test /p2"},
			{"captured http", "curl -sS --noproxy '*' http://allowed.test/p3", "allowed.test /p3"},
			{"captured https", "curl -sS --noproxy '*' " + cacert + " https://allowed.test/p4", "allowed.test /p4"},
			{"socks", "curl -sS --proxy socks5h://127.0.0.1:1080 " + cacert + " https://allowed.test/p5", "allowed.test /p5"},
			{"socks by address", "curl -sS --proxy socks5://127.0.0.1:1080 http://allowed.test/p6; echo exit=$?", "exit="},
			{"python urllib", `python3 -c 'import urllib.request,ssl; print(urllib.request.urlopen("https://allowed.test/p7", context=ssl.create_default_context(cafile="/opt/ca/test-ca.pem")).read().decode())'`, "allowed.test /p7"},
			{"denied by proxy", "curl -sS " + cacert + " https://other.test/; echo exit=$?", "exit=56"},
			{"denied by dns", "curl -sS --noproxy '*' http://other.test/; echo exit=$?", "exit=6"},
			{"denied plain proxy", "curl -s -o /dev/null -w '%{http_code}' http://other.test/x", "403"},
			{"ip literal by proxy", "curl -s -o /dev/null -w '%{http_code}' " + proxy + " http://127.0.0.3/", "403"},
			{"ip literal direct", "curl -sS --noproxy '*' http://127.0.0.3/; echo exit=$?", "exit=5"}, // 52 or 56: nothing answered
			{"ip rule by proxy", "curl -sS " + proxy + " http://127.0.0.2/ip", "allowed.test /ip"},
			{"rebinding to loopback", "curl -s -o /dev/null -w '%{http_code}' " + proxy + " http://loop.test/", "403"},
			{"rebinding to metadata", "curl -s -o /dev/null -w '%{http_code}' " + proxy + " http://meta.test/", "403"},
			{"ipv4-mapped metadata", "curl -s -o /dev/null -w '%{http_code}' " + proxy + " 'http://[::ffff:169.254.169.254]/'", "403"},
			{"ipv6 loopback by proxy", "curl -s -o /dev/null -w '%{http_code}' " + proxy + " 'http://[::1]/'", "403"},
			{"ipv6 direct", "curl -sS --noproxy '*' 'http://[2001:db8::1]/'; echo exit=$?", "exit=7"},
			{"the gateway itself", "curl -s -o /dev/null -w '%{http_code}' " + proxy + " http://127.0.0.1:3128/", "40"}, // 400 or 403
			{"the sandbox's own address", "curl -s -o /dev/null -w '%{http_code}' " + proxy + " http://127.100.0.1/", "403"},
			{"host differs from name", "curl -s -o /dev/null -w '%{http_code}' --noproxy '*' -H 'Host: other.test' http://allowed.test/h; echo exit=$?", "exit="},
			{"second host kept alive", "curl -s -o /dev/null -o /dev/null -w '%{http_code} ' http://allowed.test/k1 http://other.test/k2", "200 403"},
			{"pipelined second host", pipelined, "ok 1 second 0"},
			{"sni differs from connect", "openssl s_client -brief -proxy 127.0.0.1:3128 -connect allowed.test:443 -servername other.test </dev/null; echo exit=$?", "exit=1"},
			{"relayed in the sandbox", `python3 -c "$RELAY" >/dev/null 2>&1 & r=$!; sleep 0.5; curl -s -o /dev/null -w '%{http_code} ' -x http://127.0.0.1:9999 http://other.test/relayed; curl -s -o /dev/null -w '%{http_code}' -x http://127.0.0.1:9999 http://allowed.test/relayed; kill $r`, "403 200"},
			{"udp", udp, "errno"},
			{"raw", raw, "errno"},
		}
		// A relay the sandbox runs itself, between its clients and the
		// gateway's proxy: the gateway decides by the target alone, so it
		// changes nothing (claude-code #87381 was a proxy that did not).
		relay := `
import socket, threading
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", 9999))
l.listen()
def pipe(a, b):
    while True:
        d = a.recv(65536)
        if not d:
            break
        b.sendall(d)
    b.shutdown(socket.SHUT_WR)
while True:
    c, _ = l.accept()
    u = socket.create_connection(("127.0.0.1", 3128))
    threading.Thread(target=pipe, args=(c, u), daemon=True).start()
    threading.Thread(target=pipe, args=(u, c), daemon=True).start()
`
		out := n.runCases(m, []string{"SSL_CERT_FILE=" + ca.pemFile},
			[]string{"--net", "allow=allowed.test,loop.test,meta.test,127.0.0.2", "--mount", caDir + ":/opt/ca:ro", "--env", "RELAY=" + relay}, cases)
		if strings.Contains(out["host differs from name"], "200") {
			t.Errorf("a Host other than the name was served: %q", out["host differs from name"])
		}
		for _, r := range other.requests() {
			t.Errorf("other.test was asked %+v", r)
		}
		if len(allowed.requests()) < 7 {
			t.Errorf("allowed.test saw %d requests: %+v", len(allowed.requests()), allowed.requests())
		}
		var allowedConn, deniedConn bool
		for _, rec := range n.records() {
			if rec.Event != "net" {
				continue
			}
			if rec.Host == "allowed.test" && rec.Verdict == "allowed" && rec.Rule == "allowed.test" && strings.HasPrefix(rec.Address, "127.0.0.2:") && rec.Down > 0 {
				allowedConn = true
			}
			if rec.Host == "other.test" && rec.Verdict == "denied" && rec.Why == "no rule" {
				deniedConn = true
			}
		}
		if !allowedConn || !deniedConn {
			t.Errorf("the audit log lacks an allowed or a denied connection: %+v", n.records())
		}
	})
}
