package dns

import (
	"bytes"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/jail-sandbox/jail/internal/egress/rules"
)

// FuzzRespond: whatever arrives, respond does not panic; a reply is a
// well-formed response of at most 512 bytes carrying the query's ID and,
// when it has one, the query's own question; an answer is only ever one A
// record, named as asked, for a name the rules allow, at the pool address
// Lookup maps back to that name; a denial is NXDOMAIN; and the record
// agrees with the reply.
func FuzzRespond(f *testing.F) {
	seeds := []msg{
		{}, {name: "ExAmPlE.cOm."}, {name: "www.allowed.test."}, {name: "bad.allowed.test."},
		{name: "ssh.example.org.", typ: dnsmessage.TypeAAAA}, {name: "other.com.", typ: dnsmessage.TypeTXT},
		{typ: dnsmessage.TypeALL}, {typ: dnsmessage.TypeAXFR}, {class: dnsmessage.ClassCHAOS},
		{questions: 2}, {noQuestion: true}, {answers: 1}, {opcode: 5}, {response: true},
		{edns: true, ednsSize: 65535}, {edns: true, ednsVersion: 1}, {opts: 2}, {edns: true, padding: 40},
		{name: "1.2.3.4."}, {name: "_x.allowed.test."},
	}
	for _, m := range seeds {
		f.Add(m.build(f), false)
		f.Add(m.build(f), true)
	}
	f.Add(pointerLoop(), false)
	f.Add(dottedLabel(), false)
	rs, err := rules.Parse(testRules)
	if err != nil {
		f.Fatal(err)
	}
	s := newTestServer(f, Config{Rules: rs})
	f.Fuzz(func(t *testing.T, query []byte, tcp bool) {
		network := "udp"
		if tcp {
			network = "tcp"
		}
		out, q := s.respond(query, network)
		if out == nil {
			if q.Verdict != Dropped || q.RCode != "" || q.Address.IsValid() {
				t.Fatalf("no reply but record %+v", q)
			}
			return
		}
		if len(out) > maxReply {
			t.Fatalf("reply of %d bytes", len(out))
		}
		r, err := parseReply(out)
		if err != nil {
			t.Fatalf("reply %x does not parse: %v", out, err)
		}
		if !r.header.Response || r.header.ID != uint16(query[0])<<8|uint16(query[1]) {
			t.Fatalf("header %+v: not a response to the query", r.header)
		}
		if q.RCode != rcodeName(r.rcode) {
			t.Fatalf("recorded %s, replied %v", q.RCode, r.rcode)
		}
		if len(r.questions) > 1 {
			t.Fatalf("%d questions in the reply", len(r.questions))
		}
		var asked dnsmessage.Question
		if len(r.questions) == 1 {
			var p dnsmessage.Parser
			p.Start(query)
			asked, err = p.Question()
			if err != nil || asked != r.questions[0] {
				t.Fatalf("question %v echoed; asked %v (%v)", r.questions[0], asked, err)
			}
		}
		decision := rules.Decision{}
		if len(r.questions) == 1 {
			decision = rs.DecideName(asked.Name.String())
		}
		switch q.Verdict {
		case Allowed:
			if r.rcode != dnsmessage.RCodeSuccess || !decision.Allowed {
				t.Fatalf("allowed with rcode %v, decision %+v", r.rcode, decision)
			}
		case Denied:
			if r.rcode != dnsmessage.RCodeNameError || decision.Allowed {
				t.Fatalf("denied with rcode %v, decision %+v", r.rcode, decision)
			}
		case Refused:
			if r.rcode == dnsmessage.RCodeSuccess || r.rcode == dnsmessage.RCodeNameError {
				t.Fatalf("refused with rcode %v", r.rcode)
			}
		default:
			t.Fatalf("a reply with verdict %q", q.Verdict)
		}
		if len(r.answers) == 0 {
			if q.Address.IsValid() {
				t.Fatalf("recorded address %s, none answered", q.Address)
			}
			return
		}
		// An answer: for an allowed name only, as asked, from the pool.
		if len(r.answers) != 1 || q.Verdict != Allowed || asked.Type != dnsmessage.TypeA {
			t.Fatalf("answers %v to %v, verdict %q", r.answers, asked, q.Verdict)
		}
		a := r.answers[0]
		body, ok := a.Body.(*dnsmessage.AResource)
		if !ok || a.Header.Class != dnsmessage.ClassINET || !bytes.Equal(a.Header.Name.Data[:a.Header.Name.Length], asked.Name.Data[:asked.Name.Length]) {
			t.Fatalf("answer %v to %v", a, asked)
		}
		addr := q.Address
		if addr.As4() != body.A || !DefaultPrefix.Contains(addr) {
			t.Fatalf("answered %v, recorded %s", body.A, addr)
		}
		name, ok := s.Lookup(addr)
		canonical, err := rules.CanonicalHost(asked.Name.String())
		if !ok || err != nil || name != canonical {
			t.Fatalf("Lookup(%s) = %q, %v; asked %q (%q, %v)", addr, name, ok, asked.Name, canonical, err)
		}
	})
}
