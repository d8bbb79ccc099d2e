package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// containerdCgroup makes the cgroup name under the project's parent through
// containerd/cgroups, with the runtime-spec resources that stand for limits
// (memory plus swap equal to the memory limit on v1, no swap on v2), and
// returns its directories.
func containerdCgroup(l Layout, name string, limits Limits) ([]string, error) {
	quota, period := cpuQuota(limits.CPUs)
	switch l.Version {
	case V1:
		path := "/" + Parent + "/" + name
		resources := &specs.LinuxResources{
			Memory: &specs.LinuxMemory{Limit: &limits.Memory, Swap: &limits.Memory},
			CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period},
			Pids:   &specs.LinuxPids{Limit: &limits.Pids},
		}
		hierarchy := func() ([]cgroup1.Subsystem, error) {
			return []cgroup1.Subsystem{
				cgroup1.NewMemory(mountpoint), cgroup1.NewCpu(mountpoint),
				cgroup1.NewCpuacct(mountpoint), cgroup1.NewPids(mountpoint),
			}, nil
		}
		if _, err := cgroup1.New(cgroup1.StaticPath(path), resources, cgroup1.WithHierarchy(hierarchy)); err != nil {
			return v1Paths(path), err
		}
		return v1Paths(path), nil
	case V2:
		dir := filepath.Join(l.parentDir(), name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, err
		}
		zero := int64(0)
		resources := &cgroup2.Resources{
			Memory: &cgroup2.Memory{Max: &limits.Memory, Swap: &zero},
			CPU:    &cgroup2.CPU{Max: cgroup2.NewCPUMax(&quota, &period)},
			Pids:   &cgroup2.Pids{Max: limits.Pids},
		}
		mgr, err := cgroup2.Load(strings.TrimPrefix(dir, mountpoint), cgroup2.WithMountpoint(mountpoint))
		if err == nil {
			err = mgr.Update(resources)
		}
		return []string{dir}, err
	}
	return nil, fmt.Errorf("no cgroups")
}

// knobs are the limit files of the controllers jail uses, whether or not
// jail or containerd writes them: what either writes and the other does
// not shows as a difference from the kernel's default.
var knobs = map[Version][]string{
	V1: {
		"memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.soft_limit_in_bytes",
		"memory.swappiness", "memory.oom_control", "memory.kmem.limit_in_bytes",
		"cpu.cfs_period_us", "cpu.cfs_quota_us", "cpu.shares", "cpu.rt_runtime_us",
		"pids.max",
	},
	V2: {
		"memory.max", "memory.swap.max", "memory.high", "memory.low", "memory.min",
		"memory.oom.group", "cpu.max", "cpu.weight", "pids.max",
	},
}

// readKnobs reads each knob that the kernel has, from whichever of dirs
// holds it; oom_control's under_oom and oom_kill lines are state, not
// settings.
func readKnobs(v Version, dirs []string) map[string]string {
	out := map[string]string{}
	for _, knob := range knobs[v] {
		for _, dir := range dirs {
			b, err := os.ReadFile(filepath.Join(dir, knob))
			if err != nil {
				continue
			}
			value := strings.TrimSpace(string(b))
			if knob == "memory.oom_control" {
				value, _, _ = strings.Cut(value, "\n")
			}
			out[knob] = value
		}
	}
	return out
}

// TestLimitsMatchContainerd: a sandbox's cgroup as New makes it holds, in
// every limit file, what containerd/cgroups writes for the same limits, and
// every file New writes is among those compared.
func TestLimitsMatchContainerd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	l, err := Detect()
	if err != nil || l.Version == None {
		t.Skipf("no cgroups: %v", err)
	}
	for i, limits := range []Limits{
		benchLimits,
		{Memory: 4 << 20, CPUs: 0.001, Pids: 1},
		{Memory: 100<<20 + 123, CPUs: 1.5, Pids: 7},
		{Memory: 64 << 30, CPUs: 16, Pids: 1 << 20},
	} {
		t.Run(fmt.Sprintf("%d_%dB_%gCPU_%dtasks", i, limits.Memory, limits.CPUs, limits.Pids), func(t *testing.T) {
			ours, err := New(l, fmt.Sprintf("diff-jail-%d-%d", os.Getpid(), i), limits)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ours.Destroy() })
			theirs, err := containerdCgroup(l, fmt.Sprintf("diff-containerd-%d-%d", os.Getpid(), i), limits)
			t.Cleanup(func() { _ = removeDirs(theirs) })
			if err != nil {
				t.Fatalf("containerd: %v", err)
			}
			want, got := readKnobs(l.Version, theirs), readKnobs(l.Version, ours.Paths())
			if len(want) == 0 {
				t.Fatal("no limit file read")
			}
			for knob, value := range want {
				if got[knob] != value {
					t.Errorf("%s: jail %q, containerd %q", knob, got[knob], value)
				}
			}
			var written []setting
			if l.Version == V1 {
				written = v1Settings("/x", limits)
			} else {
				written = v2Settings("/x", limits)
			}
			for _, s := range written {
				if _, ok := want[s.file]; !ok {
					t.Errorf("%s is written but not compared", s.file)
				}
			}
		})
	}
}

// TestMakeDirsOnSharedHierarchies: where cpu and cpuacct are one hierarchy
// under two names, the sandbox's directory is made once and listed under
// both; a directory that was there before is refused and nothing made is
// left.
func TestMakeDirsOnSharedHierarchies(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"memory", "cpu,cpuacct", "pids"} {
		if err := os.Mkdir(filepath.Join(root, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"cpu", "cpuacct"} {
		if err := os.Symlink("cpu,cpuacct", filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	dirs := func(sandbox string) []string {
		var out []string
		for _, c := range v1Controllers {
			out = append(out, filepath.Join(root, c, Parent, sandbox))
		}
		return out
	}
	made, err := makeDirs(dirs("a"))
	if err != nil {
		t.Fatal(err)
	}
	if len(made) != len(v1Controllers) {
		t.Errorf("made %v", made)
	}
	if _, err := os.Stat(filepath.Join(root, "cpu,cpuacct", Parent, "a")); err != nil {
		t.Error(err)
	}

	if err := os.MkdirAll(filepath.Join(root, "pids", Parent, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	made, err = makeDirs(dirs("b"))
	if !os.IsExist(err) {
		t.Fatalf("a sandbox's directory that was there: %v", err)
	}
	if err := removeDirs(made); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"memory", "cpu,cpuacct"} {
		if _, err := os.Stat(filepath.Join(root, c, Parent, "b")); !os.IsNotExist(err) {
			t.Errorf("%s: left %v", c, err)
		}
	}
}
