package rules

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// maxNameInput bounds the text canonicalName looks at before any IDNA
// work: no valid name is longer, in any spelling.
const maxNameInput = MaxRuleLen

// errNumeric is a name whose last label is a number: a resolver reads it as
// an IPv4 address in one of inet_aton's forms (127.1, 0x7f.1, 2130706433,
// 0177.0.0.1), never as a name.
var errNumeric = errors.New("an IPv4 address in a non-canonical form (resolvers read 127.1, 0x7f.1, 0177.0.0.1 or 2130706433 as an address): write it as a.b.c.d")

// canonicalName returns the canonical form of a DNS name: lowercase ASCII,
// no trailing dot, every label 1 to 63 letters, digits or hyphens (no
// hyphen at either end, "--" at the third place only in a valid IDNA
// A-label "xn--..."), at most MaxNameLen characters, and a last label that
// is not a number. unicode allows a name in Unicode, converted to its
// A-labels by the IDNA lookup profile (UTS #46, non-transitional); without
// it a name must already be ASCII.
func canonicalName(s string, unicode bool) (string, error) {
	if s == "" {
		return "", errors.New("empty name")
	}
	if len(s) > maxNameInput {
		return "", fmt.Errorf("a name longer than %d characters", MaxNameLen)
	}
	if !isASCII(s) {
		if !utf8.ValidString(s) {
			return "", errors.New("not valid UTF-8")
		}
		ascii, err := idna.Lookup.ToASCII(s)
		if !unicode {
			if err == nil {
				return "", fmt.Errorf("not ASCII (a name on the wire is ASCII): its IDNA form is %s", ascii)
			}
			return "", errors.New("not ASCII, and not a valid internationalised name")
		}
		if err != nil {
			return "", fmt.Errorf("not a valid internationalised name: %s", strings.TrimPrefix(err.Error(), "idna: "))
		}
		s = ascii
	}
	s = strings.ToLower(s)
	s = strings.TrimSuffix(s, ".")
	if s == "" {
		return "", errors.New("empty name")
	}
	if len(s) > MaxNameLen {
		return "", fmt.Errorf("a name longer than %d characters", MaxNameLen)
	}
	for label := range strings.SplitSeq(s, ".") {
		if err := checkLabel(label); err != nil {
			return "", err
		}
	}
	if endsInNumber(s) {
		return "", errNumeric
	}
	return s, nil
}

// checkLabel checks one lowercase ASCII label.
func checkLabel(label string) error {
	if label == "" {
		return errors.New("an empty label (a leading dot, or two dots in a row)")
	}
	if len(label) > 63 {
		return fmt.Errorf("label %q is longer than 63 characters", shorten(label))
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return fmt.Errorf("invalid character %q in a name (letters, digits, - and . only)", c)
		}
	}
	if label[0] == '-' || label[len(label)-1] == '-' {
		return fmt.Errorf("label %q starts or ends with a hyphen", label)
	}
	if len(label) >= 4 && label[2:4] == "--" {
		if !strings.HasPrefix(label, "xn--") {
			return fmt.Errorf("label %q has -- at the third place, which only IDNA's xn-- may", label)
		}
		// An A-label must be the punycode of a valid U-label, and that
		// U-label's only A-label: anything else is two names in one.
		u, err := idna.Lookup.ToUnicode(label)
		if err != nil {
			return fmt.Errorf("label %q is not a valid IDNA A-label", label)
		}
		if a, err := idna.Lookup.ToASCII(u); err != nil || a != label {
			return fmt.Errorf("label %q is not a valid IDNA A-label", label)
		}
	}
	return nil
}

// endsInNumber reports whether a name's last label is a number as the URL
// standard and inet_aton read one: decimal digits, or 0x and hex digits.
// Such a name is an IPv4 address to every resolver, never looked up.
func endsInNumber(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if last == "" {
		return false
	}
	if hex, ok := strings.CutPrefix(strings.ToLower(last), "0x"); ok {
		for i := 0; i < len(hex); i++ {
			if c := hex[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// isPublicSuffix reports whether name is a public suffix (com, co.uk,
// github.io): one under which anyone may register a name. Both parts of the
// Public Suffix List count (ICANN's and the private one: a wildcard over
// github.io is every user's site), and so does any name the list does not
// know of a single label (corp, internal), by the list's default rule.
func isPublicSuffix(name string) bool {
	suffix, _ := publicsuffix.PublicSuffix(name)
	return suffix == name
}

// host is a host as Decide reads it: a canonical name, or an address.
type host struct {
	name string
	addr netip.Addr // valid for an IP literal
}

func (h host) String() string {
	if h.addr.IsValid() {
		return h.addr.String()
	}
	return h.name
}

// parseHost reads a host as the sandbox names it (a CONNECT target, a TLS
// SNI, an HTTP Host, a DNS question): an IP literal in canonical form, or
// an ASCII name. IPv6 is bare, without brackets or zone.
func parseHost(s string) (host, error) {
	if s == "" {
		return host{}, errors.New("empty host")
	}
	if len(s) > maxNameInput {
		return host{}, fmt.Errorf("a host longer than %d characters", MaxNameLen)
	}
	if strings.Contains(s, ":") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return host{}, fmt.Errorf("not an IPv6 address: %s", netipDetail(err))
		}
		if a.Zone() != "" {
			return host{}, errors.New("an address with a zone (%...) names an interface, not a destination")
		}
		return host{addr: a}, nil
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
		return host{addr: a}, nil
	}
	name, err := canonicalName(s, false)
	if err != nil {
		return host{}, err
	}
	return host{name: name}, nil
}

// CanonicalHost returns host as Decide compares it: a name lowercase,
// without its trailing dot; an address in its canonical text. It refuses
// what Decide denies as not a host: an IPv4 address in a non-canonical
// form (127.1), a name that is not ASCII (the error gives its A-label
// form), invalid characters, empty labels, brackets, zones.
func CanonicalHost(s string) (string, error) {
	h, err := parseHost(s)
	if err != nil {
		return "", fmt.Errorf("host %q: %w", shorten(s), err)
	}
	return h.String(), nil
}

// SplitHostPort splits HOST[:PORT] as a CONNECT target or a command line
// writes it (an IPv6 address in brackets when a port follows: [::1]:443; a
// bare IPv6 address takes no port), giving defaultPort when there is none.
// The host is returned as written, for CanonicalHost or Decide to judge.
func SplitHostPort(s string, defaultPort int) (string, int, error) {
	bad := func(format string, args ...any) (string, int, error) {
		return "", 0, fmt.Errorf("%q: %s", shorten(s), fmt.Sprintf(format, args...))
	}
	if rest, ok := strings.CutPrefix(s, "["); ok {
		inner, after, found := strings.Cut(rest, "]")
		if !found {
			return bad("a [ without its ]")
		}
		if !strings.Contains(inner, ":") {
			return bad("brackets are only for an IPv6 address")
		}
		if after == "" {
			return inner, defaultPort, nil
		}
		p, ok := strings.CutPrefix(after, ":")
		if !ok {
			return bad("after ] only :PORT may follow")
		}
		port, err := parsePort(p)
		if err != nil {
			return bad("%v", err)
		}
		return inner, port, nil
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, defaultPort, nil
	case 1:
		h, p, _ := strings.Cut(s, ":")
		port, err := parsePort(p)
		if err != nil {
			return bad("%v", err)
		}
		return h, port, nil
	default:
		return s, defaultPort, nil
	}
}
