package test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNetCheckSaysWhichRuleDecides: jail net check prints the verdict, the
// rule and why, and exits 0 when allowed, 1 when denied; --json gives the
// same answer as one object.
func TestNetCheckSaysWhichRuleDecides(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, c := range []struct {
			rules, target string
			code          int
			stdout        string
		}{
			{"*.example.com", "api.example.com", 0, "allowed: api.example.com:443 by *.example.com: api.example.com is a subdomain of example.com; port 443 is a default port (80, 443)\n"},
			{"*.example.com", "EXAMPLE.com.", 1, "denied: example.com:443 (no rule)\n"},
			{"**.example.com", "example.com:80", 0, "allowed: example.com:80 by **.example.com: example.com is the rule's name itself; port 80 is a default port (80, 443)\n"},
			{"example.com", "example.com:8080", 1, "denied: example.com:8080 (no rule)\n"},
			{"!api.example.com,*.example.com", "api.example.com", 1, "denied: api.example.com:443 by !api.example.com: the rule names this host; a deny rule without a port denies every port; deny wins\n"},
			{"example.com", "1.2.3.4", 1, "denied: 1.2.3.4:443 (no rule)\n"},
			{"10.0.0.0/8:5432", "10.1.2.3:5432", 0, "allowed: 10.1.2.3:5432 by 10.0.0.0/8:5432: 10.1.2.3 is in 10.0.0.0/8; port 5432 as the rule says\n"},
			{"[2001:db8::/32]:443", "[2001:db8::1]:443", 0, "allowed: [2001:db8::1]:443 by [2001:db8::/32]:443: 2001:db8::1 is in 2001:db8::/32; port 443 as the rule says\n"},
			{"169.254.169.254", "[::ffff:169.254.169.254]:80", 0, "allowed: [::ffff:169.254.169.254]:80 by 169.254.169.254: ::ffff:169.254.169.254 is 169.254.169.254, which the rule names; port 80 is a default port (80, 443)\n"},
			{"example.com", "[::ffff:169.254.169.254]:80", 1, "denied: [::ffff:169.254.169.254]:80 (no rule)\n"},
			{"", "example.com", 1, "denied: example.com:443 (no rule)\n"},
		} {
			r := jail(t, m, "net", "check", c.rules, c.target)
			if r.code != c.code || r.stdout != c.stdout || r.stderr != "" {
				t.Errorf("net check %q %q: exit %d\nstdout: %q\nstderr: %q\nwant exit %d, stdout %q", c.rules, c.target, r.code, r.stdout, r.stderr, c.code, c.stdout)
			}
		}

		r := jail(t, m, "net", "check", "--json", "!api.example.com,*.example.com", "API.example.com:443")
		var answer struct {
			Host    string `json:"host"`
			Port    int    `json:"port"`
			Allowed bool   `json:"allowed"`
			Rule    string `json:"rule"`
			Reason  string `json:"reason"`
		}
		if r.code != 1 || r.stderr != "" || strings.Count(r.stdout, "\n") != 1 {
			t.Fatalf("net check --json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if err := json.Unmarshal([]byte(r.stdout), &answer); err != nil {
			t.Fatalf("net check --json: %v: %q", err, r.stdout)
		}
		if answer.Host != "api.example.com" || answer.Port != 443 || answer.Allowed || answer.Rule != "!api.example.com" || !strings.Contains(answer.Reason, "deny wins") {
			t.Errorf("net check --json: %+v", answer)
		}
		r = jail(t, m, "net", "check", "*.example.com", "www.example.com:443", "--json")
		if r.code != 0 || !strings.HasPrefix(r.stdout, `{"host":"www.example.com","port":443,"allowed":true,"rule":"*.example.com",`) {
			t.Errorf("net check ... --json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

// TestNetCheckRefusesBadRulesAndHosts: a rule or host the gateway would
// refuse is one `jail: ` line naming it, exit 125, nothing on stdout.
func TestNetCheckRefusesBadRulesAndHosts(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, c := range []struct {
			args []string
			says string
		}{
			{[]string{"*", "example.com"}, `rule "*": * alone would match every host`},
			{[]string{"*.com", "example.com"}, `rule "*.com": a wildcard over the public suffix "com"`},
			{[]string{"**.co.uk", "example.co.uk"}, `public suffix "co.uk"`},
			{[]string{"**.github.io", "x.github.io"}, `public suffix "github.io"`},
			{[]string{"https://example.com", "example.com"}, "a URL"},
			{[]string{"example.com/path", "example.com"}, "a path"},
			{[]string{"user@example.com", "example.com"}, "user info"},
			{[]string{"example..com", "example.com"}, "empty label"},
			{[]string{"example.com:70000", "example.com"}, "1 to 65535"},
			{[]string{"a.com,,b.com", "a.com"}, "empty rule"},
			{[]string{"localhost", "localhost"}, "loopback"},
			{[]string{"example.com\n", "example.com"}, `rule "example.com\n": invalid character`},
			{[]string{"**.example.com", "127.1"}, `host "127.1": an IPv4 address in a non-canonical form`},
			{[]string{"127.0.0.0/8", "2130706433:80"}, "non-canonical"},
			{[]string{"127.0.0.0/8", "0x7f.1"}, "non-canonical"},
			{[]string{"**.example.com", "a_b.example.com"}, "invalid character"},
			{[]string{"**.example.com", "example.com:0"}, "1 to 65535"},
			{[]string{"**.example.com", "[example.com]:443"}, "brackets"},
			{[]string{"**.example.com", "bücher.example.com"}, "its IDNA form is xn--bcher-kva.example.com"},
			{[]string{"**.example.com", "evil.test\x1b[2J"}, `invalid character '\x1b'`},
			{[]string{"**.example.com"}, "usage: jail net check"},
			{[]string{"a", "b", "c"}, "usage: jail net check"},
			{[]string{"--bogus", "a", "b"}, "unknown option --bogus"},
		} {
			r := jail(t, m, append([]string{"net", "check"}, c.args...)...)
			if !isOneLine125(r) || !strings.Contains(r.stderr, c.says) || !strings.HasPrefix(r.stderr, "jail: net check: ") {
				t.Errorf("net check %q: exit %d\nstdout: %q\nstderr: %q\nwant one jail: line saying %q", c.args, r.code, r.stdout, r.stderr, c.says)
			}
		}
		if r := jail(t, m, "net", "bogus"); !isOneLine125(r) {
			t.Errorf("net bogus: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
		if r := jail(t, m, "net", "check", "--help"); r.code != 0 || !strings.Contains(r.stdout, "usage: jail net check") {
			t.Errorf("net check --help: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
	})
}
