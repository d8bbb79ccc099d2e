package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// notTCP hides that an upstream connection is TCP (it still half-closes),
// so the relay takes the path through user space.
type notTCP struct {
	net.Conn
}

func (c notTCP) CloseWrite() error { return closeWrite(c.Conn) }

// startEcho serves a TCP echo on loopback: what it reads it writes back,
// and it closes once the client has half-closed.
func startEcho(t *testing.T) net.Listener {
	t.Helper()
	l := listen(t)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return l
}

// TestRelayedTunnel: a tunnel relays every byte both ways, in order, and
// half-closes as the ends do, whether the bytes are spliced in the kernel
// (TCP both sides) or go through user space (an upstream that is not a
// *net.TCPConn); its event counts the bytes exactly; a byte limit ends it
// within the limit, a rate lets it finish.
func TestRelayedTunnel(t *testing.T) {
	const size = 4 << 20
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i*7 + i>>11) // no byte pattern a short copy would hide
	}
	payload[0] = 0 // neither TLS nor HTTP: relayed as it is
	userSpace := func(c *Config) {
		dial := c.Dial
		c.Dial = func(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, error) {
			conn, err := dial(ctx, network, ap)
			if err != nil {
				return nil, err
			}
			return notTCP{conn}, nil
		}
	}
	byteLimit := func(c *Config) { c.Limits.MaxBytes = 1 << 20 }
	rate := func(c *Config) { c.Limits.Rate = 32 << 20 }
	for _, tt := range []struct {
		name    string
		opts    []envOption
		limited bool
	}{
		{"spliced", nil, false},
		{"user space", []envOption{userSpace}, false},
		{"spliced, byte limit", []envOption{byteLimit}, true},
		{"user space, byte limit", []envOption{userSpace, byteLimit}, true},
		{"spliced, rate", []envOption{rate}, false},
		{"user space, rate", []envOption{userSpace, rate}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			echo := startEcho(t)
			e := newEnv(t, "allowed.test:7,127.0.0.1:7", tt.opts...)
			e.dialMu.Lock()
			e.portMap[7] = addrOf(echo)
			e.dialMu.Unlock()
			c, br, status := connectTunnel(t, e.ls.Proxy, "allowed.test:7", "")
			if status != 200 {
				t.Fatalf("CONNECT: %d", status)
			}
			wrote := make(chan error, 1)
			go func() {
				_, err := c.Write(payload)
				if err == nil {
					err = c.(*net.TCPConn).CloseWrite()
				}
				wrote <- err
			}()
			got, rerr := io.ReadAll(br)
			werr := <-wrote
			evs := e.connEvents(ViaProxy)
			if len(evs) != 1 {
				t.Fatalf("events %+v", evs)
			}
			ev := evs[0]
			if tt.limited {
				if len(got) >= size || ev.BytesUp+ev.BytesDown > 1<<20 || !strings.Contains(ev.Reason, "byte limit") {
					t.Fatalf("through a 1 MiB limit: %d bytes back (%v, %v), event %+v", len(got), rerr, werr, ev)
				}
				if !bytes.Equal(got, payload[:len(got)]) {
					t.Fatalf("the bytes back differ from those sent")
				}
				return
			}
			if rerr != nil || werr != nil || !bytes.Equal(got, payload) {
				t.Fatalf("%d bytes back of %d (read: %v, write: %v), equal: %v", len(got), size, rerr, werr, bytes.Equal(got, payload))
			}
			request := int64(len("CONNECT allowed.test:7 HTTP/1.1\r\nHost: allowed.test:7\r\n\r\n"))
			answer := int64(len("HTTP/1.1 200 Connection established\r\n\r\n"))
			if ev.Verdict != Allowed || ev.BytesUp != request+size || ev.BytesDown != answer+size {
				t.Fatalf("event %+v, want %d bytes up and %d down", ev, request+size, answer+size)
			}
		})
	}
}

// TestRelayLimitLeavesOthersTheirShare: an idle spliced tunnel reserves
// nothing of the byte budget, so another connection may use all of it.
func TestRelayLimitLeavesOthersTheirShare(t *testing.T) {
	echo := startEcho(t)
	e := newEnv(t, "allowed.test:7,127.0.0.1:7", func(c *Config) { c.Limits.MaxBytes = 512 << 10 })
	e.dialMu.Lock()
	e.portMap[7] = addrOf(echo)
	e.dialMu.Unlock()
	var conns []net.Conn
	for range 8 {
		c, br, status := connectTunnel(t, e.ls.Proxy, "allowed.test:7", "")
		if status != 200 {
			t.Fatalf("CONNECT: %d", status)
		}
		// A byte each way, so that the tunnel is being relayed.
		c.Write([]byte{0})
		if _, err := br.ReadByte(); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	c, br, status := connectTunnel(t, e.ls.Proxy, "allowed.test:7", "")
	if status != 200 {
		t.Fatalf("CONNECT: %d", status)
	}
	const size = 128 << 10
	go func() {
		c.Write(make([]byte, size))
		c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(br)
	if len(got) != size || (err != nil && !errors.Is(err, io.EOF)) {
		t.Fatalf("%d bytes of %d beside idle tunnels: %v", len(got), size, err)
	}
	for _, c := range conns {
		c.Close()
	}
}
