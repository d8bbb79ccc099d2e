// Package asuser runs a test binary again as the unprivileged account the
// suites use (jail-test), so that a package's tests pass for an ordinary
// user as well as for root. It is for tests only.
//
// Invariant: the copy of the binary lives in a directory of its own that
// only root can change and that is removed when the run ends; the run gets
// a minimal environment (PATH, HOME in that directory, and what the caller
// adds), no supplementary groups, and the account's own uid and gid.
package asuser

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// Account is the unprivileged account the tests run as.
const Account = "jail-test"

// Rerun runs the current test binary as Account with args (its -test.*
// flags) and extra environment entries, and returns its combined output.
// It skips t unless the caller is root and the account exists.
func Rerun(t *testing.T, args []string, env ...string) (string, error) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("not root")
	}
	acct, err := user.Lookup(Account)
	if err != nil {
		t.Skipf("no user %s: %v", Account, err)
	}
	dir, err := os.MkdirTemp("", "jail-asuser-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(os.Args[0]))
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("setpriv", append([]string{"--reuid", acct.Uid, "--regid", acct.Gid, "--clear-groups", "--", bin}, args...)...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// RerunAll runs every test of the binary but skip (a regexp, the test
// that calls it) as Account, failing t unless they pass.
func RerunAll(t *testing.T, skip string) {
	t.Helper()
	out, err := Rerun(t, []string{"-test.skip", skip, "-test.v", "-test.count=1"})
	if err != nil || !strings.Contains(out, "\nPASS\n") {
		t.Fatalf("as %s: %v\n%s", Account, err, out)
	}
	t.Logf("as %s:\n%s", Account, out)
}
