package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/cgroups/cgroupfile"
	"github.com/jail-sandbox/jail/cgroups/janitor"
)

// v2Controllers are the only controllers jail enables.
var v2Controllers = []string{"memory", "cpu", "pids"}

type v2Manager struct {
	dir string
	// held is the directory, open and held (janitor.Hold); the init is
	// cloned into it. Nil once closed.
	held *os.File
	peak bool // the kernel keeps memory.peak (Linux 5.19+)
	// Once the cgroup is readied for reuse: peakFile is memory.peak as
	// opened then, whose reads give the peak since (it was written to),
	// and cpuBase and oomBase the counters then, which cannot be reset.
	peakFile         *os.File
	cpuBase, oomBase int64
}

func newV2(l Layout, name string, limits Limits) (Manager, error) {
	// The project's parent must pass the controllers on to its children,
	// and whatever is above it to the parent (on a systemd host it already
	// does).
	parent := l.parentDir()
	if err := os.Mkdir(parent, 0o755); err != nil && !os.IsExist(err) {
		return nil, fmt.Errorf("create cgroup %s: %w", parent, err)
	}
	for _, dir := range []string{l.Above, parent} {
		if err := enableControllers(dir); err != nil {
			return nil, err
		}
	}
	dir := filepath.Join(parent, name)
	group := strings.TrimPrefix(dir, mountpoint)
	// The controllers are enabled above only where they are missing:
	// containerd's NewManager writes them into the subtree_control of every
	// ancestor up to the root, and each such write waits for every dying
	// cgroup below it (the sandboxes just removed) to be offlined.
	if err := os.Mkdir(dir, sandboxDirMode); err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", group, err)
	}
	if err := apply(v2Settings(dir, limits)); err != nil {
		_ = removeDirs([]string{dir})
		return nil, fmt.Errorf("create cgroup %s: %w", group, err)
	}
	held, err := janitor.Hold(dir)
	if err != nil {
		_ = removeDirs([]string{dir})
		return nil, err
	}
	_, peakErr := os.Stat(filepath.Join(dir, "memory.peak"))
	return &v2Manager{dir: dir, held: held, peak: peakErr == nil}, nil
}

// enableControllers makes sure dir passes jail's controllers down.
func enableControllers(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	enabled := strings.Fields(string(b))
	var missing []string
	for _, c := range v2Controllers {
		found := false
		for _, e := range enabled {
			found = found || e == c
		}
		if !found {
			missing = append(missing, "+"+c)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(missing, " ")), 0); err != nil {
		return fmt.Errorf("enable %v in %s: %w", missing, dir, err)
	}
	return nil
}

// Start: on v2 the init is cloned straight into the cgroup
// (CLONE_INTO_CGROUP), from whichever thread calls start.
func (m *v2Manager) Start(attr *syscall.SysProcAttr, start func() error, _ <-chan struct{}) error {
	attr.UseCgroupFD, attr.CgroupFD = true, int(m.held.Fd())
	return start()
}

// Usage: cpu.stat usage_usec; memory.peak where the kernel has it (5.19+),
// else 0, and the caller reports the largest process's peak instead;
// oom_kill from memory.events.
func (m *v2Manager) Usage() (Usage, error) {
	var u Usage
	cpu, err := readKeyed(filepath.Join(m.dir, "cpu.stat"))
	if err != nil {
		return u, err
	}
	u.CPU = time.Duration(cpu["usage_usec"]-m.cpuBase) * time.Microsecond
	switch {
	case m.peakFile != nil:
		if u.PeakMemory, err = readIntAt(m.peakFile); err != nil {
			return u, err
		}
	case m.peak:
		if u.PeakMemory, err = readInt(filepath.Join(m.dir, "memory.peak")); err != nil {
			return u, err
		}
	}
	events, err := readKeyed(filepath.Join(m.dir, "memory.events"))
	if err != nil {
		return u, err
	}
	u.OOMKills = events["oom_kill"] - m.oomBase
	return u, nil
}

// Reuse: as on v1 (populated 0 once the last task is gone, at most
// maxLeftCharged still charged), but the counters restart differently:
// memory.peak restarts only for reads through a descriptor that wrote to it
// (Linux 6.12; before, the file cannot be opened for writing, and the cgroup
// is not reusable), and cpu.stat and memory.events are read as bases.
func (m *v2Manager) Reuse() error {
	if m.held == nil {
		return fmt.Errorf("cgroup %s: closed", m.dir)
	}
	events, err := readKeyed(filepath.Join(m.dir, "cgroup.events"))
	if err != nil {
		return err
	}
	if events["populated"] != 0 {
		return fmt.Errorf("cgroup %s: tasks left", m.dir)
	}
	if err := checkLeftCharged(filepath.Join(m.dir, "memory.current")); err != nil {
		return err
	}
	peak, err := cgroupfile.OpenReadWrite(filepath.Join(m.dir, "memory.peak"))
	if err != nil {
		return ErrNotReusable
	}
	if _, err := peak.WriteString("reset"); err != nil {
		peak.Close()
		return ErrNotReusable
	}
	cpu, err := readKeyed(filepath.Join(m.dir, "cpu.stat"))
	if err != nil {
		peak.Close()
		return err
	}
	memEvents, err := readKeyed(filepath.Join(m.dir, "memory.events"))
	if err != nil {
		peak.Close()
		return err
	}
	if m.peakFile != nil {
		m.peakFile.Close()
	}
	m.peakFile, m.cpuBase, m.oomBase = peak, cpu["usage_usec"], memEvents["oom_kill"]
	return nil
}

func (m *v2Manager) Paths() []string { return []string{m.dir} }

// Settle: nothing of this process ever enters a v2 sandbox's cgroup.
func (m *v2Manager) Settle() {}

func (m *v2Manager) Placement() (Placement, error) {
	fd, err := unix.FcntlInt(m.held.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return Placement{}, fmt.Errorf("cgroup %s: %w", m.dir, err)
	}
	return Placement{Dir: os.NewFile(uintptr(fd), m.dir)}, nil
}

func (m *v2Manager) Destroy() error {
	defer m.Close()
	// cgroup.kill (5.14+) takes every process at once, even ones forking.
	_ = cgroupfile.Write(filepath.Join(m.dir, "cgroup.kill"), "1")
	return removeDirs([]string{m.dir})
}

func (m *v2Manager) Close() {
	if m.held != nil {
		m.held.Close()
		m.held = nil
	}
	if m.peakFile != nil {
		m.peakFile.Close()
		m.peakFile = nil
	}
}
