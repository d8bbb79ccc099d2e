package mitm

import (
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
)

// Placeholders. A placeholder stands for a secret's value inside the
// sandbox: random (crypto/rand), made anew for each sandbox, never equal
// to the value nor a part of it, and shaped like it so that a tool that
// checks a token's form accepts it:
//
//	value begins with                 placeholder keeps      body drawn from (widened by the classes the value's body has)
//	github_pat_                       the prefix, length     [A-Za-z0-9_]
//	ghp_ gho_ ghu_ ghs_ ghr_          the prefix, length     [A-Za-z0-9]
//	glpat-                            prefix, length, "."    [A-Za-z0-9_-]
//	sk-ant-api03- sk-ant-admin01-     the prefix, length     [A-Za-z0-9_-]
//	sk-ant- sk-proj- sk-svcacct-      the prefix, length     [A-Za-z0-9_-]
//	sk-admin- sk-                     the prefix, length     [A-Za-z0-9] (+ - _ when the value has them)
//	xoxb- xoxp- xoxa- xoxr- xapp-     prefix, length, "-"    per segment: the classes it has
//	AKIA ASIA                         the prefix, length     [A-Z0-9]
//	AIza                              the prefix, length     [A-Za-z0-9_-]
//	npm_                              the prefix, length     [A-Za-z0-9]
//	pypi-                             the prefix, length     [A-Za-z0-9_-]
//	hf_                               the prefix, length     [A-Za-z0-9]
//	eyJ (a JWT)                       prefix, length, "."    per segment: [A-Za-z0-9_-]
//	anything else                     its length, at least   the classes it has among a-z, A-Z, 0-9,
//	                                  what gives 128 bits     - and _ ([A-Za-z0-9] when it has none)
//
// A character of the body outside the alphabet (+ / = and the like) is
// replaced by one from it; only the separators named above stay where
// they stand. A known prefix whose body would give less than 64 random
// bits is treated as anything else. Every placeholder is made of
// [A-Za-z0-9_.-] only, so it survives a header, a URL or a shell
// unquoted.

// minFormatBits and minGenericBits are the randomness a placeholder must
// carry: enough that no text in a request matches one by chance.
const (
	minFormatBits  = 64
	minGenericBits = 128
)

const (
	lower  = "abcdefghijklmnopqrstuvwxyz"
	upper  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	digits = "0123456789"
	base62 = upper + lower + digits
)

// tokenFormat is a known kind of token: its prefix, the alphabet its body
// is always drawn from, and the separators kept in place.
type tokenFormat struct {
	prefix string
	core   string
	keep   string
}

// tokenFormats are tried in order (a longer prefix before its own
// prefix).
func tokenFormats() []tokenFormat {
	return []tokenFormat{
		{"github_pat_", base62 + "_", ""},
		{"ghp_", base62, ""}, {"gho_", base62, ""}, {"ghu_", base62, ""}, {"ghs_", base62, ""}, {"ghr_", base62, ""},
		{"glpat-", base62 + "_-", "."},
		{"sk-ant-api03-", base62 + "_-", ""}, {"sk-ant-admin01-", base62 + "_-", ""}, {"sk-ant-", base62 + "_-", ""},
		{"sk-proj-", base62 + "_-", ""}, {"sk-svcacct-", base62 + "_-", ""}, {"sk-admin-", base62 + "_-", ""},
		{"sk-", base62, ""},
		{"xoxb-", "", "-"}, {"xoxp-", "", "-"}, {"xoxa-", "", "-"}, {"xoxr-", "", "-"}, {"xapp-", "", "-"},
		{"AKIA", upper + digits, ""}, {"ASIA", upper + digits, ""},
		{"AIza", base62 + "_-", ""},
		{"npm_", base62, ""},
		{"pypi-", base62 + "_-", ""},
		{"hf_", base62, ""},
		{"eyJ", base62 + "_-", "."},
	}
}

// NewPlaceholder returns a fresh placeholder for the secret name whose
// value is value (see the table above). It fails only when the system's
// randomness does, or value is empty.
func NewPlaceholder(name, value string) (string, error) {
	if value == "" {
		return "", fmt.Errorf("mitm: secret %s: empty value", name)
	}
	for range 8 {
		p, err := shapedPlaceholder(value)
		if err != nil {
			return "", fmt.Errorf("mitm: secret %s: placeholder: %w", name, err)
		}
		if !strings.Contains(p, value) && !strings.Contains(value, p) {
			return p, nil
		}
	}
	// Only a value made of one repeated character drawn from a
	// one-character alphabet could get here, and there is none.
	return "", fmt.Errorf("mitm: secret %s: no placeholder unlike the value", name)
}

func shapedPlaceholder(value string) (string, error) {
	for _, f := range tokenFormats() {
		body, ok := strings.CutPrefix(value, f.prefix)
		if !ok || body == "" {
			continue
		}
		segs := segments(body, f.keep)
		if segs.bits(f.core) < minFormatBits {
			break
		}
		var b strings.Builder
		b.WriteString(f.prefix)
		if err := segs.fill(&b, f.core); err != nil {
			return "", err
		}
		return b.String(), nil
	}
	alphabet := classesOf(value, "")
	if alphabet == "" {
		alphabet = base62
	}
	n := len(value)
	if need := int(math.Ceil(minGenericBits / math.Log2(float64(len(alphabet))))); n < need {
		n = need
	}
	return randomString(alphabet, n)
}

// segmented is a body split at its kept separators.
type segmented struct {
	parts []string // the segments, between separators
	seps  []byte   // seps[i] follows parts[i]
}

func segments(body, keep string) segmented {
	var s segmented
	start := 0
	for i := 0; i < len(body); i++ {
		if strings.IndexByte(keep, body[i]) >= 0 {
			s.parts = append(s.parts, body[start:i])
			s.seps = append(s.seps, body[i])
			start = i + 1
		}
	}
	s.parts = append(s.parts, body[start:])
	return s
}

func (s segmented) bits(core string) float64 {
	var bits float64
	for _, p := range s.parts {
		if a := classesOf(p, core); len(a) > 1 {
			bits += float64(len(p)) * math.Log2(float64(len(a)))
		}
	}
	return bits
}

func (s segmented) fill(b *strings.Builder, core string) error {
	for i, p := range s.parts {
		a := classesOf(p, core)
		if a == "" {
			a = base62
		}
		r, err := randomString(a, len(p))
		if err != nil {
			return err
		}
		b.WriteString(r)
		if i < len(s.seps) {
			b.WriteByte(s.seps[i])
		}
	}
	return nil
}

// classesOf is core widened by the classes s has: a-z, A-Z, 0-9 whole,
// - and _ each.
func classesOf(s, core string) string {
	var has [4]bool
	dash, under := strings.Contains(core, "-"), strings.Contains(core, "_")
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z':
			has[0] = true
		case 'A' <= c && c <= 'Z':
			has[1] = true
		case '0' <= c && c <= '9':
			has[2] = true
		case c == '-':
			dash = true
		case c == '_':
			under = true
		}
	}
	var b strings.Builder
	for i, class := range []string{lower, upper, digits} {
		if has[i] || strings.Contains(core, class[:1]) {
			b.WriteString(class)
		}
	}
	if dash {
		b.WriteByte('-')
	}
	if under {
		b.WriteByte('_')
	}
	return b.String()
}

func randomString(alphabet string, n int) (string, error) {
	if alphabet == "" {
		return "", errors.New("empty alphabet")
	}
	out := make([]byte, n)
	max := big.NewInt(int64(len(alphabet)))
	for i := range out {
		k, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", err
		}
		out[i] = alphabet[k.Int64()]
	}
	return string(out), nil
}

// validPlaceholder checks a placeholder given rather than made: long
// enough not to occur by chance, and of characters that survive a header
// and a URL unchanged.
func validPlaceholder(p string) error {
	if len(p) < 16 {
		return errors.New("a placeholder must be at least 16 characters")
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return errors.New("a placeholder is made of [A-Za-z0-9_.-] only")
		}
	}
	return nil
}
