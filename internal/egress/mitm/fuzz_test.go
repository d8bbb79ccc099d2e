package mitm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// FuzzRewrite checks, on any header and target, that Rewrite never
// panics, never puts a value where its secret is not bound, and never
// shows a value in an error.
func FuzzRewrite(f *testing.F) {
	s := newTestSecrets(f, Options{PlainHTTP: true})
	ph, other := placeholderOf(f, s, "TOKEN"), placeholderOf(f, s, "OTHER")
	f.Add("api.test", "/", "Authorization", "Bearer "+ph)
	f.Add("api.test", "/?q="+other, "X-A", "x")
	f.Add("other.test", "/", "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(ph+":"+other)))
	f.Add("elsewhere.test", "/%"+ph, "Proxy-Authorization", "basic "+base64.RawURLEncoding.EncodeToString([]byte("u:"+ph)))
	f.Add("api.test", "%%%", "X-"+ph, "%25"+percentAll(ph))
	f.Fuzz(func(t *testing.T, host, target, name, value string) {
		// Let the fuzzer spell placeholders with short marks.
		value = strings.NewReplacer("@T", ph, "@O", other).Replace(value)
		target = strings.NewReplacer("@T", ph, "@O", other).Replace(target)
		h := http.Header{name: {value}}
		err := s.RewriteRequest(host, target, h)
		if err != nil {
			if strings.Contains(err.Error(), tokenValue) || strings.Contains(err.Error(), otherValue) {
				t.Fatalf("error shows a value: %v", err)
			}
			return
		}
		out := flatten(h)
		if c, ok := basicCredentials(name, h.Get(name)); ok {
			out += c
		}
		if host != "api.test" && strings.Contains(out, tokenValue) && !strings.Contains(value, tokenValue) {
			t.Fatalf("TOKEN's value put into a request to %q: %q", host, out)
		}
		if host != "other.test" && strings.Contains(out, otherValue) && !strings.Contains(value, otherValue) {
			t.Fatalf("OTHER's value put into a request to %q: %q", host, out)
		}
	})
}

// FuzzServeConn feeds any bytes to an intercepted connection (after TLS)
// with an upstream that answers every request: nothing panics or hangs,
// the value of the secret not bound to the host never goes upstream, and
// no value comes back to the sandbox.
func FuzzServeConn(f *testing.F) {
	s := newTestSecrets(f, Options{MaxHeaderBytes: 4096})
	ph, other := placeholderOf(f, s, "TOKEN"), placeholderOf(f, s, "OTHER")
	f.Add([]byte("GET / HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer @T\r\n\r\n"))
	f.Add([]byte("POST / HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\nTrailer: X-S\r\n\r\n3\r\nabc\r\n0\r\nX-S: @O\r\n\r\nGET / HTTP/1.1\r\nHost: other.test\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: api.test\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\nhello"))
	f.Add([]byte("POST / HTTP/1.1\r\nHost: api.test:443\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\nabcHEAD / HTTP/1.0\r\nHost: API.TEST\r\nX: @O\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		in = bytes.ReplaceAll(bytes.ReplaceAll(in, []byte("@T"), []byte(ph)), []byte("@O"), []byte(other))
		clientSide, proxySide := net.Pipe()
		var upstreamGot bytes.Buffer
		var mu sync.Mutex
		connect := func(ctx context.Context) (io.ReadWriteCloser, net.Conn, error) {
			a, b := net.Pipe()
			go fakeUpstream(b, &upstreamGot, &mu)
			return a, a, nil
		}
		p := s.newProxy("api.test", proxySide, proxySide, connect)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = p.serve(context.Background())
			p.closeUpstream()
			proxySide.Close()
		}()
		var back bytes.Buffer
		readDone := make(chan struct{})
		go func() { io.Copy(&back, clientSide); close(readDone) }()
		clientSide.Write(in)
		clientSide.Close()
		<-done
		<-readDone
		mu.Lock()
		defer mu.Unlock()
		if bytes.Contains(upstreamGot.Bytes(), []byte(otherValue)) {
			t.Fatalf("OTHER's value went to api.test")
		}
		if bytes.Contains(back.Bytes(), []byte(tokenValue)) || bytes.Contains(back.Bytes(), []byte(otherValue)) {
			t.Fatalf("a value came back: %q", back.Bytes())
		}
	})
}

// fakeUpstream answers every request it reads with an empty 200 (101 to
// an upgrade, then echoes), recording the bytes it read.
func fakeUpstream(c net.Conn, got *bytes.Buffer, mu *sync.Mutex) {
	defer c.Close()
	br := bufio.NewReader(io.TeeReader(c, lockedWriter{got, mu}))
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
		if req.Header.Get("Upgrade") != "" {
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			io.Copy(c, br)
			return
		}
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
			return
		}
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
