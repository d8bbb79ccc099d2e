// Package dns is the resolver jail runs for a sandbox whose network is an
// egress allowlist (--net allow=RULE,...; issue 25). It answers the
// sandbox's queries from the rules alone: a name the rules allow gets an
// address from a per-sandbox loopback pool, where the gateway captures
// connections and learns from Lookup which name an address stands for;
// every other name does not exist. Nothing is ever resolved upstream, so
// a query leaks nothing: the gateway resolves allowed names on the host
// side when the sandbox connects.
//
// Invariants:
//   - No network access: the package reads and writes only the sockets
//     handed to Serve and ServeTCP, and never sends a query anywhere.
//   - A name the rules deny (rules.DecideName: not allowed on any port)
//     gets NXDOMAIN whatever the type; so does anything that is not a valid
//     host name (an IP literal, an underscore, a non-canonical IPv4 form).
//     An allowed name gets one A record (its pool address) for type A and
//     an empty NOERROR answer for any other type.
//   - Name ↔ address is one-to-one and stable for the Server's life: an
//     address once given never stands for another name, so a connection
//     to it always means that name. There is no eviction: when the pool is
//     full a new name is REFUSED, and the names already given keep theirs.
//   - Names match case-insensitively (canonical form of the rules package)
//     and every response echoes the question as asked, case included, so
//     DNS 0x20 randomisation works.
//   - Only standard queries with one IN question are answered; responses,
//     packets shorter than a header and UDP datagrams over 512 bytes get no
//     reply; every reply is a well-formed message of at most 512 bytes
//     carrying the query's ID.
//   - Every packet received is reported to OnQuery exactly once, before
//     its reply is sent, whatever became of it.
//   - No input panics, and the work and memory per packet are bounded by
//     its size; TCP connections at once and names are bounded too.
package dns

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/jail-sandbox/jail/internal/egress/rules"
)

// DefaultPrefix is the loopback range allowed names get their addresses
// from. Any 127.0.0.0/8 address reaches the sandbox's own lo, so the pool
// needs no interface configuration; 127.100.0.0/16 keeps clear of the
// addresses software already gives a meaning to, all in 127.0.0.0/16
// (127.0.0.1 localhost, 127.0.1.1 Debian's host name, 127.0.0.53
// systemd-resolved, 127.0.0.11 Docker's DNS), and of 127.255.255.255,
// the broadcast address of lo's local route. Every sandbox has its own
// network namespace, so every sandbox may use the same range.
var DefaultPrefix = netip.MustParsePrefix("127.100.0.0/16")

// reservedLoopback is where Config.Prefix may not be (see DefaultPrefix).
var (
	loopback         = netip.MustParsePrefix("127.0.0.0/8")
	reservedLoopback = netip.MustParsePrefix("127.0.0.0/16")
	loopbackBcast    = netip.MustParseAddr("127.255.255.255")
)

// DefaultMaxNames bounds the names one sandbox can be given addresses for:
// far more than a build or an agent touches, and at most a few MiB even
// with every name 253 characters long.
const DefaultMaxNames = 4096

// DefaultMaxTCPConns bounds the TCP connections served at once.
const DefaultMaxTCPConns = 16

// answerTTL is the TTL of an answer, in seconds. An address is stable for
// the sandbox's life, so caching it is harmless; a short TTL keeps a
// stale cache from outliving a change of rules for long. Denials carry no
// SOA, so resolvers do not cache them (RFC 2308).
const answerTTL = 60

// ednsSize is the UDP payload size this server advertises (RFC 6891): the
// size DNS Flag Day 2020 recommends. Its answers never come near it.
const ednsSize = 1232

// maxUDPQuery is the largest UDP query read: a query with one question
// and an OPT record is far smaller, and RFC 1035 bounds a UDP message at
// 512 bytes without EDNS.
const maxUDPQuery = 512

// maxReply is the largest reply sent, over either transport: a reply holds
// at most the question (259 bytes), one A record and an OPT record, so it
// never needs more, whatever size a client offers.
const maxReply = 512

// tcpIdleTimeout is how long a TCP connection may sit idle, or take to
// send one message, before it is closed (RFC 7766 suggests seconds).
const tcpIdleTimeout = 10 * time.Second

// ErrClosed is what Serve and ServeTCP return once Close was called.
var ErrClosed = errors.New("dns: server closed")

// Config is what a Server answers from.
type Config struct {
	// Rules decide which names are answered; nil denies every name.
	Rules *rules.Rules
	// Prefix is the range addresses are given from: inside 127.0.0.0/8,
	// outside 127.0.0.0/16, not containing 127.255.255.255. Its first and
	// last addresses are not given. The zero Prefix is DefaultPrefix.
	Prefix netip.Prefix
	// MaxNames bounds the names given addresses (0: DefaultMaxNames); at
	// most the addresses the prefix has.
	MaxNames int
	// MaxTCPConns bounds the TCP connections served at once over all
	// listeners (0: DefaultMaxTCPConns); one more is closed at once.
	MaxTCPConns int
	// OnQuery, when set, is called for every packet received, before its
	// reply is sent. It may be called from several goroutines at once, must
	// return quickly (the server waits for it) and must not call Close.
	OnQuery func(Query)
}

// Verdict is what became of a query.
type Verdict string

const (
	// Allowed: the rules allow the name. An A query was answered with the
	// name's address, any other type with an empty NOERROR answer.
	Allowed Verdict = "allowed"
	// Denied: the rules deny the name, or it is not a valid host name:
	// NXDOMAIN.
	Denied Verdict = "denied"
	// Refused: the query was not answered: REFUSED (an unsupported class
	// or type, a full pool), FORMERR, NOTIMP, BADVERS, or SERVFAIL should a
	// reply fail to pack; RCode says which.
	Refused Verdict = "refused"
	// Dropped: no reply was sent (a response, a packet shorter than a
	// header, an oversized or cut-off query).
	Dropped Verdict = "dropped"
)

// Query is the record of one packet received, for the audit log.
type Query struct {
	Time    time.Time
	Network string         // "udp" or "tcp"
	Client  netip.AddrPort // who sent it, when known
	// Name is the question's name as asked, in presentation form (case
	// kept, no trailing dot, bytes other than letters, digits, - and _ as
	// \DDD); "" when no question could be read.
	Name string
	// Type is the question's type: "A", "AAAA", "TYPE65"; "" when no
	// question could be read.
	Type    string
	Verdict Verdict
	// RCode is the reply's response code: "NOERROR", "NXDOMAIN",
	// "REFUSED", "FORMERR", "NOTIMP" or "BADVERS"; "" when dropped.
	RCode string
	// Rule is the rule that decided, in its canonical form; "" when no
	// rule did.
	Rule string
	// Reason says why, in one line.
	Reason string
	// Address is the address answered, invalid when none was.
	Address netip.Addr
}

// Server answers one sandbox's DNS queries. Its methods are safe for
// concurrent use.
type Server struct {
	rules       *rules.Rules
	pool        *pool
	maxTCPConns int
	onQuery     func(Query)

	mu       sync.Mutex
	closed   bool
	done     chan struct{} // closed by Close
	closers  map[any]func() error
	tcpConns int
	wg       sync.WaitGroup
}

// New returns a Server for cfg, or an error naming what in cfg is wrong.
func New(cfg Config) (*Server, error) {
	prefix := cfg.Prefix
	if !prefix.IsValid() {
		prefix = DefaultPrefix
	}
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	size := 1<<(32-prefix.Bits()) - 2
	maxNames := cfg.MaxNames
	switch {
	case maxNames == 0:
		maxNames = min(DefaultMaxNames, size)
	case maxNames < 0:
		return nil, fmt.Errorf("dns: MaxNames %d: must be positive", maxNames)
	case maxNames > size:
		return nil, fmt.Errorf("dns: MaxNames %d: %s has only %d addresses to give", maxNames, prefix, size)
	}
	maxConns := cfg.MaxTCPConns
	if maxConns == 0 {
		maxConns = DefaultMaxTCPConns
	}
	if maxConns < 0 {
		return nil, fmt.Errorf("dns: MaxTCPConns %d: must be positive", maxConns)
	}
	return &Server{
		rules:       cfg.Rules,
		pool:        newPool(prefix, maxNames),
		maxTCPConns: maxConns,
		onQuery:     cfg.OnQuery,
		done:        make(chan struct{}),
		closers:     make(map[any]func() error),
	}, nil
}

// checkPrefix checks a pool's range (see Config.Prefix).
func checkPrefix(p netip.Prefix) error {
	switch {
	case !p.Addr().Is4():
		return fmt.Errorf("dns: prefix %s: must be IPv4 (IPv6 has one loopback address)", p)
	case p.Masked() != p:
		return fmt.Errorf("dns: prefix %s: bits set after the /%d (the range is %s)", p, p.Bits(), p.Masked())
	case !loopback.Contains(p.Addr()) || p.Bits() < loopback.Bits():
		return fmt.Errorf("dns: prefix %s: must be inside %s", p, loopback)
	case p.Overlaps(reservedLoopback):
		return fmt.Errorf("dns: prefix %s: overlaps %s, where 127.0.0.1 and other well-known loopback addresses are", p, reservedLoopback)
	case p.Contains(loopbackBcast):
		return fmt.Errorf("dns: prefix %s: holds %s, lo's broadcast address", p, loopbackBcast)
	case p.Bits() > 30:
		return fmt.Errorf("dns: prefix %s: too small to give an address", p)
	}
	return nil
}

// Lookup returns the name an address was given to, as its canonical form
// (lowercase, no trailing dot): what a connection to that address means.
// An IPv4-mapped IPv6 form is read as its IPv4 address.
func (s *Server) Lookup(addr netip.Addr) (string, bool) {
	return s.pool.lookup(addr.Unmap())
}

// report hands q to OnQuery.
func (s *Server) report(q Query) {
	if s.onQuery != nil {
		s.onQuery(q)
	}
}
