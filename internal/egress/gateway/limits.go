package gateway

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// errByteLimit ends a connection that would pass Limits.MaxBytes.
var errByteLimit = errors.New("the sandbox's byte limit is reached")

// errClosing is a wait cut short by Close.
var errClosing = errors.New("the gateway is closing")

// budget is Limits.MaxBytes, shared by every connection.
type budget struct {
	max  int64
	used atomic.Int64
}

// take reserves up to n bytes and returns how many it could (0: none left).
func (b *budget) take(n int) int {
	for {
		used := b.used.Load()
		left := b.max - used
		if left <= 0 {
			return 0
		}
		k := int64(n)
		if k > left {
			k = left
		}
		if b.used.CompareAndSwap(used, used+k) {
			return int(k)
		}
	}
}

// give returns bytes reserved but not used.
func (b *budget) give(n int) {
	if n > 0 {
		b.used.Add(-int64(n))
	}
}

// bucket is Limits.Rate, a token bucket shared by every connection: each
// transfer takes its bytes from it after the fact, and the next transfer
// of any connection waits while it is in debt.
type bucket struct {
	rate  float64 // bytes per second
	burst float64 // the most tokens it holds, and the most one transfer takes
	done  <-chan struct{}

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newBucket(rate int64, done <-chan struct{}) *bucket {
	burst := float64(max(rate/4, 16<<10))
	return &bucket{rate: float64(rate), burst: burst, tokens: burst, last: time.Now(), done: done}
}

// chunk is the most one transfer may move.
func (b *bucket) chunk() int { return int(b.burst) }

// take takes n tokens and, while the bucket is in debt, waits until it is
// not (or Close).
func (b *bucket) take(n int) error {
	b.mu.Lock()
	now := time.Now()
	b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	b.tokens -= float64(n)
	var wait time.Duration
	if b.tokens < 0 {
		wait = time.Duration(-b.tokens / b.rate * float64(time.Second))
	}
	b.mu.Unlock()
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-b.done:
		return errClosing
	}
}

// meteredConn is a client connection as the gateway reads and writes it:
// counted both ways, within the byte budget and the rate.
type meteredConn struct {
	net.Conn
	g        *Gateway
	up, down atomic.Int64
	limitHit atomic.Bool
}

func (g *Gateway) meter(c net.Conn) *meteredConn {
	return &meteredConn{Conn: c, g: g}
}

func (m *meteredConn) Read(p []byte) (int, error) {
	p, reserved, err := m.reserve(p)
	if err != nil {
		return 0, err
	}
	n, err := m.Conn.Read(p)
	if serr := m.settle(&m.up, reserved, n); serr != nil && err == nil {
		err = serr
	}
	return n, err
}

func (m *meteredConn) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		part, reserved, err := m.reserve(p)
		if err != nil {
			return written, err
		}
		n, err := m.Conn.Write(part)
		written += n
		if serr := m.settle(&m.down, reserved, n); serr != nil && err == nil {
			err = serr
		}
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// reserve cuts p to what the budget and the rate let one transfer move,
// reserving it from the budget.
func (m *meteredConn) reserve(p []byte) ([]byte, int, error) {
	if len(p) == 0 {
		return p, 0, nil
	}
	k, reserved, err := m.allow(len(p))
	if err != nil {
		return nil, 0, err
	}
	return p[:k], reserved, nil
}

// transferMax is the most one transfer may move: the rate's chunk, or
// limit when there is no rate (or it allows more).
func (m *meteredConn) transferMax(limit int) int {
	if b := m.g.bucket; b != nil && limit > b.chunk() {
		return b.chunk()
	}
	return limit
}

// allow is how many of n bytes (n > 0) one transfer may move (k, at
// least 1, at most n), after cutting n to the rate's chunk and reserving
// what it can of it from the budget (reserved: 0 without a budget, else
// k); errByteLimit when the budget has nothing left. settle ends what
// allow began.
func (m *meteredConn) allow(n int) (k, reserved int, err error) {
	n = m.transferMax(n)
	if m.g.budget == nil {
		return n, 0, nil
	}
	k = m.g.budget.take(n)
	if k == 0 {
		m.limitHit.Store(true)
		return 0, 0, errByteLimit
	}
	return k, k, nil
}

// settle records a transfer of moved bytes (counted in count, m.up or
// m.down) for which reserved bytes were taken from the budget: it gives
// back what was not used and takes moved from the rate, waiting while the
// rate is in debt (errClosing: Close cut the wait short).
func (m *meteredConn) settle(count *atomic.Int64, reserved, moved int) error {
	count.Add(int64(moved))
	if m.g.budget != nil {
		m.g.budget.give(reserved - moved)
	}
	if moved > 0 && m.g.bucket != nil {
		return m.g.bucket.take(moved)
	}
	return nil
}

// CloseWrite half-closes the connection, when it can be.
func (m *meteredConn) CloseWrite() error {
	return closeWrite(m.Conn)
}

// closeWrite half-closes c if it is a kind that can be, else does nothing.
func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
