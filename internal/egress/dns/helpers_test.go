package dns

import (
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/jail-sandbox/jail/internal/egress/rules"
)

// testRules is the allowlist the tests answer from.
const testRules = "example.com,*.allowed.test,!bad.allowed.test,ssh.example.org:22,1.2.3.4,!blocked.example.net:80,blocked.example.net"

// newTestServer returns a Server for testRules and cfg's other fields.
func newTestServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	rs, err := rules.Parse(testRules)
	if err != nil {
		t.Fatalf("rules.Parse: %v", err)
	}
	if cfg.Rules == nil {
		cfg.Rules = rs
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// msg describes a query to build; the zero value of a field is the usual.
type msg struct {
	id          uint16
	name        string // default example.com.
	typ         dnsmessage.Type
	class       dnsmessage.Class
	opcode      dnsmessage.OpCode
	response    bool
	noQuestion  bool
	questions   int // more than one: the same question again
	answers     int // A records in the answer section
	authorities int
	edns        bool
	ednsSize    uint16
	ednsVersion uint8
	opts        int // OPT records (edns sets 1)
	padding     int // bytes of EDNS padding (RFC 7830)
}

// build encodes m.
func (m msg) build(t testing.TB) []byte {
	t.Helper()
	name := m.name
	if name == "" {
		name = "example.com."
	}
	typ, class := m.typ, m.class
	if typ == 0 {
		typ = dnsmessage.TypeA
	}
	if class == 0 {
		class = dnsmessage.ClassINET
	}
	n, err := dnsmessage.NewName(name)
	if err != nil {
		t.Fatalf("NewName(%q): %v", name, err)
	}
	id := m.id
	if id == 0 {
		id = 0x1234
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, OpCode: m.opcode, Response: m.response, RecursionDesired: true})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("building %+v: %v", m, err)
		}
	}
	must(b.StartQuestions())
	questions := max(m.questions, 1)
	if m.noQuestion {
		questions = 0
	}
	for range questions {
		must(b.Question(dnsmessage.Question{Name: n, Type: typ, Class: class}))
	}
	must(b.StartAnswers())
	for range m.answers {
		must(b.AResource(dnsmessage.ResourceHeader{Name: n, Class: dnsmessage.ClassINET, TTL: 1}, dnsmessage.AResource{A: [4]byte{1, 2, 3, 4}}))
	}
	must(b.StartAuthorities())
	for range m.authorities {
		must(b.AResource(dnsmessage.ResourceHeader{Name: n, Class: dnsmessage.ClassINET, TTL: 1}, dnsmessage.AResource{A: [4]byte{1, 2, 3, 4}}))
	}
	must(b.StartAdditionals())
	opts := m.opts
	if m.edns && opts == 0 {
		opts = 1
	}
	for range opts {
		var rh dnsmessage.ResourceHeader
		size := m.ednsSize
		if size == 0 {
			size = 1232
		}
		must(rh.SetEDNS0(int(size), 0, false))
		rh.TTL |= uint32(m.ednsVersion) << 16
		var o dnsmessage.OPTResource
		if m.padding > 0 {
			o.Options = []dnsmessage.Option{{Code: 12, Data: make([]byte, m.padding)}}
		}
		must(b.OPTResource(rh, o))
	}
	out, err := b.Finish()
	must(err)
	return out
}

// parsed is a reply, read in full.
type parsed struct {
	header    dnsmessage.Header
	rcode     dnsmessage.RCode // extended when there is an OPT
	questions []dnsmessage.Question
	answers   []dnsmessage.Resource
	opt       *dnsmessage.Resource
}

// parseReply reads every section of a reply, or says what is wrong with it.
func parseReply(b []byte) (parsed, error) {
	var p dnsmessage.Parser
	var r parsed
	var err error
	if r.header, err = p.Start(b); err != nil {
		return r, err
	}
	r.rcode = r.header.RCode
	if r.questions, err = p.AllQuestions(); err != nil {
		return r, err
	}
	if r.answers, err = p.AllAnswers(); err != nil {
		return r, err
	}
	if _, err = p.AllAuthorities(); err != nil {
		return r, err
	}
	additionals, err := p.AllAdditionals()
	if err != nil {
		return r, err
	}
	for i := range additionals {
		if additionals[i].Header.Type == dnsmessage.TypeOPT {
			r.opt = &additionals[i]
			r.rcode = additionals[i].Header.ExtendedRCode(r.header.RCode)
		}
	}
	return r, nil
}
