package test

import (
	"os/exec"
	"testing"
)

// TestEgressTunnelFirstBytesAreChecked: in a CONNECT or SOCKS tunnel the
// gateway reads what the sandbox sends first, and neither of two
// disguises gets past it, root and rootless:
//   - a TLS record that is not a handshake (a warning alert, which Go's
//     TLS server skips) before a ClientHello naming another server: it
//     passed as "neither TLS nor HTTP", the SNI (and ECH) unchecked;
//   - a request line with a byte a request line should not hold (which
//     lenient servers read as a request anyway) naming another Host: it
//     passed as "not HTTP", the Host unchecked.
func TestEgressTunnelFirstBytesAreChecked(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("needs python3")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		n := newEgressNet(t, m, map[string]string{"allowed.test": "127.0.0.2", "other.test": "127.0.0.3"})
		ca := newTestAuthority(t, sharedTempDir(t, nil))
		allowed := n.serveSite(ca, "allowed.test", "127.0.0.2", nil)
		const tunnel = `
import socket, ssl, sys
def tunnel(port):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT allowed.test:%d HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n" % (port, port))
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d:
            break
        head += d
    if b" 200 " not in head.split(b"\r\n")[0]:
        print("connect refused"); sys.exit()
    s.settimeout(10)
    return s
`
		alert := tunnel + `
s = tunnel(443)
s.sendall(bytes([21, 3, 1, 0, 2, 1, 90]))  # alert: warning, user_canceled
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
try:
    ctx.wrap_socket(s, server_hostname="other.test")
    print("handshake done")
except (OSError, ssl.SSLError) as e:
    print("handshake refused")
`
		oddByte := tunnel + `
s = tunnel(80)
s.sendall(b"GET /odd\xff HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n")
data = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
except OSError:
    pass
print("status", data.split(b"\r\n")[0].decode(errors="replace"))
`
		n.runCases(m, nil, []string{"--net", "allow=allowed.test,127.0.0.2"}, []egressCase{
			{"alert before the ClientHello", "python3 -c '" + alert + "'", "handshake refused"},
			{"odd byte in the request line", "python3 -c '" + oddByte + "'", "status HTTP/1.1 403"},
		})
		for _, r := range allowed.requests() {
			if r.Host != "allowed.test" {
				t.Errorf("allowed.test's server was asked for %+v", r)
			}
		}
		var denied int
		for _, rec := range n.records() {
			if rec.Event == "net" && rec.Via == "proxy" && rec.Verdict == "denied" && rec.Host == "allowed.test" {
				denied++
			}
		}
		// The alert's tunnel, and the odd request's tunnel and request.
		if denied < 3 {
			t.Errorf("%d denials on record, want 3: %+v", denied, n.records())
		}
	})
}
