package dns

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// served is a Server serving on loopback UDP and TCP ports of the test
// process, and the queries it reported.
type served struct {
	*Server
	udp, tcp string // host:port

	mu      sync.Mutex
	queries []Query
	errs    chan error // what Serve and ServeTCP returned
}

func (s *served) recorded() []Query {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.queries)
}

// serve starts a Server for testRules on 127.0.0.1, UDP and TCP.
func serve(t *testing.T, cfg Config) *served {
	t.Helper()
	sv := &served{errs: make(chan error, 2)}
	cfg.OnQuery = func(q Query) {
		sv.mu.Lock()
		sv.queries = append(sv.queries, q)
		sv.mu.Unlock()
	}
	sv.Server = newTestServer(t, cfg)
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		pc.Close()
		t.Fatal(err)
	}
	sv.udp, sv.tcp = pc.LocalAddr().String(), l.Addr().String()
	go func() { sv.errs <- sv.Serve(pc) }()
	go func() { sv.errs <- sv.ServeTCP(l) }()
	t.Cleanup(func() {
		sv.Close()
		for range 2 {
			if err := <-sv.errs; !errors.Is(err, ErrClosed) {
				t.Errorf("Serve returned %v; want ErrClosed", err)
			}
		}
	})
	return sv
}

// resolver is Go's own DNS client, sending every query to addr over
// network whatever it would pick.
func resolver(network, addr string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}

// TestGoResolver: Go's resolver, over UDP and TCP, gets the pool address of
// an allowed name (A and AAAA asked together: the empty AAAA is no error),
// "no such host" for a denied one, and each query is reported.
func TestGoResolver(t *testing.T) {
	sv := serve(t, Config{})
	ctx := context.Background()
	for _, c := range []struct{ network, addr string }{{"udp", sv.udp}, {"tcp", sv.tcp}} {
		r := resolver(c.network, c.addr)
		addrs, err := r.LookupHost(ctx, "Example.com.")
		if err != nil || !slices.Equal(addrs, []string{"127.100.0.1"}) {
			t.Errorf("%s: LookupHost(allowed) = %v, %v; want [127.100.0.1]", c.network, addrs, err)
		}
		ips, err := r.LookupNetIP(ctx, "ip4", "www.allowed.test.")
		if err != nil || len(ips) != 1 || ips[0] != netip.MustParseAddr("127.100.0.2") {
			t.Errorf("%s: LookupNetIP(ip4, allowed) = %v, %v; want [127.100.0.2]", c.network, ips, err)
		}
		for _, denied := range []string{"bad.allowed.test.", "other.com.", "example.com.localdomain."} {
			addrs, err := r.LookupHost(ctx, denied)
			var dnsErr *net.DNSError
			if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
				t.Errorf("%s: LookupHost(%s) = %v, %v; want no such host", c.network, denied, addrs, err)
			}
		}
		if _, err := r.LookupTXT(ctx, "example.com."); err == nil {
			t.Errorf("%s: TXT of an allowed name found a record", c.network)
		}
	}
	qs := sv.recorded()
	var allowedA, deniedA int
	for _, q := range qs {
		if !q.Client.Addr().IsLoopback() || q.Time.IsZero() || q.Network == "" {
			t.Errorf("record %+v: want the client, time and network", q)
		}
		switch {
		case q.Type == "A" && q.Verdict == Allowed:
			allowedA++
			if !q.Address.IsValid() || q.Rule == "" || q.RCode != "NOERROR" {
				t.Errorf("record of an answer %+v: want its address, rule and NOERROR", q)
			}
		case q.Type == "A" && q.Verdict == Denied:
			deniedA++
			if q.Address.IsValid() || q.RCode != "NXDOMAIN" {
				t.Errorf("record of a denial %+v: want NXDOMAIN and no address", q)
			}
		}
	}
	if allowedA != 4 || deniedA != 6 {
		t.Errorf("%d allowed and %d denied A queries recorded; want 4 and 6: %+v", allowedA, deniedA, qs)
	}
}

// exchangeUDP sends one datagram and reads one reply.
func exchangeUDP(t *testing.T, addr string, query []byte) []byte {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(query); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65536)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// TestServeDropsWhatIsNotAQuery: a response or an oversized datagram gets
// no reply (the next query's reply is the first thing read back), and is
// still reported.
func TestServeDropsWhatIsNotAQuery(t *testing.T) {
	sv := serve(t, Config{})
	c, err := net.Dial("udp", sv.udp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, m := range [][]byte{
		msg{id: 1, response: true}.build(t),
		msg{id: 2, edns: true, padding: 600}.build(t),
		{0, 3},
		msg{id: 4}.build(t),
	} {
		if _, err := c.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 65536)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := parseReply(buf[:n]); err != nil || r.header.ID != 4 {
		t.Errorf("first reply %+v, %v; want the one to query 4", r.header, err)
	}
	var verdicts []Verdict
	for _, q := range sv.recorded() {
		verdicts = append(verdicts, q.Verdict)
	}
	if !slices.Equal(verdicts, []Verdict{Dropped, Dropped, Dropped, Allowed}) {
		t.Errorf("verdicts %v; want three dropped, one allowed", verdicts)
	}
}

// TestServeTCPFraming: several queries in one TCP connection are answered
// in order; a message longer than 512 bytes is fine over TCP; a
// connection that sends a response is closed.
func TestServeTCPFraming(t *testing.T) {
	sv := serve(t, Config{})
	c, err := net.Dial("tcp", sv.tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame := func(m []byte) []byte {
		return append(binary.BigEndian.AppendUint16(nil, uint16(len(m))), m...)
	}
	var out bytes.Buffer
	out.Write(frame(msg{id: 1}.build(t)))
	out.Write(frame(msg{id: 2, name: "other.com."}.build(t)))
	out.Write(frame(msg{id: 3, edns: true, padding: 3000}.build(t)))
	out.Write(frame(msg{id: 4, response: true}.build(t)))
	out.Write(frame(msg{id: 5}.build(t)))
	if _, err := c.Write(out.Bytes()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		id    uint16
		rcode dnsmessage.RCode
	}{{1, dnsmessage.RCodeSuccess}, {2, dnsmessage.RCodeNameError}, {3, dnsmessage.RCodeSuccess}} {
		var length [2]byte
		if _, err := io.ReadFull(c, length[:]); err != nil {
			t.Fatalf("reading reply %d: %v", want.id, err)
		}
		m := make([]byte, binary.BigEndian.Uint16(length[:]))
		if _, err := io.ReadFull(c, m); err != nil {
			t.Fatal(err)
		}
		r, err := parseReply(m)
		if err != nil || r.header.ID != want.id || r.rcode != want.rcode {
			t.Errorf("reply %+v, %v; want ID %d, %v", r.header, err, want.id, want.rcode)
		}
	}
	// After the response (4) the server closes, 5 unread (so the close
	// may come as a reset): no reply to 5.
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Errorf("read %d bytes after a response sent; want the connection closed", n)
	}
}

// TestServeTCPBoundsConnections: a connection beyond MaxTCPConns is closed
// unread; those within are served.
func TestServeTCPBoundsConnections(t *testing.T) {
	sv := serve(t, Config{MaxTCPConns: 1})
	first, err := net.Dial("tcp", sv.tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	// A query answered on the first shows it was accepted and counted.
	m := msg{}.build(t)
	if _, err := first.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(m))), m...)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(first, make([]byte, 2)); err != nil {
		t.Fatal(err)
	}
	second, err := net.Dial("tcp", sv.tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if n, err := second.Read(make([]byte, 1)); err == nil {
		t.Errorf("a connection over the bound read %d bytes; want it closed", n)
	}
}

// TestCloseStopsServing: Serve and ServeTCP return ErrClosed on Close, a
// Serve after Close returns at once, and Lookup still answers.
func TestCloseStopsServing(t *testing.T) {
	s := newTestServer(t, Config{})
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- s.Serve(pc) }()
	exchangeUDP(t, pc.LocalAddr().String(), msg{}.build(t)) // serving
	// An open TCP connection is closed by Close too.
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- s.ServeTCP(l) }()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := msg{}.build(t)
	c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(m))), m...))
	if _, err := io.ReadFull(c, make([]byte, 2)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Errorf("Serve after Close: %v; want ErrClosed", err)
		}
	}
	if _, err := io.ReadAll(c); err != nil {
		t.Errorf("the open connection: %v; want it closed", err)
	}
	pc2, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(pc2); !errors.Is(err, ErrClosed) {
		t.Errorf("Serve on a closed Server: %v", err)
	}
	if _, err := pc2.WriteTo([]byte{0}, pc.LocalAddr()); err == nil {
		t.Errorf("Serve on a closed Server left its socket open")
	}
	if name, ok := s.Lookup(netip.MustParseAddr("127.100.0.1")); !ok || name != "example.com" {
		t.Errorf("Lookup after Close = %q, %v", name, ok)
	}
}

// TestDig: Debian's dig (bind9-dnsutils), a client that is not Go's, over
// UDP and TCP, with EDNS as it sends it.
func TestDig(t *testing.T) {
	dig, err := exec.LookPath("dig")
	if err != nil {
		t.Skip("dig not installed (apt-get install bind9-dnsutils)")
	}
	sv := serve(t, Config{})
	udpHost, udpPort, _ := net.SplitHostPort(sv.udp)
	_, tcpPort, _ := net.SplitHostPort(sv.tcp)
	run := func(port string, args ...string) string {
		t.Helper()
		args = append([]string{"@" + udpHost, "-p", port, "+tries=1", "+time=10"}, args...)
		out, _ := exec.Command(dig, args...).CombinedOutput()
		return string(out)
	}
	for _, c := range []struct {
		tcp  bool
		args []string
		want []string // parts of dig's output
	}{
		{false, []string{"+short", "example.com", "A"}, []string{"127.100.0.1\n"}},
		{true, []string{"+tcp", "+short", "EXAMPLE.com", "A"}, []string{"127.100.0.1\n"}},
		{false, []string{"x.allowed.test", "A"}, []string{"status: NOERROR", "ANSWER: 1,", "x.allowed.test.\t\t60\tIN\tA\t127.100.0.2", "udp: 1232"}},
		{false, []string{"example.com", "AAAA"}, []string{"status: NOERROR", "ANSWER: 0,"}},
		{false, []string{"bad.allowed.test", "A"}, []string{"status: NXDOMAIN", "ANSWER: 0,"}},
		{true, []string{"+tcp", "other.com", "TXT"}, []string{"status: NXDOMAIN"}},
		{true, []string{"example.com", "ANY"}, []string{"status: REFUSED"}}, // dig asks ANY over TCP
		{false, []string{"version.bind", "TXT", "CH"}, []string{"status: REFUSED"}},
		{false, []string{"+bufsize=65535", "example.com"}, []string{"status: NOERROR", "127.100.0.1", "udp: 1232"}},
		{false, []string{"+noednsneg", "+edns=1", "example.com"}, []string{"status: BADVERS"}},
		{false, []string{"+noedns", "example.com"}, []string{"status: NOERROR", "127.100.0.1"}},
		{true, []string{"example.com", "AXFR"}, []string{"Transfer failed"}},
	} {
		port := udpPort
		if c.tcp {
			port = tcpPort
		}
		out := run(port, c.args...)
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("dig %v: output lacks %q:\n%s", c.args, w, out)
			}
		}
	}
}
