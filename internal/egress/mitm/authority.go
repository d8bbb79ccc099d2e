package mitm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jail-sandbox/jail/internal/egress/rules"
)

// DefaultCAValidity is how long an authority is valid when
// AuthorityOptions.Validity is zero. Its key lives only in the gateway's
// memory and its name constraints confine it to the bound hosts, so what
// a short life adds is a bound on how long a key taken from that memory
// (a core dump, swap) stays useful. 90 days outlasts any persistent
// sandbox's usual run (the authority is made again, with a new key, each
// time the sandbox's gateway starts); a sandbox that runs longer sees TLS
// to its bound hosts fail and must be restarted.
const DefaultCAValidity = 90 * 24 * time.Hour

// leafValidity is a leaf's life: it is minted again, with a new key, when
// less than leafRenewBefore of it remains. (Bounded by the authority's.)
const (
	leafValidity    = 7 * 24 * time.Hour
	leafRenewBefore = 24 * time.Hour
)

// clockSkew is how far before now certificates become valid, for a
// sandbox clock a little behind the host's.
const clockSkew = time.Hour

// maxCachedLeaves bounds the leaves kept; beyond it the oldest is minted
// again when asked for.
const maxCachedLeaves = 256

// maxSubjectSandbox bounds the sandbox name in the authority's subject
// (a common name is at most 64 characters).
const maxSubjectSandbox = 40

// AuthorityOptions tune NewAuthority. The zero value is the default.
type AuthorityOptions struct {
	// Validity is the authority's life; DefaultCAValidity when zero.
	Validity time.Duration
	// Now gives the time; time.Now when nil.
	Now func() time.Time
}

// Authority is a per-sandbox certificate authority made in memory, whose
// name constraints permit only the hosts it was made for, and the leaves
// it mints for them.
type Authority struct {
	key   *ecdsa.PrivateKey
	cert  *x509.Certificate
	pem   []byte
	names map[string]bool // bound hosts, canonical
	now   func() time.Time

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
	order  []string // minting order, oldest first, for eviction
}

// NewAuthority makes an ECDSA P-256 authority for the sandbox named
// sandbox that can vouch for hosts only (canonical names or IP literals;
// no wildcards).
func NewAuthority(sandbox string, hosts []string, opts AuthorityOptions) (*Authority, error) {
	if len(hosts) == 0 {
		return nil, errors.New("mitm: an authority needs at least one host")
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	validity := opts.Validity
	if validity == 0 {
		validity = DefaultCAValidity
	}
	if validity < 0 {
		return nil, errors.New("mitm: negative authority validity")
	}
	names := make(map[string]bool, len(hosts))
	var dns []string
	var ips []*net.IPNet
	for _, h := range hosts {
		c, err := canonicalBoundHost(h)
		if err != nil {
			return nil, fmt.Errorf("mitm: %w", err)
		}
		if names[c] {
			continue
		}
		names[c] = true
		if a, err := netip.ParseAddr(c); err == nil {
			ips = append(ips, &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())})
		} else {
			dns = append(dns, c)
		}
	}
	slices.Sort(dns)

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("mitm: authority key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	if len(sandbox) > maxSubjectSandbox {
		sandbox = sandbox[:maxSubjectSandbox]
	}
	start := now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			Organization:       []string{"jail"},
			OrganizationalUnit: []string{"sandbox " + sandbox},
			CommonName:         "jail sandbox " + sandbox + " secrets CA",
		},
		NotBefore:             start.Add(-clockSkew),
		NotAfter:              start.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,

		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         dns,
		ExcludedDNSDomains:          excludedSubdomains(dns),
		PermittedIPRanges:           ips,
	}
	if len(ips) == 0 {
		// An empty permitted list constrains nothing: exclude every
		// address instead.
		tmpl.ExcludedIPRanges = []*net.IPNet{
			{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
			{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)},
		}
	}
	if len(dns) == 0 {
		// Likewise for names: permit none by excluding them all ("" is
		// every name as a constraint).
		tmpl.ExcludedDNSDomains = []string{""}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("mitm: authority certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("mitm: authority certificate: %w", err)
	}
	return &Authority{
		key:    key,
		cert:   cert,
		pem:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		names:  names,
		now:    now,
		leaves: make(map[string]*tls.Certificate),
	}, nil
}

// excludedSubdomains are the constraints that exclude the strict
// subdomains of each name (".name", which Go, OpenSSL and BoringSSL read
// as "below name"), except of a name another bound name lies below:
// excluding those would exclude that name too.
func excludedSubdomains(names []string) []string {
	var out []string
	for _, n := range names {
		below := false
		for _, m := range names {
			if strings.HasSuffix(m, "."+n) {
				below = true
				break
			}
		}
		if !below {
			out = append(out, "."+n)
		}
	}
	return out
}

// canonicalBoundHost checks a host a secret may be bound to: a canonical
// name or IP literal, not a wildcard.
func canonicalBoundHost(h string) (string, error) {
	if strings.ContainsAny(h, "*!/") {
		return "", fmt.Errorf("host %q: a secret is bound to exact host names, not patterns", h)
	}
	return rules.CanonicalHost(h)
}

func randomSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("mitm: serial number: %w", err)
	}
	return s.Add(s, big.NewInt(1)), nil
}

// CertificatePEM is the authority's certificate, PEM-encoded, for the
// sandbox's trust store.
func (a *Authority) CertificatePEM() []byte { return slices.Clone(a.pem) }

// Certificate is the authority's certificate (shared: do not modify).
func (a *Authority) Certificate() *x509.Certificate { return a.cert }

// NotAfter is when the authority, and every leaf it mints, expires.
func (a *Authority) NotAfter() time.Time { return a.cert.NotAfter }

// Permits reports whether the authority may vouch for host (canonical).
func (a *Authority) Permits(host string) bool { return a.names[host] }

// Leaf returns a certificate and key for host, minted on first use and
// cached (at most maxCachedLeaves), or an error when host is not one the
// authority was made for, or the authority has expired.
func (a *Authority) Leaf(host string) (*tls.Certificate, error) {
	if !a.names[host] {
		return nil, fmt.Errorf("mitm: no certificate for %q: no secret is bound to it", host)
	}
	now := a.now()
	if !now.Before(a.cert.NotAfter) {
		return nil, fmt.Errorf("mitm: the sandbox's authority expired at %s: restart the sandbox", a.cert.NotAfter.Format(time.RFC3339))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.leaves[host]; ok {
		if c.Leaf.NotAfter.Sub(now) >= leafRenewBefore || !c.Leaf.NotAfter.Before(a.cert.NotAfter) {
			return c, nil
		}
	}
	c, err := a.mint(host, now)
	if err != nil {
		return nil, err
	}
	if _, ok := a.leaves[host]; !ok {
		if len(a.order) >= maxCachedLeaves {
			delete(a.leaves, a.order[0])
			a.order = a.order[1:]
		}
		a.order = append(a.order, host)
	}
	a.leaves[host] = c
	return c, nil
}

func (a *Authority) mint(host string, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("mitm: leaf key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	notBefore := now.Add(-clockSkew)
	if notBefore.Before(a.cert.NotBefore) {
		notBefore = a.cert.NotBefore
	}
	notAfter := now.Add(leafValidity)
	if notAfter.After(a.cert.NotAfter) {
		notAfter = a.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: host},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = []net.IP{ip.AsSlice()}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return nil, fmt.Errorf("mitm: certificate for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("mitm: certificate for %s: %w", host, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}
