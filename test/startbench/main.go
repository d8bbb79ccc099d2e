// Command startbench measures what a sandbox costs to start: jail beside
// bubblewrap, crun, runc, unshare and the bare command, interleaved round by
// round in one run so that machine noise falls on every contender alike.
//
// It times, as root:
//  1. cold start of /bin/true in a busybox root filesystem with all
//     isolation on (namespaces, the same limits, the same seccomp filter
//     where the tool takes one); on cgroup v1 hosts also bwrap under the
//     same cgroup limits as jail's (cgwrap, compiled with gcc), the peer
//     with jail's features that bwrap alone lacks;
//  2. the same on the default root (the host tree read-only);
//  3. throughput: sandboxes started and finished per second, two at a time;
//  4. with -image, the cost of --image over the default root.
//
// Every contender runs in a private mount namespace where the empty cgroup
// v2 hierarchy of a hybrid host is unmounted (crun refuses hybrid layouts);
// that changes nothing on the host. Whatever the run creates (a work
// directory, crun and runc state, cgroups under jail-bench) is removed.
//
//	go run ./test/startbench -jail bin/jail -json bin/bench-start.json
//
// With -repeat N each cold-start comparison runs N times, one after the
// other, and a last table gives jail's time over each contender's in every
// run, with the lowest, median and highest: on a shared machine one run's
// ratio moves by ten per cent from one run to the next.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// insideEnv marks the re-executed copy that runs in the private mount
// namespace.
const insideEnv = "JAIL_STARTBENCH_INSIDE"

type options struct {
	jail       string
	rounds     int
	warmup     int
	throughput time.Duration
	jsonOut    string
	only       string
	scenarios  string
	image      string
	repeat     int
}

func main() {
	var o options
	flag.StringVar(&o.jail, "jail", "bin/jail", "the jail binary")
	flag.IntVar(&o.rounds, "n", 200, "timed rounds; each runs every contender once")
	flag.IntVar(&o.warmup, "warmup", 10, "untimed rounds first")
	flag.DurationVar(&o.throughput, "throughput", 10*time.Second, "how long each tool runs two at a time (0: skip)")
	flag.StringVar(&o.jsonOut, "json", "", "write the figures, raw samples included, to this file")
	flag.StringVar(&o.only, "only", "", "comma-separated contender names to run (default: all)")
	flag.StringVar(&o.scenarios, "scenarios", "busybox,host", "comma-separated cold-start scenarios: busybox, host, image")
	flag.StringVar(&o.image, "image", "", "an image in jail's store, for the image scenario")
	flag.IntVar(&o.repeat, "repeat", 1, "runs of each cold-start comparison, one after the other; with more than one, each contender's ratio to jail is summarised across runs")
	flag.Parse()
	if o.rounds < 1 || o.warmup < 0 || o.repeat < 1 || o.throughput < 0 {
		fmt.Fprintln(os.Stderr, "startbench: -n and -repeat must be at least 1, -warmup and -throughput not negative")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "startbench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (crun and runc place cgroups; the peers are compared as root)")
	}
	jail, err := filepath.Abs(o.jail)
	if err != nil {
		return err
	}
	o.jail = jail
	if os.Getenv(insideEnv) == "" {
		return reexecPrivate()
	}
	if err := unix.Unmount("/sys/fs/cgroup/unified", unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return fmt.Errorf("unmount the empty cgroup v2 hierarchy: %w", err)
	}

	env, err := newBench(o.jail, func(name string) bool { return len(filter([]contender{{name: name}}, o.only)) == 1 })
	if err != nil {
		return err
	}
	defer env.cleanup()

	report := Report{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Rounds: o.rounds}
	for _, sc := range env.scenarios(o.image) {
		if !strings.Contains(","+o.scenarios+",", ","+sc.key+",") {
			continue
		}
		cs := filter(sc.contenders, o.only)
		if len(cs) == 0 {
			continue
		}
		var runs [][]Result
		for r := 0; r < max(o.repeat, 1); r++ {
			res, err := timeInterleaved(cs, o.warmup, o.rounds)
			if err != nil {
				return err
			}
			name := sc.name
			if o.repeat > 1 {
				name = fmt.Sprintf("%s (run %d of %d)", sc.name, r+1, o.repeat)
			}
			report.Scenarios = append(report.Scenarios, Scenario{Name: name, Results: res})
			printScenario(name, res)
			runs = append(runs, res)
		}
		if len(runs) > 1 {
			sum := summarizeRatios(sc.name, runs)
			report.Ratios = append(report.Ratios, sum...)
			printRatios(sc.name, sum)
		}
	}
	if o.throughput > 0 && strings.Contains(","+o.scenarios+",", ",busybox,") {
		cs := filter(env.throughputContenders(), o.only)
		res, err := measureThroughput(cs, o.throughput)
		if err != nil {
			return err
		}
		report.Throughput = res
		printThroughput(res, o.throughput)
	}
	if o.jsonOut != "" {
		data, err := json.MarshalIndent(report, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonOut, append(data, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Printf("\nraw figures: %s\n", o.jsonOut)
	}
	return nil
}

// reexecPrivate runs this program again in a private mount namespace.
func reexecPrivate() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := append([]string{"-m", "--propagation", "private", self}, os.Args[1:]...)
	cmd := exec.Command("unshare", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), insideEnv+"=1")
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			os.Exit(ee.ExitCode())
		}
		return err
	}
	return nil
}

func filter(cs []contender, only string) []contender {
	if only == "" {
		return cs
	}
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []contender
	for _, c := range cs {
		if want[c.name] {
			out = append(out, c)
		}
	}
	return out
}

// Report is the JSON file: enough to compare one run with a later one.
type Report struct {
	Date      string     `json:"date"`
	Machine   Machine    `json:"machine"`
	Rounds    int        `json:"rounds"`
	Scenarios []Scenario `json:"cold_start"`
	// Ratios summarise each contender's ratio to jail across the runs of
	// a scenario (-repeat).
	Ratios     []Ratios     `json:"ratios,omitempty"`
	Throughput []Throughput `json:"throughput,omitempty"`
}

// Machine says where the figures were taken.
type Machine struct {
	Kernel  string `json:"kernel"`
	CPUs    int    `json:"cpus"`
	Cgroups string `json:"cgroups"`
	Go      string `json:"go"`
}

// Scenario is one cold-start comparison.
type Scenario struct {
	Name    string   `json:"name"`
	Results []Result `json:"results"`
}

// Result is one contender's cold starts.
type Result struct {
	Name      string    `json:"name"`
	Command   string    `json:"command"`
	MedianMS  float64   `json:"median_ms"`
	P90MS     float64   `json:"p90_ms"`
	RatioJail float64   `json:"ratio_to_jail"`
	SamplesMS []float64 `json:"samples_ms"`
}

// Throughput is sandboxes completed per second with two at a time.
type Throughput struct {
	Name      string  `json:"name"`
	Completed int     `json:"completed"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	RatioJail float64 `json:"ratio_to_jail"`
	// CPUPerSandboxMS is the machine's busy time over the run divided by
	// the sandboxes completed (benchmark's own share included).
	CPUPerSandboxMS float64 `json:"cpu_ms_per_sandbox"`
}

func machine() Machine {
	var u unix.Utsname
	_ = unix.Uname(&u)
	m := Machine{Kernel: unix.ByteSliceToString(u.Release[:]), CPUs: runtime.NumCPU(), Go: runtime.Version()}
	var st unix.Statfs_t
	switch {
	case unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC:
		m.Cgroups = "v2"
	default:
		m.Cgroups = "v1"
		if _, err := os.Stat("/sys/fs/cgroup/unified"); err == nil {
			m.Cgroups = "v1 (hybrid host; v2 hierarchy unmounted for the run)"
		}
	}
	return m
}

// timeInterleaved runs every contender once per round and returns each
// one's statistics; the first contender named jail is the reference.
func timeInterleaved(cs []contender, warmup, rounds int) ([]Result, error) {
	samples := make([][]time.Duration, len(cs))
	for r := 0; r < warmup+rounds; r++ {
		for i := range cs {
			d, err := cs[i].once()
			if err != nil {
				return nil, err
			}
			if r >= warmup {
				samples[i] = append(samples[i], d)
			}
		}
	}
	out := make([]Result, len(cs))
	for i, c := range cs {
		ts := samples[i]
		sorted := append([]time.Duration(nil), ts...)
		sort.Slice(sorted, func(a, b int) bool { return sorted[a] < sorted[b] })
		out[i] = Result{Name: c.name, Command: c.describe(), MedianMS: ms(sorted[len(sorted)/2]), P90MS: ms(sorted[len(sorted)*9/10])}
		for _, t := range ts {
			out[i].SamplesMS = append(out[i].SamplesMS, ms(t))
		}
	}
	ratios := ratiosToJail(cs, func(i int) float64 { return out[i].MedianMS })
	for i := range out {
		out[i].RatioJail = ratios[i]
	}
	return out, nil
}

// measureThroughput runs each tool two at a time, back to back, for d in
// all: two halves in opposite orders, so that a drift of the machine's load
// falls on all tools alike.
func measureThroughput(cs []contender, d time.Duration) ([]Throughput, error) {
	done := make([]int, len(cs))
	spent := make([]time.Duration, len(cs))
	busy := make([]time.Duration, len(cs))
	for half := 0; half < 2; half++ {
		for k := range cs {
			i := k
			if half == 1 {
				i = len(cs) - 1 - k
			}
			before, err := machineBusy()
			if err != nil {
				return nil, err
			}
			n, took, err := cs[i].parallel(2, d/2)
			if err != nil {
				return nil, err
			}
			after, err := machineBusy()
			if err != nil {
				return nil, err
			}
			done[i] += n
			spent[i] += took
			busy[i] += after - before
		}
	}
	out := make([]Throughput, len(cs))
	for i, c := range cs {
		out[i] = Throughput{Name: c.name, Completed: done[i], Seconds: spent[i].Seconds(), PerSecond: float64(done[i]) / spent[i].Seconds()}
		if done[i] > 0 {
			out[i].CPUPerSandboxMS = ms(busy[i]) / float64(done[i])
		}
	}
	ratios := ratiosToJail(cs, func(i int) float64 { return out[i].PerSecond })
	for i := range out {
		out[i].RatioJail = ratios[i]
	}
	return out, nil
}

// machineBusy is the CPU time the whole machine has spent on anything but
// idling (and, in a VM, being stolen) since boot, from /proc/stat: a
// sandbox's cost wherever it falls (the tool's processes, the kernel's
// workers that tear namespaces down, a server's threads).
func machineBusy() (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	// user nice system idle iowait irq softirq steal: all but idle,
	// iowait and steal.
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		v, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		ticks += v
	}
	// USER_HZ is 100 on every Linux architecture jail runs on.
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// ratiosToJail divides each contender's figure by jail's (0 without jail).
func ratiosToJail(cs []contender, figure func(i int) float64) []float64 {
	ratios := make([]float64, len(cs))
	for j, c := range cs {
		if c.name != "jail" || figure(j) == 0 {
			continue
		}
		for i := range cs {
			ratios[i] = figure(i) / figure(j)
		}
		break
	}
	return ratios
}

func printScenario(name string, res []Result) {
	fmt.Printf("\n## cold start: %s\n\n", name)
	fmt.Println("| tool | median | p90 | × jail | command |")
	fmt.Println("|---|---|---|---|---|")
	for _, r := range res {
		fmt.Printf("| %s | %.2f ms | %.2f ms | %.2f | `%s` |\n", r.Name, r.MedianMS, r.P90MS, r.RatioJail, r.Command)
	}
}

// Ratios is one contender's ratio to jail in each run of a scenario: the
// machine's speed drifts between runs, and a single run's ratio with it.
type Ratios struct {
	Scenario  string    `json:"scenario"`
	Name      string    `json:"name"`
	Ratios    []float64 `json:"ratios_to_jail"`
	Median    float64   `json:"median"`
	JailMedMS []float64 `json:"jail_median_ms"`
}

func summarizeRatios(scenario string, runs [][]Result) []Ratios {
	var out []Ratios
	for i, first := range runs[0] {
		if first.Name == "jail" {
			continue
		}
		r := Ratios{Scenario: scenario, Name: first.Name}
		for _, run := range runs {
			r.Ratios = append(r.Ratios, run[i].RatioJail)
			r.JailMedMS = append(r.JailMedMS, run[0].MedianMS)
		}
		sorted := append([]float64(nil), r.Ratios...)
		sort.Float64s(sorted)
		r.Median = median(sorted)
		out = append(out, r)
	}
	return out
}

// median of sorted values.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// printRatios prints, per contender, jail's time over the contender's in
// each run (the × jail column read the other way round: "jail takes N
// times its time"), which is how the targets are stated.
func printRatios(scenario string, sum []Ratios) {
	fmt.Printf("\n## %s: jail's median over each contender's, run by run\n\n", scenario)
	fmt.Println("| contender | per run | lowest | median | highest |")
	fmt.Println("|---|---|---|---|---|")
	for _, r := range sum {
		cells := make([]string, len(r.Ratios))
		inv := make([]float64, len(r.Ratios))
		for i, x := range r.Ratios {
			inv[i] = 1 / x
			cells[i] = fmt.Sprintf("%.3f", inv[i])
		}
		sort.Float64s(inv)
		fmt.Printf("| %s | %s | %.3f | %.3f | %.3f |\n", r.Name, strings.Join(cells, " "), inv[0], median(inv), inv[len(inv)-1])
	}
}

func printThroughput(res []Throughput, d time.Duration) {
	fmt.Printf("\n## throughput: 2 at a time, %s per tool\n\n", d)
	fmt.Println("| tool | sandboxes/s | × jail | machine CPU per sandbox |")
	fmt.Println("|---|---|---|---|")
	for _, r := range res {
		fmt.Printf("| %s | %.0f | %.2f | %.1f ms |\n", r.Name, r.PerSecond, r.RatioJail, r.CPUPerSandboxMS)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
