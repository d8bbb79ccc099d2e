package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jail-sandbox/jail/internal/audit"
	"github.com/jail-sandbox/jail/internal/egress/protocol"
)

// TestAuditRateBoundsAFlood: a sandbox that asks many names at once gets
// auditBurst lines written and the rest counted, in a line that says how
// many were not written; the shared log is not flooded (two reviews
// rotated every older line out with 80000 queries in 6 s).
func TestAuditRateBoundsAFlood(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	log, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	g := &gateway{cfg: &protocol.Config{Sandbox: "flood"}, audit: log}
	const asked = auditBurst + 5000
	for i := 0; i < asked; i++ {
		g.record(audit.DNS, &audit.NetDetail{Via: "dns", Host: "x.test", Verdict: "denied"})
	}
	g.close()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	written, dropped := 0, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			Via, Verdict, Why string
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Via == "audit" && l.Verdict == "dropped" {
			var n int
			for _, w := range strings.Fields(l.Why) {
				if err := json.Unmarshal([]byte(w), &n); err == nil {
					break
				}
			}
			dropped += n
			continue
		}
		written++
	}
	// The bucket refills while the loop runs: a few more than the burst.
	if written < auditBurst || written > auditBurst+2000 || written+dropped != asked {
		t.Errorf("%d lines written, %d counted as dropped, of %d", written, dropped, asked)
	}
}
