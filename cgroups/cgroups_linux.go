// Package cgroups places each sandbox in a cgroup of its own, limits its
// memory (swap included), CPU and number of tasks, and reads back how much it
// used and whether the kernel's OOM killer struck. It works on cgroup v2
// (unified) and v1, including systemd's hybrid layout where the v2 hierarchy
// carries no controllers. It writes the few limit files itself, with what
// containerd/cgroups writes for the same limits (limits_linux.go says why;
// a test holds the two to the same result).
//
// Invariants: only the memory, cpu(acct) and pids controllers are touched;
// every cgroup jail creates lives under a parent named Parent (at the root of
// each hierarchy for root; inside the user's delegated subtree on v2 for an
// ordinary user), and nothing else is written except to pass those
// controllers down to it; the only tasks ever moved are, on v1, threads
// moving themselves (no lock is taken then): the thread of a pool's forker
// that forks a sandbox's init, into the sandbox's cgroup and then out to
// Parent (the init is born inside); or, for an init its supervisor starts
// itself, the init's thread that forks the command (Placement's Enter
// files, which the supervisor opens and the init writes). On v2 the init is
// cloned into its cgroup. A sandbox's cgroup is removed
// when the sandbox ends (or, for a pool, readied for the next sandbox: see
// Manager.Reuse), and a janitor process (package janitor) removes it
// even when the supervisor is SIGKILLed. A Manager holds its directories
// from their making until Destroy or Close, so that no janitor's sweep
// takes them while they are empty and still in use.
package cgroups

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/cgroups/cgroupfile"
	"github.com/jail-sandbox/jail/cgroups/janitor"
)

// Parent is the project's cgroup, at the root of each hierarchy.
const Parent = janitor.Parent

const mountpoint = "/sys/fs/cgroup"

// Version is the cgroup layout in use.
type Version int

const (
	// None: no cgroup this process may use.
	None Version = iota
	V1
	V2
)

// Limits bounds a sandbox.
type Limits struct {
	// Memory in bytes, swap included.
	Memory int64
	// CPUs in cores.
	CPUs float64
	// Pids is the most processes and threads at once.
	Pids int64
}

// Usage is what a sandbox consumed.
type Usage struct {
	CPU time.Duration
	// PeakMemory in bytes; 0 when the kernel keeps no peak (see Manager).
	PeakMemory int64
	// OOMKills counts processes the OOM killer killed in the sandbox.
	OOMKills int64
}

// Manager is one sandbox's cgroup.
type Manager interface {
	// Start calls start, which forks a sandbox's init with attr, so that
	// the init is born in the cgroup and nothing of the sandbox ever runs
	// outside it. The thread that forks stays until hold is closed: a
	// child's parent-death signal fires when that thread ends.
	Start(attr *syscall.SysProcAttr, start func() error, hold <-chan struct{}) error
	// Settle returns once nothing of this process is in the cgroup any
	// more: on v1, Start returns as soon as the init is forked and the
	// forking thread leaves the cgroup beside the init's own start. Call it
	// before the cgroup is removed, or its janitor let go, which would
	// take that thread for part of the sandbox.
	Settle()
	// Usage reads the cgroup's counters.
	Usage() (Usage, error)
	// Paths are the cgroup's directories, for the janitor.
	Paths() []string
	// Destroy kills whatever still runs in the cgroup, removes it and
	// closes it.
	Destroy() error
	// Close lets go of the cgroup without removing it (a janitor will):
	// from then on a janitor may sweep it once it is empty.
	Close()
	// Placement says how another process forks an init into the cgroup,
	// as Start does here (jail's forker), or moves itself in (an init
	// started before the cgroup, on v1).
	Placement() (Placement, error)
	// Reuse readies the cgroup of a sandbox that is gone for another
	// sandbox with the same limits, as if it were new: it checks that no
	// task is left in it and that no more memory stays charged to it than
	// the kernel's own reserves and objects (ErrStillCharged otherwise),
	// and starts its counters afresh, so that Usage reports only what the
	// next sandbox uses. An error means the cgroup is not fit for reuse
	// (ErrNotReusable where the kernel cannot restart the counters);
	// Destroy it then.
	Reuse() error
}

// ErrNotReusable: this kernel cannot start a cgroup's counters afresh
// (Manager.Reuse).
var ErrNotReusable = errors.New("cgroup: counters cannot be reset here")

// ErrStillCharged: more memory is still charged to the cgroup than a
// reused one may start with (Manager.Reuse).
var ErrStillCharged = errors.New("cgroup: memory still charged")

// Placement is how a forking thread gets a child born in a cgroup: on v1 it
// writes "0" to each of the Enter tasks files before the fork and to each
// of Leave after; on v2 it clones the child into Dir (the caller closes
// it). A thread that writes "0" to the Enter files moves itself in.
type Placement struct {
	Enter, Leave []string
	Dir          *os.File
}

// Layout is where this process puts sandbox cgroups.
type Layout struct {
	Version Version
	// Above is the v2 directory the project's parent is made in: the
	// hierarchy's root for root, the top of the delegated subtree for an
	// ordinary user. Unused on v1, where Parent sits at each root.
	Above string
}

// parentDir is the v2 directory of the project's parent.
func (l Layout) parentDir() string { return filepath.Join(l.Above, Parent) }

// Detect returns the layout this process can place sandboxes in, or one
// with Version None and why not.
func Detect() (Layout, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(mountpoint, &st); err != nil {
		return Layout{}, fmt.Errorf("%s: %w", mountpoint, err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		if os.Geteuid() == 0 {
			return Layout{Version: V2, Above: mountpoint}, nil
		}
		above, err := delegatedSubtree()
		if err != nil {
			return Layout{}, fmt.Errorf("cgroups v2: %w", err)
		}
		return Layout{Version: V2, Above: above}, nil
	}
	if os.Geteuid() != 0 {
		// v1 hierarchies cannot be delegated safely (CVE-2022-0492).
		return Layout{}, errors.New("cgroups v1: not usable without root")
	}
	for _, c := range []string{"memory", "cpu", "cpuacct", "pids"} {
		if _, err := os.Stat(filepath.Join(mountpoint, c, "cgroup.procs")); err != nil {
			return Layout{}, fmt.Errorf("cgroup v1 controller %s is not mounted", c)
		}
	}
	return Layout{Version: V1}, nil
}

// delegatedSubtree finds the highest cgroup above (or at) this process's own
// that belongs to this user and that it may write, as systemd's delegation
// of user@UID.service provides, and checks it offers jail's controllers.
func delegatedSubtree() (string, error) {
	own, err := ownCgroup()
	if err != nil {
		return "", err
	}
	found := ""
	for dir := own; dir != mountpoint && strings.HasPrefix(dir, mountpoint+"/"); dir = filepath.Dir(dir) {
		var st unix.Stat_t
		if unix.Stat(dir, &st) != nil || int(st.Uid) != os.Geteuid() ||
			unix.Access(filepath.Join(dir, "cgroup.procs"), unix.W_OK) != nil ||
			unix.Access(filepath.Join(dir, "cgroup.subtree_control"), unix.W_OK) != nil {
			break
		}
		found = dir
	}
	if found == "" {
		return "", errors.New("no cgroup is delegated to this user")
	}
	if found == own {
		return "", fmt.Errorf("the delegated cgroup %s holds this process itself", own)
	}
	b, err := os.ReadFile(filepath.Join(found, "cgroup.controllers"))
	if err != nil {
		return "", err
	}
	for _, c := range v2Controllers {
		if !hasWord(string(b), c) {
			return "", fmt.Errorf("the delegated cgroup %s does not offer %s", found, c)
		}
	}
	return found, nil
}

// ownCgroup is this process's v2 cgroup directory.
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Join(mountpoint, path), nil
		}
	}
	return "", errors.New("not in a cgroup v2 hierarchy")
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// New creates the cgroup for one sandbox, named name under the project's
// parent, with limits applied.
func New(l Layout, name string, limits Limits) (Manager, error) {
	if name == "" || strings.ContainsAny(name, "/.") {
		return nil, fmt.Errorf("cgroup name %q", name)
	}
	switch l.Version {
	case V1:
		return newV1(name, limits)
	case V2:
		return newV2(l, name, limits)
	}
	return nil, errors.New("no cgroup version available")
}

// PathsFor returns the directories New(l, name, ...) creates, for a janitor
// (package janitor).
func PathsFor(l Layout, name string) []string {
	switch l.Version {
	case V1:
		return v1Paths("/" + Parent + "/" + name)
	case V2:
		return []string{filepath.Join(l.parentDir(), name)}
	}
	return nil
}

// cpuQuota turns cores into a CFS quota for the kernel's default period.
func cpuQuota(cpus float64) (quota int64, period uint64) {
	period = 100000
	quota = int64(cpus * float64(period))
	if quota < 1000 {
		quota = 1000
	}
	return quota, period
}

// readKeyed reads "key value" lines into a map.
func readKeyed(path string) (map[string]int64, error) {
	b, err := cgroupfile.Read(path)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}

// readIntAt reads a single number from the start of an open cgroup file.
func readIntAt(f *os.File) (int64, error) {
	buf := make([]byte, 64)
	n, err := f.ReadAt(buf, 0)
	if err != nil && err != io.EOF {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(buf[:n])), 10, 64)
}

func readInt(path string) (int64, error) {
	b, err := cgroupfile.Read(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// removeDirs kills what remains in each cgroup directory and removes it.
func removeDirs(dirs []string) error { return janitor.Remove(dirs) }

// sandboxDirMode is the mode of a sandbox's cgroup directories: others may
// not open them, for whoever opens one may flock it, and an exclusive lock
// taken before the supervisor's (hold) kept the sandbox from starting, a
// shared one kept a leftover from every janitor's sweep.
const sandboxDirMode = 0o711

// hold holds each of dirs (janitor.Hold), so that no janitor sweeps them
// while this process uses them.
func hold(dirs []string) ([]*os.File, error) {
	var held []*os.File
	for _, d := range dirs {
		f, err := janitor.Hold(d)
		if err != nil {
			release(held)
			return nil, err
		}
		held = append(held, f)
	}
	return held, nil
}

func release(held []*os.File) {
	for _, f := range held {
		f.Close()
	}
}

// UsageAt reads the counters of the cgroup whose directories are paths
// (Manager.Paths of it, from another process): on v2 one directory, on v1
// one per controller, told apart by their hierarchy's name. Counters the
// kernel does not keep read as 0.
func UsageAt(paths []string) (Usage, error) {
	var u Usage
	if len(paths) == 1 {
		dir := paths[0]
		cpu, err := readKeyed(filepath.Join(dir, "cpu.stat"))
		if err != nil {
			return u, err
		}
		u.CPU = time.Duration(cpu["usage_usec"]) * time.Microsecond
		u.PeakMemory, _ = readInt(filepath.Join(dir, "memory.peak"))
		events, _ := readKeyed(filepath.Join(dir, "memory.events"))
		u.OOMKills = events["oom_kill"]
		return u, nil
	}
	for _, dir := range paths {
		switch filepath.Base(filepath.Dir(filepath.Dir(dir))) {
		case "cpuacct", "cpu,cpuacct":
			ns, err := readInt(filepath.Join(dir, "cpuacct.usage"))
			if err != nil {
				return u, err
			}
			u.CPU = time.Duration(ns)
		case "memory":
			peak, err := readInt(filepath.Join(dir, "memory.max_usage_in_bytes"))
			if err != nil {
				return u, err
			}
			u.PeakMemory = peak
			oom, _ := readKeyed(filepath.Join(dir, "memory.oom_control"))
			u.OOMKills = oom["oom_kill"]
		}
	}
	return u, nil
}

// OOMKillsAt reads only the OOM killer's count of the cgroup whose
// directories are paths (as UsageAt does, without the other counters):
// an exec reads it before and after its command.
func OOMKillsAt(paths []string) (int64, error) {
	for _, dir := range paths {
		if len(paths) == 1 {
			events, err := readKeyed(filepath.Join(dir, "memory.events"))
			return events["oom_kill"], err
		}
		if filepath.Base(filepath.Dir(filepath.Dir(dir))) == "memory" {
			oom, err := readKeyed(filepath.Join(dir, "memory.oom_control"))
			return oom["oom_kill"], err
		}
	}
	return 0, errors.New("cgroup: no memory controller")
}
