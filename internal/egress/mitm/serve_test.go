package mitm

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestServeTLSPutsTheValueOnlyWhereBound(t *testing.T) {
	s := newTestSecrets(t, Options{})
	ph, other := placeholderOf(t, s, "TOKEN"), placeholderOf(t, s, "OTHER")
	tests := []struct {
		name       string
		target     string
		header     http.Header
		basic      []string // user, password
		wantStatus int
		// check looks at what the upstream received (when it did).
		check func(t *testing.T, r recorded)
	}{
		{name: "bearer", target: "/", header: http.Header{"Authorization": {"Bearer " + ph}}, wantStatus: 200,
			check: func(t *testing.T, r recorded) {
				if got := r.Header.Get("Authorization"); got != "Bearer "+tokenValue {
					t.Errorf("upstream got Authorization %q", got)
				}
			}},
		{name: "custom header and two in one value", target: "/", header: http.Header{"X-Api-Key": {ph}, "X-Both": {ph + "," + ph}}, wantStatus: 200,
			check: func(t *testing.T, r recorded) {
				if r.Header.Get("X-Api-Key") != tokenValue || r.Header.Get("X-Both") != tokenValue+","+tokenValue {
					t.Errorf("upstream got %q", r.Header)
				}
			}},
		{name: "basic auth password", target: "/", basic: []string{"user", ph}, wantStatus: 200,
			check: func(t *testing.T, r recorded) {
				want := "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+tokenValue))
				if got := r.Header.Get("Authorization"); got != want {
					t.Errorf("upstream got Authorization %q, want %q", got, want)
				}
			}},
		{name: "basic auth user", target: "/", basic: []string{ph, "x-oauth-basic"}, wantStatus: 200,
			check: func(t *testing.T, r recorded) {
				want := "Basic " + base64.StdEncoding.EncodeToString([]byte(tokenValue+":x-oauth-basic"))
				if got := r.Header.Get("Authorization"); got != want {
					t.Errorf("upstream got Authorization %q, want %q", got, want)
				}
			}},
		{name: "placeholder in the URL is left as it is", target: "/p?token=" + ph, wantStatus: 200,
			check: func(t *testing.T, r recorded) {
				if r.Target != "/p?token="+ph {
					t.Errorf("upstream got target %q", r.Target)
				}
			}},
		{name: "unbound secret in a header", target: "/", header: http.Header{"Authorization": {"Bearer " + other}}, wantStatus: 403},
		{name: "unbound secret in basic auth", target: "/", basic: []string{"u", other}, wantStatus: 403},
		{name: "unbound secret in the query", target: "/?k=" + other, wantStatus: 403},
		{name: "unbound secret percent-encoded in the query", target: "/?k=" + percentAll(other), wantStatus: 403},
		{name: "unbound secret in a header name", target: "/", header: http.Header{"X-" + other: {"1"}}, wantStatus: 403},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, "api.test")
			h := startHarness(t, s, "api.test", u.addr())
			req, err := http.NewRequest("GET", "https://api.test"+tc.target, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header[k] = v
			}
			if tc.basic != nil {
				req.SetBasicAuth(tc.basic[0], tc.basic[1])
			}
			resp, err := h.client(s).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tc.wantStatus)
			}
			for _, v := range []string{tokenValue, otherValue} {
				if strings.Contains(string(body), v) || strings.Contains(flatten(resp.Header), v) {
					t.Errorf("a value came back to the client")
				}
			}
			reqs := u.requests()
			if tc.wantStatus != 200 {
				if len(reqs) != 0 {
					t.Errorf("a refused request reached the upstream: %+v", reqs)
				}
				if !strings.Contains(string(body), "OTHER") {
					t.Errorf("refusal %q does not name the secret", body)
				}
				return
			}
			if len(reqs) != 1 {
				t.Fatalf("upstream got %d requests", len(reqs))
			}
			if reqs[0].Host != "api.test" {
				t.Errorf("upstream got Host %q", reqs[0].Host)
			}
			tc.check(t, reqs[0])
			if strings.Contains(flatten(reqs[0].Header)+reqs[0].Target, otherValue) {
				t.Errorf("the unbound value reached the upstream")
			}
		})
	}
}

func percentAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteString("%" + strings.ToUpper(hex2(s[i])))
	}
	return b.String()
}

func hex2(c byte) string {
	const h = "0123456789abcdef"
	return string([]byte{h[c>>4], h[c&15]})
}

func flatten(h http.Header) string {
	var b strings.Builder
	for k, vs := range h {
		b.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
	}
	return b.String()
}

func TestServeTLSRefusesAnotherHostOnTheSameConnection(t *testing.T) {
	s := newTestSecrets(t, Options{})
	ph := placeholderOf(t, s, "TOKEN")
	tests := []struct {
		name   string
		second string
		want   string
	}{
		{"another Host", "GET / HTTP/1.1\r\nHost: other.test\r\nAuthorization: Bearer " + ph + "\r\n\r\n", "421"},
		{"absolute URI to another host", "GET https://other.test/ HTTP/1.1\r\nHost: api.test\r\n\r\n", "421"},
		{"an IP literal", "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "421"},
		{"no Host", "GET / HTTP/1.0\r\n\r\n", "400"},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: api.test\r\nHost: other.test\r\n\r\n", "400"},
		{"the same host with a port, in capitals, with a dot", "GET /2 HTTP/1.1\r\nHost: API.Test.:443\r\n\r\n", "200"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, "api.test")
			h := startHarness(t, s, "api.test", u.addr())
			c, err := h.dialTLS(t, s, "api.test")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: api.test\r\n\r\n")
			if got := readResponses(t, br, "GET"); !strings.HasPrefix(got[0], "200") {
				t.Fatalf("first request: %q", got)
			}
			io.WriteString(c, tc.second)
			got := readResponses(t, br, "GET")
			if !strings.HasPrefix(got[0], tc.want) {
				t.Fatalf("second request: %q, want %s", got, tc.want)
			}
			want := 1
			if tc.want == "200" {
				want = 2
			}
			if n := len(u.requests()); n != want {
				t.Errorf("upstream got %d requests, want %d", n, want)
			}
			if tc.want != "200" {
				if _, err := br.ReadByte(); err == nil {
					t.Errorf("the connection went on after a refusal")
				}
				r := <-h.results
				var re *RefusedError
				if !errors.As(r.err, &re) {
					t.Errorf("ServeTLS returned %v, want a RefusedError", r.err)
				}
			}
		})
	}
}

func TestServeTLSPipelinedRequestsAreEachChecked(t *testing.T) {
	s := newTestSecrets(t, Options{})
	ph, other := placeholderOf(t, s, "TOKEN"), placeholderOf(t, s, "OTHER")
	u := newUpstream(t, "api.test")
	h := startHarness(t, s, "api.test", u.addr())
	c, err := h.dialTLS(t, s, "api.test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Five requests in one write: the fourth carries an unbound
	// placeholder, so it and the fifth never reach the upstream.
	io.WriteString(c, "GET /a HTTP/1.1\r\nHost: api.test\r\nX-Api-Key: "+ph+"\r\n\r\n"+
		"POST /b HTTP/1.1\r\nHost: api.test\r\nContent-Length: 5\r\n\r\nhello"+
		"HEAD /c HTTP/1.1\r\nHost: api.test\r\n\r\n"+
		"GET /d HTTP/1.1\r\nHost: api.test\r\nX-Api-Key: "+other+"\r\n\r\n"+
		"GET /e HTTP/1.1\r\nHost: api.test\r\n\r\n")
	got := readResponses(t, bufio.NewReader(c), "GET", "POST", "HEAD", "GET")
	want := []string{"200 GET /a body=0", "200 POST /b body=5", "200 ", "403 jail: secret OTHER: is not bound to (placeholder in the header X-Api-Key of a request to) api.test\n"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("response %d: %q, want %q", i+1, got[i], want[i])
		}
	}
	reqs := u.requests()
	if len(reqs) != 3 || reqs[0].Header.Get("X-Api-Key") != tokenValue || string(reqs[1].Body) != "hello" {
		t.Errorf("upstream got %+v", reqs)
	}
	for _, r := range reqs {
		if r.RemoteAddr != reqs[0].RemoteAddr {
			t.Errorf("the upstream connection was not kept: %s then %s", reqs[0].RemoteAddr, r.RemoteAddr)
		}
	}
}

func TestServeTLSStreamsBodies(t *testing.T) {
	s := newTestSecrets(t, Options{})
	ph := placeholderOf(t, s, "TOKEN")
	t.Run("chunked upload with a trailer", func(t *testing.T) {
		u := newUpstream(t, "api.test")
		h := startHarness(t, s, "api.test", u.addr())
		c, err := h.dialTLS(t, s, "api.test")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "PUT /up HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sig\r\n\r\n"+
			"5\r\nhello\r\n1;ext=1\r\n \r\n5\r\nworld\r\n0\r\nX-Sig: "+ph+"\r\n\r\n")
		if got := readResponses(t, bufio.NewReader(c), "PUT"); got[0] != "200 PUT /up body=11" {
			t.Fatalf("response %q", got)
		}
		r := u.requests()[0]
		if string(r.Body) != "hello world" || r.Trailer.Get("X-Sig") != tokenValue {
			t.Errorf("upstream got body %q trailer %q", r.Body, r.Trailer)
		}
	})
	t.Run("Expect 100-continue", func(t *testing.T) {
		u := newUpstream(t, "api.test")
		h := startHarness(t, s, "api.test", u.addr())
		c, err := h.dialTLS(t, s, "api.test")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		io.WriteString(c, "POST /x HTTP/1.1\r\nHost: api.test\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
		line, err := br.ReadString('\n')
		if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
			t.Fatalf("got %q, %v before the body", line, err)
		}
		if l, _ := br.ReadString('\n'); l != "\r\n" {
			t.Fatalf("got %q after 100", l)
		}
		io.WriteString(c, "abc")
		if got := readResponses(t, br, "POST"); got[0] != "200 POST /x body=3" {
			t.Fatalf("response %q", got)
		}
	})
	t.Run("a streamed response streams", func(t *testing.T) {
		u := newUpstream(t, "api.test")
		h := startHarness(t, s, "api.test", u.addr())
		resp, err := h.client(s).Get("https://api.test/stream")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		// The upstream holds the second part until the first arrived.
		if l, err := br.ReadString('\n'); l != "first\n" {
			t.Fatalf("got %q, %v", l, err)
		}
		close(u.release)
		if rest, _ := io.ReadAll(br); string(rest) != "second\n" {
			t.Fatalf("got %q", rest)
		}
	})
	t.Run("a large download and the byte counts", func(t *testing.T) {
		u := newUpstream(t, "api.test")
		h := startHarness(t, s, "api.test", u.addr())
		cl := h.client(s)
		resp, err := cl.Get("https://api.test/big")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n != 1<<20 {
			t.Fatalf("got %d bytes", n)
		}
		cl.CloseIdleConnections()
		r := <-h.results
		if r.err != nil || r.down < 1<<20 || r.up == 0 || r.up > 4096 {
			t.Errorf("ServeTLS returned up %d down %d err %v", r.up, r.down, r.err)
		}
	})
}

func TestServeTLSRedactsAnEchoedValue(t *testing.T) {
	s := newTestSecrets(t, Options{})
	ph := placeholderOf(t, s, "TOKEN")
	u := newUpstream(t, "api.test")
	h := startHarness(t, s, "api.test", u.addr())
	req, _ := http.NewRequest("GET", "https://api.test/echo", nil)
	req.Header.Set("Authorization", "Bearer "+ph)
	req.Header.Set("X-Api-Key", ph)
	resp, err := h.client(s).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Echo-Authorization"); got != "Bearer "+ph {
		t.Errorf("echoed Authorization came back as %q", got)
	}
	if got := resp.Header.Get("X-Echo-Api-Key"); got != ph {
		t.Errorf("echoed X-Api-Key came back as %q", got)
	}
}

func TestServeTLSUpgrades(t *testing.T) {
	s := newTestSecrets(t, Options{})
	ph := placeholderOf(t, s, "TOKEN")
	t.Run("WebSocket passes through after 101", func(t *testing.T) {
		u := newUpstream(t, "api.test")
		h := startHarness(t, s, "api.test", u.addr())
		c, err := h.dialTLS(t, s, "api.test")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: api.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nAuthorization: Bearer "+ph+"\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 101 {
			t.Fatalf("got %v, %v", resp, err)
		}
		io.WriteString(c, "ping\n")
		if l, err := br.ReadString('\n'); l != "echo:ping\n" {
			t.Fatalf("got %q, %v", l, err)
		}
		if got := u.requests()[0].Header.Get("Authorization"); got != "Bearer "+tokenValue {
			t.Errorf("upgrade request's Authorization %q", got)
		}
	})
	t.Run("h2c is removed", func(t *testing.T) {
		u := newUpstream(t, "api.test")
		h := startHarness(t, s, "api.test", u.addr())
		c, err := h.dialTLS(t, s, "api.test")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: api.test\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nConnection: Upgrade, HTTP2-Settings, keep-alive\r\n\r\n")
		if got := readResponses(t, bufio.NewReader(c), "GET"); got[0] != "200 GET / body=0" {
			t.Fatalf("got %q", got)
		}
		r := u.requests()[0]
		if r.Header.Get("Upgrade") != "" || r.Header.Get("Http2-Settings") != "" || r.Header.Get("Connection") != "keep-alive" {
			t.Errorf("upstream got %q", r.Header)
		}
	})
}

func TestServeTLSRefusesWhatItCannotRead(t *testing.T) {
	s := newTestSecrets(t, Options{MaxHeaderBytes: 1024})
	tests := []struct {
		name    string
		request string
		want    string
	}{
		{"HTTP/2 prior knowledge", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "505"},
		{"a header over the bound", "GET / HTTP/1.1\r\nHost: api.test\r\nX-Big: " + strings.Repeat("a", 8000) + "\r\n\r\n", "431"},
		{"CONNECT", "CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n", "405"},
		{"garbage", "\x16\x03\x01 hello\r\n\r\n", "400"},
		{"both Content-Length and chunked, smuggling", "POST / HTTP/1.1\r\nHost: api.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked, identity\r\n\r\n", "400"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, "api.test")
			h := startHarness(t, s, "api.test", u.addr())
			c, err := h.dialTLS(t, s, "api.test")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, tc.request)
			line, _ := bufio.NewReader(c).ReadString('\n')
			if !strings.HasPrefix(line, "HTTP/1.1 "+tc.want) {
				t.Errorf("got %q, want %s", line, tc.want)
			}
			if n := len(u.requests()); n != 0 {
				t.Errorf("upstream got %d requests", n)
			}
		})
	}
}

func TestServeTLSHandshake(t *testing.T) {
	s := newTestSecrets(t, Options{})
	tests := []struct {
		name   string
		sni    string
		alpn   []string
		wantOK bool
	}{
		{"the bound host", "api.test", nil, true},
		{"no ALPN", "api.test", []string{}, true},
		{"h2 and http/1.1 get http/1.1", "api.test", []string{"h2", "http/1.1"}, true},
		{"h2 only is refused", "api.test", []string{"h2"}, false},
		{"another server name is refused", "other.test", nil, false},
		{"an unbound name is refused", "evil.test", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, "api.test")
			h := startHarness(t, s, "api.test", u.addr())
			c, err := h.dialTLS(t, s, tc.sni, tc.alpn...)
			if tc.wantOK != (err == nil) {
				t.Fatalf("handshake: %v, want ok %v", err, tc.wantOK)
			}
			if err != nil {
				if r := <-h.results; r.err == nil {
					t.Errorf("ServeTLS returned no error")
				}
				return
			}
			defer c.Close()
			if p := c.ConnectionState().NegotiatedProtocol; p != "" && p != "http/1.1" {
				t.Errorf("negotiated %q", p)
			}
		})
	}
}

func TestServeTLSVerifiesTheUpstream(t *testing.T) {
	s := newTestSecrets(t, Options{})
	ph := placeholderOf(t, s, "TOKEN")
	stranger, err := newTestCA("not trusted")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, u *upstream)
	}{
		{"certificate for another name", func(t *testing.T, u *upstream) {}},
		{"certificate from an untrusted CA", func(t *testing.T, u *upstream) {
			u.srv.TLS.Certificates = []tls.Certificate{signLeaf(t, stranger.cert, stranger.key, "", "api.test")}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			names := []string{"elsewhere.test"}
			u := newUpstreamDeferred(t, names...)
			tc.setup(t, u)
			u.srv.StartTLS()
			h := startHarness(t, s, "api.test", u.addr())
			req, _ := http.NewRequest("GET", "https://api.test/", nil)
			req.Header.Set("Authorization", "Bearer "+ph)
			resp, err := h.client(s).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadGateway {
				t.Errorf("status %d, want 502", resp.StatusCode)
			}
			if len(u.requests()) != 0 {
				t.Errorf("the value went to an unverified host")
			}
		})
	}
}

// newUpstreamDeferred is newUpstream that leaves the start to the caller.
func newUpstreamDeferred(t *testing.T, names ...string) *upstream {
	u := &upstream{release: make(chan struct{})}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	u.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{signLeaf(t, upstreamRoots.cert, upstreamRoots.key, "", names...)}}
	t.Cleanup(u.srv.Close)
	return u
}

// TestServeTLSRedactsAnEchoedValueInEveryResponseHead: a value a bound
// host echoes comes back as its placeholder in the head of an
// informational (103) or switching (101) response too, not only in the
// final one's.
func TestServeTLSRedactsAnEchoedValueInEveryResponseHead(t *testing.T) {
	s := newTestSecrets(t, Options{})
	ph := placeholderOf(t, s, "TOKEN")
	for _, tt := range []struct{ path, extra string }{
		{"/early-echo", ""},
		{"/ws-echo", "Upgrade: websocket\r\nConnection: Upgrade\r\n"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			u := newUpstream(t, "api.test")
			h := startHarness(t, s, "api.test", u.addr())
			c, err := h.dialTLS(t, s, "api.test")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, "GET "+tt.path+" HTTP/1.1\r\nHost: api.test\r\n"+tt.extra+"Authorization: Bearer "+ph+"\r\n\r\n")
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			var head strings.Builder
			for {
				line, err := br.ReadString('\n')
				head.WriteString(line)
				if err != nil || line == "\r\n" && strings.Contains(head.String(), "X-Echo") {
					break
				}
			}
			if strings.Contains(head.String(), tokenValue) {
				t.Fatalf("the value came back to the sandbox: %q", head.String())
			}
			if !strings.Contains(head.String(), "Bearer "+ph) {
				t.Fatalf("no echo in %q", head.String())
			}
		})
	}
}

// TestServeTLSRefusesTrace: TRACE to a bound host would come back with
// the request as the host received it, value included, in the body.
func TestServeTLSRefusesTrace(t *testing.T) {
	s := newTestSecrets(t, Options{})
	ph := placeholderOf(t, s, "TOKEN")
	u := newUpstream(t, "api.test")
	h := startHarness(t, s, "api.test", u.addr())
	c, err := h.dialTLS(t, s, "api.test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "TRACE / HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer "+ph+"\r\n\r\n")
	got := readResponses(t, bufio.NewReader(c), "TRACE")[0]
	if strings.Contains(got, tokenValue) || !strings.HasPrefix(got, "405 ") {
		t.Fatalf("TRACE answered %q, want 405", got)
	}
	if len(u.requests()) != 0 {
		t.Fatalf("the host got %d requests", len(u.requests()))
	}
}

// TestServeTLSRecordsEveryRequest: record is called once per request
// read, forwarded or refused, with its method and target as sent.
func TestServeTLSRecordsEveryRequest(t *testing.T) {
	s := newTestSecrets(t, Options{})
	ph := placeholderOf(t, s, "TOKEN")
	u := newUpstream(t, "api.test")
	h := startHarness(t, s, "api.test", u.addr())
	c, err := h.dialTLS(t, s, "api.test")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "GET /one HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer "+ph+"\r\n\r\n"+
		"POST /two HTTP/1.1\r\nHost: other.test\r\nContent-Length: 0\r\n\r\n")
	readResponses(t, bufio.NewReader(c), "GET", "POST")
	c.Close()
	<-h.results
	recs := h.requestRecords()
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2: %+v", len(recs), recs)
	}
	if r := recs[0]; r.Method != "GET" || r.Target != "/one" || r.Refused != nil || r.Err != nil || r.Up == 0 || r.Down == 0 {
		t.Errorf("first record %+v", r)
	}
	if r := recs[1]; r.Method != "POST" || r.Target != "/two" || r.Refused == nil || r.Refused.Status != http.StatusMisdirectedRequest {
		t.Errorf("second record %+v", r)
	}
	for _, r := range recs {
		if strings.Contains(fmt.Sprint(r), tokenValue) {
			t.Errorf("a record holds the value: %+v", r)
		}
	}
}
