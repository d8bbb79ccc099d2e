package rules

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// TestParseAcceptsAndCanonicalises: each accepted list and the canonical
// text it is kept as (lowercase, no trailing dot, A-labels, masked ranges,
// single addresses bare, IPv6 with a port in brackets).
func TestParseAcceptsAndCanonicalises(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"example.com", "example.com"},
		{"EXAMPLE.com.", "example.com"},
		{"*.Example.COM", "*.example.com"},
		{"**.example.com", "**.example.com"},
		{"example.com:8080", "example.com:8080"},
		{"*.example.com:443", "*.example.com:443"},
		{"!api.example.com,*.example.com", "!api.example.com,*.example.com"},
		{"!10.0.0.5,10.0.0.0/8:8080", "!10.0.0.5,10.0.0.0/8:8080"},
		{"1.2.3.4", "1.2.3.4"},
		{"1.2.3.4/32", "1.2.3.4"},
		{"1.2.3.4:22", "1.2.3.4:22"},
		{"10.0.0.0/8", "10.0.0.0/8"},
		{"2001:db8::1", "2001:db8::1"},
		{"[2001:DB8::1]", "2001:db8::1"},
		{"[2001:db8::1]:443", "[2001:db8::1]:443"},
		{"2001:db8::/32", "2001:db8::/32"},
		{"[2001:db8::/32]:443", "[2001:db8::/32]:443"},
		{"::1", "::1"},
		{"127.0.0.1:8080", "127.0.0.1:8080"},
		{"169.254.169.254", "169.254.169.254"},
		{"bücher.example", "xn--bcher-kva.example"},        // Unicode: its A-labels
		{"XN--BCHER-KVA.example", "xn--bcher-kva.example"}, // punycode as is
		{"ＥＸＡＭＰＬＥ.com", "example.com"},                     // UTS #46 mapping (fullwidth)
		{"123.example.com", "123.example.com"},             // a numeric label that is not the last
		{"1password.com", "1password.com"},
		{"**.user.github.io", "**.user.github.io"}, // under a private public suffix
		{"*.example.co.uk", "*.example.co.uk"},
		{"github.io", "github.io"}, // an exact public suffix is one host
		{"a.b.c.example.com:65535", "a.b.c.example.com:65535"},
		{"example.com,example.com", "example.com,example.com"},
		{strings.Repeat("a.", 126) + "a", strings.Repeat("a.", 126) + "a"}, // 253 characters
		{strings.Repeat("a", 63) + ".com", strings.Repeat("a", 63) + ".com"},
	} {
		r, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if got := r.String(); got != c.want {
			t.Errorf("Parse(%q).String() = %q; want %q", c.in, got, c.want)
		}
	}
}

// TestParseRefusesWithTheReason: each refused list, and a part of the one
// line saying why, which names the rule.
func TestParseRefusesWithTheReason(t *testing.T) {
	for _, c := range []struct{ in, why string }{
		{"*", "alone"},
		{"**", "alone"},
		{"*:443", "alone"},
		{"!*", "alone"},
		{"*.com", "public suffix"},
		{"**.com", "public suffix"},
		{"*.co.uk", "public suffix"},
		{"**.co.uk", "public suffix"},
		{"**.github.io", "public suffix"},   // the list's private part
		{"*.blogspot.com", "public suffix"}, // ditto
		{"*.corp", "public suffix"},         // an unlisted top-level domain
		{"*.COM.", "public suffix"},         // normalised before the check
		{"!*.com", "public suffix"},         // deny too: one grammar
		{"*.", "no name"},
		{"**.", "no name"},
		{"*.*.example.com", "whole first label"},
		{"a.*.example.com", "whole first label"},
		{"*example.com", "whole first label"},
		{"***.example.com", "whole first label"},
		{"https://example.com", "URL"},
		{"http://example.com:8080/x", "URL"},
		{"example.com/path", "path"},
		{"example.com/", "path"},
		{"user@example.com", "user info"},
		{"user:pw@example.com", "user info"},
		{"example..com", "empty label"},
		{".example.com", "empty label"},
		{"example.com..", "empty label"},
		{"a.com,,b.com", "empty rule"},
		{"a.com,", "empty rule"},
		{",", "empty rule"},
		{"!", "needs a rule"},
		{"!!example.com", "one !"},
		{"exa mple.com", "invalid character"},
		{" example.com", "invalid character"},
		{"example.com\n", "invalid character"},
		{"a_b.example.com", "invalid character"},
		{"exa%mple.com", "invalid character"},
		{"example.com?x", "invalid character"},
		{"-a.example.com", "hyphen"},
		{"a-.example.com", "hyphen"},
		{"ab--c.example.com", "third place"},
		{"xn--abc-.example.com", "hyphen"},
		{"xn--a.example.com", "IDNA"},
		{"xn--ls8h-.com", "hyphen"},
		{"example.com:0", "1 to 65535"},
		{"example.com:65536", "1 to 65535"},
		{"example.com:080", "1 to 65535"},
		{"example.com:+80", "1 to 65535"},
		{"example.com:", "1 to 65535"},
		{"example.com:http", "1 to 65535"},
		{":443", "needs a host"},
		{"example.com:80:90", "one :PORT"},
		{"[example.com]:80", "only for an IPv6"},
		{"[1.2.3.4]:80", "only for an IPv6"},
		{"[2001:db8::1", "without its ]"},
		{"[2001:db8::1]443", "only :PORT"},
		{"2001:db8::1]", "brackets"},
		{strings.Repeat("a.", 127) + "a", "longer than 253"}, // 255 characters
		{strings.Repeat("a", 64) + ".com", "longer than 63"},
		{"127.1", "non-canonical"},
		{"0x7f.1", "non-canonical"},
		{"0177.0.0.1", "non-canonical"},
		{"2130706433", "non-canonical"},
		{"1.2.3", "non-canonical"},
		{"example.0x1f", "non-canonical"},
		{"example.123", "non-canonical"},
		{"*.1.2.3", "no wildcard"},
		{"**.10.0.0.1", "no wildcard"},
		{"10.1/8", "CIDR"},
		{"10.1.2.3/8", "bits set"},
		{"10.0.0.0/33", "CIDR"},
		{"10.0.0.0/", "CIDR"},
		{"0.0.0.0/0", "every address"},
		{"::/0", "every address"},
		{"[::/0]:443", "every address"},
		{"fe80::1%eth0", "zone"},
		{"::ffff:169.254.169.254", "IPv4-mapped"},
		{"::ffff:0:0/96", "IPv4-mapped"},
		{"64:ff9b::a9fe:a9fe", "NAT64"},
		{"64:ff9b::/96", "NAT64"},
		{"::7f00:1", "IPv4-compatible"},
		{"localhost", "loopback"},
		{"LOCALHOST.", "loopback"},
		{"api.localhost", "loopback"},
		{"**.app.localhost", "loopback"},
		{"bü_cher.example", "internationalised"},
		{"\xff.example", "UTF-8"},
		{strings.Repeat("x", MaxRuleLen+1), "longer than"},
		{strings.Repeat("a.com,", MaxRules) + "a.com", "more than 256"},
		{strings.Repeat("a", MaxRules*(MaxRuleLen+1)+1), "bytes, more than"},
	} {
		_, err := Parse(c.in)
		if err == nil {
			t.Errorf("Parse(%q) accepted; want refused (%s)", c.in, c.why)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.why) {
			t.Errorf("Parse(%q): %q; want it to say %q", c.in, msg, c.why)
		}
		if strings.ContainsAny(msg, "\n\r") || len(msg) > 400 {
			t.Errorf("Parse(%.40q): error is not one short line: %q", c.in, msg)
		}
		var ruleErr *Error
		if errors.As(err, &ruleErr) && !strings.Contains(c.in, ruleErr.Rule) {
			t.Errorf("Parse(%.40q): error names %q, not a rule of the list", c.in, ruleErr.Rule)
		}
	}
}

// TestParseBoundsTheList: MaxRules rules are accepted, one more is not.
func TestParseBoundsTheList(t *testing.T) {
	list := strings.TrimSuffix(strings.Repeat("a.example.com,", MaxRules), ",")
	r, err := Parse(list)
	if err != nil || r.Len() != MaxRules {
		t.Fatalf("%d rules: %v", MaxRules, err)
	}
	if _, err := Parse(list + ",b.example.com"); err == nil {
		t.Fatalf("%d rules accepted", MaxRules+1)
	}
}

// TestDecide: which rule decides for a host and port, deny winning, names
// only by name rules and IP literals only by address rules.
func TestDecide(t *testing.T) {
	const (
		allowed = true
		denied  = false
	)
	for _, c := range []struct {
		rules, host string
		port        int
		allowed     bool
		rule        string // "" : no rule decided
	}{
		// Exact names, case and trailing dot.
		{"example.com", "example.com", 443, allowed, "example.com"},
		{"example.com", "EXAMPLE.com.", 443, allowed, "example.com"},
		{"EXAMPLE.com.", "example.com", 80, allowed, "example.com"},
		{"example.com", "www.example.com", 443, denied, ""},
		{"example.com", "example.com.evil.test", 443, denied, ""},
		{"example.com", "notexample.com", 443, denied, ""},
		// *. is subdomains at any depth, never the apex.
		{"*.example.com", "api.example.com", 443, allowed, "*.example.com"},
		{"*.example.com", "a.b.example.com", 443, allowed, "*.example.com"},
		{"*.example.com", "example.com", 443, denied, ""},
		{"*.example.com", "badexample.com", 443, denied, ""},
		{"*.example.com", "example.com.evil.test", 443, denied, ""},
		// **. is the apex and subdomains.
		{"**.example.com", "example.com", 443, allowed, "**.example.com"},
		{"**.example.com", "a.b.example.com", 80, allowed, "**.example.com"},
		{"**.example.com", "xexample.com", 443, denied, ""},
		// Ports: default 80 and 443; a rule's port is the only one.
		{"example.com", "example.com", 80, allowed, "example.com"},
		{"example.com", "example.com", 8080, denied, ""},
		{"example.com", "example.com", 22, denied, ""},
		{"example.com:8080", "example.com", 8080, allowed, "example.com:8080"},
		{"example.com:8080", "example.com", 443, denied, ""},
		{"*.example.com:443", "api.example.com", 80, denied, ""},
		{"example.com", "example.com", 0, denied, ""},
		{"example.com", "example.com", 65536, denied, ""},
		// Deny wins, in any order; a deny without a port denies every port.
		{"!api.example.com,*.example.com", "api.example.com", 443, denied, "!api.example.com"},
		{"*.example.com,!api.example.com", "api.example.com", 443, denied, "!api.example.com"},
		{"*.example.com,!api.example.com", "www.example.com", 443, allowed, "*.example.com"},
		{"*.example.com,!api.example.com", "v2.api.example.com", 443, allowed, "*.example.com"},
		{"*.example.com:8443,!api.example.com", "api.example.com", 8443, denied, "!api.example.com"},
		{"*.example.com,!api.example.com:80", "api.example.com", 443, allowed, "*.example.com"},
		{"*.example.com,!api.example.com:80", "api.example.com", 80, denied, "!api.example.com:80"},
		{"**.example.com,!*.example.com", "example.com", 443, allowed, "**.example.com"},
		{"**.example.com,!*.example.com", "a.example.com", 443, denied, "!*.example.com"},
		// The first allow rule that matches is the one named.
		{"example.com:443,**.example.com", "example.com", 443, allowed, "example.com:443"},
		// IP literals: only an address rule allows one, never a name rule.
		{"1.2.3.4", "1.2.3.4", 443, allowed, "1.2.3.4"},
		{"1.2.3.4", "1.2.3.5", 443, denied, ""},
		{"example.com", "1.2.3.4", 443, denied, ""},
		{"10.0.0.0/8", "10.20.30.40", 80, allowed, "10.0.0.0/8"},
		{"10.0.0.0/8:5432", "10.20.30.40", 5432, allowed, "10.0.0.0/8:5432"},
		{"10.0.0.0/8:5432", "10.20.30.40", 443, denied, ""},
		{"10.0.0.0/8,!10.0.0.5", "10.0.0.5", 443, denied, "!10.0.0.5"},
		{"10.0.0.0/8,!10.0.0.5", "10.0.0.6", 443, allowed, "10.0.0.0/8"},
		{"2001:db8::/32", "2001:db8::1", 443, allowed, "2001:db8::/32"},
		{"[2001:db8::/32]:443", "2001:DB8::1", 443, allowed, "[2001:db8::/32]:443"},
		{"[2001:db8::/32]:443", "2001:db8::1", 80, denied, ""},
		// The IPv4 forms of IPv6 reach the IPv4 host: an IPv4 rule decides them.
		{"169.254.169.254", "::ffff:169.254.169.254", 80, allowed, "169.254.169.254"},
		{"2001:db8::/32", "::ffff:169.254.169.254", 80, denied, ""},
		{"example.com", "::ffff:169.254.169.254", 80, denied, ""},
		{"10.0.0.0/8,!10.0.0.5", "::ffff:10.0.0.5", 443, denied, "!10.0.0.5"},
		{"10.0.0.0/8,!10.0.0.5", "64:ff9b::a00:5", 443, denied, "!10.0.0.5"},
		{"10.0.0.0/8,!10.0.0.5", "::10.0.0.5", 443, denied, "!10.0.0.5"},
		// Loopback by address needs an address rule; localhost is a name no rule may hold.
		{"127.0.0.1:8080", "127.0.0.1", 8080, allowed, "127.0.0.1:8080"},
		{"127.0.0.1:8080", "localhost", 8080, denied, ""},
		{"::1", "::1", 443, allowed, "::1"},
		{"example.com", "::1", 443, denied, ""},
		// A non-public address needs a rule inside its range, not one that merely contains it.
		{"0.0.0.0/1", "127.0.0.1", 80, denied, ""},
		{"0.0.0.0/1", "93.184.216.34", 80, allowed, "0.0.0.0/1"},
		{"169.0.0.0/8", "169.254.169.254", 80, denied, ""},
		{"169.254.0.0/16", "169.254.169.254", 80, allowed, "169.254.0.0/16"},
		{"::/1", "::1", 443, denied, ""},
		{"f800::/5", "fd00::1", 443, denied, ""},
		{"10.0.0.0/8,!0.0.0.0/1", "10.0.0.5", 443, denied, "!0.0.0.0/1"},
		// Non-canonical IPv4 literals are no hosts at all: refused, never a name.
		{"**.example.com,127.0.0.0/8", "127.1", 80, denied, ""},
		{"127.0.0.0/8", "0x7f.1", 80, denied, ""},
		{"127.0.0.0/8", "0177.0.0.1", 80, denied, ""},
		{"127.0.0.0/8", "2130706433", 80, denied, ""},
		{"127.0.0.0/8", "127.000.000.001", 80, denied, ""},
		{"1.2.3.4", "1.2.3.4.", 80, denied, ""}, // a trailing dot makes it a numeric name
		// A name that is digits only in its other labels is a name.
		{"123.example.com", "123.example.com", 443, allowed, "123.example.com"},
		// Invalid hosts are denied.
		{"**.example.com", "", 443, denied, ""},
		{"**.example.com", "a..example.com", 443, denied, ""},
		{"**.example.com", "a_b.example.com", 443, denied, ""},
		{"**.example.com", "[::1]", 443, denied, ""},
		{"**.example.com", "a.example.com:443", 443, denied, ""},
		{"**.example.com", "a.example.com/x", 443, denied, ""},
		{"**.example.com", "a.example.com\x00", 443, denied, ""},
		{"xn--bcher-kva.example", "bücher.example", 443, denied, ""}, // hosts are ASCII on the wire
		{"bücher.example", "XN--BCHER-KVA.EXAMPLE", 443, allowed, "xn--bcher-kva.example"},
		{"fe80::/10", "fe80::1%eth0", 443, denied, ""},
		// The empty list denies everything.
		{"", "example.com", 443, denied, ""},
		{"", "1.2.3.4", 443, denied, ""},
	} {
		r, err := Parse(c.rules)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.rules, err)
		}
		d := r.Decide(c.host, c.port)
		if d.Allowed != c.allowed || d.Rule != c.rule {
			t.Errorf("rules %q: Decide(%q, %d) = %+v; want allowed %v by %q", c.rules, c.host, c.port, d, c.allowed, c.rule)
		}
		if d.Reason == "" || strings.ContainsAny(d.Reason, "\n\r") {
			t.Errorf("rules %q: Decide(%q, %d): reason %q is not one line", c.rules, c.host, c.port, d.Reason)
		}
		if d.Rule == "" && !d.Allowed && !strings.HasPrefix(d.Reason, "no rule") && !strings.HasPrefix(d.Reason, "invalid") && !strings.HasSuffix(d.Reason, "can allow it") {
			t.Errorf("rules %q: Decide(%q, %d): denied by no rule, reason %q", c.rules, c.host, c.port, d.Reason)
		}
	}
}

// TestDecideNilRulesDenies: a nil *Rules is the empty list.
func TestDecideNilRulesDenies(t *testing.T) {
	var r *Rules
	if d := r.Decide("example.com", 443); d.Allowed || d.Reason != "no rule" {
		t.Errorf("nil rules: %+v", d)
	}
	if d := r.AllowsAddress(netip.MustParseAddr("127.0.0.1"), 443); d.Allowed {
		t.Errorf("nil rules allowed loopback: %+v", d)
	}
	if r.String() != "" || r.Len() != 0 {
		t.Errorf("nil rules: %q, %d", r.String(), r.Len())
	}
}

// TestAllowsAddress: an address an allowed name resolved to passes when
// public; every non-public class, and every IPv6 form of one, only when an
// address rule covers it; deny address rules still win.
func TestAllowsAddress(t *testing.T) {
	for _, c := range []struct {
		rules, addr string
		port        int
		allowed     bool
		rule        string
	}{
		{"example.com", "93.184.216.34", 443, true, ""},
		{"example.com", "2606:2800:220:1:248:1893:25c8:1946", 443, true, ""},
		{"example.com", "::ffff:93.184.216.34", 443, true, ""},
		{"example.com", "64:ff9b::5db8:d822", 443, true, ""}, // NAT64 of a public address
		{"example.com", "2002:5db8:d822::1", 443, true, ""},  // 6to4 of a public address
		// Refused classes.
		{"example.com", "127.0.0.1", 443, false, ""},
		{"example.com", "127.255.255.254", 443, false, ""},
		{"example.com", "10.1.2.3", 443, false, ""},
		{"example.com", "172.16.0.1", 443, false, ""},
		{"example.com", "172.31.255.255", 443, false, ""},
		{"example.com", "192.168.1.1", 443, false, ""},
		{"example.com", "169.254.169.254", 80, false, ""},
		{"example.com", "100.64.0.1", 443, false, ""},
		{"example.com", "100.127.255.255", 443, false, ""},
		{"example.com", "0.0.0.0", 443, false, ""},
		{"example.com", "0.1.2.3", 443, false, ""},
		{"example.com", "224.0.0.1", 443, false, ""},
		{"example.com", "239.255.255.250", 443, false, ""},
		{"example.com", "255.255.255.255", 443, false, ""},
		{"example.com", "240.0.0.1", 443, false, ""},
		{"example.com", "192.0.0.170", 443, false, ""},
		{"example.com", "198.18.0.1", 443, false, ""},
		{"example.com", "::1", 443, false, ""},
		{"example.com", "::", 443, false, ""},
		{"example.com", "fe80::1", 443, false, ""},
		{"example.com", "fe80::1%eth0", 443, false, ""},
		{"example.com", "fd00::1", 443, false, ""},
		{"example.com", "fc00::1", 443, false, ""},
		{"example.com", "ff02::1", 443, false, ""},
		{"example.com", "fec0::1", 443, false, ""},
		{"example.com", "2001:db8::1", 443, false, ""},
		{"example.com", "2001:0:4136:e378:8000:63bf:3fff:fdd2", 443, false, ""}, // Teredo
		{"example.com", "64:ff9b:1::1", 443, false, ""},
		{"example.com", "100::1", 443, false, ""},
		{"example.com", "::1:2:3:4:5", 443, false, ""}, // outside 2000::/3
		// IPv6 forms of non-public IPv4 addresses.
		{"example.com", "::ffff:169.254.169.254", 80, false, ""},
		{"example.com", "::ffff:127.0.0.1", 443, false, ""},
		{"example.com", "::ffff:10.0.0.1", 443, false, ""},
		{"example.com", "::169.254.169.254", 80, false, ""}, // IPv4-compatible
		{"example.com", "::127.0.0.1", 443, false, ""},
		{"example.com", "64:ff9b::a9fe:a9fe", 80, false, ""}, // NAT64 of 169.254.169.254
		{"example.com", "64:ff9b::7f00:1", 443, false, ""},
		{"example.com", "2002:a9fe:a9fe::1", 80, false, ""}, // 6to4 of 169.254.169.254
		{"example.com", "2002:7f00:1::1", 443, false, ""},
		// An address rule lets a non-public address through, on its ports.
		{"example.com,127.0.0.1:8080", "127.0.0.1", 8080, true, "127.0.0.1:8080"},
		{"example.com,127.0.0.1:8080", "127.0.0.1", 443, false, ""},
		{"example.com,127.0.0.1:8080", "::ffff:127.0.0.1", 8080, true, "127.0.0.1:8080"},
		{"example.com,169.254.169.254", "64:ff9b::a9fe:a9fe", 80, true, "169.254.169.254"},
		{"example.com,10.0.0.0/8", "10.9.8.7", 443, true, "10.0.0.0/8"},
		{"example.com,fd00::/8", "fd12::1", 443, true, "fd00::/8"},
		{"example.com,::1", "::1", 443, true, "::1"},
		// A wider rule that merely contains a non-public range does not name it.
		{"example.com,0.0.0.0/1", "127.0.0.1", 443, false, ""},
		{"example.com,0.0.0.0/1", "::ffff:10.0.0.1", 443, false, ""},
		{"example.com,0.0.0.0/1", "93.184.216.34", 443, true, "0.0.0.0/1"},
		{"example.com,128.0.0.0/1", "169.254.169.254", 80, false, ""},
		{"example.com,::/1", "::1", 443, false, ""},
		{"example.com,f800::/5", "fd00::1", 443, false, ""},
		{"example.com,2002::/16", "2002:a9fe:a9fe::1", 80, false, ""},
		{"example.com,2002:a9fe::/32", "2002:a9fe:a9fe::1", 80, true, "2002:a9fe::/32"},
		{"example.com,4000::/2", "4000::1", 443, true, "4000::/2"}, // outside 2000::/3, and so is the rule
		{"example.com,::/3", "::1:2:3:4:5", 443, true, "::/3"},
		{"example.com,::/1", "::1:2:3:4:5", 443, false, ""}, // ::/1 holds 2000::/3
		// Deny address rules win, over public addresses too.
		{"example.com,!93.184.216.0/24", "93.184.216.34", 443, false, "!93.184.216.0/24"},
		{"example.com,!93.184.216.0/24", "::ffff:93.184.216.34", 443, false, "!93.184.216.0/24"},
		{"10.0.0.0/8,!10.0.0.5", "10.0.0.5", 443, false, "!10.0.0.5"},
		// A name rule never covers an address.
		{"127.0.0.1.nip.example", "127.0.0.1", 443, false, ""},
	} {
		r, err := Parse(c.rules)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.rules, err)
		}
		d := r.AllowsAddress(netip.MustParseAddr(c.addr), c.port)
		if d.Allowed != c.allowed || d.Rule != c.rule {
			t.Errorf("rules %q: AllowsAddress(%s, %d) = %+v; want allowed %v by %q", c.rules, c.addr, c.port, d, c.allowed, c.rule)
		}
		if d.Reason == "" || strings.ContainsAny(d.Reason, "\n\r") {
			t.Errorf("AllowsAddress(%s, %d): reason %q is not one line", c.addr, c.port, d.Reason)
		}
	}
	var r Rules
	if d := r.AllowsAddress(netip.Addr{}, 443); d.Allowed {
		t.Errorf("the zero address allowed: %+v", d)
	}
	if d := r.AllowsAddress(netip.MustParseAddr("93.184.216.34"), 0); d.Allowed {
		t.Errorf("port 0 allowed: %+v", d)
	}
}

// TestReasonsSayWhy: the reasons name the match and the class.
func TestReasonsSayWhy(t *testing.T) {
	r, err := Parse("*.example.com,!api.example.com,10.0.0.0/8:5432")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		d    Decision
		want string
	}{
		{r.Decide("www.example.com", 443), "www.example.com is a subdomain of example.com; port 443 is a default port"},
		{r.Decide("api.example.com", 443), "deny wins"},
		{r.Decide("10.1.1.1", 5432), "10.1.1.1 is in 10.0.0.0/8; port 5432 as the rule says"},
		{r.Decide("evil.test", 443), "no rule"},
		{r.Decide("127.1", 443), "invalid host"},
		{r.AllowsAddress(netip.MustParseAddr("::ffff:169.254.169.254"), 80), "::ffff:169.254.169.254 (a form of 169.254.169.254) is link-local"},
		{r.AllowsAddress(netip.MustParseAddr("100.64.1.1"), 443), "CGNAT"},
		{r.AllowsAddress(netip.MustParseAddr("fd00::1"), 443), "ULA"},
		{r.AllowsAddress(netip.MustParseAddr("10.0.0.1"), 443), "10.0.0.1 is private (RFC 1918): only an address or CIDR rule within 10.0.0.0/8 can allow it"},
	} {
		if !strings.Contains(c.d.Reason, c.want) {
			t.Errorf("reason %q; want it to say %q", c.d.Reason, c.want)
		}
	}
}

// TestCanonicalHost: hosts as Decide reads them.
func TestCanonicalHost(t *testing.T) {
	for _, c := range []struct{ in, want, why string }{
		{"Example.COM.", "example.com", ""},
		{"1.2.3.4", "1.2.3.4", ""},
		{"2001:DB8:0:0::1", "2001:db8::1", ""},
		{"::FFFF:169.254.169.254", "::ffff:169.254.169.254", ""},
		{"xn--bcher-kva.example", "xn--bcher-kva.example", ""},
		{"localhost", "localhost", ""},
		{"123.example.com", "123.example.com", ""},
		{"bücher.example", "", "xn--bcher-kva.example"},
		{"127.1", "", "non-canonical"},
		{"0x7f000001", "", "non-canonical"},
		{"2130706433", "", "non-canonical"},
		{"1.2.3.04", "", "non-canonical"},
		{"[::1]", "", "not an IPv6 address"},
		{"fe80::1%lo", "", "zone"},
		{"a..b", "", "empty label"},
		{"", "", "empty host"},
		{".", "", "empty name"},
		{"xn--a", "", "IDNA"},
		{strings.Repeat("a.", 127) + "a", "", "longer than 253"},
	} {
		got, err := CanonicalHost(c.in)
		if c.why == "" {
			if err != nil || got != c.want {
				t.Errorf("CanonicalHost(%q) = %q, %v; want %q", c.in, got, err, c.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("CanonicalHost(%q) = %q, %v; want an error saying %q", c.in, got, err, c.why)
		}
	}
}

// TestSplitHostPort: HOST[:PORT] with IPv6 in brackets.
func TestSplitHostPort(t *testing.T) {
	for _, c := range []struct {
		in   string
		host string
		port int
		ok   bool
	}{
		{"example.com", "example.com", 443, true},
		{"example.com:80", "example.com", 80, true},
		{"1.2.3.4:8080", "1.2.3.4", 8080, true},
		{"[::1]:8443", "::1", 8443, true},
		{"[::1]", "::1", 443, true},
		{"::1", "::1", 443, true},
		{"example.com:0", "", 0, false},
		{"example.com:65536", "", 0, false},
		{"example.com:", "", 0, false},
		{"[::1]x", "", 0, false},
		{"[::1", "", 0, false},
		{"[example.com]:80", "", 0, false},
	} {
		h, p, err := SplitHostPort(c.in, 443)
		if (err == nil) != c.ok || h != c.host || p != c.port {
			t.Errorf("SplitHostPort(%q) = %q, %d, %v; want %q, %d, ok %v", c.in, h, p, err, c.host, c.port, c.ok)
		}
	}
}

// FuzzParse: Parse never panics; what it accepts has a canonical text that
// parses to itself; what it refuses is one line; Decide never panics.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", "example.com", "EXAMPLE.com.", "*.example.com", "**.example.com:8443",
		"!api.example.com,*.example.com", "10.0.0.0/8:22", "[2001:db8::/32]:443",
		"::ffff:1.2.3.4", "127.1", "0x7f.1", "bücher.example", "xn--bcher-kva.example",
		"*.com", "**.github.io", "*", "https://x", "a@b", "a..b", "a.com,,b.com",
		"fe80::1%eth0", "1.2.3.4/32", "[::1]:1", "ＥＸＡＭＰＬＥ.com", "xn--zca.de",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, list string) {
		r, err := Parse(list)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("Parse(%q): error of more than one line: %q", list, err)
			}
			return
		}
		text := r.String()
		again, err := Parse(text)
		if err != nil {
			t.Fatalf("Parse(%q) gave %q, which Parse refuses: %v", list, text, err)
		}
		if again.String() != text || again.Len() != r.Len() {
			t.Fatalf("Parse(%q) gave %q, which parses to %q", list, text, again.String())
		}
		for _, h := range []string{list, "example.com", "1.2.3.4", "::1"} {
			_ = r.Decide(h, 443)
		}
	})
}
