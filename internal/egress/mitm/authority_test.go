package mitm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAuthorityCertificate(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, err := NewAuthority("box", []string{"API.test.", "api.test", "git.test", "x.git.test", "10.0.0.5"}, AuthorityOptions{Now: func() time.Time { return start }})
	if err != nil {
		t.Fatal(err)
	}
	c := a.Certificate()
	block, _ := pem.Decode(a.CertificatePEM())
	if block == nil || block.Type != "CERTIFICATE" || string(block.Bytes) != string(c.Raw) {
		t.Fatalf("CertificatePEM is not the certificate")
	}
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Errorf("key %T, want ECDSA P-256", c.PublicKey)
	}
	if !c.IsCA || !c.MaxPathLenZero || c.MaxPathLen != 0 || c.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign {
		t.Errorf("IsCA %v MaxPathLen %d/%v KeyUsage %v", c.IsCA, c.MaxPathLen, c.MaxPathLenZero, c.KeyUsage)
	}
	if !strings.Contains(c.Subject.CommonName, "jail") || !strings.Contains(c.Subject.CommonName, "box") {
		t.Errorf("subject %q does not name jail and the sandbox", c.Subject)
	}
	if !c.NotAfter.Equal(start.Add(DefaultCAValidity)) || !c.NotBefore.Equal(start.Add(-time.Hour)) {
		t.Errorf("valid %s to %s", c.NotBefore, c.NotAfter)
	}
	if !c.PermittedDNSDomainsCritical {
		t.Errorf("name constraints not critical")
	}
	if want := []string{"api.test", "git.test", "x.git.test"}; !slices.Equal(c.PermittedDNSDomains, want) {
		t.Errorf("permitted %q, want %q", c.PermittedDNSDomains, want)
	}
	// git.test has a bound host below it: its subdomains cannot be
	// excluded without excluding x.git.test.
	if want := []string{".api.test", ".x.git.test"}; !slices.Equal(c.ExcludedDNSDomains, want) {
		t.Errorf("excluded %q, want %q", c.ExcludedDNSDomains, want)
	}
	if len(c.PermittedIPRanges) != 1 || c.PermittedIPRanges[0].String() != "10.0.0.5/32" || len(c.ExcludedIPRanges) != 0 {
		t.Errorf("IP ranges %v / %v", c.PermittedIPRanges, c.ExcludedIPRanges)
	}
	for _, h := range []string{"api.test", "x.git.test", "10.0.0.5"} {
		if !a.Permits(h) {
			t.Errorf("does not permit %s", h)
		}
	}
}

func TestNewAuthorityRefuses(t *testing.T) {
	for _, hosts := range [][]string{nil, {"*.api.test"}, {"**.test"}, {"a..test"}, {"http://api.test"}, {"!api.test"}} {
		if _, err := NewAuthority("box", hosts, AuthorityOptions{}); err == nil {
			t.Errorf("NewAuthority(%q) succeeded", hosts)
		}
	}
}

func TestAuthorityMintsLeavesForBoundHostsOnly(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	a, err := NewAuthority("box", []string{"api.test", "127.0.0.9"}, AuthorityOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(a.Certificate())
	for _, h := range []string{"api.test", "127.0.0.9"} {
		leaf, err := a.Leaf(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: h, CurrentTime: now}); err != nil {
			t.Errorf("leaf for %s does not verify: %v", h, err)
		}
		if again, _ := a.Leaf(h); again != leaf {
			t.Errorf("leaf for %s not cached", h)
		}
	}
	for _, h := range []string{"other.test", "sub.api.test", "API.TEST", "", "127.0.0.1"} {
		if _, err := a.Leaf(h); err == nil {
			t.Errorf("minted a leaf for %q", h)
		}
	}
	// A leaf near its end is minted again; past the authority's end none
	// is.
	first, _ := a.Leaf("api.test")
	now = now.Add(leafValidity - time.Hour)
	if renewed, _ := a.Leaf("api.test"); renewed == first {
		t.Errorf("a leaf about to expire was not renewed")
	}
	now = a.NotAfter()
	if _, err := a.Leaf("api.test"); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("leaf after the authority's end: %v", err)
	}
}

// TestAuthorityNameConstraintsHoldAgainstAStolenKey signs certificates
// with the authority's key as a thief would and checks that Go and
// OpenSSL reject every one for a name not bound.
func TestAuthorityNameConstraintsHoldAgainstAStolenKey(t *testing.T) {
	a, err := NewAuthority("box", []string{"api.test"}, AuthorityOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, a.CertificatePEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(a.Certificate())
	tests := []struct {
		name   string
		cn     string
		sans   []string
		verify string // the name a client would check
		wantOK bool
	}{
		{"control: the bound host", "api.test", []string{"api.test"}, "api.test", true},
		{"another name", "other.test", []string{"other.test"}, "other.test", false},
		{"a subdomain of the bound host", "", []string{"sub.api.test"}, "sub.api.test", false},
		{"a name ending like it", "", []string{"evilapi.test"}, "evilapi.test", false},
		{"a wildcard for another name", "", []string{"*.other.test"}, "x.other.test", false},
		{"a wildcard below the bound host", "", []string{"*.api.test"}, "x.api.test", false},
		{"an IP address", "", []string{"127.0.0.1"}, "127.0.0.1", false},
		{"the bound host and another", "", []string{"api.test", "other.test"}, "other.test", false},
		{"common name only", "other.test", nil, "other.test", false},
	}
	_, opensslErr := exec.LookPath("openssl")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			forged := signLeaf(t, a.cert, a.key, tc.cn, tc.sans...)
			_, err := forged.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.verify})
			if tc.wantOK != (err == nil) {
				t.Errorf("Go: %v, want ok %v", err, tc.wantOK)
			}
			var inv x509.CertificateInvalidError
			if err != nil && !tc.wantOK && len(tc.sans) > 0 && (!errors.As(err, &inv) || inv.Reason != x509.CANotAuthorizedForThisName) {
				t.Errorf("Go refused for another reason: %v", err)
			}
			if opensslErr != nil {
				t.Skip("no openssl")
			}
			leafFile := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".pem")
			if err := os.WriteFile(leafFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: forged.Certificate[0]}), 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"verify", "-CAfile", caFile}
			if ip := net.ParseIP(tc.verify); ip != nil {
				args = append(args, "-verify_ip", tc.verify)
			} else {
				args = append(args, "-verify_hostname", tc.verify)
			}
			out, err := exec.Command("openssl", append(args, leafFile)...).CombinedOutput()
			if tc.wantOK != (err == nil) {
				t.Errorf("openssl: %v: %s, want ok %v", err, out, tc.wantOK)
			}
			if !tc.wantOK && len(tc.sans) > 0 && !strings.Contains(string(out), "subtree violation") {
				t.Errorf("openssl refused for another reason: %s", out)
			}
		})
	}
}
