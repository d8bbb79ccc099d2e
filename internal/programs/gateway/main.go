// Command gateway is the egress gateway of one sandbox (--net allow=,
// docs/egress.md), a program of jail (see package programs): jail starts
// it per sandbox with its end of a socket pair as descriptor 3 and talks
// to it over package protocol. It is embedded in jail at build time and
// never installed on its own.
//
// It parses the rules (the jail command cannot: the public-suffix list
// links net/http), answers with the per-sandbox trust anchor and the
// secrets' placeholders when secrets are bound to hosts, then serves the
// listeners the sandbox's init opened inside its network namespace: the
// HTTP and SOCKS proxies, the resolver, and the captured ports 80 and 443.
// It is the sandbox's one way out, and holds nothing of the sandbox's but
// those sockets.
//
// It ends when its socket to jail hangs up (a jail run's whole life), or,
// Detached (a persistent sandbox, whose holder becomes its monitor), when
// the sandbox's init ends (its pidfd).
package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/audit"
	"github.com/jail-sandbox/jail/internal/egress/dns"
	"github.com/jail-sandbox/jail/internal/egress/mitm"
	"github.com/jail-sandbox/jail/internal/egress/protocol"
	"github.com/jail-sandbox/jail/internal/egress/rules"
	"github.com/jail-sandbox/jail/internal/procname"
)

// sock is the descriptor of the socket to jail.
const sock = 3

func main() {
	procname.Set("jail-gateway")
	// A terminal's ^C is for the sandbox's command; jail ends the gateway.
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGPIPE)
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "jail: egress gateway: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg protocol.Config
	if _, err := protocol.Recv(sock, &cfg, protocol.MaxMessage, 0); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	g, refusal := newGateway(&cfg)
	if refusal != "" {
		return protocol.Send(sock, protocol.Hello{Error: refusal})
	}
	defer g.close()
	if err := protocol.Send(sock, g.hello); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	var start protocol.Start
	files, err := protocol.Recv(sock, &start, 4096, len(protocol.Listeners)+1)
	if errors.Is(err, protocol.ErrClosed) {
		return nil // jail went away before the sandbox was ready
	}
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	want := len(protocol.Listeners)
	if start.Pidfd {
		want++
	}
	if len(files) != want || start.Listeners != len(protocol.Listeners) || (cfg.Detached && !start.Pidfd) {
		for _, f := range files {
			f.Close()
		}
		return fmt.Errorf("start: %d descriptors, want %d", len(files), want)
	}
	if start.Pidfd {
		g.pids = newPidFinder(files[len(files)-1])
	}
	if err := g.serve(files[:len(protocol.Listeners)]); err != nil {
		return err
	}
	if cfg.Detached {
		return waitEnd(files[len(files)-1])
	}
	// The socket hangs up when jail is done with the sandbox.
	var nothing struct{}
	_, _ = protocol.Recv(sock, &nothing, 4096, 0)
	return nil
}

// waitEnd waits until the init that pidfd names has ended.
func waitEnd(pidfd *os.File) error {
	fds := []unix.PollFd{{Fd: int32(pidfd.Fd()), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if err == nil {
			return nil
		}
		if err != unix.EINTR {
			return fmt.Errorf("wait for the sandbox: %w", err)
		}
	}
}

// gateway is everything that serves one sandbox.
type gateway struct {
	cfg   *protocol.Config
	rules *rules.Rules
	hello protocol.Hello
	audit *audit.Log

	// pids finds the sandbox's process at a connection's end (nil: the
	// init's pidfd was not given).
	pids *pidFinder
	// secrets, when secrets are bound to hosts, terminates TLS to those
	// hosts and puts the values into their requests.
	secrets *mitm.Secrets

	dns *dns.Server
	// proxies serves the HTTP and SOCKS proxies and the captured ports.
	proxies interface{ Close() error }

	limit   auditLimiter    // the sandbox's audit rate
	eventMu sync.Mutex      // serialises denial events on the socket
	told    map[string]bool // the denials told, by HOST:PORT
}

// maxTold bounds the denials told to jail.
const maxTold = 1024

// newGateway checks cfg: a refusal is a "jail: ..." line for the user.
func newGateway(cfg *protocol.Config) (*gateway, string) {
	rs, err := rules.Parse(cfg.Rules)
	if err != nil {
		return nil, fmt.Sprintf("jail: --net allow=: %v", err)
	}
	g := &gateway{cfg: cfg, rules: rs}
	if cfg.Audit != "" {
		// Every attempt is on record, or none is made.
		if g.audit, err = audit.Open(cfg.Audit); err != nil {
			return nil, fmt.Sprintf("jail: --net: the audit log, which records every connection: %v", err)
		}
	}
	if refusal := g.bindSecrets(); refusal != "" {
		g.close()
		return nil, refusal
	}
	return g, ""
}

// serve starts serving the listeners, in protocol.Listeners' order.
func (g *gateway) serve(files []*os.File) error {
	listeners := make(map[string]net.Listener)
	var udp net.PacketConn
	for i, f := range files {
		l := protocol.Listeners[i]
		var err error
		if l.Stream {
			var ln net.Listener
			if ln, err = net.FileListener(f); err == nil && g.pids != nil {
				ln = &pidListener{Listener: ln, finder: g.pids}
			}
			listeners[l.Name] = ln
		} else {
			udp, err = net.FilePacketConn(f)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("listener %s: %w", l.Name, err)
		}
	}
	var err error
	g.dns, err = dns.New(dns.Config{Rules: g.rules, OnQuery: g.recordQuery})
	if err != nil {
		return err
	}
	go func() { _ = g.dns.Serve(udp) }()
	go func() { _ = g.dns.ServeTCP(listeners["dns-tcp"]) }()
	g.proxies, err = g.startProxies(listeners)
	return err
}

func (g *gateway) close() {
	if g.proxies != nil {
		_ = g.proxies.Close()
	}
	if g.dns != nil {
		_ = g.dns.Close()
	}
	if g.audit != nil {
		g.flushAudit()
		_ = g.audit.Close()
	}
}

// record writes one line of the audit log.
func (g *gateway) record(event string, d *audit.NetDetail) {
	g.write(audit.Event{Event: event, Net: d})
}

// Audit lines one sandbox's gateway writes at most: auditBurst at once,
// auditRate a second on average. The log is shared and rotated by size: a
// sandbox flooding it with queries would push every older line out, its
// own and other sandboxes'. Past the rate, lines are counted, and one
// line a second says how many were not written.
const (
	auditRate  = 200
	auditBurst = 10000
)

// auditLimiter is write's token bucket.
type auditLimiter struct {
	mu         sync.Mutex
	tokens     float64
	last       time.Time
	dropped    int64
	lastReport time.Time
}

// write writes e, with the sandbox's name, labels and uid, within the
// sandbox's audit rate.
func (g *gateway) write(e audit.Event) {
	if g.audit == nil {
		return
	}
	e.Sandbox, e.Labels, e.UID = g.cfg.Sandbox, g.cfg.Labels, g.cfg.UID
	l := &g.limit
	l.mu.Lock()
	now := time.Now()
	if l.last.IsZero() {
		l.tokens, l.lastReport = auditBurst, now
	} else {
		l.tokens = min(auditBurst, l.tokens+now.Sub(l.last).Seconds()*auditRate)
	}
	l.last = now
	var summary int64
	allowed := l.tokens >= 1
	if allowed {
		l.tokens--
	} else {
		l.dropped++
	}
	if l.dropped > 0 && now.Sub(l.lastReport) >= time.Second {
		summary, l.dropped, l.lastReport = l.dropped, 0, now
	}
	l.mu.Unlock()
	if allowed {
		_ = g.audit.Write(e)
	}
	if summary > 0 {
		_ = g.audit.Write(audit.Event{Event: audit.Net, Sandbox: e.Sandbox, Labels: e.Labels, UID: e.UID,
			Net: &audit.NetDetail{Via: "audit", Verdict: "dropped", Why: fmt.Sprintf("%d lines past the sandbox's audit rate (%d a second) not written", summary, auditRate)}})
	}
}

// flushAudit writes the count of lines not written, if any.
func (g *gateway) flushAudit() {
	l := &g.limit
	l.mu.Lock()
	dropped := l.dropped
	l.dropped = 0
	l.mu.Unlock()
	if dropped > 0 && g.audit != nil {
		_ = g.audit.Write(audit.Event{Event: audit.Net, Sandbox: g.cfg.Sandbox, Labels: g.cfg.Labels, UID: g.cfg.UID,
			Net: &audit.NetDetail{Via: "audit", Verdict: "dropped", Why: fmt.Sprintf("%d lines past the sandbox's audit rate (%d a second) not written", dropped, auditRate)}})
	}
}

// denied tells jail of a denial, for the command's stderr, unless jail is
// not reading: a full socket drops the event rather than stall the
// gateway.
func (g *gateway) denied(host string, port int, reason string) {
	if !g.cfg.Events {
		return
	}
	g.eventMu.Lock()
	defer g.eventMu.Unlock()
	// Once per host and port: a resolver asks several times for a name.
	key := fmt.Sprintf("%s:%d", host, port)
	if g.told[key] || len(g.told) >= maxTold {
		return
	}
	if g.told == nil {
		g.told = make(map[string]bool)
	}
	g.told[key] = true
	_ = protocol.SendNoWait(sock, protocol.Event{Host: host, Port: port, Reason: reason})
}

// recordQuery records one DNS query, with the process that asked: found
// before the answer goes (a resolver closes its socket once answered),
// which costs the answer a look through the sandbox's /proc.
func (g *gateway) recordQuery(q dns.Query) {
	d := &audit.NetDetail{Via: "dns", Host: q.Name, QueryType: q.Type, RCode: q.RCode,
		Verdict: string(q.Verdict), Rule: q.Rule, Why: q.Reason}
	if q.Client.IsValid() {
		d.Client = q.Client.String()
	}
	if q.Address.IsValid() {
		d.Address = q.Address.String()
	}
	if q.Client.IsValid() {
		d.PID = g.pids.find(q.Network, netip.AddrPortFrom(q.Client.Addr().Unmap(), q.Client.Port()), netip.AddrPort{})
		d.Exec = sessionOf(d.PID)
	}
	g.record(audit.DNS, d)
	if q.Verdict == dns.Denied && q.Name != "" {
		g.denied(q.Name, 0, q.Reason)
	}
}
