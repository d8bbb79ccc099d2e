package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// withCgroups runs f as root, the mode in which jail uses cgroups here.
// Rootless runs on hosts without delegation fall back to rlimits, tested
// separately.
func withCgroups(t *testing.T, f func(t *testing.T, m mode)) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root here (no delegation)")
	}
	t.Run("root", func(t *testing.T) {
		checkNoLeaks(t)
		f(t, asRoot)
	})
}

// runJSON runs jail with --json and decodes the result object.
func runJSON(t *testing.T, m mode, args ...string) (result, map[string]any) {
	t.Helper()
	r := jail(t, m, append([]string{"run", "--json"}, args...)...)
	var res map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("jail %s: exit %d, no result object: %v\nstdout %q\nstderr %q", strings.Join(args, " "), r.code, err, r.stdout, r.stderr)
	}
	return r, res
}

func number(res map[string]any, key string) float64 {
	v, _ := res[key].(float64)
	return v
}

const memoryHog = `x=$(head -c 400M /dev/zero | tr '\0' a); echo survived`

func TestMemoryLimitOOMKills(t *testing.T) {
	withCgroups(t, func(t *testing.T, m mode) {
		r, res := runJSON(t, m, "--memory", "64M", "--", "sh", "-c", memoryHog)
		if r.code != 137 || res["oom_killed"] != true || number(res, "exit_code") != 137 {
			t.Fatalf("exit %d, result %v; want 137 and oom_killed", r.code, res)
		}
		if !strings.Contains(r.stderr, "jail: killed: out of memory") {
			t.Errorf("stderr %q lacks the OOM line", r.stderr)
		}
		if peak := number(res, "peak_memory_bytes"); peak < 0.75*64*(1<<20) || peak > 1.1*64*(1<<20) {
			t.Errorf("peak_memory_bytes %.0f; want near the 64M limit", peak)
		}
		// A process that exits 137 by itself is not an OOM kill.
		r, res = runJSON(t, m, "--memory", "64M", "--", "sh", "-c", "kill -KILL $$")
		if r.code != 137 || res["oom_killed"] != false {
			t.Errorf("self-kill: exit %d, result %v; want 137 without oom_killed", r.code, res)
		}
		r, res = runJSON(t, m, "--memory", "64M", "--", "sh", "-c", "exit 137")
		if r.code != 137 || res["oom_killed"] != false || strings.Contains(r.stderr, "out of memory") {
			t.Errorf("exit 137: result %v, stderr %q", res, r.stderr)
		}
	})
}

func TestTmpfsFillGetsENOSPC(t *testing.T) {
	withCgroups(t, func(t *testing.T, m mode) {
		r, res := runJSON(t, m, "--memory", "128M", "--", "sh", "-c", "dd if=/dev/zero of=/tmp/fill bs=1M count=200 2>&1; df -m /tmp | tail -1")
		out, _ := res["stdout"].(string)
		if !strings.Contains(out, "No space left on device") || res["oom_killed"] != false {
			t.Errorf("exit %d, stdout %q, oom_killed %v; want ENOSPC and no OOM", r.code, out, res["oom_killed"])
		}
	})
}

// TestCPUQuota measures the CPU time two busy loops get in 2 s of wall
// time, as the shell's `times` reports for its children: the sandbox's own
// setup is not counted, so the figure holds under emulation too. The
// tolerance is the issue's ±25 %.
func TestCPUQuota(t *testing.T) {
	withCgroups(t, func(t *testing.T, m mode) {
		// The loops' wall time is measured inside too: under software
		// emulation (the cgroup v2 VM) a 2 s timeout may fire late, and
		// the quota is per unit of wall time.
		// What the machine gives the same loops unconfined, just before,
		// bounds what a quota can give: the machine is shared.
		loop := `s=$(date +%s%N); timeout 2 sh -c 'while :; do :; done' & timeout 2 sh -c 'while :; do :; done' & wait; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); times`
		cores := func(out string) float64 {
			var wall float64
			fmt.Sscanf(strings.SplitN(out, "\n", 2)[0], "%f", &wall)
			return childCPU(t, out) / wall
		}
		for _, c := range []struct {
			cpus  string
			quota float64
		}{{"0.5", 0.5}, {"2", 2}} {
			free, err := exec.Command("sh", "-c", loop).Output()
			if err != nil {
				t.Fatal(err)
			}
			r := jail(t, m, "run", "--cpus", c.cpus, "--", "sh", "-c", loop)
			got, want := cores(r.stdout), min(c.quota, cores(string(free)))
			if got < 0.75*want || got > 1.25*c.quota {
				t.Errorf("--cpus %s: two busy loops got %.2f cores; want %.2f ±25%% (%.2f free just before)", c.cpus, got, want, cores(string(free)))
			}
		}
	})
}

// childCPU reads the children's user and system time from the last line of
// the shell's `times` output ("0m1.23s 0m0.01s"), in milliseconds.
func childCPU(t *testing.T, out string) float64 {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	total := 0.0
	for _, f := range strings.Fields(lines[len(lines)-1]) {
		var min int
		var sec float64
		if _, err := fmt.Sscanf(f, "%dm%fs", &min, &sec); err != nil {
			t.Fatalf("times output %q: %v", out, err)
		}
		total += float64(min)*60000 + sec*1000
	}
	return total
}

func TestForkBombIsContained(t *testing.T) {
	withCgroups(t, func(t *testing.T, m mode) {
		done := make(chan result, 1)
		go func() {
			done <- jail(t, m, "run", "--pids", "64", "--timeout", "3s", "--", "sh", "-c", "f() { f | f & }; f; sleep 10")
		}()
		// While it rages, the host still forks.
		time.Sleep(time.Second)
		for i := 0; i < 20; i++ {
			if err := exec.Command("true").Run(); err != nil {
				t.Errorf("the host could not fork during the bomb: %v", err)
				break
			}
		}
		r := <-done
		if r.code != 124 {
			t.Errorf("fork bomb: exit %d (stderr %q); want 124 after the timeout", r.code, r.stderr)
		}
	})
}

// Rootless on a host without cgroup delegation: rlimits bound the damage,
// and jail says which limits are not enforced.
func TestRootlessFallbackLimits(t *testing.T) {
	m := asRootless
	checkNoLeaks(t)
	r := jail(t, m, "run", "--pids", "20", "--", "sh", "-c", "for i in $(seq 40); do sleep 2 & done 2>/dev/null; wait; echo done")
	if !strings.Contains(r.stderr, "jail: notice: no cgroup") {
		t.Skipf("this user has a cgroup here; stderr %q", r.stderr)
	}
	if !strings.Contains(r.stderr, "--cpus is not enforced") {
		t.Errorf("notice does not say which limits are not enforced: %q", r.stderr)
	}
	// 40 sleeps cannot all start under RLIMIT_NPROC=20.
	r = jail(t, m, "run", "--pids", "20", "--", "sh", "-c", "n=0; for i in $(seq 40); do sleep 5 & n=$((n+1)); done 2>/dev/null; jobs -p | wc -l")
	if r.code == 0 && strings.TrimSpace(r.stdout) == "40" {
		t.Errorf("--pids 20 let 40 processes run: %q", r.stdout)
	}
	_, res := runJSON(t, m, "--memory", "64M", "--", "sh", "-c", memoryHog)
	out, _ := res["stdout"].(string)
	if strings.Contains(out, "survived") {
		t.Errorf("a 400M allocation succeeded under --memory 64M: %v", res)
	}
	// Issue 22, item 6: the places the whole sandbox shares are bounded
	// too, together below --memory, and the notice says what is not.
	if !strings.Contains(r.stderr, "NOT bounded: memfd") {
		t.Errorf("the notice does not say what is not bounded: %q", r.stderr)
	}
	const shared = `total=0; for d in /tmp /run /dev/shm /root; do kb=$(df -k $d | awk 'NR==2{print $2}'); total=$((total+kb)); done; echo $total; cat /proc/sys/kernel/shmmax`
	r = jail(t, m, "run", "--memory", "64M", "--", "sh", "-c", shared)
	f := strings.Fields(r.stdout)
	if len(f) != 2 {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	tmpfsKB, _ := strconv.Atoi(f[0])
	shmmax, _ := strconv.Atoi(f[1])
	if tmpfsKB <= 0 || tmpfsKB*1024+shmmax > 64<<20 {
		t.Errorf("under --memory 64M the tmpfs mounts hold %d KiB and System V shm %d bytes", tmpfsKB, shmmax)
	}
}

// TestRootlessDelegatedCgroup: an ordinary user with a delegated cgroup v2
// subtree (as systemd gives user@UID.service) gets real limits, in that
// subtree, with no fallback notice.
func TestRootlessDelegatedCgroup(t *testing.T) {
	var st syscall.Statfs_t
	if os.Geteuid() != 0 || syscall.Statfs("/sys/fs/cgroup", &st) != nil || st.Type != 0x63677270 {
		t.Skip("needs root on a cgroup v2 host to set up a delegated subtree")
	}
	checkNoLeaks(t)
	deleg := "/sys/fs/cgroup/jail-test-delegated"
	session := filepath.Join(deleg, "session")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+memory +cpu +pids"), 0))
	must(os.Mkdir(deleg, 0o755))
	t.Cleanup(func() {
		// The sandbox's cgroup is the janitor's to remove once jail has
		// answered: the parents go once it has, or later tests would
		// find them.
		parent := filepath.Join(deleg, "jail")
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if left, _ := filepath.Glob(filepath.Join(parent, "*", "cgroup.procs")); len(left) == 0 {
				break
			}
		}
		for _, d := range []string{parent, session, deleg} {
			if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
				t.Errorf("remove the delegated subtree: %v", err)
			}
		}
	})
	must(os.WriteFile(filepath.Join(deleg, "cgroup.subtree_control"), []byte("+memory +cpu +pids"), 0))
	must(os.Mkdir(session, 0o755))
	for _, p := range []string{deleg, session} {
		for _, f := range []string{"", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"} {
			must(os.Chown(filepath.Join(p, f), rootless.uid, rootless.gid))
		}
	}
	// The user's shell lives in the leaf; jail runs from there as the user.
	cmd := exec.Command("sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, session,
		"setpriv", "--reuid", strconv.Itoa(rootless.uid), "--regid", strconv.Itoa(rootless.gid), "--clear-groups", "--",
		jailBin, "run", "--json", "--memory", "32M", "--", "sh", "-c", memoryHog)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + rootless.home}
	r := runCmd(t, cmd)
	if strings.Contains(r.stderr, "no cgroup") {
		t.Fatalf("delegated cgroup not used: %s", r.stderr)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("exit %d: %v; stdout %q stderr %q", r.code, err, r.stdout, r.stderr)
	}
	if r.code != 137 || res["oom_killed"] != true {
		t.Errorf("exit %d, result %v; want an OOM kill under the delegated cgroup's limit", r.code, res)
	}
}
