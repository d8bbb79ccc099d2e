// Package rules is the grammar of jail's egress allowlist (--net
// allow=RULE[,RULE...]) and the decision it makes: may the sandbox reach
// this host on this port, and may the gateway dial this address for it.
// It does no networking and keeps no state beyond the parsed rules.
//
// A rule is one of
//
//	example.com            exactly that name
//	*.example.com          any subdomain of example.com (any depth), not the apex
//	**.example.com         example.com and any subdomain of it
//	1.2.3.4, 10.0.0.0/8    an address or a CIDR range (IPv6 too: 2001:db8::/32)
//
// optionally followed by :PORT (IPv6 in brackets: [2001:db8::/32]:443),
// and optionally preceded by ! to deny. An allow rule without a port
// allows ports 80 and 443; a deny rule without a port denies every port.
//
// Invariants:
//   - Rules are immutable once parsed and safe for concurrent use; a nil
//     *Rules denies everything, as an empty list does.
//   - Deny wins: a host or address any deny rule matches is denied whatever
//     the allow rules say. Nothing matched is denied ("no rule").
//   - A name is decided by name rules only, and an IP literal by address
//     rules only: no name rule ever lets an address through.
//   - A resolved address that is not public (loopback, private, link-local,
//     CGNAT, ULA, multicast, unspecified, broadcast, reserved, and the
//     IPv4-mapped, IPv4-compatible and NAT64 forms of those) passes only
//     by an address rule inside its range (127.0.0.1, 10.0.0.0/8), never
//     by a wider one that merely contains it (0.0.0.0/1).
//   - Names are compared in one canonical form (lowercase ASCII, IDNA
//     A-labels, no trailing dot); a host not in a form a resolver would
//     read as that name (127.1, 0x7f.1, 2130706433, an underscore, a bad
//     xn-- label) is refused rather than guessed at.
//   - Every accepted list has one canonical text (String), and parsing that
//     text gives the same list again.
//   - Parse never panics and does bounded work: at most MaxRules rules of
//     at most MaxRuleLen bytes each.
package rules

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// MaxRules is the most rules one list may hold: Decide is a scan of them.
const MaxRules = 256

// MaxRuleLen is the longest rule text accepted, in bytes (a name is at most
// 253 characters as ASCII; its Unicode spelling may take more bytes).
const MaxRuleLen = 1024

// MaxNameLen is the longest name, in ASCII characters without the trailing
// dot (RFC 1035).
const MaxNameLen = 253

// defaultPorts are the ports an allow rule without :PORT allows.
var defaultPorts = [...]int{80, 443}

// Error is why Parse refused one rule.
type Error struct {
	Rule   string // the rule as written
	Reason string // one line
}

func (e *Error) Error() string {
	return fmt.Sprintf("rule %q: %s", shorten(e.Rule), e.Reason)
}

// shorten keeps an error to one readable line whatever the rule's length.
func shorten(s string) string {
	const most = 80
	if len(s) <= most {
		return s
	}
	return s[:most] + "..."
}

// kind is what a rule matches.
type kind uint8

const (
	exactName         kind = iota // example.com
	subdomains                    // *.example.com
	apexAndSubdomains             // **.example.com
	address                       // 1.2.3.4, 10.0.0.0/8
)

// rule is one parsed rule.
type rule struct {
	deny   bool
	kind   kind
	name   string       // canonical name (exactName, subdomains, apexAndSubdomains)
	prefix netip.Prefix // masked, canonical (address)
	port   int          // 0: the default (allow: 80 and 443; deny: every port)
}

// Rules is a parsed allowlist.
type Rules struct {
	rules []rule
}

// Decision is the answer for one host or address on one port.
type Decision struct {
	Allowed bool
	// Rule is the rule that decided, in its canonical form, or "" when no
	// rule did.
	Rule string
	// Reason says why, in one line: "no rule" when nothing matched.
	Reason string
}

// Parse parses the comma-separated rules of --net allow=RULE[,RULE...].
// The empty list denies everything. A refused rule is an *Error naming it.
func Parse(list string) (*Rules, error) {
	if list == "" {
		return &Rules{}, nil
	}
	if len(list) > MaxRules*(MaxRuleLen+1) {
		return nil, fmt.Errorf("the rule list is %d bytes, more than %d", len(list), MaxRules*(MaxRuleLen+1))
	}
	if n := strings.Count(list, ",") + 1; n > MaxRules {
		return nil, fmt.Errorf("%d rules, more than %d", n, MaxRules)
	}
	texts := strings.Split(list, ",")
	r := &Rules{rules: make([]rule, 0, len(texts))}
	for _, text := range texts {
		parsed, err := parseRule(text)
		if err != nil {
			return nil, err
		}
		r.rules = append(r.rules, parsed)
	}
	return r, nil
}

// parseRule parses one rule; its errors are *Error.
func parseRule(text string) (rule, error) {
	refuse := func(format string, args ...any) (rule, error) {
		return rule{}, &Error{Rule: text, Reason: fmt.Sprintf(format, args...)}
	}
	if text == "" {
		return refuse("empty rule (two commas, or a comma at an end)")
	}
	if len(text) > MaxRuleLen {
		return refuse("longer than %d bytes", MaxRuleLen)
	}
	var r rule
	body := text
	if rest, ok := strings.CutPrefix(body, "!"); ok {
		r.deny, body = true, rest
	}
	switch {
	case body == "":
		return refuse("! needs a rule after it")
	case strings.HasPrefix(body, "!"):
		return refuse("one ! at most")
	case strings.Contains(body, "://"):
		return refuse("a URL: write only the host name (and :PORT), without a scheme")
	case strings.Contains(body, "@"):
		return refuse("user info (@) is not part of a rule: write only the host name")
	}
	for i := 0; i < len(body); i++ {
		if c := body[i]; c <= ' ' || c == 0x7f {
			return refuse("invalid character %q", c)
		}
	}
	host, port, bracketed, err := splitRulePort(body)
	if err != nil {
		return refuse("%s", err)
	}
	r.port = port
	if host == "*" || host == "**" {
		return refuse("%s alone would match every host: name the hosts", host)
	}
	base := host
	if rest, ok := strings.CutPrefix(host, "**."); ok {
		r.kind, base = apexAndSubdomains, rest
	} else if rest, ok := strings.CutPrefix(host, "*."); ok {
		r.kind, base = subdomains, rest
	} else if looksLikeAddress(host) || bracketed {
		prefix, err := parseAddressRule(host)
		if err != nil {
			return refuse("%s", err)
		}
		r.kind, r.prefix = address, prefix
		return r, nil
	}
	if strings.Contains(base, "*") {
		return refuse("a wildcard is a whole first label: *.NAME (subdomains) or **.NAME (the name and its subdomains)")
	}
	if before, _, found := strings.Cut(base, "/"); found {
		if endsInNumber(before) {
			return refuse("not an address range: a CIDR is written a.b.c.d/N")
		}
		return refuse("a path: write only the host name (and :PORT)")
	}
	if base == "" {
		return refuse("no name after %s", host)
	}
	name, err := canonicalName(base, true)
	if err != nil {
		if r.kind != exactName && errors.Is(err, errNumeric) {
			return refuse("an address takes no wildcard: write a CIDR such as 10.0.0.0/8")
		}
		return refuse("%s", err)
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return refuse("localhost names are the loopback address (RFC 6761): to reach a service on loopback write its address, e.g. 127.0.0.1:8080")
	}
	if r.kind != exactName && isPublicSuffix(name) {
		return refuse("a wildcard over the public suffix %q would match every site registered under it", name)
	}
	r.name = name
	return r, nil
}

// looksLikeAddress reports whether a rule's host is meant as an address or
// CIDR: an IPv6 colon, or an IPv4 address before any slash. Names with a
// numeric last label (127.1) are not, and are refused as names.
func looksLikeAddress(host string) bool {
	if strings.Contains(host, ":") {
		return true
	}
	before, _, _ := strings.Cut(host, "/")
	addr, err := netip.ParseAddr(before)
	return err == nil && addr.Is4()
}

// splitRulePort splits a rule's host from its :PORT (0 when there is
// none). bracketed says the host was written in brackets, which only IPv6
// takes.
func splitRulePort(s string) (host string, port int, bracketed bool, err error) {
	if rest, ok := strings.CutPrefix(s, "["); ok {
		inner, after, found := strings.Cut(rest, "]")
		if !found {
			return "", 0, false, errors.New("a [ without its ]")
		}
		if !strings.Contains(inner, ":") {
			return "", 0, false, errors.New("brackets are only for an IPv6 address or range")
		}
		if after == "" {
			return inner, 0, true, nil
		}
		p, ok := strings.CutPrefix(after, ":")
		if !ok {
			return "", 0, false, errors.New("after ] only :PORT may follow")
		}
		port, err := parsePort(p)
		return inner, port, true, err
	}
	if strings.ContainsAny(s, "[]") {
		return "", 0, false, errors.New("brackets are only around an IPv6 address or range: [2001:db8::1]:443")
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, 0, false, nil
	case 1:
		host, p, _ := strings.Cut(s, ":")
		if host == "" {
			return "", 0, false, errors.New("a port needs a host before it (HOST:PORT)")
		}
		port, err := parsePort(p)
		return host, port, false, err
	default:
		// A bare IPv6 address or range, which takes no port unbracketed.
		return s, 0, false, nil
	}
}

// parsePort parses a port, 1 to 65535, written in canonical decimal.
func parsePort(p string) (int, error) {
	bad := fmt.Errorf("port %q: a number from 1 to 65535", p)
	if p == "" || len(p) > 5 || p[0] == '0' {
		return 0, bad
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return 0, bad
		}
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, bad
	}
	return n, nil
}

// parseAddressRule parses an address or CIDR rule's host.
func parseAddressRule(host string) (netip.Prefix, error) {
	var prefix netip.Prefix
	if strings.Contains(host, "/") {
		p, err := netip.ParsePrefix(host)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("not an address range (CIDR): %s", netipDetail(err))
		}
		if p.Masked() != p {
			return netip.Prefix{}, fmt.Errorf("bits set after the /%d: the range is %s", p.Bits(), p.Masked())
		}
		prefix = p
	} else {
		a, err := netip.ParseAddr(host)
		if err != nil {
			return netip.Prefix{}, errors.New("not an IPv6 address, and a name takes one :PORT (an IPv6 address with a port is written [2001:db8::1]:443)")
		}
		if a.Zone() != "" {
			return netip.Prefix{}, errors.New("an address with a zone (%...) names an interface, not a destination")
		}
		prefix = netip.PrefixFrom(a, a.BitLen())
	}
	if prefix.Bits() == 0 {
		return netip.Prefix{}, fmt.Errorf("%s is every address: name the addresses or ranges", prefix)
	}
	if prefix.Addr().Is6() && canonicalAddr(prefix.Addr()).Is4() {
		return netip.Prefix{}, errors.New("an IPv4-mapped, IPv4-compatible or NAT64 form: write the IPv4 address or range, which covers these forms too")
	}
	return prefix, nil
}

// netipDetail is what is wrong, from one of netip's parse errors, without
// the input they repeat in full (the caller's error names the rule).
func netipDetail(err error) string {
	msg := err.Error()
	if _, detail, ok := strings.Cut(msg, "): "); ok {
		return detail
	}
	return msg
}

// String is the rule's canonical text.
func (r rule) String() string {
	var b strings.Builder
	if r.deny {
		b.WriteByte('!')
	}
	var host string
	switch r.kind {
	case exactName:
		host = r.name
	case subdomains:
		host = "*." + r.name
	case apexAndSubdomains:
		host = "**." + r.name
	case address:
		if r.prefix.IsSingleIP() {
			host = r.prefix.Addr().String()
		} else {
			host = r.prefix.String()
		}
	}
	if r.port == 0 {
		b.WriteString(host)
		return b.String()
	}
	if r.kind == address && r.prefix.Addr().Is6() {
		host = "[" + host + "]"
	}
	b.WriteString(host)
	b.WriteByte(':')
	b.WriteString(strconv.Itoa(r.port))
	return b.String()
}

// String is the list's canonical text, which Parse reads back as the same
// list.
func (rs *Rules) String() string {
	if rs == nil {
		return ""
	}
	texts := make([]string, len(rs.rules))
	for i, r := range rs.rules {
		texts[i] = r.String()
	}
	return strings.Join(texts, ",")
}

// Len is the number of rules.
func (rs *Rules) Len() int {
	if rs == nil {
		return 0
	}
	return len(rs.rules)
}
