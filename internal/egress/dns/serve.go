package dns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// Serve answers the queries arriving on conn (UDP) until Close, then
// returns ErrClosed; any other error reading conn ends it too, returned
// wrapped. The Server owns conn from the call on: Close closes it.
func (s *Server) Serve(conn net.PacketConn) error {
	if !s.track(conn, conn.Close) {
		conn.Close()
		return ErrClosed
	}
	defer s.untrack(conn)
	// One byte more than a query may have, to see that a datagram had more.
	buf := make([]byte, maxUDPQuery+1)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			if s.isClosed() {
				return ErrClosed
			}
			return fmt.Errorf("dns: reading queries on %s: %w", conn.LocalAddr(), err)
		}
		out, q := s.respond(buf[:n], "udp")
		q.Client = addrPort(from)
		s.report(q)
		if out != nil {
			// A reply lost is the client's to ask again, as over any UDP.
			_, _ = conn.WriteTo(out, from)
		}
	}
}

// ServeTCP answers the queries arriving on the connections l accepts,
// each connection in its own goroutine, at most MaxTCPConns at once over
// all listeners (one more is closed at once), until Close, then returns
// ErrClosed. The Server owns l from the call on: Close closes it and every
// connection it accepted.
func (s *Server) ServeTCP(l net.Listener) error {
	if !s.track(l, l.Close) {
		l.Close()
		return ErrClosed
	}
	defer s.untrack(l)
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrClosed
			}
			if !transientAcceptError(err) {
				return fmt.Errorf("dns: accepting on %s: %w", l.Addr(), err)
			}
			// Out of descriptors or memory for now: wait a little, as
			// net/http does, rather than spin or stop serving.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-s.done:
			}
			continue
		}
		backoff = 0
		if !s.trackTCP(c) {
			c.Close()
			continue
		}
		go s.serveConn(c)
	}
}

// transientAcceptError reports whether Accept may succeed when tried again.
func transientAcceptError(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// serveConn answers the queries of one TCP connection (RFC 7766: each
// message after its two-byte length, several in a row), one at a time,
// until the client closes it, idles, or sends what is not a query.
func (s *Server) serveConn(c net.Conn) {
	defer s.untrackTCP(c)
	defer c.Close()
	client := addrPort(c.RemoteAddr())
	var length [2]byte
	for {
		if c.SetReadDeadline(time.Now().Add(tcpIdleTimeout)) != nil {
			return
		}
		if _, err := io.ReadFull(c, length[:]); err != nil {
			return
		}
		msg := make([]byte, binary.BigEndian.Uint16(length[:]))
		var out []byte
		var q Query
		if _, err := io.ReadFull(c, msg); err != nil {
			q = Query{Time: time.Now(), Network: "tcp", Verdict: Dropped, Reason: "the connection ended inside a message"}
		} else {
			out, q = s.respond(msg, "tcp")
		}
		q.Client = client
		s.report(q)
		if out == nil {
			// Not a query (or cut off): what follows cannot be trusted
			// to be framed as messages.
			return
		}
		framed := make([]byte, 2+len(out))
		binary.BigEndian.PutUint16(framed, uint16(len(out)))
		copy(framed[2:], out)
		if c.SetWriteDeadline(time.Now().Add(tcpIdleTimeout)) != nil {
			return
		}
		if _, err := c.Write(framed); err != nil {
			return
		}
	}
}

// Close stops every Serve and ServeTCP, closes their sockets and the
// connections accepted, and returns when all of them have returned. The
// names given keep their addresses: Lookup still answers.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	closers := make([]func() error, 0, len(s.closers))
	for _, closeFn := range s.closers {
		closers = append(closers, closeFn)
	}
	s.mu.Unlock()
	for _, closeFn := range closers {
		_ = closeFn() // ours to close; an error closing changes nothing
	}
	s.wg.Wait()
	return nil
}

// track registers a socket a Serve loop reads, unless the Server is closed.
func (s *Server) track(key any, closeFn func() error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.closers[key] = closeFn
	s.wg.Add(1)
	return true
}

// untrack is the end of what track began.
func (s *Server) untrack(key any) {
	s.mu.Lock()
	delete(s.closers, key)
	s.mu.Unlock()
	s.wg.Done()
}

// trackTCP registers an accepted connection, unless the Server is closed
// or serves MaxTCPConns already.
func (s *Server) trackTCP(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.tcpConns >= s.maxTCPConns {
		return false
	}
	s.tcpConns++
	s.closers[c] = c.Close
	s.wg.Add(1)
	return true
}

// untrackTCP is the end of what trackTCP began.
func (s *Server) untrackTCP(c net.Conn) {
	s.mu.Lock()
	s.tcpConns--
	s.mu.Unlock()
	s.untrack(c)
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// addrPort is a socket address as the record keeps it.
func addrPort(a net.Addr) netip.AddrPort {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.AddrPort()
	case *net.TCPAddr:
		return a.AddrPort()
	}
	return netip.AddrPort{}
}
