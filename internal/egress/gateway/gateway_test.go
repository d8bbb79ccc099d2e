package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jail-sandbox/jail/internal/egress/mitm"
)

func TestProxyWithCurl(t *testing.T) {
	tests := []struct {
		name     string
		rules    string
		args     func(e *env) []string
		wantCode int    // curl's exit code
		wantOut  string // in stdout
	}{
		{name: "plain HTTP to an allowed name", rules: testRules,
			args:    func(e *env) []string { return []string{"-x", "http://" + addrOf(e.ls.Proxy), "http://allowed.test/a"} },
			wantOut: `host=allowed.test path=/a ua="curl/`},
		{name: "plain HTTP to a denied name", rules: testRules,
			args:    func(e *env) []string { return []string{"-x", "http://" + addrOf(e.ls.Proxy), "http://denied.test/a"} },
			wantOut: "jail: net: denied denied.test:80 (no rule)"},
		{name: "HTTPS through CONNECT to an allowed name", rules: testRules,
			args: func(e *env) []string {
				return []string{"-x", "http://" + addrOf(e.ls.Proxy), "--cacert", e.caFile, "https://allowed.test/b"}
			},
			wantOut: "host=allowed.test path=/b"},
		{name: "HTTPS through CONNECT to a denied name", rules: testRules,
			args: func(e *env) []string {
				return []string{"-x", "http://" + addrOf(e.ls.Proxy), "--cacert", e.caFile, "https://denied.test/b"}
			},
			wantCode: 56},
		{name: "SOCKS5 with the name", rules: testRules,
			args: func(e *env) []string {
				return []string{"--socks5-hostname", addrOf(e.ls.SOCKS), "--cacert", e.caFile, "https://allowed.test/c"}
			},
			wantOut: "host=allowed.test path=/c"},
		{name: "SOCKS5 with a denied name", rules: testRules,
			args: func(e *env) []string {
				return []string{"--socks5-hostname", addrOf(e.ls.SOCKS), "http://denied.test/c"}
			},
			wantCode: 97},
		{name: "SOCKS5 with an IP without an address rule", rules: "allowed.test",
			args: func(e *env) []string {
				return []string{"--socks5", addrOf(e.ls.SOCKS), "http://127.0.0.1/c"}
			},
			wantCode: 97},
		{name: "SOCKS5 with an IP an address rule names", rules: "127.0.0.1",
			args: func(e *env) []string {
				return []string{"--socks5", addrOf(e.ls.SOCKS), "http://127.0.0.1/d"}
			},
			wantOut: "host=127.0.0.1 path=/d"},
		{name: "captured port 80", rules: testRules,
			args: func(e *env) []string {
				return []string{"--connect-to", "allowed.test:80:" + addrOf(e.ls.HTTP), "http://allowed.test/e"}
			},
			wantOut: "host=allowed.test path=/e"},
		{name: "captured port 443", rules: testRules,
			args: func(e *env) []string {
				return []string{"--connect-to", "allowed.test:443:" + addrOf(e.ls.TLS), "--cacert", e.caFile, "https://allowed.test/f"}
			},
			wantOut: "host=allowed.test path=/f"},
		{name: "captured port 443 with another name in SNI", rules: testRules,
			args: func(e *env) []string {
				return []string{"--connect-to", "other.test:443:" + addrOf(e.ls.TLS), "--cacert", e.caFile, "https://other.test/f"}
			},
			wantCode: 35},
		{name: "HTTP/2 prior knowledge on captured port 80", rules: testRules,
			args: func(e *env) []string {
				return []string{"--http2-prior-knowledge", "--connect-to", "allowed.test:80:" + addrOf(e.ls.HTTP), "http://allowed.test/g"}
			},
			wantCode: 52},
		{name: "h2c upgrade through the proxy", rules: testRules,
			args: func(e *env) []string {
				return []string{"--http2", "-x", "http://" + addrOf(e.ls.Proxy), "http://allowed.test/h"}
			},
			wantOut: "h2c"},
	}
	// The host's proxy settings must not reach the gateway's dials.
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:9")
	t.Setenv("http_proxy", "http://127.0.0.1:9")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.rules)
			out, code := curl(t, tt.args(e)...)
			if code != tt.wantCode {
				t.Errorf("curl exit %d, want %d; output %q", code, tt.wantCode, out)
			}
			if !strings.Contains(out, tt.wantOut) {
				t.Errorf("curl output %q, want it to contain %q", out, tt.wantOut)
			}
		})
	}
}

// TestResolvedAddressesAreChecked: a name the rules allow that resolves to
// loopback, link-local (cloud metadata) or an IPv4-mapped form of them is
// refused without an address rule, and nothing is dialed (DNS rebinding).
func TestResolvedAddressesAreChecked(t *testing.T) {
	tests := []struct {
		name       string
		rules      string
		host       string
		wantStatus int
		wantReason string
	}{
		{"loopback", "rebind.test", "rebind.test", 403, "127.0.0.1 is loopback"},
		{"metadata", "metadata.test", "metadata.test", 403, "169.254.169.254 is link-local"},
		{"IPv4-mapped loopback", "mapped.test", "mapped.test", 403, "::ffff:127.0.0.1 (a form of 127.0.0.1) is loopback"},
		{"mixed: only the allowed address is dialed", "mixed.test,127.0.0.1", "mixed.test", 200, ""},
		{"an address rule names it", "rebind.test,127.0.0.1", "rebind.test", 200, ""},
		{"a wider range than loopback's does not", "rebind.test,0.0.0.0/1", "rebind.test", 403, "loopback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.rules)
			for _, via := range []string{"GET", "CONNECT"} {
				if via == "GET" {
					c, br := rawConn(t, e.ls.Proxy)
					fmt.Fprintf(c, "GET http://%s/x HTTP/1.1\r\nHost: %s\r\n\r\n", tt.host, tt.host)
					resp, body := readResponse(t, br, "GET")
					if resp.StatusCode != tt.wantStatus || !strings.Contains(body, tt.wantReason) {
						t.Errorf("GET: %d %q, want %d and %q", resp.StatusCode, body, tt.wantStatus, tt.wantReason)
					}
				} else {
					_, _, status := connectTunnel(t, e.ls.Proxy, tt.host+":443", "")
					if status != tt.wantStatus {
						t.Errorf("CONNECT: %d, want %d", status, tt.wantStatus)
					}
				}
			}
			for _, a := range e.dialedAddrs() {
				if a.Addr() != netip.MustParseAddr("127.0.0.1") {
					t.Errorf("dialed %s", a)
				}
				if tt.wantStatus != 200 {
					t.Errorf("dialed %s although refused", a)
				}
			}
			if tt.wantStatus != 200 {
				for _, ev := range e.connEvents(ViaProxy) {
					if ev.Verdict != Denied || !strings.Contains(ev.Reason, tt.wantReason) {
						t.Errorf("event %+v, want denied for %q; all: %+v", ev, tt.wantReason, e.eventsNow())
					}
				}
			}
		})
	}
}

func TestConnectRefusals(t *testing.T) {
	tests := []struct {
		name       string
		rules      string
		target     string
		hostHeader string
		wantStatus int
	}{
		{"an IP literal without an address rule", "allowed.test", "127.0.0.1:443", "", 403},
		{"an IPv4-mapped IP literal", "allowed.test", "[::ffff:127.0.0.1]:443", "", 403},
		{"an IPv4-mapped IP literal, the IPv4 address denied", testRules + ",!127.0.0.1", "[::ffff:127.0.0.1]:443", "", 403},
		{"a non-canonical IPv4 form", testRules, "127.1:443", "", 400},
		{"a port the rules do not allow", testRules, "allowed.test:8443", "", 403},
		{"no port", testRules, "allowed.test", "", 400},
		{"Host header naming another host", testRules, "allowed.test:443", "other.test:443", 403},
		{"Host header naming the target", testRules, "allowed.test:443", "ALLOWED.test.:443", 200},
		{"an IP literal an address rule names", "127.0.0.1", "127.0.0.1:443", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.rules)
			_, _, status := connectTunnel(t, e.ls.Proxy, tt.target, tt.hostHeader)
			if status != tt.wantStatus {
				t.Fatalf("CONNECT %s: %d, want %d", tt.target, status, tt.wantStatus)
			}
		})
	}
}

// TestConnectToTheGatewayItself: even with an address rule naming it, the
// gateway never dials one of its own listeners (a relay through itself).
func TestConnectToTheGatewayItself(t *testing.T) {
	proxy, socks := listen(t), listen(t)
	ruleText := "127.0.0.1:" + portOf(proxy) + ",127.0.0.1:" + portOf(socks)
	e := newEnvOn(t, ruleText, Listeners{Proxy: proxy, SOCKS: socks})
	for _, l := range []net.Listener{proxy, socks} {
		_, _, status := connectTunnel(t, e.ls.Proxy, addrOf(l), "")
		if status != 403 {
			t.Fatalf("CONNECT to the gateway's %s: %d, want 403", addrOf(l), status)
		}
	}
	if d := e.dialedAddrs(); len(d) != 0 {
		t.Fatalf("dialed %v", d)
	}
	for _, ev := range e.connEvents(ViaProxy) {
		if ev.Verdict != Denied || !strings.Contains(ev.Reason, "the gateway's own listener") {
			t.Errorf("event %+v", ev)
		}
	}
}

// TestOneHostPerConnection: the second request of a kept-alive or
// pipelined connection is decided on its own, and on a connection with a
// fixed target (captured port 80, a CONNECT tunnel) it must name that
// target.
func TestOneHostPerConnection(t *testing.T) {
	req := func(target, host string) string {
		return fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, host)
	}
	tests := []struct {
		name     string
		open     func(t *testing.T, e *env) (net.Conn, *bufio.Reader)
		requests []string
		pipeline bool
		want     []int // statuses; fewer than requests: the connection ends
	}{
		{"proxy: kept-alive, second host allowed", proxyConn,
			[]string{req("http://allowed.test/1", "allowed.test"), req("http://other.test/2", "other.test")}, false, []int{200, 200}},
		{"proxy: kept-alive, second host denied", proxyConn,
			[]string{req("http://allowed.test/1", "allowed.test"), req("http://denied.test/2", "denied.test")}, false, []int{200, 403}},
		{"proxy: pipelined, second host denied", proxyConn,
			[]string{req("http://allowed.test/1", "allowed.test"), req("http://denied.test/2", "denied.test"), req("http://allowed.test/3", "allowed.test")}, true, []int{200, 403}},
		{"proxy: Host header not the URL's host", proxyConn,
			[]string{req("http://allowed.test/1", "other.test")}, false, []int{403}},
		{"proxy: origin-form request", proxyConn,
			[]string{req("/1", "allowed.test")}, false, []int{400}},
		{"proxy: two Host headers", proxyConn,
			[]string{"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nHost: other.test\r\n\r\n"}, false, []int{400 + unparsed}},
		{"proxy: a folded Host header", proxyConn,
			[]string{"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n other.test\r\n\r\n"}, false, []int{400 + unparsed}},
		{"proxy: https:// in absolute form", proxyConn,
			[]string{req("https://allowed.test/1", "allowed.test")}, false, []int{400}},
		{"proxy: h2c upgrade", proxyConn,
			[]string{"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"}, false, []int{403}},
		{"captured 80: kept-alive, second host", capturedConn,
			[]string{req("/1", "allowed.test"), req("/2", "other.test")}, false, []int{200, 403}},
		{"captured 80: pipelined, second host", capturedConn,
			[]string{req("/1", "allowed.test"), req("/2", "other.test")}, true, []int{200, 403}},
		{"captured 80: pipelined, same host", capturedConn,
			[]string{req("/1", "allowed.test"), req("/2", "Allowed.Test:80")}, true, []int{200, 200}},
		{"captured 80: absolute form naming another host", capturedConn,
			[]string{req("http://other.test/1", "other.test")}, false, []int{403}},
		{"captured 80: no Host", capturedConn,
			[]string{"GET / HTTP/1.1\r\n\r\n"}, false, []int{400}},
		{"captured 80: HTTP/1.0 without Host goes to the name", capturedConn,
			[]string{"GET /1 HTTP/1.0\r\n\r\n"}, false, []int{200}},
		{"captured 80: HTTP/2 preface", capturedConn,
			[]string{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"}, false, []int{403}},
		{"captured 80: h2c upgrade", capturedConn,
			[]string{"GET / HTTP/1.1\r\nHost: allowed.test\r\nUpgrade: h2c\r\n\r\n"}, false, []int{403}},
		{"CONNECT tunnel: second host", tunnelConn,
			[]string{req("/1", "allowed.test"), req("/2", "other.test")}, false, []int{200, 403}},
		{"CONNECT tunnel: pipelined, second host", tunnelConn,
			[]string{req("/1", "allowed.test"), req("/2", "other.test")}, true, []int{200, 403}},
		{"CONNECT tunnel: a CONNECT inside", tunnelConn,
			[]string{"CONNECT other.test:80 HTTP/1.1\r\nHost: other.test:80\r\n\r\n"}, false, []int{400}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, testRules)
			c, br := tt.open(t, e)
			if tt.pipeline {
				io.WriteString(c, strings.Join(tt.requests, ""))
			}
			for i, r := range tt.requests {
				if !tt.pipeline {
					io.WriteString(c, r)
				}
				if i == len(tt.want) {
					expectClosed(t, br)
					break
				}
				resp, body := readResponse(t, br, "GET")
				if resp.StatusCode != tt.want[i]%unparsed {
					t.Fatalf("request %d: %d %q, want %d", i+1, resp.StatusCode, body, tt.want[i])
				}
				if resp.StatusCode == 200 && !strings.Contains(body, "host=allowed.test") && !strings.Contains(body, "host=other.test") {
					t.Fatalf("request %d: upstream saw %q", i+1, body)
				}
			}
			if len(tt.want) == len(tt.requests) && tt.want[len(tt.want)-1] != 200 {
				expectClosed(t, br)
			}
			// Every request has its event, and the connection one.
			var requests, want int
			for _, ev := range e.allEvents() {
				if ev.Method != "" {
					requests++
				}
			}
			for _, w := range tt.want {
				if w < unparsed {
					want++
				}
			}
			if requests != want {
				t.Errorf("%d request events, want %d", requests, want)
			}
		})
	}
}

// unparsed added to a status: no request could be parsed, so no request
// event is emitted (the connection's says why).
const unparsed = 1000

func proxyConn(t *testing.T, e *env) (net.Conn, *bufio.Reader) { return rawConn(t, e.ls.Proxy) }

func capturedConn(t *testing.T, e *env) (net.Conn, *bufio.Reader) { return rawConn(t, e.ls.HTTP) }

// tunnelConn is a CONNECT tunnel to allowed.test:80.
func tunnelConn(t *testing.T, e *env) (net.Conn, *bufio.Reader) {
	c, br, status := connectTunnel(t, e.ls.Proxy, "allowed.test:80", "")
	if status != 200 {
		t.Fatalf("CONNECT: %d", status)
	}
	return c, br
}

// TestTunnelTLSChecks: after CONNECT the ClientHello must name the target
// (or nothing) and not offer ECH.
func TestTunnelTLSChecks(t *testing.T) {
	tests := []struct {
		name       string
		hello      func(t *testing.T) []byte
		wantReason string // "" allowed
	}{
		{"SNI of the target", func(t *testing.T) []byte { return clientHelloBytes(t, "allowed.test") }, ""},
		{"SNI of the target, other case and a dot", func(t *testing.T) []byte { return helloSpec{names: []string{"ALLOWED.test."}}.records() }, ""},
		{"no SNI", func(t *testing.T) []byte { return clientHelloBytes(t, "") }, ""},
		{"SNI of another host", func(t *testing.T) []byte { return clientHelloBytes(t, "other.test") }, `the TLS server name "other.test" is not allowed.test`},
		{"ECH", func(t *testing.T) []byte { return helloSpec{names: []string{"allowed.test"}, ech: true}.records() }, "ECH"},
		{"a malformed ClientHello", func(t *testing.T) []byte { return []byte{22, 3, 1, 0, 4, 1, 0, 0, 0} }, "not a valid TLS ClientHello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, via := range []string{ViaProxy, ViaSOCKS, ViaTLS} {
				e := newEnv(t, testRules)
				var c net.Conn
				var br *bufio.Reader
				switch via {
				case ViaProxy:
					var status int
					c, br, status = connectTunnel(t, e.ls.Proxy, "allowed.test:443", "")
					if status != 200 {
						t.Fatalf("CONNECT: %d", status)
					}
				case ViaSOCKS:
					c, br = socksConnect(t, e, 3, "allowed.test", 443, 0)
				case ViaTLS:
					c, br = rawConn(t, e.ls.TLS)
				}
				c.Write(tt.hello(t))
				if tt.wantReason != "" {
					expectClosed(t, br)
				} else {
					// The upstream TLS server answers with its ServerHello.
					b := make([]byte, 1)
					// (an alert for a hand-built ClientHello, still the server's)
					if _, err := io.ReadFull(br, b); err != nil || b[0] != recordHandshake && b[0] != 21 {
						t.Fatalf("%s: no answer from the server: %v %v", via, b, err)
					}
				}
				c.Close()
				evs := e.connEvents(via)
				if len(evs) != 1 {
					t.Fatalf("%s: %d events %+v", via, len(evs), evs)
				}
				ev := evs[0]
				if tt.wantReason == "" {
					if ev.Verdict != Allowed || ev.Host != "allowed.test" || ev.Port != 443 || ev.Address != netip.MustParseAddrPort("127.0.0.1:443") || ev.Rule != "allowed.test" {
						t.Errorf("%s: event %+v", via, ev)
					}
				} else if ev.Verdict != Denied || !strings.Contains(ev.Reason, tt.wantReason) {
					t.Errorf("%s: event %+v, want denied for %q", via, ev, tt.wantReason)
				}
			}
		})
	}
}

// TestTunnelPassesOtherProtocols: neither TLS nor HTTP passes through, and
// so does a protocol where the server speaks first.
func TestTunnelPassesOtherProtocols(t *testing.T) {
	banner := listen(t)
	defer banner.Close()
	go func() {
		for {
			c, err := banner.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.WriteString(c, "220 hello\r\n")
				io.Copy(c, c)
			}()
		}
	}()
	e := newEnv(t, "allowed.test:25,127.0.0.1:25")
	e.dialMu.Lock()
	e.portMap[25] = addrOf(banner)
	e.dialMu.Unlock()
	c, br, status := connectTunnel(t, e.ls.Proxy, "allowed.test:25", "")
	if status != 200 {
		t.Fatalf("CONNECT: %d", status)
	}
	line, err := br.ReadString('\n')
	if err != nil || line != "220 hello\r\n" {
		t.Fatalf("banner %q, %v", line, err)
	}
	io.WriteString(c, "\x00binary\n")
	got := make([]byte, 8)
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "\x00binary\n" {
		t.Fatalf("echo %q, %v", got, err)
	}
}

// socksConnect does a SOCKS5 CONNECT and expects success unless wantReply
// is set, in which case it returns after checking that reply.
func socksConnect(t *testing.T, e *env, atyp byte, host string, port int, wantReply byte) (net.Conn, *bufio.Reader) {
	t.Helper()
	return socksRequest(t, e, 1, atyp, host, port, wantReply)
}

func socksRequest(t *testing.T, e *env, cmd, atyp byte, host string, port int, wantReply byte) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, br := rawConn(t, e.ls.SOCKS)
	c.Write([]byte{5, 1, 0})
	var m [2]byte
	if _, err := io.ReadFull(br, m[:]); err != nil || m != [2]byte{5, 0} {
		t.Fatalf("method reply %v, %v", m, err)
	}
	req := []byte{5, cmd, 0, atyp}
	switch atyp {
	case 1:
		a := netip.MustParseAddr(host).As4()
		req = append(req, a[:]...)
	case 4:
		a := netip.MustParseAddr(host).As16()
		req = append(req, a[:]...)
	default:
		req = append(req, byte(len(host)))
		req = append(req, host...)
	}
	req = append(req, byte(port>>8), byte(port))
	c.Write(req)
	var reply [10]byte
	if _, err := io.ReadFull(br, reply[:]); err != nil {
		t.Fatalf("SOCKS reply: %v", err)
	}
	if reply[1] != wantReply {
		t.Fatalf("SOCKS reply %d, want %d", reply[1], wantReply)
	}
	if reply[3] != 1 || [6]byte(reply[4:]) != [6]byte{} {
		t.Fatalf("SOCKS reply's bound address %v, want 0.0.0.0:0", reply[3:])
	}
	return c, br
}

func TestSOCKSReplies(t *testing.T) {
	tests := []struct {
		name  string
		rules string
		cmd   byte
		atyp  byte
		host  string
		port  int
		reply byte
	}{
		{"domain allowed", testRules, 1, 3, "allowed.test", 80, 0},
		{"domain denied", testRules, 1, 3, "denied.test", 80, 2},
		{"domain resolving to loopback", "rebind.test", 1, 3, "rebind.test", 80, 2},
		{"an IPv4 address without an address rule", testRules + ",!127.0.0.1", 1, 1, "127.0.0.1", 80, 2},
		{"an IPv4 address an address rule names", "127.0.0.1", 1, 1, "127.0.0.1", 80, 0},
		{"an IPv6 loopback", testRules, 1, 4, "::1", 80, 2},
		{"an IPv4-mapped IPv6 address", "allowed.test", 1, 4, "::ffff:127.0.0.1", 80, 2},
		{"a domain that is an IP literal", "allowed.test", 1, 3, "127.0.0.1", 80, 2},
		{"BIND", testRules, 2, 3, "allowed.test", 80, 7},
		{"UDP ASSOCIATE", testRules, 3, 1, "0.0.0.0", 0, 7},
		{"an unknown address type", testRules, 1, 9, "", 80, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.rules)
			if tt.atyp == 9 {
				c, br := rawConn(t, e.ls.SOCKS)
				c.Write([]byte{5, 1, 0, 5, 1, 0, 9})
				b := make([]byte, 4)
				io.ReadFull(br, b)
				if b[3] != 8 {
					t.Fatalf("reply %v, want 8", b)
				}
				return
			}
			c, br := socksRequest(t, e, tt.cmd, tt.atyp, tt.host, tt.port, tt.reply)
			if tt.reply == 0 {
				fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", tt.host)
				resp, body := readResponse(t, br, "GET")
				if resp.StatusCode != 200 {
					t.Fatalf("through SOCKS: %d %q", resp.StatusCode, body)
				}
			} else {
				expectClosed(t, br)
				if tt.atyp != 9 {
					for _, a := range e.dialedAddrs() {
						t.Errorf("dialed %s", a)
					}
				}
			}
		})
	}
}

func TestCapturedUnknownLocalAddress(t *testing.T) {
	for _, via := range []string{ViaHTTP, ViaTLS} {
		t.Run(via, func(t *testing.T) {
			e := newEnv(t, testRules, func(c *Config) {
				c.NameOf = func(netip.Addr) (string, bool) { return "", false }
			})
			l := e.ls.HTTP
			if via == ViaTLS {
				l = e.ls.TLS
			}
			c, br := rawConn(t, l)
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
			expectClosed(t, br)
			evs := e.connEvents(via)
			if len(evs) != 1 || evs[0].Verdict != Denied || !strings.Contains(evs[0].Reason, "127.0.0.1 is no address the sandbox's DNS gave a name") {
				t.Fatalf("events %+v", evs)
			}
			if d := e.dialedAddrs(); len(d) != 0 {
				t.Fatalf("dialed %v", d)
			}
		})
	}
}

// fakeInterceptor passes TLS through, via the dial it is given, and
// records what it saw.
type fakeInterceptor struct {
	mu        sync.Mutex
	served    []string
	rewritten []string
	refuse    bool
}

func (f *fakeInterceptor) Intercepts(host string) bool { return host == "allowed.test" }

func (f *fakeInterceptor) ServeTLS(ctx context.Context, client net.Conn, host string, port int, dial func(context.Context) (net.Conn, error), record func(mitm.Request)) (int64, int64, error) {
	f.mu.Lock()
	f.served = append(f.served, fmt.Sprintf("%s:%d", host, port))
	f.mu.Unlock()
	up, err := dial(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer up.Close()
	done := make(chan int64)
	go func() {
		n, _ := io.Copy(up, client)
		closeWrite(up)
		done <- n
	}()
	down, _ := io.Copy(client, up)
	closeWrite(client)
	return <-done, down, nil
}

func (f *fakeInterceptor) RewriteRequest(host, target string, h http.Header) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rewritten = append(f.rewritten, host)
	if f.refuse {
		return fmt.Errorf("a placeholder sent to %s", host)
	}
	h.Set("X-Rewritten", "yes")
	return nil
}

func TestInterceptor(t *testing.T) {
	f := &fakeInterceptor{}
	e := newEnv(t, testRules, func(c *Config) { c.Interceptor = f })
	for _, args := range [][]string{
		{"-x", "http://" + addrOf(e.ls.Proxy), "--cacert", e.caFile, "https://allowed.test/i"},
		{"--connect-to", "allowed.test:443:" + addrOf(e.ls.TLS), "--cacert", e.caFile, "https://allowed.test/i"},
		{"-x", "http://" + addrOf(e.ls.Proxy), "--cacert", e.caFile, "https://other.test/i"},
		{"-x", "http://" + addrOf(e.ls.Proxy), "http://other.test/i"},
	} {
		out, code := curl(t, args...)
		if code != 0 || !strings.Contains(out, "path=/i") {
			t.Fatalf("curl %v: %d %q", args, code, out)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.Join(f.served, " ") != "allowed.test:443 allowed.test:443" {
		t.Errorf("ServeTLS for %v, want allowed.test twice (other.test passes through)", f.served)
	}
	if strings.Join(f.rewritten, " ") != "other.test" {
		t.Errorf("Rewrite for %v", f.rewritten)
	}
	f.refuse = true
	f.mu.Unlock()
	out, _ := curl(t, "-x", "http://"+addrOf(e.ls.Proxy), "http://other.test/i")
	f.mu.Lock()
	if !strings.Contains(out, "refused by the secret filter") {
		t.Errorf("a refused rewrite: %q", out)
	}
}

func TestLimits(t *testing.T) {
	t.Run("connections at once", func(t *testing.T) {
		e := newEnv(t, testRules, func(c *Config) { c.Limits.MaxConns = 1 })
		// One connection held open: a tunnel.
		tunnelConn(t, e)
		c, br := rawConn(t, e.ls.Proxy)
		io.WriteString(c, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
		resp, _ := readResponse(t, br, "GET")
		if resp.StatusCode != 503 {
			t.Fatalf("over the limit: %d, want 503", resp.StatusCode)
		}
		sc, sbr := rawConn(t, e.ls.SOCKS)
		sc.Write([]byte{5, 1, 0, 5, 1, 0, 3, 12})
		sc.Write([]byte("allowed.test\x00\x50"))
		b := make([]byte, 6)
		io.ReadFull(sbr, b)
		if b[3] != 1 {
			t.Fatalf("SOCKS over the limit: reply %v, want general failure", b)
		}
		hc, hbr := rawConn(t, e.ls.HTTP)
		io.WriteString(hc, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
		expectClosed(t, hbr)
		denied := 0
		for _, ev := range e.allEvents() {
			if strings.Contains(ev.Reason, "more than 1 connections at once") {
				denied++
			}
		}
		if denied != 3 {
			t.Fatalf("%d events of the limit, want 3", denied)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		e := newEnv(t, testRules, func(c *Config) { c.Limits.MaxBytes = 64 << 10 })
		out, code := curl(t, "-x", "http://"+addrOf(e.ls.Proxy), "http://allowed.test/big")
		if code == 0 || len(out) >= 1<<20 {
			t.Fatalf("1 MiB through a 64 KiB limit: exit %d, %d bytes", code, len(out))
		}
		out, code = curl(t, "-x", "http://"+addrOf(e.ls.Proxy), "http://allowed.test/")
		if code == 0 {
			t.Fatalf("a request after the limit: %q", out)
		}
		var ended bool
		for _, ev := range e.connEvents(ViaProxy) {
			ended = ended || strings.Contains(ev.Reason, "byte limit")
			if ev.BytesUp+ev.BytesDown > 64<<10 {
				t.Errorf("event %+v: more than the limit", ev)
			}
		}
		if !ended {
			t.Fatalf("no event says the byte limit ended a connection")
		}
	})
	t.Run("rate", func(t *testing.T) {
		// Throttled, the bytes still all arrive (how fast is for a
		// benchmark, not a test).
		e := newEnv(t, testRules, func(c *Config) { c.Limits.Rate = 16 << 20 })
		out, code := curl(t, "-x", "http://"+addrOf(e.ls.Proxy), "http://allowed.test/big")
		if code != 0 || len(out) != 1<<20 {
			t.Fatalf("exit %d, %d bytes", code, len(out))
		}
	})
}

// TestSlowClientsAreClosed: a client that sends no complete head,
// handshake or ClientHello in time is closed (the timeout shortened).
func TestSlowClientsAreClosed(t *testing.T) {
	for _, tt := range []struct {
		via  string
		send string
	}{
		{ViaProxy, ""},
		{ViaProxy, "GET http://allowed.test/ HTTP/1.1\r\n"},
		{ViaSOCKS, "\x05"},
		{ViaHTTP, "GET / HTTP/1.1\r\nHost: allowed.test\r\n"},
		{ViaTLS, "\x16\x03\x01"},
	} {
		t.Run(tt.via, func(t *testing.T) {
			e := newEnv(t, testRules, func(c *Config) { c.headTimeout = 50 * time.Millisecond })
			l := map[string]net.Listener{ViaProxy: e.ls.Proxy, ViaSOCKS: e.ls.SOCKS, ViaHTTP: e.ls.HTTP, ViaTLS: e.ls.TLS}[tt.via]
			c, br := rawConn(t, l)
			io.WriteString(c, tt.send)
			expectClosed(t, br)
			evs := e.connEvents(tt.via)
			if len(evs) != 1 || evs[0].Verdict != Denied {
				t.Fatalf("events %+v", evs)
			}
		})
	}
}

func TestHeadTooLarge(t *testing.T) {
	e := newEnv(t, testRules)
	c, br := rawConn(t, e.ls.Proxy)
	go fmt.Fprintf(c, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", MaxHead))
	resp, _ := readResponse(t, br, "GET")
	if resp.StatusCode != 431 {
		t.Fatalf("%d, want 431", resp.StatusCode)
	}
}

// TestRequestsAreReframed: what the upstream receives is the checked
// request written anew: origin form, the checked Host, no hop-by-hop or
// proxy headers, no User-Agent added, the body as sent.
func TestRequestsAreReframed(t *testing.T) {
	e := newEnv(t, testRules)
	c, br := rawConn(t, e.ls.Proxy)
	io.WriteString(c, "POST http://allowed.test/echo HTTP/1.1\r\nHost: allowed.test\r\nProxy-Authorization: Basic eDp5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
	resp, body := readResponse(t, br, "POST")
	if resp.StatusCode != 200 || body != "hello" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	io.WriteString(c, "GET http://allowed.test/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	_, body = readResponse(t, br, "GET")
	if body != `host=allowed.test path=/x ua=""` {
		t.Fatalf("upstream saw %q", body)
	}
}

// TestEvents checks every field of the events of an allowed plain request
// and of a denied CONNECT.
func TestEvents(t *testing.T) {
	e := newEnv(t, testRules)
	c, br := rawConn(t, e.ls.Proxy)
	io.WriteString(c, "GET http://allowed.test/p?q=1 HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	readResponse(t, br, "GET")
	c.Close()
	connectTunnel(t, e.ls.Proxy, "denied.test:443", "")
	clientPort := netip.MustParseAddrPort(c.LocalAddr().String())
	proxyAddr := netip.MustParseAddrPort(addrOf(e.ls.Proxy))
	evs := e.allEvents()
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3: %+v", len(evs), evs)
	}
	var req, conn, denied *Event
	for i := range evs {
		ev := &evs[i]
		switch {
		case ev.Method == "GET":
			req = ev
		case ev.Client == clientPort:
			conn = ev
		default:
			denied = ev
		}
	}
	if req == nil || conn == nil || denied == nil {
		t.Fatalf("events %+v", evs)
	}
	check := func(what string, ok bool, ev *Event) {
		if !ok {
			t.Errorf("%s: %+v", what, *ev)
		}
	}
	check("request", req.Via == ViaProxy && req.Client == clientPort && req.Local == proxyAddr &&
		req.Host == "allowed.test" && req.Port == 80 && req.Address == netip.MustParseAddrPort("127.0.0.1:80") &&
		req.Path == "http://allowed.test/p?q=1" && req.Rule == "allowed.test" && req.Verdict == Allowed &&
		req.BytesUp > 0 && req.BytesDown > 0 && !req.Time.IsZero() && req.Duration > 0, req)
	check("connection", conn.Via == ViaProxy && conn.Method == "" && conn.Host == "allowed.test" && conn.Verdict == Allowed &&
		conn.BytesUp == req.BytesUp && conn.BytesDown == req.BytesDown && conn.Duration > 0, conn)
	check("denied", denied.Via == ViaProxy && denied.Host == "denied.test" && denied.Port == 443 && !denied.Address.IsValid() &&
		denied.Verdict == Denied && denied.Reason == "no rule" && denied.Rule == "", denied)
}

// TestCloseEndsEverything: Close ends connections in every state and every
// goroutine of the gateway.
func TestCloseEndsEverything(t *testing.T) {
	before := runtime.NumGoroutine()
	e := newEnv(t, testRules)
	tunnelConn(t, e)                             // a tunnel, idle
	rawConn(t, e.ls.Proxy)                       // nothing sent yet
	c, _ := rawConn(t, e.ls.HTTP)                // half a head
	io.WriteString(c, "GET / HTTP/1.1\r\n")      //
	socksConnect(t, e, 3, "allowed.test", 80, 0) // a SOCKS tunnel
	sc, _ := rawConn(t, e.ls.TLS)
	sc.Write(clientHelloBytes(t, "allowed.test")) // a TLS relay
	time.Sleep(50 * time.Millisecond)             // let them all be accepted
	done := make(chan struct{})
	go func() { e.g.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("Close did not return:\n%s", buf[:runtime.Stack(buf, true)])
	}
	if n := len(e.connEvents(ViaProxy)); n != 2 {
		t.Errorf("%d proxy connection events, want 2", n)
	}
	// Only the test's own (httptest, pipes) remain; poll briefly, as they
	// end asynchronously.
	e.tlsSrv.CloseClientConnections()
	for i := 0; ; i++ {
		var buf [1 << 16]byte
		stack := string(buf[:runtime.Stack(buf[:], true)])
		if !strings.Contains(stack, "egress/gateway.(*") {
			break
		}
		if i == 100 {
			t.Fatalf("gateway goroutines remain after Close (before: %d):\n%s", before, stack)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var _ = os.Getenv
var _ = tls.Client
var _ = x509.NewCertPool
