package mitm

import (
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jail-sandbox/jail/internal/egress/rules"
)

// maxValueSize bounds a value (the secret store's own bound).
const maxValueSize = 64 << 10

// DefaultMaxHeaderBytes bounds the header of a request or response read on
// an intercepted connection when Options.MaxHeaderBytes is zero.
const DefaultMaxHeaderBytes = 64 << 10

// Binding binds a secret to the hosts its value may be sent to. Printing
// a Binding (any verb) shows its name and hosts, never its value.
type Binding struct {
	// Name is the secret's name, the sandbox's variable that holds the
	// placeholder.
	Name string
	// Placeholder is what the sandbox holds; NewSecrets makes one with
	// NewPlaceholder when it is empty.
	Placeholder string
	// Value is the real value, behind a pointer so that fmt, which
	// prints a nested pointer as an address, never prints it, even from
	// a Binding held in an unexported field (where the Format method
	// cannot be called). A string, as the secret store gives it: a
	// []byte could be wiped, but every request that carries the value
	// is a string anyway.
	Value *string
	// Hosts are the hosts the value may go to: exact names or IP
	// literals.
	Hosts []string
}

// Format prints "NAME@HOST,HOST" whatever the verb.
func (b Binding) Format(f fmt.State, verb rune) {
	_, _ = io.WriteString(f, b.Name+"@"+strings.Join(b.Hosts, ","))
}

// String is "NAME@HOST,HOST".
func (b Binding) String() string { return fmt.Sprint(b) }

// Options tune NewSecrets. The zero value is the default.
type Options struct {
	// Authority tunes the sandbox's authority.
	Authority AuthorityOptions
	// UpstreamRoots verify the real hosts; nil: the system's roots
	// (which honour SSL_CERT_FILE and SSL_CERT_DIR).
	UpstreamRoots *x509.CertPool
	// PlainHTTP lets Rewrite put values into plain-HTTP requests to bound
	// hosts. Off, such a request is refused: the value would cross the
	// network in the clear, readable by whoever is on the path or answers
	// for the host's name.
	PlainHTTP bool
	// MaxHeaderBytes bounds each request's and response's header on an
	// intercepted connection; DefaultMaxHeaderBytes when zero.
	MaxHeaderBytes int
}

// Secrets are a sandbox's secrets bound to hosts: the Interceptor the
// gateway hands intercepted connections and plain-HTTP headers to.
// Printing a Secrets (any verb) shows names and hosts only.
type Secrets struct {
	auth    *Authority
	entries []*entry
	byHost  map[string][]*entry // the entries bound to each host
	opts    Options
}

// entry is one secret. Its value is behind a pointer so that fmt, which
// prints nested pointers as addresses, never prints it.
type entry struct {
	name        string
	placeholder string
	value       *string
	hosts       map[string]bool
}

// RefusedError is a request refused because of a placeholder or its host.
// Its text names the secret and the host, never a value.
type RefusedError struct {
	// Status is the HTTP status the request is answered with.
	Status int
	// Secret is the secret concerned, if any.
	Secret string
	// Host is the host the request was for.
	Host string
	// Reason says why, briefly.
	Reason string
}

func (e *RefusedError) Error() string {
	if e.Secret != "" {
		return fmt.Sprintf("secret %s: %s %s", e.Secret, e.Reason, e.Host)
	}
	return fmt.Sprintf("request to %s refused: %s", e.Host, e.Reason)
}

// Refusal says why the request was refused: the gateway records an error
// that has it as a denial.
func (e *RefusedError) Refusal() string { return e.Error() }

// NewSecrets checks bindings, makes placeholders where none is given, and
// makes the sandbox's authority for the hosts they are bound to.
func NewSecrets(sandbox string, bindings []Binding, opts Options) (*Secrets, error) {
	if len(bindings) == 0 {
		return nil, errors.New("mitm: no secret is bound to a host")
	}
	if opts.MaxHeaderBytes == 0 {
		opts.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if opts.MaxHeaderBytes < 0 {
		return nil, errors.New("mitm: negative MaxHeaderBytes")
	}
	s := &Secrets{byHost: make(map[string][]*entry), opts: opts}
	var allHosts []string
	for _, b := range bindings {
		e, err := newEntry(b)
		if err != nil {
			return nil, fmt.Errorf("mitm: %w", err)
		}
		for _, other := range s.entries {
			if other.name == e.name {
				return nil, fmt.Errorf("mitm: secret %s bound twice: give all its hosts in one binding", e.name)
			}
		}
		s.entries = append(s.entries, e)
		for h := range e.hosts {
			if len(s.byHost[h]) == 0 {
				allHosts = append(allHosts, h)
			}
			s.byHost[h] = append(s.byHost[h], e)
		}
	}
	// No placeholder may hide in another or in a value (or the other way
	// round), or one replacement could make or break another.
	for _, a := range s.entries {
		for _, b := range s.entries {
			if a != b && (strings.Contains(a.placeholder, b.placeholder) ||
				strings.Contains(*a.value, b.placeholder) || strings.Contains(b.placeholder, *a.value)) {
				return nil, fmt.Errorf("mitm: secrets %s and %s: a placeholder is part of another placeholder or value", a.name, b.name)
			}
		}
	}
	slices.Sort(allHosts)
	auth, err := NewAuthority(sandbox, allHosts, opts.Authority)
	if err != nil {
		return nil, err
	}
	s.auth = auth
	return s, nil
}

func newEntry(b Binding) (*entry, error) {
	if !validName(b.Name) {
		return nil, fmt.Errorf("secret %q: not a variable name", b.Name)
	}
	if b.Value == nil {
		return nil, fmt.Errorf("secret %s: no value", b.Name)
	}
	v := *b.Value
	switch {
	case v == "":
		return nil, fmt.Errorf("secret %s: empty value", b.Name)
	case len(v) > maxValueSize:
		return nil, fmt.Errorf("secret %s: value longer than %d bytes", b.Name, maxValueSize)
	case !validFieldValue(v):
		return nil, fmt.Errorf("secret %s: its value has a control character (a newline?) and cannot go in a request header", b.Name)
	}
	if len(b.Hosts) == 0 {
		return nil, fmt.Errorf("secret %s: bound to no host", b.Name)
	}
	e := &entry{name: b.Name, placeholder: b.Placeholder, value: &v, hosts: make(map[string]bool)}
	for _, h := range b.Hosts {
		c, err := canonicalBoundHost(h)
		if err != nil {
			return nil, fmt.Errorf("secret %s: %w", b.Name, err)
		}
		e.hosts[c] = true
	}
	if e.placeholder == "" {
		p, err := NewPlaceholder(b.Name, v)
		if err != nil {
			return nil, err
		}
		e.placeholder = p
	} else if err := validPlaceholder(e.placeholder); err != nil {
		return nil, fmt.Errorf("secret %s: %w", b.Name, err)
	}
	if strings.Contains(v, e.placeholder) || strings.Contains(e.placeholder, v) {
		return nil, fmt.Errorf("secret %s: the placeholder and the value hold one another", b.Name)
	}
	return e, nil
}

// validName is the secret store's rule: [A-Za-z_][A-Za-z0-9_]{0,127}.
func validName(name string) bool {
	if len(name) == 0 || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// validFieldValue: visible ASCII, space, tab, and bytes >= 0x80 (RFC 9110
// field-vchar and obs-text); no CR, LF, NUL or other control.
func validFieldValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// Format prints the names and hosts of the secrets, whatever the verb.
func (s *Secrets) Format(f fmt.State, verb rune) {
	parts := make([]string, len(s.entries))
	for i, e := range s.entries {
		hosts := make([]string, 0, len(e.hosts))
		for h := range e.hosts {
			hosts = append(hosts, h)
		}
		slices.Sort(hosts)
		parts[i] = e.name + "@" + strings.Join(hosts, ",")
	}
	_, _ = io.WriteString(f, "mitm.Secrets["+strings.Join(parts, " ")+"]")
}

// Authority is the sandbox's authority: its CertificatePEM goes into the
// sandbox's trust store.
func (s *Secrets) Authority() *Authority { return s.auth }

// Placeholders are NAME=placeholder entries, in the order of the
// bindings, for the sandbox's environment.
func (s *Secrets) Placeholders() []string {
	env := make([]string, len(s.entries))
	for i, e := range s.entries {
		env[i] = e.name + "=" + e.placeholder
	}
	return env
}

// NotAfter is when the sandbox's authority expires.
func (s *Secrets) NotAfter() time.Time { return s.auth.NotAfter() }

// Intercepts reports whether a secret is bound to host (canonical), so
// that TLS to it is to be terminated.
func (s *Secrets) Intercepts(host string) bool { return len(s.byHost[host]) > 0 }

// Rewrite is applied to the headers of a plain-HTTP request to host. It
// refuses (a *RefusedError) a request that carries the placeholder of a
// secret not bound to host, and one that carries that of a secret bound
// to host unless Options.PlainHTTP, in which case it puts the value
// there.
func (s *Secrets) Rewrite(host string, h http.Header) error {
	return s.rewrite(host, "", h, s.opts.PlainHTTP)
}

// RewriteRequest is Rewrite that also looks at the request's target (its
// URL as sent, percent-encoded or not) for placeholders of secrets not
// bound to host. A gateway that has the target should call it rather
// than Rewrite.
func (s *Secrets) RewriteRequest(host, target string, h http.Header) error {
	return s.rewrite(host, target, h, s.opts.PlainHTTP)
}

// rewrite refuses the request if a placeholder of a secret not bound to
// host occurs in target or h (header names and values, percent-decoded,
// and decoded basic credentials), or one bound to host occurs and
// substitute is false; else it replaces, in h's values, the placeholders
// of the secrets bound to host with their values.
func (s *Secrets) rewrite(host, target string, h http.Header, substitute bool) error {
	if err := s.check(host, target, h, substitute); err != nil {
		return err
	}
	bound := s.byHost[host]
	if len(bound) == 0 {
		return nil
	}
	for name, values := range h {
		for i, v := range values {
			values[i] = s.substitute(bound, name, v)
		}
	}
	return nil
}

// check is rewrite's refusal.
func (s *Secrets) check(host, target string, h http.Header, substitute bool) error {
	refuse := func(e *entry, where string) error {
		if e.hosts[host] {
			return &RefusedError{Status: http.StatusForbidden, Secret: e.name, Host: host,
				Reason: "is only sent over TLS (placeholder in the " + where + " of a plain-HTTP request to)"}
		}
		return &RefusedError{Status: http.StatusForbidden, Secret: e.name, Host: host,
			Reason: "is not bound to (placeholder in the " + where + " of a request to)"}
	}
	// A bound placeholder in the target, or in a header name, is not
	// replaced and gives nothing away: only an unbound one is refused.
	for _, form := range decodings(target) {
		for _, e := range s.entries {
			if !e.hosts[host] && strings.Contains(form, e.placeholder) {
				return refuse(e, "target")
			}
		}
	}
	for name, values := range h {
		// Names are case-insensitive (and read canonicalised).
		lname := strings.ToLower(name)
		for _, e := range s.entries {
			if !e.hosts[host] && strings.Contains(lname, strings.ToLower(e.placeholder)) {
				return refuse(e, "header name")
			}
		}
		for _, v := range values {
			forms := decodings(v)
			if cred, ok := basicCredentials(name, v); ok {
				forms = append(forms, cred)
			}
			for _, form := range forms {
				for _, e := range s.entries {
					if strings.Contains(form, e.placeholder) && (!e.hosts[host] || !substitute) {
						return refuse(e, "header "+name)
					}
				}
			}
		}
	}
	return nil
}

// substitute replaces the placeholders of bound in the value v of the
// header name; in basic credentials it replaces them in the decoded
// user:password and encodes it again.
func (s *Secrets) substitute(bound []*entry, name, v string) string {
	if cred, ok := basicCredentials(name, v); ok {
		if replaced, n := replaceAll(bound, cred); n > 0 {
			scheme, _, _ := strings.Cut(strings.TrimLeft(v, " \t"), " ")
			return scheme + " " + base64.StdEncoding.EncodeToString([]byte(replaced))
		}
	}
	out, _ := replaceAll(bound, v)
	return out
}

func replaceAll(bound []*entry, v string) (string, int) {
	n := 0
	for _, e := range bound {
		if c := strings.Count(v, e.placeholder); c > 0 {
			v = strings.ReplaceAll(v, e.placeholder, *e.value)
			n += c
		}
	}
	return v, n
}

// redact replaces, in a response header's value, the values of the
// secrets bound to host with their placeholders: a bound host that echoes
// a request header must not hand the value to the sandbox. Basic
// credentials echoed whole are left alone (base64 of user:value is not
// the value).
func (s *Secrets) redact(host string, h http.Header) {
	for _, values := range h {
		for i, v := range values {
			for _, e := range s.byHost[host] {
				if strings.Contains(v, *e.value) {
					v = strings.ReplaceAll(v, *e.value, e.placeholder)
				}
			}
			values[i] = v
		}
	}
}

// holdsValue reports whether v holds the value of a secret bound to host.
func (s *Secrets) holdsValue(host, v string) bool {
	for _, e := range s.byHost[host] {
		if strings.Contains(v, *e.value) {
			return true
		}
	}
	return false
}

// basicCredentials decodes the credentials of an Authorization or
// Proxy-Authorization value of the Basic scheme (any case, standard or
// URL-safe base64, padded or not).
func basicCredentials(name, v string) (string, bool) {
	if !strings.EqualFold(name, "Authorization") && !strings.EqualFold(name, "Proxy-Authorization") {
		return "", false
	}
	scheme, rest, ok := strings.Cut(strings.TrimLeft(v, " \t"), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", false
	}
	rest = strings.Trim(rest, " \t")
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(rest); err == nil {
			return string(b), true
		}
	}
	return "", false
}

// decodings are the forms of s a placeholder may hide in: s itself and,
// when it has a %, s percent-decoded once and twice ('+' read as a space
// in the query's manner too: a placeholder has neither).
func decodings(s string) []string {
	if s == "" {
		return nil
	}
	forms := []string{s}
	for range 2 {
		last := forms[len(forms)-1]
		if !strings.Contains(last, "%") {
			break
		}
		forms = append(forms, percentDecode(last))
	}
	return forms
}

// percentDecode decodes every valid %XX and keeps whatever else as it
// is (url.PathUnescape gives up on the first bad escape, which would let
// one bad escape hide a placeholder).
func percentDecode(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b.WriteByte(hi<<4 | lo)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// canonicalRequestHost is the canonical host of a Host header or
// authority: HOST[:PORT], the port stripped.
func canonicalRequestHost(hostport string) (string, error) {
	h, _, err := rules.SplitHostPort(hostport, 0)
	if err != nil {
		return "", err
	}
	return rules.CanonicalHost(h)
}
