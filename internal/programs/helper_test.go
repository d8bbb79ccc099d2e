package programs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelperIsBuiltFromItsSources: the committed helper program of each
// architecture is, byte for byte, what helper/build.sh makes of init.c and
// janitor.c now (so a change to them without `make helper` fails here), and
// its .sha256 is its hash. The build runs in a directory of its own: the
// script's output must not depend on where it runs. An architecture whose
// cross compiler is not installed is skipped, saying what to install.
func TestHelperIsBuiltFromItsSources(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			committed, err := os.ReadFile(filepath.Join("helper", "jail-helper-"+arch))
			if err != nil {
				t.Fatal(err)
			}
			sum, err := os.ReadFile(filepath.Join("helper", "jail-helper-"+arch+".sha256"))
			if err != nil {
				t.Fatal(err)
			}
			if h := sha256.Sum256(committed); strings.TrimSpace(string(sum)) != hex.EncodeToString(h[:]) {
				t.Errorf("jail-helper-%s.sha256 is not the hash of jail-helper-%s", arch, arch)
			}
			out := filepath.Join(t.TempDir(), "helper")
			build := exec.Command("sh", "helper/build.sh", arch, out)
			msg, err := build.CombinedOutput()
			if err != nil {
				if strings.Contains(string(msg), "needs Debian's") && arch != "amd64" {
					t.Skipf("%s", strings.TrimSpace(string(msg)))
				}
				t.Fatalf("helper/build.sh %s: %v\n%s", arch, err, msg)
			}
			built, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(built, committed) {
				t.Errorf("helper/jail-helper-%s is not what helper/build.sh builds from the sources (%d bytes built, %d committed): run make helper and commit it", arch, len(built), len(committed))
			}
		})
	}
}

// TestHelperRefusesOtherNames: the helper program runs as the init or the
// janitor only when started as one; under any other name (a user who found
// its copy) it says what it is, changes nothing and exits 125.
func TestHelperRefusesOtherNames(t *testing.T) {
	p, err := Open(Helper)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, name := range []string{"jail-helper", "", "jail:init2", "jail:cgroup-janitorx"} {
		cmd := &exec.Cmd{Path: p.Path, Args: []string{name}}
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 125 || string(out) != "jail: this program is started by jail only\n" {
			t.Errorf("argv[0] %q: %v, %q; want exit 125 and one line", name, err, out)
		}
	}
}
