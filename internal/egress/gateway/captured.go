package gateway

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/jail-sandbox/jail/internal/egress/rules"
)

// capturedName is the name a captured connection's local address stands
// for; false (the connection refused and closed) when it stands for none.
func (c *conn) capturedName(port int) (string, bool) {
	local := c.ev.Local
	var name string
	ok := false
	if c.g.cfg.NameOf != nil && local.IsValid() {
		name, ok = c.g.cfg.NameOf(local.Addr())
	}
	if ok {
		canonical, err := canonicalName(name)
		if err != nil {
			ok = false
		}
		name = canonical
	}
	if !ok {
		c.target(local.Addr().String(), port, dialed{})
		c.deny("", fmt.Sprintf("%s is no address the sandbox's DNS gave a name", local.Addr()))
		c.client.Close()
		return "", false
	}
	c.target(name, port, dialed{})
	return name, true
}

// serveCapturedHTTP serves a connection to port 80 of an address the
// sandbox's DNS gave a name: every request must name that name.
func (g *Gateway) serveCapturedHTTP(nc net.Conn) {
	c := g.newConn(nc, ViaHTTP)
	defer c.finish()
	name, ok := c.capturedName(80)
	if !ok {
		return
	}
	s := &httpSession{c: c, via: ViaHTTP, fixedHost: name, fixedPort: 80}
	s.serve(true)
}

// serveCapturedTLS serves a connection to port 443 of an address the
// sandbox's DNS gave a name: its ClientHello must name that name (or
// none), and it is relayed to the name's port 443 or handed to the
// Interceptor.
func (g *Gateway) serveCapturedTLS(nc net.Conn) {
	c := g.newConn(nc, ViaTLS)
	defer c.finish()
	name, ok := c.capturedName(443)
	if !ok {
		return
	}
	if err := c.setDeadline(g.headTimeout); err != nil {
		return
	}
	first, err := c.br.Peek(1)
	if err != nil {
		if isTimeout(err) {
			c.deny("", "no ClientHello in time")
		} else {
			c.deny("", "closed before a ClientHello")
		}
		c.client.Close()
		return
	}
	if first[0] != recordHandshake {
		c.deny("", "not TLS on a captured port 443")
		if looksLikeHTTP(c.br) {
			c.refuse(http.StatusBadRequest, "plain HTTP sent to port 443")
			return
		}
		c.client.Close()
		return
	}
	d := g.rules.Decide(name, 443)
	if !d.Allowed {
		// The DNS gave the name an address, so some port of it is allowed,
		// but not this one.
		c.deny(d.Rule, d.Reason)
		c.client.Close()
		return
	}
	raw, ok := c.checkHello(name, d.Rule)
	if !ok {
		return
	}
	if ic := g.cfg.Interceptor; ic != nil && ic.Intercepts(name) {
		c.intercept(name, 443, raw, nil)
		return
	}
	up, err := g.dialChecked(g.ctx, name, 443)
	c.target(name, 443, up)
	if err != nil {
		var r *refusal
		if errors.As(err, &r) {
			c.deny(r.rule, r.reason)
		} else {
			c.deny(up.rule, "upstream: "+oneLine(err.Error()))
		}
		c.client.Close()
		return
	}
	defer g.untrack(up.conn)
	if err := c.setDeadline(0); err != nil {
		return
	}
	if _, err := up.conn.Write(raw); err != nil {
		c.ended("upstream: " + oneLine(err.Error()))
		return
	}
	c.ended("TLS relayed")
	c.splice(up.conn, nil)
}

// looksLikeHTTP reports whether the buffered bytes begin like a request
// line (letters, then a space).
func looksLikeHTTP(br interface{ Peek(int) ([]byte, error) }) bool {
	b, _ := br.Peek(8)
	for i, x := range b {
		if x == ' ' {
			return i > 0
		}
		if x < 'A' || x > 'Z' {
			return false
		}
	}
	return false
}

// refuseOverLimit tells a connection over Limits.MaxConns so, as its
// protocol can (proxy: 503; SOCKS: general failure; captured: closed), and
// records it.
func (g *Gateway) refuseOverLimit(nc net.Conn, via string) {
	c := g.newConn(nc, via)
	reason := fmt.Sprintf("more than %d connections at once", g.maxConns)
	c.deny("", reason)
	defer c.finish()
	_ = nc.SetDeadline(time.Now().Add(time.Second))
	switch via {
	case ViaProxy:
		c.refuse(http.StatusServiceUnavailable, "too many connections: "+reason)
	case ViaSOCKS:
		var hdr [2]byte
		if _, err := io.ReadFull(c.br, hdr[:]); err != nil || hdr[0] != socksVersion {
			return
		}
		if _, err := io.CopyN(io.Discard, c.br, int64(hdr[1])); err != nil {
			return
		}
		if _, err := nc.Write([]byte{socksVersion, socksNoAuth}); err != nil {
			return
		}
		c.socksReply(socksFailure)
		c.lingerClose()
	default:
		nc.Close()
	}
}

// canonicalName is a name from NameOf in canonical form; an IP literal is
// not a name.
func canonicalName(name string) (string, error) {
	h, err := rules.CanonicalHost(name)
	if err != nil {
		return "", err
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return "", fmt.Errorf("%s is an address, not a name", h)
	}
	return h, nil
}
