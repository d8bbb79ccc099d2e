// Command persistbench measures persistent sandboxes (issue 24) beside
// `unshare -Urmpinuf /bin/true`, interleaved round by round on one
// machine: an exec of /bin/true into a running sandbox through jail
// serve's POST /v1/sandboxes/{name}/exec and through `jail exec`, the idle
// host memory a sandbox keeps (the RSS of its monitor, cgroup janitor and
// init, summed), and how many idle sandboxes run at once. Beside them, in
// the same rounds, the floors no exec can go below: /bin/true forked and
// executed on the host, and jail's own start (`jail --version`); and a
// peer, nsenter -a into a namespace set unshare made. It prints
// medians and ratios; `make bench` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jail-sandbox/jail/api"
	"github.com/jail-sandbox/jail/client"
)

func main() {
	jailBin := flag.String("jail", "bin/jail", "the jail binary")
	rounds := flag.Int("n", 300, "execs of each kind, interleaved")
	idle := flag.Int("idle", 100, "idle sandboxes to keep at once")
	flag.Parse()
	if err := run(*jailBin, *rounds, *idle); err != nil {
		fmt.Fprintln(os.Stderr, "persistbench:", err)
		os.Exit(1)
	}
}

func run(jailBin string, rounds, idle int) error {
	jailBin, _ = filepath.Abs(jailBin)
	dir, err := os.MkdirTemp("", "persistbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	env := append(os.Environ(), "JAIL_STATE_DIR="+filepath.Join(dir, "state"), "JAIL_AUDIT_LOG="+filepath.Join(dir, "audit", "audit.log"))
	jail := func(args ...string) *exec.Cmd {
		cmd := exec.Command(jailBin, args...)
		cmd.Env = env
		return cmd
	}
	if out, err := jail("create", "bench").CombinedOutput(); err != nil {
		return fmt.Errorf("create: %v: %s", err, out)
	}
	defer jail("rm", "-f", "bench").Run()

	socket := filepath.Join(dir, "serve", "jail.sock")
	serve := jail("serve", "--socket", socket)
	if err := serve.Start(); err != nil {
		return err
	}
	defer func() { _ = serve.Process.Kill(); _ = serve.Wait() }()
	c := client.New(socket)
	defer c.Close()
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := c.Health(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("jail serve did not answer")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The peer: nsenter -a into a namespace set unshare made and keeps
	// (a sleeping process), the least a command-line exec into a running
	// sandbox does: no filter, no cgroup, no output captured.
	holder := exec.Command("unshare", "-Urmpinuf", "--kill-child", "sleep", "1000000")
	if err := holder.Start(); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
	inner, err := onlyChild(holder.Process.Pid)
	if err != nil {
		return err
	}

	// The first row is what the targets are stated against; the floors
	// (a plain fork and exec of /bin/true on the host, as os/exec does it
	// with clone(CLONE_VFORK), and jail's own start, `jail --version`) say
	// what no exec into a sandbox can go below: an exec runs /bin/true too,
	// and `jail exec` starts jail too.
	kinds := []struct {
		name string
		run  func() error
	}{
		{"unshare -Urmpinuf /bin/true", func() error { return exec.Command("unshare", "-Urmpinuf", "/bin/true").Run() }},
		{"floor: /bin/true on the host (fork + exec)", func() error { return exec.Command("/bin/true").Run() }},
		{"floor: jail --version (jail's own start)", func() error { return jail("--version").Run() }},
		{"peer: nsenter -a -t PID /bin/true (into namespaces unshare made)", func() error {
			return exec.Command("nsenter", "-a", "-t", inner, "/bin/true").Run()
		}},
		{"jail exec NAME -- /bin/true", func() error { return jail("exec", "bench", "--", "/bin/true").Run() }},
		{"POST /v1/sandboxes/NAME/exec /bin/true", func() error {
			res, err := c.Exec(ctx, "bench", api.ExecRequest{Cmd: "/bin/true"})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d", res.ExitCode)
			}
			return err
		}},
	}
	times := make([][]time.Duration, len(kinds))
	for i := 0; i < rounds+10; i++ {
		for k, kind := range kinds {
			start := time.Now()
			if err := kind.run(); err != nil {
				return fmt.Errorf("%s: %v", kind.name, err)
			}
			if i >= 10 { // the first ten warm caches up
				times[k] = append(times[k], time.Since(start))
			}
		}
	}
	base := median(times[0])
	fmt.Printf("\n## Persistent sandboxes: exec of /bin/true, %d interleaved rounds (medians)\n\n", rounds)
	fmt.Printf("Targets (issue 24): the POST at most 0.30×, jail exec at most 1.00×.\n\n")
	fmt.Printf("| what | median | ratio to unshare |\n|---|---|---|\n")
	for k, kind := range kinds {
		m := median(times[k])
		fmt.Printf("| %s | %.3f ms | %.2f× |\n", kind.name, ms(m), float64(m)/float64(base))
	}

	// Idle sandboxes: made one after another, then measured at rest.
	start := time.Now()
	for i := 0; i < idle; i++ {
		if out, err := jail("create", "idle-"+strconv.Itoa(i)).CombinedOutput(); err != nil {
			removeIdle(jail, idle)
			return fmt.Errorf("create idle-%d: %v: %s", i, err, out)
		}
	}
	made := time.Since(start)
	time.Sleep(time.Second)
	total, procs := idleRSS()
	running := 0
	if out, err := jail("ls", "--json").Output(); err == nil {
		running = strings.Count(string(out), `"state":"running"`)
	}
	fmt.Printf("\n## Idle sandboxes: %d made in %.1f s (%.1f ms each), %d running at once\n\n", idle, made.Seconds(), ms(made)/float64(idle), running-1)
	fmt.Printf("host RSS of their %d processes (monitor, cgroup janitor, init of each, and the benchmark's own sandbox): %.1f MiB, %.0f KiB per sandbox (target ≤ 2048 KiB)\n",
		procs, float64(total)/1024, float64(total)/float64(idle+1))
	removeIdle(jail, idle)
	return nil
}

func removeIdle(jail func(...string) *exec.Cmd, n int) {
	for i := 0; i < n; i++ {
		_ = jail("rm", "-f", "idle-"+strconv.Itoa(i)).Run()
	}
}

// idleRSS sums VmRSS (KiB) over the host processes persistent sandboxes
// keep: each one's monitor, its cgroup janitor and its init (as the host
// sees them, by their process names).
func idleRSS() (kib int64, procs int) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		var name string
		var rss int64
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "Name:"); ok {
				name = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				rss, _ = strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			}
		}
		switch name {
		case "jail-monitor", "jail-janitor", "jail-init":
			kib += rss
			procs++
		}
	}
	return kib, procs
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// onlyChild waits, up to 5 s, for the process pid's one child and returns
// its pid.
func onlyChild(pid int) (string, error) {
	file := fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)
	for deadline := time.Now().Add(5 * time.Second); ; {
		b, err := os.ReadFile(file)
		if f := strings.Fields(string(b)); err == nil && len(f) == 1 {
			return f[0], nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("unshare's child did not appear (%s: %q, %v)", file, b, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
