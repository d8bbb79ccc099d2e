package dns

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/jail-sandbox/jail/internal/egress/rules"
)

// rcodeBadVers is BADVERS (RFC 6891): an EDNS version this server does not
// speak. It needs the OPT record's extended bits.
const rcodeBadVers dnsmessage.RCode = 16

// reply is a response being made.
type reply struct {
	header   dnsmessage.Header
	rcode    dnsmessage.RCode     // may be extended (BADVERS)
	question *dnsmessage.Question // echoed when set
	answer   netip.Addr           // an A record when valid
	edns     bool                 // the query had a valid OPT record: answer with one
}

// respond handles one message received over network ("udp" or "tcp") and
// returns the reply to send (nil: none) and the record of the query,
// Client left for the caller. It never panics, whatever msg holds.
func (s *Server) respond(msg []byte, network string) ([]byte, Query) {
	q := Query{Time: time.Now(), Network: network, Verdict: Dropped}
	if network == "udp" && len(msg) > maxUDPQuery {
		q.Reason = fmt.Sprintf("a UDP query longer than %d bytes", maxUDPQuery)
		return nil, q
	}
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		q.Reason = "shorter than a DNS header"
		return nil, q
	}
	if h.Response {
		q.Reason = "a response, not a query"
		return nil, q
	}
	r := &reply{header: dnsmessage.Header{
		ID:                 h.ID,
		Response:           true,
		OpCode:             h.OpCode,
		RecursionDesired:   h.RecursionDesired,
		RecursionAvailable: true, // a stub expects a recursive resolver: Go's takes an empty reply without RA for a lame referral
		CheckingDisabled:   h.CheckingDisabled,
	}}
	refuse := func(rcode dnsmessage.RCode, format string, args ...any) ([]byte, Query) {
		r.rcode = rcode
		r.answer = netip.Addr{}
		q.Verdict, q.Reason = Refused, fmt.Sprintf(format, args...)
		return s.finish(r, &q)
	}
	if h.OpCode != 0 {
		return refuse(dnsmessage.RCodeNotImplemented, "opcode %d: only standard queries (0) are answered", h.OpCode)
	}
	question, err := p.Question()
	if errors.Is(err, dnsmessage.ErrSectionDone) {
		return refuse(dnsmessage.RCodeFormatError, "no question")
	}
	if err != nil {
		return refuse(dnsmessage.RCodeFormatError, "a malformed question: %s", parseError(err))
	}
	q.Name, q.Type = presentName(question.Name), typeName(question.Type)
	if _, err := p.Question(); !errors.Is(err, dnsmessage.ErrSectionDone) {
		return refuse(dnsmessage.RCodeFormatError, "more than one question")
	}
	r.question = &question
	if _, err := p.AnswerHeader(); !errors.Is(err, dnsmessage.ErrSectionDone) {
		return refuse(dnsmessage.RCodeFormatError, "answer records in a query")
	}
	if _, err := p.AuthorityHeader(); !errors.Is(err, dnsmessage.ErrSectionDone) {
		return refuse(dnsmessage.RCodeFormatError, "authority records in a query")
	}
	ednsVersion := -1
	for {
		rh, err := p.AdditionalHeader()
		if errors.Is(err, dnsmessage.ErrSectionDone) {
			break
		}
		if err != nil {
			return refuse(dnsmessage.RCodeFormatError, "a malformed additional record: %s", parseError(err))
		}
		if rh.Type == dnsmessage.TypeOPT {
			if ednsVersion >= 0 {
				r.edns = false // RFC 6891 6.1.1: FORMERR, without an OPT
				return refuse(dnsmessage.RCodeFormatError, "more than one OPT record")
			}
			if rh.Name.Length != 1 || rh.Name.Data[0] != '.' {
				return refuse(dnsmessage.RCodeFormatError, "an OPT record not at the root name")
			}
			// The client's UDP payload size (rh.Class) needs no check: no
			// reply is ever larger than 512 bytes, which every client takes.
			ednsVersion = int(rh.TTL>>16) & 0xff
			r.edns = true
		}
		// Other records (a TSIG, a SIG(0)) are ignored: nothing here is
		// signed or needs to be.
		if err := p.SkipAdditional(); err != nil {
			r.edns = false
			return refuse(dnsmessage.RCodeFormatError, "a malformed additional record: %s", parseError(err))
		}
	}
	if ednsVersion > 0 {
		return refuse(rcodeBadVers, "EDNS version %d: only version 0 is spoken", ednsVersion)
	}
	if question.Class != dnsmessage.ClassINET {
		return refuse(dnsmessage.RCodeRefused, "class %s: only IN is answered", className(question.Class))
	}
	switch t := question.Type; {
	case t == dnsmessage.TypeALL:
		return refuse(dnsmessage.RCodeRefused, "ANY is not answered (RFC 8482): ask for A")
	case t == dnsmessage.TypeAXFR || t == 251: // IXFR
		return refuse(dnsmessage.RCodeRefused, "%s: there is no zone to transfer", typeName(t))
	case t == dnsmessage.TypeOPT || t >= 128 && t <= 255:
		return refuse(dnsmessage.RCodeRefused, "%s is a meta type, not a record type to ask for", typeName(t))
	}

	asked := question.Name.String()
	d := s.rules.DecideName(asked)
	q.Rule = d.Rule
	if !d.Allowed {
		r.rcode = dnsmessage.RCodeNameError
		q.Verdict, q.Reason = Denied, d.Reason
		return s.finish(r, &q)
	}
	q.Verdict, q.Reason = Allowed, d.Reason
	// Only A: IPv6 has one loopback address (::1), so no address per name.
	// AAAA (and any other type) gets an empty NOERROR, which says the name
	// exists without records of that type, so a client asking A and AAAA
	// together uses the A; NXDOMAIN would say the name does not exist at
	// all, and a stub that gets it for either question gives up.
	if question.Type != dnsmessage.TypeA {
		q.Reason += fmt.Sprintf("; no %s record: only A is answered", typeName(question.Type))
		return s.finish(r, &q)
	}
	name, err := rules.CanonicalHost(asked)
	if err != nil { // DecideName allowed it, so it is a canonical name
		return refuse(dnsmessage.RCodeServerFailure, "%s", err)
	}
	addr, ok := s.pool.assign(name)
	if !ok {
		// REFUSED, not SERVFAIL: SERVFAIL says "try again", and nothing
		// will change (addresses are never taken back, or a connection to
		// one could reach another name than the one it was given for).
		q.Rule = ""
		return refuse(dnsmessage.RCodeRefused, "every one of the %d addresses is given to another name (names keep theirs for the sandbox's life)", s.pool.max)
	}
	r.answer = addr
	q.Address = addr
	return s.finish(r, &q)
}

// finish packs the reply and completes the record of the query. A reply
// that cannot be packed, or does not fit maxReply, falls back to a
// smaller one that always does.
func (s *Server) finish(r *reply, q *Query) ([]byte, Query) {
	q.RCode = rcodeName(r.rcode)
	out, err := r.pack()
	if err == nil && len(out) <= maxReply {
		return out, *q
	}
	if err == nil {
		// Cannot happen with one question and one A record; if it did,
		// truncation is the well-formed way to say so.
		r.header.Truncated = true
		r.answer = netip.Addr{}
		q.Address = netip.Addr{}
	} else {
		r.rcode, r.question, r.answer = dnsmessage.RCodeServerFailure, nil, netip.Addr{}
		q.Verdict, q.RCode, q.Rule, q.Address = Refused, rcodeName(r.rcode), "", netip.Addr{}
		q.Reason = "the reply could not be made: " + err.Error()
	}
	out, err = r.pack()
	if err != nil || len(out) > maxReply {
		q.Verdict, q.RCode, q.Rule, q.Address = Dropped, "", "", netip.Addr{}
		q.Reason = "no reply could be made"
		return nil, *q
	}
	return out, *q
}

// pack encodes the reply.
func (r *reply) pack() ([]byte, error) {
	h := r.header
	h.RCode = r.rcode & 0xf
	b := dnsmessage.NewBuilder(make([]byte, 0, maxReply), h)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if r.question != nil {
		if err := b.Question(*r.question); err != nil {
			return nil, err
		}
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	if r.answer.IsValid() && r.question != nil {
		rh := dnsmessage.ResourceHeader{Name: r.question.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: answerTTL}
		if err := b.AResource(rh, dnsmessage.AResource{A: r.answer.As4()}); err != nil {
			return nil, err
		}
	}
	if err := b.StartAdditionals(); err != nil {
		return nil, err
	}
	if r.edns {
		var rh dnsmessage.ResourceHeader
		if err := rh.SetEDNS0(ednsSize, r.rcode, false); err != nil {
			return nil, err
		}
		if err := b.OPTResource(rh, dnsmessage.OPTResource{}); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

// parseError is dnsmessage's error without its package prefix.
func parseError(err error) string {
	return strings.TrimPrefix(err.Error(), "dnsmessage: ")
}

// presentName is a name as asked, for the record: case kept, no trailing
// dot (the root is "."), and every byte other than a letter, a digit, -
// or _ within a label as \DDD, so that the text is printable and cannot
// pass for another name.
func presentName(n dnsmessage.Name) string {
	data := n.Data[:n.Length]
	if len(data) == 0 || string(data) == "." {
		return "."
	}
	data = data[:len(data)-1] // the trailing dot
	var b strings.Builder
	for _, c := range data {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
			b.WriteByte(c) // a '.' here is a label boundary: labels with dots do not parse
		default:
			fmt.Fprintf(&b, "\\%03d", c)
		}
	}
	return b.String()
}

// typeNames are the mnemonics of the types worth naming in a record.
var typeNames = map[dnsmessage.Type]string{
	1: "A", 2: "NS", 5: "CNAME", 6: "SOA", 12: "PTR", 15: "MX", 16: "TXT",
	28: "AAAA", 33: "SRV", 35: "NAPTR", 41: "OPT", 43: "DS", 48: "DNSKEY",
	64: "SVCB", 65: "HTTPS", 99: "SPF", 249: "TKEY", 250: "TSIG", 251: "IXFR",
	252: "AXFR", 253: "MAILB", 254: "MAILA", 255: "ANY", 257: "CAA",
}

// typeName is a type's mnemonic, or TYPEn (RFC 3597).
func typeName(t dnsmessage.Type) string {
	if s, ok := typeNames[t]; ok {
		return s
	}
	return "TYPE" + strconv.Itoa(int(t))
}

// className is a class's mnemonic, or CLASSn (RFC 3597).
func className(c dnsmessage.Class) string {
	switch c {
	case dnsmessage.ClassINET:
		return "IN"
	case dnsmessage.ClassCHAOS:
		return "CH"
	case dnsmessage.ClassHESIOD:
		return "HS"
	case dnsmessage.ClassANY:
		return "ANY"
	}
	return "CLASS" + strconv.Itoa(int(c))
}

// rcodeName is a response code's mnemonic.
func rcodeName(c dnsmessage.RCode) string {
	switch c {
	case dnsmessage.RCodeSuccess:
		return "NOERROR"
	case dnsmessage.RCodeFormatError:
		return "FORMERR"
	case dnsmessage.RCodeServerFailure:
		return "SERVFAIL"
	case dnsmessage.RCodeNameError:
		return "NXDOMAIN"
	case dnsmessage.RCodeNotImplemented:
		return "NOTIMP"
	case dnsmessage.RCodeRefused:
		return "REFUSED"
	case rcodeBadVers:
		return "BADVERS"
	}
	return "RCODE" + strconv.Itoa(int(c))
}
