package test

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestJailsHeapRefusesHugePages: jail's Go heap is advised against
// transparent huge pages (the build sets the runtime's disablethp, see
// internal/programs/gobuild.sh), which saved `jail run` 10-14 ms in the
// cgroup v2 VM, whose kernel gives them to every mapping; and the sandboxed
// command still may have them, as it would outside jail.
func TestJailsHeapRefusesHugePages(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		sleeper, initPid := startSleeperAndInit(t, m, "7.625")
		cli, err := strconv.Atoi(statusOf(t, initPid, "PPid"))
		if err != nil {
			t.Fatal(err)
		}
		if name := statusOf(t, cli, "Name"); name != "jail" {
			t.Fatalf("the init's parent is %q; want the jail command", name)
		}
		heap, flags := largestAnonymousMapping(t, cli)
		if !strings.Contains(" "+flags+" ", " nh ") {
			t.Errorf("jail's heap %s is not advised against huge pages: VmFlags %s", heap, flags)
		}
		if enabled := statusOf(t, sleeper, "THP_enabled"); enabled != "1" {
			t.Errorf("the sandboxed command has THP_enabled %q; want 1, as outside jail", enabled)
		}
	})
}

// largestAnonymousMapping returns the address range and the VmFlags of the
// anonymous mapping of pid with the most resident memory above 4 GiB: a Go
// program's heap. (Below it, right after the static binary, lie its bss
// sections, crypto's 32 MiB DRBG buffer among them, which are no heap and
// which a kernel that gives huge pages everywhere backs with one as soon
// as they are touched.)
func largestAnonymousMapping(t *testing.T, pid int) (addresses, flags string) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var current string
	var rss, most int
	anonymous := false
	scan := bufio.NewScanner(f)
	for scan.Scan() {
		fields := strings.Fields(scan.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			// A mapping's header: range, mode, offset, device, inode[, path].
			current, anonymous = fields[0], len(fields) == 5
			if start, err := strconv.ParseUint(strings.Split(fields[0], "-")[0], 16, 64); err != nil || start < 1<<32 {
				anonymous = false
			}
		case len(fields) >= 2 && fields[0] == "Rss:":
			rss, _ = strconv.Atoi(fields[1])
		case fields[0] == "VmFlags:" && anonymous && rss > most:
			most, addresses, flags = rss, current, strings.Join(fields[1:], " ")
		}
	}
	if err := scan.Err(); err != nil {
		t.Fatal(err)
	}
	if addresses == "" {
		t.Fatalf("no anonymous mapping in process %d", pid)
	}
	return addresses, flags
}
