package gateway

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"syscall"

	"github.com/jail-sandbox/jail/internal/egress/rules"
)

// SOCKS5 (RFC 1928) constants.
const (
	socksVersion     = 5
	socksNoAuth      = 0
	socksNoMethod    = 0xff
	socksCmdConnect  = 1
	socksAtypIPv4    = 1
	socksAtypDomain  = 3
	socksAtypIPv6    = 4
	socksOK          = 0
	socksFailure     = 1 // general SOCKS server failure
	socksNotAllowed  = 2 // connection not allowed by ruleset
	socksNetUnreach  = 3
	socksHostUnreach = 4
	socksRefused     = 5
	socksCmdNotSupp  = 7
	socksAtypNotSupp = 8
)

// serveSOCKS serves one connection of the SOCKS5 listener.
func (g *Gateway) serveSOCKS(nc net.Conn) {
	c := g.newConn(nc, ViaSOCKS)
	defer c.finish()
	if err := c.setDeadline(g.headTimeout); err != nil {
		return
	}
	host, port, reply, reason := c.socksHandshake()
	if reason != "" {
		c.deny("", reason)
		if reply != 0 {
			c.socksReply(reply)
		}
		c.client.Close()
		return
	}
	c.target(host, port, dialed{})
	up, err := g.dialChecked(g.ctx, host, port)
	c.target(host, port, up)
	if err != nil {
		var r *refusal
		if errors.As(err, &r) {
			c.deny(r.rule, r.reason)
			c.socksReply(socksNotAllowed)
		} else {
			c.deny(up.rule, "upstream: "+oneLine(err.Error()))
			c.socksReply(socksDialFailure(err))
		}
		c.client.Close()
		return
	}
	defer g.untrack(up.conn)
	if !c.socksReply(socksOK) {
		c.ended("closed by the client")
		return
	}
	c.tunnel(host, port, up)
}

// socksHandshake reads the method negotiation and the request, and
// returns the canonical target, or the reply code and reason of a refusal
// (reply 0: close without one).
func (c *conn) socksHandshake() (host string, port int, reply byte, reason string) {
	var hdr [2]byte
	if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
		return "", 0, 0, "no SOCKS greeting: " + oneLine(err.Error())
	}
	if hdr[0] != socksVersion {
		return "", 0, 0, fmt.Sprintf("SOCKS version %d, not 5", hdr[0])
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(c.br, methods); err != nil {
		return "", 0, 0, "a short SOCKS greeting"
	}
	offered := false
	for _, m := range methods {
		offered = offered || m == socksNoAuth
	}
	if !offered {
		_, _ = c.client.Write([]byte{socksVersion, socksNoMethod})
		return "", 0, 0, "the SOCKS client offers no method without authentication"
	}
	if _, err := c.client.Write([]byte{socksVersion, socksNoAuth}); err != nil {
		return "", 0, 0, "closed by the client"
	}
	var req [4]byte
	if _, err := io.ReadFull(c.br, req[:]); err != nil {
		return "", 0, 0, "no SOCKS request: " + oneLine(err.Error())
	}
	if req[0] != socksVersion || req[2] != 0 {
		return "", 0, socksFailure, "a malformed SOCKS request"
	}
	var addrLen int
	switch req[3] {
	case socksAtypIPv4:
		addrLen = 4
	case socksAtypIPv6:
		addrLen = 16
	case socksAtypDomain:
		var l [1]byte
		if _, err := io.ReadFull(c.br, l[:]); err != nil {
			return "", 0, 0, "a short SOCKS request"
		}
		addrLen = int(l[0])
		if addrLen == 0 {
			return "", 0, socksFailure, "an empty SOCKS domain name"
		}
	default:
		return "", 0, socksAtypNotSupp, fmt.Sprintf("SOCKS address type %d", req[3])
	}
	buf := make([]byte, addrLen+2)
	if _, err := io.ReadFull(c.br, buf); err != nil {
		return "", 0, 0, "a short SOCKS request"
	}
	addr, portBytes := buf[:addrLen], buf[addrLen:]
	port = int(portBytes[0])<<8 | int(portBytes[1])
	switch req[3] {
	case socksAtypIPv4:
		host = netip.AddrFrom4([4]byte(addr)).String()
	case socksAtypIPv6:
		host = netip.AddrFrom16([16]byte(addr)).String()
	default:
		host = string(addr)
	}
	if req[1] != socksCmdConnect {
		// On record only as a canonical host: the domain is the
		// sandbox's bytes, and the denial goes to the user's terminal.
		if canon, err := rules.CanonicalHost(host); err == nil {
			c.target(canon, port, dialed{})
		}
		return "", 0, socksCmdNotSupp, fmt.Sprintf("SOCKS command %d: only CONNECT is served", req[1])
	}
	canon, err := rules.CanonicalHost(host)
	if err != nil {
		return "", 0, socksNotAllowed, "invalid host: " + oneLine(err.Error())
	}
	if port == 0 {
		return canon, 0, socksNotAllowed, "port 0"
	}
	if err := c.setDeadline(0); err != nil {
		return "", 0, 0, "closed by the client"
	}
	return canon, port, 0, ""
}

// socksReply sends a reply. The bound address is always 0.0.0.0:0: the
// host side's address is none of the sandbox's business.
func (c *conn) socksReply(code byte) bool {
	_, err := c.client.Write([]byte{socksVersion, code, 0, socksAtypIPv4, 0, 0, 0, 0, 0, 0})
	return err == nil
}

// socksDialFailure is the reply code for a dial that failed.
func socksDialFailure(err error) byte {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return socksRefused
	case errors.Is(err, syscall.ENETUNREACH):
		return socksNetUnreach
	case errors.Is(err, syscall.EHOSTUNREACH):
		return socksHostUnreach
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return socksHostUnreach
	}
	return socksFailure
}
