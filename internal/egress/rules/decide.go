package rules

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// reasonNoRule is the Reason when no rule matched.
const reasonNoRule = "no rule"

// Decide decides whether the sandbox may reach host on port. host is a
// name or an IP literal as the sandbox gave it (see CanonicalHost); an
// invalid host or port is denied, with the reason. A name is decided by
// the name rules, an IP literal by the address rules only; a deny rule that
// matches wins over any allow rule. Decide does not resolve: the gateway
// checks each address it would dial for an allowed name with
// AllowsAddress.
func (rs *Rules) Decide(h string, port int) Decision {
	if port < 1 || port > 65535 {
		return Decision{Reason: fmt.Sprintf("invalid port %d", port)}
	}
	parsed, err := parseHost(h)
	if err != nil {
		return Decision{Reason: "invalid host: " + err.Error()}
	}
	if parsed.addr.IsValid() {
		return rs.decideAddress(parsed.addr, port, false)
	}
	for _, deny := range []bool{true, false} {
		for _, r := range rs.list() {
			if r.deny != deny || r.kind == address || !r.matchesPort(port) {
				continue
			}
			if how, ok := r.matchName(parsed.name); ok {
				return r.decision(how, port)
			}
		}
	}
	return Decision{Reason: reasonNoRule}
}

// AllowsAddress decides whether the gateway may dial ip on port for a name
// Decide allowed: ip is one address the name resolved to. A deny address
// rule covering ip denies it; an allow address rule covering it allows it;
// otherwise a public address passes (Rule "") and any other (loopback,
// private, link-local, CGNAT, ULA, multicast, unspecified, broadcast,
// reserved, or an IPv4-mapped, IPv4-compatible or NAT64 form of one) is
// denied. It is not a decision on ip as a host: an IP literal the sandbox
// names goes to Decide, which allows it only by an address rule.
func (rs *Rules) AllowsAddress(ip netip.Addr, port int) Decision {
	if port < 1 || port > 65535 {
		return Decision{Reason: fmt.Sprintf("invalid port %d", port)}
	}
	if !ip.IsValid() {
		return Decision{Reason: "invalid address"}
	}
	return rs.decideAddress(ip, port, true)
}

// decideAddress decides an address by the address rules. resolved: the
// address is one an allowed name resolved to, which passes without a rule
// when public. A non-public address is allowed only by a rule inside its
// range (127.0.0.1, 10.0.0.0/8, 169.254.169.254), never by a wider one that
// merely contains it (0.0.0.0/1): the range must be named.
func (rs *Rules) decideAddress(ip netip.Addr, port int, resolved bool) Decision {
	canon := canonicalAddr(ip)
	class := classify(canon)
	containedOnly := false // a rule contains the address but may not name it
	for _, deny := range []bool{true, false} {
		for _, r := range rs.list() {
			if r.deny != deny || r.kind != address || !r.matchesPort(port) || !r.prefix.Contains(canon) {
				continue
			}
			if !deny && !class.public && !class.admits(r.prefix) {
				containedOnly = true
				continue
			}
			how := "the rule names this address"
			if !r.prefix.IsSingleIP() {
				how = fmt.Sprintf("%s is in %s", canon, r.prefix)
			} else if canon != ip.WithZone("") {
				how = fmt.Sprintf("%s is %s, which the rule names", ip.WithZone(""), canon)
			}
			return r.decision(how, port)
		}
	}
	if class.public {
		if resolved {
			return Decision{Allowed: true, Reason: "a public address of an allowed name"}
		}
		return Decision{Reason: reasonNoRule}
	}
	if !resolved && !containedOnly {
		return Decision{Reason: reasonNoRule}
	}
	what := canon.String()
	if canon != ip.WithZone("") {
		what = fmt.Sprintf("%s (a form of %s)", ip.WithZone(""), canon)
	}
	return Decision{Reason: fmt.Sprintf("%s is %s: only an address or CIDR rule within %s can allow it", what, class.what, class.rangeText())}
}

// list is the rules, none for a nil *Rules.
func (rs *Rules) list() []rule {
	if rs == nil {
		return nil
	}
	return rs.rules
}

// matchesPort: a rule's own port, or without one: every port to deny,
// the default ports to allow.
func (r rule) matchesPort(port int) bool {
	if r.port != 0 {
		return port == r.port
	}
	if r.deny {
		return true
	}
	for _, p := range defaultPorts {
		if port == p {
			return true
		}
	}
	return false
}

// matchName reports whether a name rule matches a canonical name, and how.
func (r rule) matchName(name string) (string, bool) {
	subdomain := len(name) > len(r.name) && strings.HasSuffix(name, r.name) && name[len(name)-len(r.name)-1] == '.'
	switch r.kind {
	case exactName:
		return "the rule names this host", name == r.name
	case subdomains:
		return fmt.Sprintf("%s is a subdomain of %s", name, r.name), subdomain
	case apexAndSubdomains:
		if name == r.name {
			return fmt.Sprintf("%s is the rule's name itself", name), true
		}
		return fmt.Sprintf("%s is a subdomain of %s", name, r.name), subdomain
	}
	return "", false
}

// decision is the Decision of a rule that matched: how it matched, and on
// which port.
func (r rule) decision(how string, port int) Decision {
	var on string
	switch {
	case r.port != 0:
		on = "port " + strconv.Itoa(port) + " as the rule says"
	case r.deny:
		on = "a deny rule without a port denies every port"
	default:
		on = "port " + strconv.Itoa(port) + " is a default port (80, 443)"
	}
	if r.deny {
		return Decision{Rule: r.String(), Reason: how + "; " + on + "; deny wins"}
	}
	return Decision{Allowed: true, Rule: r.String(), Reason: how + "; " + on}
}
