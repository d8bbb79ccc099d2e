package supervisor

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkPersistentExec times one command, /bin/true, run in a
// persistent sandbox that is already up (its stdio /dev/null), beside
// `unshare -Urmpinuf /bin/true`, the cost of new namespaces alone that
// issue 24's targets are stated against (the API's exec at most 0.3x).
func BenchmarkPersistentExec(b *testing.B) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	b.Run("exec in a running sandbox", func(b *testing.B) {
		plan := testPlan(b, testSandbox{})
		proc := plan.Config.Process
		proc.Args = []string{"/bin/true"}
		ps, err := BootPersistent(testJob(), plan, &Timings{Start: time.Now()})
		if err != nil {
			b.Fatal(err)
		}
		defer ps.Close()
		for b.Loop() {
			if code, _, err := ps.Exec(b.Context(), &proc, null, null, null); err != nil || code != 0 {
				b.Fatalf("exit %d: %v", code, err)
			}
		}
		// What the idle sandbox's init keeps of the host's memory, after
		// the commands (its only host process here; the monitor of
		// docs/persistent.md would add its own).
		if rss, err := residentKiB(ps.s.init.pid()); err == nil {
			b.ReportMetric(float64(rss), "init-RSS-KiB")
		}
	})
	b.Run("unshare -Urmpinuf /bin/true", func(b *testing.B) {
		if _, err := exec.LookPath("unshare"); err != nil {
			b.Skip(err)
		}
		for b.Loop() {
			if err := exec.Command("unshare", "-Urmpinuf", "/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// residentKiB is the VmRSS of process pid, in KiB.
func residentKiB(pid int) (int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}
