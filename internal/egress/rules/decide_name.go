package rules

// DecideName decides whether the sandbox may reach the name h on at least
// one port: what the sandbox's DNS asks before it gives a name an address
// (a DNS question carries no port). h is decided as Decide decides it on
// each port an allow rule matching the name names (its :PORT, or 80 and
// 443), so a deny rule still wins port by port: the name is allowed only
// when some such port is. The Decision is that of the first allowed port,
// in the rules' order; a denial is that of the first port tried, or of
// port 443 when no allow rule matched. An IP literal is not a name and is
// denied: only a name gets a DNS answer.
func (rs *Rules) DecideName(h string) Decision {
	parsed, err := parseHost(h)
	if err != nil {
		return Decision{Reason: "invalid host: " + err.Error()}
	}
	if parsed.addr.IsValid() {
		return Decision{Reason: "an address, not a name: only a name is answered"}
	}
	var denial *Decision
	for _, r := range rs.list() {
		if r.deny || r.kind == address {
			continue
		}
		if _, ok := r.matchName(parsed.name); !ok {
			continue
		}
		ports := defaultPorts[:]
		if r.port != 0 {
			ports = []int{r.port}
		}
		for _, port := range ports {
			d := rs.Decide(parsed.name, port)
			if d.Allowed {
				return d
			}
			if denial == nil {
				denial = &d
			}
		}
	}
	if denial != nil {
		return *denial
	}
	return rs.Decide(parsed.name, 443)
}
