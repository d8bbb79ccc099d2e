package gateway

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// relayPipeSize is the size asked for the pipe of a spliced relay: the
// most one splice(2) moves. A larger pipe means fewer system calls per
// MiB; the kernel may refuse it (fs.pipe-max-size, or a user over
// fs.pipe-user-pages-soft), and the pipe then keeps the size it has.
const relayPipeSize = 256 << 10

// errNoPipe: no pipe could be made for a spliced relay; the bytes go
// through user space instead.
var errNoPipe = errors.New("no pipe for splice")

// relay moves what src sends to dst until src ends (nil: dst is the
// caller's to half-close) or an error. What srcBuf (a reader of src, may
// be nil) holds already goes first, through dst. Then, when both are TCP
// connections, splice(2) moves the bytes in the kernel, through a pipe:
// none is copied into the gateway. Else, or with no pipe to be had, they
// go through user space.
//
// The client's side is metered as always: exactly one of dst and src is
// c.client (its meteredConn), and the bytes spliced are counted, held to
// the byte budget and to the rate chunk by chunk, as Read and Write of the
// meteredConn count them.
func (c *conn) relay(dst io.Writer, src net.Conn, srcBuf *bufio.Reader) error {
	if srcBuf != nil {
		if n := srcBuf.Buffered(); n > 0 {
			b, _ := srcBuf.Peek(n)
			if _, err := dst.Write(b); err != nil {
				return err
			}
			_, _ = srcBuf.Discard(n)
		}
	}
	m := c.client
	var from, to *net.TCPConn
	var count *atomic.Int64
	switch {
	case src == m:
		// Upload: the sandbox's bytes to the upstream.
		from, _ = m.Conn.(*net.TCPConn)
		to, _ = dst.(*net.TCPConn)
		count = &m.up
	case dst == m:
		// Download: the upstream's bytes to the sandbox.
		from, _ = src.(*net.TCPConn)
		to, _ = m.Conn.(*net.TCPConn)
		count = &m.down
	default:
		return fmt.Errorf("gateway: relay between %T and %T, neither the client", dst, src)
	}
	if from != nil && to != nil {
		err := m.spliceRelay(to, from, count)
		if err != errNoPipe {
			return err
		}
	}
	_, err := io.Copy(dst, src)
	return err
}

// spliceRelay moves what src sends to dst with splice(2) through a pipe
// of its own, until src ends (nil) or an error (errNoPipe: no pipe, and
// nothing moved). Each chunk goes from src into the pipe, as much as src
// has then (at most the rate's chunk); is taken from the byte budget (at
// most what the budget has left: the rest is never sent, and the relay
// ends with errByteLimit); goes from the pipe to dst; and is counted in
// count and taken from the rate. No byte is reserved while src is idle.
func (m *meteredConn) spliceRelay(dst, src *net.TCPConn, count *atomic.Int64) error {
	srcRaw, err := src.SyscallConn()
	if err != nil {
		return errNoPipe
	}
	dstRaw, err := dst.SyscallConn()
	if err != nil {
		return errNoPipe
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return errNoPipe
	}
	pr, pw := p[0], p[1]
	defer unix.Close(pr)
	defer unix.Close(pw)
	size := unix.Getpagesize() * 16 // a pipe's default
	if got, err := unix.FcntlInt(uintptr(pw), unix.F_SETPIPE_SZ, relayPipeSize); err == nil {
		size = got
	} else if got, err := unix.FcntlInt(uintptr(pw), unix.F_GETPIPE_SZ, 0); err == nil {
		size = got
	}
	for {
		// Into the pipe: what src has, waiting until it has some.
		var n64 int64
		var serr error
		rerr := srcRaw.Read(func(fd uintptr) bool {
			for {
				n64, serr = unix.Splice(int(fd), nil, pw, nil, m.transferMax(size), unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
				if serr != unix.EINTR {
					return serr != unix.EAGAIN
				}
			}
		})
		if rerr == nil && serr != nil {
			rerr = os.NewSyscallError("splice", serr)
		}
		if rerr != nil {
			return rerr
		}
		if n64 == 0 {
			return nil // src ended
		}
		n := int(n64)
		// The budget, now that n is known; a rest it does not allow
		// stays in the pipe, closed unsent.
		allowed, reserved := n, 0
		var limitErr error
		if b := m.g.budget; b != nil {
			allowed = b.take(n)
			reserved = allowed
			if allowed < n {
				m.limitHit.Store(true)
				limitErr = errByteLimit
			}
		}
		// Out of the pipe, all of what is allowed.
		moved := 0
		var werr error
		for moved < allowed && werr == nil {
			var k int64
			var serr error
			werr = dstRaw.Write(func(fd uintptr) bool {
				for {
					k, serr = unix.Splice(pr, nil, int(fd), nil, allowed-moved, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
					if serr != unix.EINTR {
						return serr != unix.EAGAIN
					}
				}
			})
			if werr == nil && serr != nil {
				werr = os.NewSyscallError("splice", serr)
			}
			if werr == nil && k == 0 {
				// A pipe holding bytes gives some; never expected.
				werr = io.ErrUnexpectedEOF
			}
			moved += int(max(k, 0))
		}
		if err := m.settle(count, reserved, moved); err != nil && werr == nil {
			werr = err
		}
		if werr != nil {
			return werr
		}
		if limitErr != nil {
			return limitErr
		}
	}
}
