package gateway

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// conn is one client connection being served, and its connection Event.
type conn struct {
	g      *Gateway
	client *meteredConn
	br     *bufio.Reader // reads client; MaxHead so a whole head fits
	start  time.Time

	mu sync.Mutex
	ev Event // the connection's Event, filled in as it goes
}

func (g *Gateway) newConn(c net.Conn, via string) *conn {
	m := g.meter(c)
	cn := &conn{g: g, client: m, br: bufio.NewReaderSize(m, MaxHead), start: time.Now()}
	cn.ev = Event{Time: cn.start, Via: via, Verdict: Allowed}
	cn.ev.Client, _ = addrPort(c.RemoteAddr())
	cn.ev.Local, _ = addrPort(c.LocalAddr())
	return cn
}

// target records what the connection was decided for.
func (c *conn) target(host string, port int, d dialed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ev.Host, c.ev.Port = host, port
	if d.addr.IsValid() {
		c.ev.Address = d.addr
	}
	if d.rule != "" {
		c.ev.Rule = d.rule
	}
}

// deny marks the connection denied, for reason, unless it was already
// (the first reason is the one that counts).
func (c *conn) deny(rule, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ev.Verdict == Denied {
		return
	}
	c.ev.Verdict, c.ev.Reason = Denied, reason
	if rule != "" {
		c.ev.Rule = rule
	}
}

// ended records why an allowed connection ended, unless a reason is
// already there.
func (c *conn) ended(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ev.Reason == "" {
		c.ev.Reason = reason
	}
}

// finish emits the connection's Event.
func (c *conn) finish() {
	c.mu.Lock()
	ev := c.ev
	c.mu.Unlock()
	if c.client.limitHit.Load() {
		ev.Reason = errByteLimit.Error()
		if ev.Verdict == Allowed {
			ev.Reason = "ended: " + ev.Reason
		}
	}
	if ev.Reason == "" {
		ev.Reason = "closed"
	}
	ev.BytesUp, ev.BytesDown = c.client.up.Load(), c.client.down.Load()
	ev.Duration = time.Since(c.start)
	c.g.emit(ev)
}

// setDeadline sets the client's read deadline d from now (0: none).
func (c *conn) setDeadline(d time.Duration) error {
	var t time.Time
	if d > 0 {
		t = time.Now().Add(d)
	}
	return c.client.SetReadDeadline(t)
}

// lingerClose half-closes the client, reads and drops what it still sends
// for a moment, so that a response written before is not lost to a reset,
// and closes it.
func (c *conn) lingerClose() {
	_ = c.client.CloseWrite()
	_ = c.client.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.CopyN(io.Discard, c.client.Conn, 256<<10)
	c.client.Close()
}

// isTimeout reports whether err is a deadline passing.
func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// splice relays client ↔ upstream until both directions end: what one
// side half-closes is half-closed on the other; an error either way ends
// both. What c.br holds of the client goes first, and so does what upBr
// (may be nil) holds of upstream; the rest is relayed by relay, spliced
// in the kernel when it can be.
func (c *conn) splice(up net.Conn, upBr *bufio.Reader) {
	errc := make(chan error, 1)
	// This goroutine always ends before splice returns: an error or
	// Close closes both connections.
	go func() {
		err := c.relay(up, c.client, c.br)
		if err == nil {
			err = closeWrite(up)
		} else {
			up.Close()
			c.client.Close()
		}
		errc <- err
	}()
	err := c.relay(c.client, up, upBr)
	if err == nil {
		_ = c.client.CloseWrite()
	} else {
		up.Close()
		c.client.Close()
	}
	<-errc
}
