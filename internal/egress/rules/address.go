package rules

import (
	"net/netip"
)

// nat64 is the well-known NAT64 prefix (RFC 6052): 64:ff9b::a.b.c.d is
// a.b.c.d reached through a translator.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// sixToFour is 6to4 (RFC 3056): 2002:AABB:CCDD::/48 is the site behind the
// IPv4 address AA.BB.CC.DD.
var sixToFour = netip.MustParsePrefix("2002::/16")

// globalUnicast is where public IPv6 addresses are (RFC 4291).
var globalUnicast = netip.MustParsePrefix("2000::/3")

// special is an address range that is not the public internet, and what it
// is, for the reason of a denial.
type special struct {
	prefix netip.Prefix
	what   string
}

// specialV4 is every IPv4 range that is not public (IANA's special-purpose
// registry, RFC 6890, with the ranges that are public there left out),
// the most specific first so that the reason names it.
var specialV4 = []special{
	{netip.MustParsePrefix("0.0.0.0/32"), "the unspecified address"},
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network" (0.0.0.0/8)`},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (CGNAT, 100.64.0.0/10)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (169.254.0.0/16, where cloud metadata services are)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (RFC 1918)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments (192.0.0.0/24)"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation (TEST-NET-1)"},
	{netip.MustParsePrefix("192.88.99.0/24"), "the 6to4 relay anycast (192.88.99.0/24)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (RFC 1918)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking (198.18.0.0/15)"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation (TEST-NET-2)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation (TEST-NET-3)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("255.255.255.255/32"), "the broadcast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (240.0.0.0/4)"},
}

// specialV6 is every IPv6 range in global unicast (2000::/3) that is not
// public, and the named ranges outside it; anything else outside 2000::/3
// is refused as not global unicast. The IPv4 forms (mapped, compatible,
// NAT64) never reach this table: canonicalAddr turned them into IPv4.
var specialV6 = []special{
	{netip.MustParsePrefix("::/128"), "the unspecified address"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64 (64:ff9b:1::/48)"},
	{netip.MustParsePrefix("100::/64"), "discard-only (100::/64)"},
	{netip.MustParsePrefix("2001::/32"), "Teredo (2001::/32), which hides an IPv4 address"},
	{netip.MustParsePrefix("2001:2::/48"), "benchmarking (2001:2::/48)"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation (2001:db8::/32)"},
	{netip.MustParsePrefix("3fff::/20"), "documentation (3fff::/20)"},
	{netip.MustParsePrefix("fc00::/7"), "unique local (ULA, fc00::/7)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local (fe80::/10)"},
	{netip.MustParsePrefix("fec0::/10"), "site-local (fec0::/10, deprecated)"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// canonicalAddr is the address a connection to ip reaches, as the rules
// see it: without a zone, and the IPv4 address itself for the IPv6 forms
// that carry one to that same IPv4 host (IPv4-mapped ::ffff:a.b.c.d,
// IPv4-compatible ::a.b.c.d, NAT64 64:ff9b::a.b.c.d). :: and ::1 are
// themselves, not IPv4-compatible forms.
func canonicalAddr(ip netip.Addr) netip.Addr {
	ip = ip.WithZone("")
	if ip.Is4In6() {
		return ip.Unmap()
	}
	if !ip.Is6() {
		return ip
	}
	b := ip.As16()
	if nat64.Contains(ip) {
		return netip.AddrFrom4([4]byte(b[12:16]))
	}
	compatible := true
	for _, x := range b[:12] {
		if x != 0 {
			compatible = false
			break
		}
	}
	if compatible && ip != netip.IPv6Unspecified() && ip != netip.IPv6Loopback() {
		return netip.AddrFrom4([4]byte(b[12:16]))
	}
	return ip
}

// class is what classify found an address to be.
type class struct {
	public bool
	what   string
	// within is the non-public range the address is in: a rule allows the
	// address only if it lies inside it. Invalid for the IPv6 outside
	// global unicast with no range of its own: then a rule must lie
	// outside 2000::/3.
	within netip.Prefix
}

// admits reports whether an allow rule's prefix names this non-public
// class's range (lies inside it) rather than merely containing it.
func (c class) admits(p netip.Prefix) bool {
	if !c.within.IsValid() {
		return !p.Overlaps(globalUnicast)
	}
	return p.Bits() >= c.within.Bits() && c.within.Contains(p.Addr())
}

// rangeText is the range a rule must lie in, for a reason.
func (c class) rangeText() string {
	if !c.within.IsValid() {
		return "it (outside 2000::/3)"
	}
	return c.within.String()
}

// classify says whether a canonical address is public and, when it is not,
// what it is and in which range.
func classify(ip netip.Addr) class {
	table := specialV4
	if ip.Is6() {
		table = specialV6
	}
	for _, s := range table {
		if s.prefix.Contains(ip) {
			return class{what: s.what, within: s.prefix}
		}
	}
	if ip.Is4() {
		return class{public: true}
	}
	if sixToFour.Contains(ip) {
		b := ip.As16()
		inner := classify(netip.AddrFrom4([4]byte(b[2:6])))
		if inner.public {
			return class{public: true}
		}
		// The 6to4 image of the IPv4 range: 2002:a9fe::/32 for 169.254.0.0/16.
		v4 := inner.within.Addr().As4()
		var image [16]byte
		image[0], image[1] = 0x20, 0x02
		copy(image[2:6], v4[:])
		return class{
			what:   "6to4 of " + netip.AddrFrom4([4]byte(b[2:6])).String() + ", which is " + inner.what,
			within: netip.PrefixFrom(netip.AddrFrom16(image), 16+inner.within.Bits()),
		}
	}
	if !globalUnicast.Contains(ip) {
		return class{what: "not global unicast (outside 2000::/3)"}
	}
	return class{public: true}
}
