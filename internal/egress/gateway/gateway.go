// Package gateway is the host side of a sandbox's egress (issue 25): it
// serves the listeners opened inside the sandbox's network namespace (an
// HTTP proxy, a SOCKS5 proxy, and the captured ports 80 and 443 of the
// addresses the sandbox's DNS gives allowed names), decides every
// connection and every HTTP request by the egress rules, dials only what
// they allow, and relays the bytes. It does not know how its listeners
// were made: it serves the net.Listeners it is given.
//
// Invariants:
//   - Nothing is dialed that the rules did not allow: every dial is
//     rules.Decide(host, port), then (for a name) the host-side resolution
//     of it, then rules.AllowsAddress for each address, and only checked
//     addresses are dialed, as addresses (never a name again: no DNS
//     rebinding between check and dial). An IP literal is decided by the
//     address rules alone. An address:port one of the gateway's own
//     listeners has is never dialed.
//   - One target per connection: the host a connection was decided for
//     (CONNECT or SOCKS target, the name of a captured address) must be
//     the host of everything sent on it that names one: the TLS SNI, and
//     the Host of every HTTP request of a kept-alive or pipelined
//     connection. A TLS ClientHello with encrypted_client_hello (which
//     would hide the real name) is refused, and so are HTTP/2 (the
//     prior-knowledge preface, h2c upgrades) on the plain paths, where a
//     stream could name another host unseen. On the HTTP proxy every
//     request is decided on its own.
//   - HTTP is re-framed, never passed through: each request head is parsed
//     (at most MaxHead bytes), checked and written anew upstream, so the
//     upstream reads exactly the requests that were checked.
//   - No upstream proxy is ever used, whatever the host's environment.
//   - Bounded: at most Limits.MaxConns client connections at once (one
//     more is refused at once), a request or response head of at most
//     MaxHead bytes, a ClientHello of at most MaxClientHello bytes; a
//     client that sends no complete head or ClientHello within the head
//     timeout (10 s) is closed. Relayed connections may idle.
//   - Every client connection gives exactly one Event (Method empty) when
//     it ends, allowed or denied, and every HTTP request read on a plain
//     HTTP path or an intercepted TLS connection one more (Method set).
//     OnEvent is called synchronously.
//   - Close closes every listener and connection and returns when every
//     goroutine the Gateway started has returned.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/jail-sandbox/jail/internal/egress/mitm"
	"github.com/jail-sandbox/jail/internal/egress/rules"
)

// DefaultMaxConns is Limits.MaxConns when it is 0.
const DefaultMaxConns = 256

// MaxHead is the most bytes an HTTP request or response head may take
// (request line or status line and headers).
const MaxHead = 64 << 10

// headTimeout is how long a client may take to send a complete request
// head, SOCKS handshake or ClientHello.
const headTimeout = 10 * time.Second

// idleTimeout is how long a kept-alive HTTP client connection may wait
// for its next request before it is closed.
const idleTimeout = 90 * time.Second

// dialTimeout bounds resolving and connecting (the default Dial's).
const dialTimeout = 15 * time.Second

// maxRefusing bounds the connections over MaxConns being told so at once;
// beyond it they are closed without a word.
const maxRefusing = 16

// Verdicts of an Event.
const (
	Allowed = "allowed"
	Denied  = "denied"
)

// Vias of an Event: the listener a connection came in on.
const (
	ViaProxy = "proxy"
	ViaSOCKS = "socks"
	ViaHTTP  = "http"
	ViaTLS   = "tls"
)

// ErrClosed is what Serve returns after Close.
var ErrClosed = errors.New("gateway: closed")

// Config is what a Gateway decides by and how it reaches out.
type Config struct {
	// Rules decide every host and address; nil denies all.
	Rules *rules.Rules
	// NameOf maps the local address a captured connection arrived at (an
	// address the sandbox's DNS gave for a name) to that name; false: not
	// one of them, and the connection is refused. nil refuses every
	// captured connection.
	NameOf func(netip.Addr) (string, bool)
	// Resolve resolves a name on the host side; nil: Go's own resolver.
	// Every address it returns is checked before any dial.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial dials one checked address; nil: a net.Dialer with a connect
	// timeout.
	Dial func(ctx context.Context, network string, addr netip.AddrPort) (net.Conn, error)
	// Limits bound what the sandbox may use.
	Limits Limits
	// Interceptor terminates TLS for the hosts it names; nil: TLS always
	// passes through untouched.
	Interceptor Interceptor
	// OnEvent is the audit record: called once per client connection and
	// once per HTTP request on the plain HTTP paths and on intercepted
	// TLS connections. It must be cheap and
	// safe to call from several goroutines.
	OnEvent func(Event)
	// ListenersElsewhere: the listeners are in another network namespace
	// than the one the gateway dials in (a sandbox's, whose init opened
	// them), so no dial can reach them; the refusal of a dial to a
	// listener's own address is then off. Without it, a dial to any
	// address of a listener's port it is bound to is refused.
	ListenersElsewhere bool

	// headTimeout replaces the head timeout when set (tests).
	headTimeout time.Duration
}

// Limits bound one gateway (one sandbox).
type Limits struct {
	// MaxConns is the most client connections served at once; 0:
	// DefaultMaxConns.
	MaxConns int
	// MaxBytes is the most bytes relayed in all, up and down, counted on
	// the sandbox's side; 0: unlimited. A connection that would pass it
	// ends.
	MaxBytes int64
	// Rate is the most bytes per second relayed, up and down together,
	// over all connections; 0: unlimited.
	Rate int64
}

// Interceptor terminates TLS for hosts a secret is bound to (package
// mitm).
type Interceptor interface {
	// Intercepts reports whether TLS to host is to be terminated.
	Intercepts(host string) bool
	// ServeTLS takes over client, a TLS connection from the sandbox meant
	// for host:port; its Read replays the ClientHello already peeked. It
	// checks each request's Host, dials upstream with dial (which does the
	// rule and address checks), calls record once for each request it
	// read, and returns when done.
	ServeTLS(ctx context.Context, client net.Conn, host string, port int, dial func(ctx context.Context) (net.Conn, error), record func(mitm.Request)) (up, down int64, err error)
	// RewriteRequest is applied to the target (as sent) and headers of
	// every plain-HTTP request forwarded to host; an error refuses the
	// request (403).
	RewriteRequest(host, target string, h http.Header) error
}

// interceptorRefusal is an error of ServeTLS that refused a request (its
// Host, a placeholder), as opposed to one that failed: it is recorded as
// a denial, with Refusal as the reason.
type interceptorRefusal interface {
	error
	Refusal() string
}

// Listeners are what Serve serves; any may be nil.
type Listeners struct {
	Proxy net.Listener // HTTP proxy: CONNECT and absolute-form requests
	SOCKS net.Listener // SOCKS5, no authentication, CONNECT only
	HTTP  net.Listener // captured port 80 of the DNS's addresses
	TLS   net.Listener // captured port 443 of the DNS's addresses
}

// Event is one audit record: a client connection when it ends (Method
// empty), or one HTTP request on a plain HTTP path or an intercepted TLS
// connection.
type Event struct {
	Time      time.Time      // when the connection or request began
	Via       string         // ViaProxy, ViaSOCKS, ViaHTTP, ViaTLS
	Client    netip.AddrPort // the sandbox's end
	Local     netip.AddrPort // the listener's end (a captured address)
	Host      string         // the target host, canonical, if one was named
	Port      int            // the target port
	Address   netip.AddrPort // the address dialed, if any
	Method    string         // HTTP requests only
	Path      string         // HTTP requests only, at most maxPathInEvent bytes
	Rule      string         // the rule that decided, if one did
	Verdict   string         // Allowed or Denied
	Reason    string         // why, one line
	BytesUp   int64          // from the sandbox
	BytesDown int64          // to the sandbox
	Duration  time.Duration
}

// maxPathInEvent bounds an Event's Path: an audit line stays a line.
const maxPathInEvent = 1024

// Gateway serves a sandbox's egress listeners. Its methods are safe for
// concurrent use.
type Gateway struct {
	cfg      Config
	rules    *rules.Rules
	resolve  func(ctx context.Context, host string) ([]netip.Addr, error)
	dial     func(ctx context.Context, network string, addr netip.AddrPort) (net.Conn, error)
	maxConns int
	budget   *budget
	bucket   *bucket
	ctx      context.Context
	cancel   context.CancelFunc
	done     <-chan struct{}
	// headTimeout and idleTimeout are the package's constants; tests
	// shorten them.
	headTimeout time.Duration
	idleTimeout time.Duration

	mu        sync.Mutex
	closed    bool
	serving   bool
	conns     int // client connections being served
	refusing  int // client connections over MaxConns being told so
	closers   map[any]func() error
	listening []netip.AddrPort // the listeners' own addresses
	wg        sync.WaitGroup
}

// New checks cfg and makes a Gateway; Serve starts it.
func New(cfg Config) (*Gateway, error) {
	if cfg.Limits.MaxConns < 0 || cfg.Limits.MaxBytes < 0 || cfg.Limits.Rate < 0 {
		return nil, fmt.Errorf("gateway: negative limits %+v", cfg.Limits)
	}
	g := &Gateway{
		cfg:         cfg,
		rules:       cfg.Rules,
		resolve:     cfg.Resolve,
		dial:        cfg.Dial,
		maxConns:    cfg.Limits.MaxConns,
		headTimeout: headTimeout,
		idleTimeout: idleTimeout,
		closers:     make(map[any]func() error),
	}
	if cfg.headTimeout > 0 {
		g.headTimeout = cfg.headTimeout
	}
	if g.rules == nil {
		g.rules = &rules.Rules{}
	}
	if g.maxConns == 0 {
		g.maxConns = DefaultMaxConns
	}
	if g.resolve == nil {
		// Go's own resolver, never the C library's: no NSS module or
		// host configuration of this process decides what a name is.
		r := &net.Resolver{PreferGo: true}
		g.resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return r.LookupNetIP(ctx, "ip", host)
		}
	}
	if g.dial == nil {
		d := &net.Dialer{Timeout: dialTimeout}
		g.dial = func(ctx context.Context, network string, addr netip.AddrPort) (net.Conn, error) {
			return d.DialContext(ctx, network, addr.String())
		}
	}
	if cfg.Limits.MaxBytes > 0 {
		g.budget = &budget{max: cfg.Limits.MaxBytes}
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.done = g.ctx.Done()
	if cfg.Limits.Rate > 0 {
		g.bucket = newBucket(cfg.Limits.Rate, g.done)
	}
	return g, nil
}

// Serve serves ls until Close, then returns ErrClosed. The Gateway owns the
// listeners from the call on. An error accepting on one of them that
// retrying cannot mend ends Serve with that error, after closing ls (the
// connections already accepted are served on until Close). Serve may be
// called once.
func (g *Gateway) Serve(ls Listeners) error {
	type served struct {
		l      net.Listener
		handle func(net.Conn)
		via    string
	}
	var all []served
	for _, s := range []served{
		{ls.Proxy, g.serveProxy, ViaProxy},
		{ls.SOCKS, g.serveSOCKS, ViaSOCKS},
		{ls.HTTP, g.serveCapturedHTTP, ViaHTTP},
		{ls.TLS, g.serveCapturedTLS, ViaTLS},
	} {
		if s.l != nil {
			all = append(all, s)
		}
	}
	closeAll := func() {
		for _, s := range all {
			s.l.Close()
		}
	}
	if len(all) == 0 {
		return errors.New("gateway: no listener to serve")
	}
	g.mu.Lock()
	switch {
	case g.closed:
		g.mu.Unlock()
		closeAll()
		return ErrClosed
	case g.serving:
		g.mu.Unlock()
		closeAll()
		return errors.New("gateway: Serve called twice")
	}
	g.serving = true
	for _, s := range all {
		g.closers[s.l] = s.l.Close
		if a, ok := addrPort(s.l.Addr()); ok {
			g.listening = append(g.listening, a)
		}
	}
	g.wg.Add(len(all))
	g.mu.Unlock()

	errs := make(chan error, len(all))
	for _, s := range all {
		go func() {
			defer g.wg.Done()
			errs <- g.acceptLoop(s.l, s.via, s.handle)
		}()
	}
	var first error
	for range all {
		err := <-errs
		if first == nil && !errors.Is(err, ErrClosed) {
			first = err
			closeAll()
		}
	}
	if first != nil {
		return first
	}
	return ErrClosed
}

// acceptLoop accepts on l until it fails for good or the Gateway closes.
func (g *Gateway) acceptLoop(l net.Listener, via string, handle func(net.Conn)) error {
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if g.isClosed() {
				return ErrClosed
			}
			if !transientAcceptError(err) {
				return fmt.Errorf("gateway: accepting on %s: %w", l.Addr(), err)
			}
			// Out of descriptors or memory for now: wait a little rather
			// than spin or stop serving.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-g.done:
			}
			continue
		}
		backoff = 0
		switch g.admit(c) {
		case admitted:
			go func() {
				defer g.release(c)
				handle(c)
			}()
		case overLimit:
			go func() {
				defer g.releaseRefusal(c)
				g.refuseOverLimit(c, via)
			}()
		default:
			c.Close()
		}
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

type admission int

const (
	dropped   admission = iota // closed, or too many being refused: close it
	admitted                   // serve it
	overLimit                  // tell it so
)

// admit counts a client connection in, or says why not.
func (g *Gateway) admit(c net.Conn) admission {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.closed:
		return dropped
	case g.conns < g.maxConns:
		g.conns++
		g.closers[c] = c.Close
		g.wg.Add(1)
		return admitted
	case g.refusing < maxRefusing:
		g.refusing++
		g.closers[c] = c.Close
		g.wg.Add(1)
		return overLimit
	}
	return dropped
}

// release is the end of an admitted connection.
func (g *Gateway) release(c net.Conn) {
	c.Close()
	g.mu.Lock()
	g.conns--
	delete(g.closers, c)
	g.mu.Unlock()
	g.wg.Done()
}

// releaseRefusal is the end of a connection refused over MaxConns.
func (g *Gateway) releaseRefusal(c net.Conn) {
	c.Close()
	g.mu.Lock()
	g.refusing--
	delete(g.closers, c)
	g.mu.Unlock()
	g.wg.Done()
}

// track registers an upstream connection for Close; false (and c closed)
// when the Gateway is closed already. untrack ends it.
func (g *Gateway) track(c net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		c.Close()
		return false
	}
	g.closers[c] = c.Close
	return true
}

// untrack closes c and forgets it.
func (g *Gateway) untrack(c net.Conn) {
	c.Close()
	g.mu.Lock()
	delete(g.closers, c)
	g.mu.Unlock()
}

// goTracked runs f in a goroutine Close waits for; false when closed.
func (g *Gateway) goTracked(f func()) bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	g.wg.Add(1)
	g.mu.Unlock()
	go func() {
		defer g.wg.Done()
		f()
	}()
	return true
}

// Close stops Serve, closes every listener and connection, and returns when
// every goroutine of the Gateway has returned.
func (g *Gateway) Close() error {
	g.mu.Lock()
	g.closed = true
	closers := make([]func() error, 0, len(g.closers))
	for _, closeFn := range g.closers {
		closers = append(closers, closeFn)
	}
	g.mu.Unlock()
	g.cancel()
	for _, closeFn := range closers {
		_ = closeFn() // ours to close; an error closing changes nothing
	}
	g.wg.Wait()
	return nil
}

func (g *Gateway) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// isListening reports whether addr:port is one of the gateway's own
// listeners (one bound to an unspecified address listens on every
// address of its port).
func (g *Gateway) isListening(addr netip.Addr, port int) bool {
	addr = addr.Unmap().WithZone("")
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, l := range g.listening {
		if int(l.Port()) != port {
			continue
		}
		la := l.Addr().Unmap().WithZone("")
		if la == addr || la.IsUnspecified() {
			return true
		}
	}
	return false
}

// emit hands an event to OnEvent.
func (g *Gateway) emit(ev Event) {
	if g.cfg.OnEvent != nil {
		g.cfg.OnEvent(ev)
	}
}

// addrPort is a TCP socket address as an Event keeps it.
func addrPort(a net.Addr) (netip.AddrPort, bool) {
	if t, ok := a.(*net.TCPAddr); ok {
		ap := t.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), true
	}
	return netip.AddrPort{}, false
}
