package dns

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// TestRespond: what each query gets, in order on one Server (so the pool
// addresses count up): allowed names an A record from the pool, stable
// and case-insensitive; other types of an allowed name an empty NOERROR;
// denied and invalid names NXDOMAIN whatever the type; unsupported
// queries REFUSED, FORMERR, NOTIMP or BADVERS; non-queries nothing.
func TestRespond(t *testing.T) {
	s := newTestServer(t, Config{})
	type want struct {
		drop    bool
		rcode   dnsmessage.RCode
		answer  string // the A record's address, "" for none
		verdict Verdict
		rule    string
		reason  string // a part of the reason
		edns    bool   // an OPT record in the reply
		noQ     bool   // no question echoed
	}
	for _, c := range []struct {
		name    string
		query   []byte
		network string // default udp
		want    want
	}{
		{"an allowed name gets the pool's first address", msg{}.build(t), "", want{answer: "127.100.0.1", verdict: Allowed, rule: "example.com", reason: "names this host"}},
		{"the same name again gets the same address", msg{}.build(t), "", want{answer: "127.100.0.1", verdict: Allowed, rule: "example.com"}},
		{"another case of it too", msg{name: "EXAMPLE.COM."}.build(t), "", want{answer: "127.100.0.1", verdict: Allowed, rule: "example.com"}},
		{"a second name the next address", msg{name: "www.Allowed.test."}.build(t), "", want{answer: "127.100.0.2", verdict: Allowed, rule: "*.allowed.test"}},
		{"a name allowed on port 22 only has an address", msg{name: "ssh.example.org."}.build(t), "", want{answer: "127.100.0.3", verdict: Allowed, rule: "ssh.example.org:22"}},
		{"a name denied on port 80 but allowed on 443 has one", msg{name: "blocked.example.net."}.build(t), "", want{answer: "127.100.0.4", verdict: Allowed, rule: "blocked.example.net"}},
		{"AAAA of an allowed name: empty NOERROR", msg{typ: dnsmessage.TypeAAAA}.build(t), "", want{verdict: Allowed, rule: "example.com", reason: "no AAAA record"}},
		{"MX of an allowed name: empty NOERROR", msg{typ: dnsmessage.TypeMX}.build(t), "", want{verdict: Allowed, rule: "example.com"}},
		{"HTTPS of an allowed name: empty NOERROR (no ECH config)", msg{typ: 65}.build(t), "", want{verdict: Allowed, rule: "example.com", reason: "no HTTPS record"}},
		{"a denied name: NXDOMAIN", msg{name: "bad.allowed.test."}.build(t), "", want{rcode: dnsmessage.RCodeNameError, verdict: Denied, rule: "!bad.allowed.test", reason: "deny wins"}},
		{"AAAA of a denied name: NXDOMAIN", msg{name: "bad.allowed.test.", typ: dnsmessage.TypeAAAA}.build(t), "", want{rcode: dnsmessage.RCodeNameError, verdict: Denied, rule: "!bad.allowed.test"}},
		{"TXT of an unlisted name: NXDOMAIN", msg{name: "exfil-data.other.com.", typ: dnsmessage.TypeTXT}.build(t), "", want{rcode: dnsmessage.RCodeNameError, verdict: Denied, reason: "no rule"}},
		{"an unlisted name: NXDOMAIN", msg{name: "other.com."}.build(t), "", want{rcode: dnsmessage.RCodeNameError, verdict: Denied, reason: "no rule"}},
		{"a subdomain of an exact rule: NXDOMAIN", msg{name: "www.example.com."}.build(t), "", want{rcode: dnsmessage.RCodeNameError, verdict: Denied}},
		{"search-domain junk: NXDOMAIN", msg{name: "example.com.localdomain."}.build(t), "", want{rcode: dnsmessage.RCodeNameError, verdict: Denied}},
		{"the apex of *.: NXDOMAIN", msg{name: "allowed.test."}.build(t), "", want{rcode: dnsmessage.RCodeNameError, verdict: Denied}},
		{"an address rule's address as a name: NXDOMAIN", msg{name: "1.2.3.4."}.build(t), "", want{rcode: dnsmessage.RCodeNameError, verdict: Denied, reason: "invalid host"}},
		{"localhost: NXDOMAIN", msg{name: "localhost."}.build(t), "", want{rcode: dnsmessage.RCodeNameError, verdict: Denied}},
		{"an underscore name: NXDOMAIN", msg{name: "_http._tcp.example.com.", typ: dnsmessage.TypeSRV}.build(t), "", want{rcode: dnsmessage.RCodeNameError, verdict: Denied, reason: "invalid host"}},
		{"the root: NXDOMAIN", msg{name: "."}.build(t), "", want{rcode: dnsmessage.RCodeNameError, verdict: Denied}},
		{"ANY: REFUSED", msg{typ: dnsmessage.TypeALL}.build(t), "", want{rcode: dnsmessage.RCodeRefused, verdict: Refused, reason: "ANY"}},
		{"AXFR: REFUSED", msg{typ: dnsmessage.TypeAXFR}.build(t), "tcp", want{rcode: dnsmessage.RCodeRefused, verdict: Refused, reason: "no zone to transfer"}},
		{"IXFR: REFUSED", msg{typ: 251}.build(t), "tcp", want{rcode: dnsmessage.RCodeRefused, verdict: Refused, reason: "no zone to transfer"}},
		{"a meta type as a question: REFUSED", msg{typ: 250}.build(t), "", want{rcode: dnsmessage.RCodeRefused, verdict: Refused, reason: "meta type"}},
		{"class CH: REFUSED", msg{class: dnsmessage.ClassCHAOS, name: "version.bind.", typ: dnsmessage.TypeTXT}.build(t), "", want{rcode: dnsmessage.RCodeRefused, verdict: Refused, reason: "class CH"}},
		{"class ANY: REFUSED", msg{class: dnsmessage.ClassANY}.build(t), "", want{rcode: dnsmessage.RCodeRefused, verdict: Refused}},
		{"two questions: FORMERR", msg{questions: 2}.build(t), "", want{rcode: dnsmessage.RCodeFormatError, verdict: Refused, reason: "more than one question", noQ: true}},
		{"no question: FORMERR", msg{noQuestion: true}.build(t), "", want{rcode: dnsmessage.RCodeFormatError, verdict: Refused, reason: "no question", noQ: true}},
		{"answers in a query: FORMERR", msg{answers: 1}.build(t), "", want{rcode: dnsmessage.RCodeFormatError, verdict: Refused, reason: "answer records"}},
		{"authorities in a query: FORMERR", msg{authorities: 1}.build(t), "", want{rcode: dnsmessage.RCodeFormatError, verdict: Refused, reason: "authority records"}},
		{"opcode STATUS: NOTIMP", msg{opcode: 2}.build(t), "", want{rcode: dnsmessage.RCodeNotImplemented, verdict: Refused, reason: "opcode 2", noQ: true}},
		{"opcode UPDATE: NOTIMP", msg{opcode: 5}.build(t), "", want{rcode: dnsmessage.RCodeNotImplemented, verdict: Refused, noQ: true}},
		{"EDNS with a huge size: answered, our size in the OPT", msg{edns: true, ednsSize: 65535}.build(t), "", want{answer: "127.100.0.1", verdict: Allowed, rule: "example.com", edns: true}},
		{"EDNS with a size below 512: answered", msg{edns: true, ednsSize: 1}.build(t), "", want{answer: "127.100.0.1", verdict: Allowed, rule: "example.com", edns: true}},
		{"EDNS version 1: BADVERS", msg{edns: true, ednsVersion: 1}.build(t), "", want{rcode: rcodeBadVers, verdict: Refused, reason: "EDNS version 1", edns: true}},
		{"two OPT records: FORMERR without OPT", msg{opts: 2}.build(t), "", want{rcode: dnsmessage.RCodeFormatError, verdict: Refused, reason: "more than one OPT"}},
		{"a UDP query over 512 bytes: dropped", msg{edns: true, padding: 600}.build(t), "", want{drop: true, reason: "longer than 512"}},
		{"the same query over TCP: answered", msg{edns: true, padding: 600}.build(t), "tcp", want{answer: "127.100.0.1", verdict: Allowed, rule: "example.com", edns: true}},
		{"a response: dropped", msg{response: true}.build(t), "", want{drop: true, reason: "a response"}},
		{"an empty packet: dropped", nil, "", want{drop: true, reason: "shorter than a DNS header"}},
		{"11 bytes: dropped", msg{}.build(t)[:11], "", want{drop: true, reason: "shorter than a DNS header"}},
		{"a question cut short: FORMERR", msg{}.build(t)[:20], "", want{rcode: dnsmessage.RCodeFormatError, verdict: Refused, reason: "malformed question", noQ: true}},
		{"a question without its type: FORMERR", msg{}.build(t)[:25], "", want{rcode: dnsmessage.RCodeFormatError, verdict: Refused, noQ: true}},
		{"a name pointing at itself: FORMERR", pointerLoop(), "", want{rcode: dnsmessage.RCodeFormatError, verdict: Refused, noQ: true}},
		{"a label with a dot in it: FORMERR", dottedLabel(), "", want{rcode: dnsmessage.RCodeFormatError, verdict: Refused, noQ: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			network := c.network
			if network == "" {
				network = "udp"
			}
			out, q := s.respond(c.query, network)
			if !strings.Contains(q.Reason, c.want.reason) {
				t.Errorf("reason %q; want it to contain %q", q.Reason, c.want.reason)
			}
			if c.want.drop {
				if out != nil || q.Verdict != Dropped || q.RCode != "" {
					t.Errorf("got a reply (%x) or verdict %q, rcode %q; want it dropped", out, q.Verdict, q.RCode)
				}
				return
			}
			r, err := parseReply(out)
			if err != nil {
				t.Fatalf("reply %x does not parse: %v", out, err)
			}
			if len(out) > maxReply {
				t.Errorf("reply of %d bytes", len(out))
			}
			if !r.header.Response || r.header.ID != 0x1234 || !r.header.RecursionAvailable {
				t.Errorf("header %+v: want a response with the query's ID and RA", r.header)
			}
			if r.rcode != c.want.rcode || q.RCode != rcodeName(c.want.rcode) {
				t.Errorf("rcode %v (recorded %s); want %v", r.rcode, q.RCode, c.want.rcode)
			}
			if q.Verdict != c.want.verdict || q.Rule != c.want.rule {
				t.Errorf("verdict %q, rule %q; want %q, %q", q.Verdict, q.Rule, c.want.verdict, c.want.rule)
			}
			if (r.opt != nil) != c.want.edns {
				t.Errorf("OPT in the reply: %v; want %v", r.opt != nil, c.want.edns)
			}
			if r.opt != nil && r.opt.Header.Class != ednsSize {
				t.Errorf("OPT size %d; want %d", r.opt.Header.Class, ednsSize)
			}
			if c.want.noQ != (len(r.questions) == 0) || len(r.questions) > 1 {
				t.Errorf("%d questions echoed; want none: %v", len(r.questions), c.want.noQ)
			}
			if len(r.questions) == 1 && !bytes.Equal(questionBytes(t, c.query), questionBytes(t, out)) {
				t.Errorf("the question echoed differs from the one asked")
			}
			var got string
			for _, a := range r.answers {
				ar, ok := a.Body.(*dnsmessage.AResource)
				if !ok || a.Header.TTL != answerTTL {
					t.Fatalf("answer %v: want one A record with TTL %d", a, answerTTL)
				}
				got = netip.AddrFrom4(ar.A).String()
			}
			if len(r.answers) > 1 || got != c.want.answer {
				t.Errorf("answers %v; want %q", r.answers, c.want.answer)
			}
			if q.Address.IsValid() != (c.want.answer != "") || c.want.answer != "" && q.Address.String() != c.want.answer {
				t.Errorf("recorded address %v; want %q", q.Address, c.want.answer)
			}
		})
	}
}

// questionBytes is the question section of a message with one question
// written without compression: from after the header to after the class.
func questionBytes(t *testing.T, m []byte) []byte {
	t.Helper()
	end := 12
	for end < len(m) && m[end] != 0 {
		end += 1 + int(m[end])
	}
	if end+5 > len(m) {
		t.Fatalf("no whole question in %x", m)
	}
	return m[12 : end+5]
}

// pointerLoop is a query whose name is a compression pointer to itself.
func pointerLoop() []byte {
	return []byte{0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1}
}

// dottedLabel is a query for one label "example.com", a dot inside it:
// read as text it would be the two labels example and com.
func dottedLabel() []byte {
	q := []byte{0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 11}
	q = append(q, "example.com"...)
	return append(q, 0, 0, 1, 0, 1)
}

// TestAnswerKeepsTheCaseAsked: DNS 0x20 — the reply's question and answer
// carry the name exactly as the query wrote it, so a resolver that
// randomised the case accepts it, and the address is the name's.
func TestAnswerKeepsTheCaseAsked(t *testing.T) {
	s := newTestServer(t, Config{})
	for _, asked := range []string{"example.com.", "eXaMpLe.CoM.", "EXAMPLE.COM."} {
		out, q := s.respond(msg{name: asked}.build(t), "udp")
		r, err := parseReply(out)
		if err != nil {
			t.Fatalf("%s: %v", asked, err)
		}
		if len(r.questions) != 1 || r.questions[0].Name.String() != asked {
			t.Errorf("%s: question echoed as %v", asked, r.questions)
		}
		if len(r.answers) != 1 || r.answers[0].Header.Name.String() != asked {
			t.Fatalf("%s: answers %v; want one named as asked", asked, r.answers)
		}
		if got := netip.AddrFrom4(r.answers[0].Body.(*dnsmessage.AResource).A); got != netip.MustParseAddr("127.100.0.1") {
			t.Errorf("%s: address %s; want 127.100.0.1 for every case", asked, got)
		}
		if q.Name != strings.TrimSuffix(asked, ".") {
			t.Errorf("recorded name %q; want %q", q.Name, asked)
		}
	}
}

// TestPoolFullRefusesNewNames: with the pool full a new name is REFUSED
// (not SERVFAIL: asking again cannot help), and the names given keep
// their addresses; no address is ever taken back.
func TestPoolFullRefusesNewNames(t *testing.T) {
	s := newTestServer(t, Config{MaxNames: 2})
	ask := func(name string) (parsed, Query) {
		t.Helper()
		out, q := s.respond(msg{name: name}.build(t), "udp")
		r, err := parseReply(out)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r, q
	}
	for _, name := range []string{"a.allowed.test.", "b.allowed.test."} {
		if r, _ := ask(name); len(r.answers) != 1 {
			t.Fatalf("%s: not answered: %+v", name, r)
		}
	}
	r, q := ask("c.allowed.test.")
	if r.rcode != dnsmessage.RCodeRefused || len(r.answers) != 0 || q.Verdict != Refused || !strings.Contains(q.Reason, "every one of the 2 addresses") {
		t.Errorf("third name: rcode %v, %d answers, %+v; want REFUSED", r.rcode, len(r.answers), q)
	}
	if r, _ := ask("A.allowed.test."); len(r.answers) != 1 || netip.AddrFrom4(r.answers[0].Body.(*dnsmessage.AResource).A).String() != "127.100.0.1" {
		t.Errorf("a name given before the pool filled lost its address: %+v", r)
	}
	if _, ok := s.Lookup(netip.MustParseAddr("127.100.0.3")); ok || s.pool.size() != 2 {
		t.Errorf("the pool grew past its bound to %d", s.pool.size())
	}
	// A denied name is still NXDOMAIN, not REFUSED: the pool is not asked.
	if r, _ := ask("other.com."); r.rcode != dnsmessage.RCodeNameError {
		t.Errorf("denied name with the pool full: rcode %v; want NXDOMAIN", r.rcode)
	}
}

// TestLookup: the name an address was given to, both ways, the
// IPv4-mapped form too; no name for an address never given.
func TestLookup(t *testing.T) {
	s := newTestServer(t, Config{})
	for _, name := range []string{"Example.COM.", "x.allowed.test."} {
		s.respond(msg{name: name}.build(t), "udp")
	}
	for _, c := range []struct {
		addr string
		name string
		ok   bool
	}{
		{"127.100.0.1", "example.com", true},
		{"::ffff:127.100.0.1", "example.com", true},
		{"127.100.0.2", "x.allowed.test", true},
		{"127.100.0.3", "", false},
		{"127.100.0.0", "", false},
		{"127.0.0.1", "", false},
		{"::1", "", false},
	} {
		name, ok := s.Lookup(netip.MustParseAddr(c.addr))
		if name != c.name || ok != c.ok {
			t.Errorf("Lookup(%s) = %q, %v; want %q, %v", c.addr, name, ok, c.name, c.ok)
		}
	}
	if name, ok := s.Lookup(netip.Addr{}); ok {
		t.Errorf("Lookup(zero Addr) = %q", name)
	}
}

// TestNewChecksTheConfig: the pool's range must be loopback away from the
// well-known addresses, and the bounds must fit it.
func TestNewChecksTheConfig(t *testing.T) {
	for _, c := range []struct {
		cfg    Config
		reason string // "" when accepted
	}{
		{Config{}, ""},
		{Config{Prefix: netip.MustParsePrefix("127.200.0.0/24"), MaxNames: 254}, ""},
		{Config{Prefix: netip.MustParsePrefix("127.128.0.0/9")}, "lo's broadcast"},
		{Config{Prefix: netip.MustParsePrefix("127.200.0.0/24"), MaxNames: 255}, "only 254 addresses"},
		{Config{Prefix: netip.MustParsePrefix("127.0.0.0/8")}, "overlaps 127.0.0.0/16"},
		{Config{Prefix: netip.MustParsePrefix("127.0.0.0/24")}, "overlaps 127.0.0.0/16"},
		{Config{Prefix: netip.MustParsePrefix("10.0.0.0/16")}, "inside 127.0.0.0/8"},
		{Config{Prefix: netip.MustParsePrefix("126.0.0.0/7")}, "inside 127.0.0.0/8"},
		{Config{Prefix: netip.MustParsePrefix("::1/128")}, "IPv4"},
		{Config{Prefix: netip.MustParsePrefix("127.100.0.1/16")}, "bits set"},
		{Config{Prefix: netip.MustParsePrefix("127.100.0.0/31")}, "too small"},
		{Config{MaxNames: -1}, "positive"},
		{Config{MaxTCPConns: -1}, "positive"},
	} {
		_, err := New(c.cfg)
		switch {
		case c.reason == "" && err != nil:
			t.Errorf("New(%+v): %v", c.cfg, err)
		case c.reason != "" && (err == nil || !strings.Contains(err.Error(), c.reason)):
			t.Errorf("New(%+v) = %v; want an error containing %q", c.cfg, err, c.reason)
		}
	}
}

// TestNilRulesDenyEveryName: a Server without rules answers no name.
func TestNilRulesDenyEveryName(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	out, q := s.respond(msg{}.build(t), "udp")
	r, err := parseReply(out)
	if err != nil || r.rcode != dnsmessage.RCodeNameError || q.Verdict != Denied {
		t.Errorf("rcode %v, verdict %q, err %v; want NXDOMAIN", r.rcode, q.Verdict, err)
	}
}

// TestPresentName: the recorded name is printable and cannot pass for
// another: bytes outside letters, digits, - and _ are \DDD.
func TestPresentName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{".", "."},
		{"Example.com.", "Example.com"},
		{"a b.com.", `a\032b.com`},
		{"a\\.com.", `a\092.com`},
		{"\x00\xff.", `\000\255`},
		{"_x-1.", "_x-1"},
	} {
		var n dnsmessage.Name
		n.Length = uint8(copy(n.Data[:], c.in))
		if got := presentName(n); got != c.want {
			t.Errorf("presentName(%q) = %q; want %q", c.in, got, c.want)
		}
	}
}
