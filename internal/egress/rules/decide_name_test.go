package rules

import (
	"strings"
	"testing"
)

// TestDecideName: a name is allowed when some port of it is, deny rules
// winning port by port; addresses and invalid names are never allowed.
func TestDecideName(t *testing.T) {
	for _, c := range []struct {
		rules, host string
		allowed     bool
		rule        string // the deciding rule, "" for none
		reason      string // a part of the reason
	}{
		{"", "example.com", false, "", "no rule"},
		{"example.com", "example.com", true, "example.com", "port 80"},
		{"example.com", "EXAMPLE.com.", true, "example.com", ""},
		{"example.com", "www.example.com", false, "", "no rule"},
		{"example.com", "example.com.localdomain", false, "", "no rule"},
		{"*.example.com", "a.b.example.com", true, "*.example.com", "subdomain"},
		{"*.example.com", "example.com", false, "", "no rule"},
		{"**.example.com", "example.com", true, "**.example.com", ""},
		{"example.com:22", "example.com", true, "example.com:22", "port 22"},
		{"!example.com,example.com", "example.com", false, "!example.com", "deny wins"},
		// Denied on 80 only: still reachable on 443, so it has a name.
		{"!example.com:80,example.com", "example.com", true, "example.com", "port 443"},
		{"!example.com:80,!example.com:443,example.com", "example.com", false, "!example.com:80", "deny wins"},
		{"!example.com:22,example.com:22,other.com", "example.com", false, "!example.com:22", "deny wins"},
		{"!*.example.com,**.example.com", "a.example.com", false, "!*.example.com", "deny wins"},
		{"!*.example.com,**.example.com", "example.com", true, "**.example.com", ""},
		{"1.2.3.4", "1.2.3.4", false, "", "an address"},
		{"127.0.0.1", "127.0.0.1", false, "", "an address"},
		{"::1", "::1", false, "", "an address"},
		{"example.com", "", false, "", "invalid host"},
		{"example.com", "exa_mple.com", false, "", "invalid host"},
		{"example.com", "127.1", false, "", "invalid host"},
		{"example.com", strings.Repeat("a", 64) + ".com", false, "", "invalid host"},
	} {
		rs, err := Parse(c.rules)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.rules, err)
		}
		d := rs.DecideName(c.host)
		if d.Allowed != c.allowed || d.Rule != c.rule || !strings.Contains(d.Reason, c.reason) {
			t.Errorf("rules %q: DecideName(%q) = %+v; want allowed %v, rule %q, reason containing %q", c.rules, c.host, d, c.allowed, c.rule, c.reason)
		}
	}
	var nilRules *Rules
	if d := nilRules.DecideName("example.com"); d.Allowed {
		t.Errorf("nil rules allowed a name: %+v", d)
	}
}
