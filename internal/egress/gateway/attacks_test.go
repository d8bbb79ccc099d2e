package gateway

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
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
