// Package cgroups places each sandbox in a cgroup of its own, limits its
// memory (swap included), CPU and number of tasks, and reads back how much it
// used and whether the kernel's OOM killer struck. It works on cgroup v2
// (unified) and v1, including systemd's hybrid layout where the v2 hierarchy
// carries no controllers, through containerd/cgroups.
//
// Invariants: only the memory, cpu(acct) and pids controllers are touched;
// every cgroup jail creates lives under a parent named Parent at the root of
// each hierarchy, and nothing outside it is ever written; a sandbox's cgroup
// is removed when the sandbox ends, and a janitor process removes it even
// when the supervisor is SIGKILLed.
package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Parent is the project's cgroup, at the root of each hierarchy.
const Parent = "jail"

const mountpoint = "/sys/fs/cgroup"

// Version is the cgroup layout in use.
type Version int

const (
	// None: no cgroup this process may use.
	None Version = iota
	V1
	V2
)

func (v Version) String() string {
	return [...]string{"none", "v1", "v2"}[v]
}

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
	// Version is the layout the cgroup lives in.
	Version() Version
	// CloneFD is a descriptor of the cgroup for CLONE_INTO_CGROUP, or -1
	// when processes must be attached with Attach.
	CloneFD() int
	// Attach moves a process into the cgroup.
	Attach(pid int) error
	// Usage reads the cgroup's counters.
	Usage() (Usage, error)
	// Paths are the cgroup's directories, for the janitor.
	Paths() []string
	// Destroy kills whatever still runs in the cgroup and removes it.
	Destroy() error
}

// Detect returns the layout this process can place sandboxes in, or None
// and why not.
func Detect() (Version, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(mountpoint, &st); err != nil {
		return None, fmt.Errorf("%s: %w", mountpoint, err)
	}
	v := V1
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		v = V2
	}
	if os.Geteuid() != 0 {
		// Delegated cgroups for ordinary users are not used yet.
		return None, fmt.Errorf("cgroups %s: not delegated to this user", v)
	}
	if v == V1 {
		for _, c := range []string{"memory", "cpu", "cpuacct", "pids"} {
			if _, err := os.Stat(filepath.Join(mountpoint, c, "cgroup.procs")); err != nil {
				return None, fmt.Errorf("cgroup v1 controller %s is not mounted", c)
			}
		}
	}
	return v, nil
}

// New creates the cgroup for one sandbox, named name under Parent, with
// limits applied.
func New(v Version, name string, limits Limits) (Manager, error) {
	if name == "" || strings.ContainsAny(name, "/.") {
		return nil, fmt.Errorf("cgroup name %q", name)
	}
	switch v {
	case V1:
		return newV1(name, limits)
	case V2:
		return newV2(name, limits)
	}
	return nil, errors.New("no cgroup version available")
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
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, sc.Err()
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// removeDirs kills what remains in each cgroup directory and removes it,
// retrying while the kernel still counts exiting processes.
func removeDirs(dirs []string) error {
	var firstErr error
	for _, dir := range dirs {
		deadline := time.Now().Add(5 * time.Second)
		for {
			killProcs(dir)
			err := unix.Rmdir(dir)
			if err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
				if firstErr == nil {
					firstErr = fmt.Errorf("remove cgroup %s: %w", dir, err)
				}
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return firstErr
}

// killProcs SIGKILLs every process listed in a cgroup directory.
func killProcs(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}
