package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/jail-sandbox/jail/cgroups/cgroupfile"
)

// v1Controllers are the only v1 hierarchies jail touches, by the names
// they are mounted under.
var v1Controllers = []string{"memory", "cpu", "cpuacct", "pids"}

type v1Manager struct {
	path string // below each hierarchy's root: /jail/<name>
	// left is closed once the thread that Start moved into the cgroup is
	// out of it again; nil before Start.
	left chan struct{}
	held []*os.File
	// oomBase is the oom_kill count when the cgroup was last readied for
	// reuse: the kernel's counter cannot be reset.
	oomBase int64
}

// newV1 makes the cgroup in each of the four hierarchies (and the
// project's parent there, the first time) and writes the limits.
func newV1(name string, limits Limits) (Manager, error) {
	path := "/" + Parent + "/" + name
	made, err := makeDirs(v1Paths(path))
	if err == nil {
		err = apply(v1Settings(path, limits))
	}
	if err != nil {
		_ = removeDirs(made)
		return nil, fmt.Errorf("create cgroup %s: %w", path, err)
	}
	held, err := hold(made)
	if err != nil {
		_ = removeDirs(made)
		return nil, err
	}
	return &v1Manager{path: path, held: held}, nil
}

// makeDirs makes each of dirs, and its parent when missing, and returns
// what it made, also when it fails part way. A directory that exists
// already is an error (it is someone else's) unless it is one just made
// under another name: most v1 hosts mount cpu and cpuacct as one
// hierarchy, cpu,cpuacct, with both names as symbolic links to it.
func makeDirs(dirs []string) ([]string, error) {
	var made []string
	for _, dir := range dirs {
		err := os.Mkdir(dir, sandboxDirMode)
		if os.IsNotExist(err) {
			// The parent is missing only the first time, so it is
			// not tried before every sandbox.
			if err = os.Mkdir(filepath.Dir(dir), 0o755); err == nil || os.IsExist(err) {
				err = os.Mkdir(dir, sandboxDirMode)
			}
		}
		if os.IsExist(err) && isOneOf(dir, made) {
			err = nil
		}
		if err != nil {
			return made, err
		}
		made = append(made, dir)
	}
	return made, nil
}

// isOneOf reports whether dir is the same directory as one of dirs.
func isOneOf(dir string, dirs []string) bool {
	info, err := os.Stat(dir)
	if err != nil {
		return false
	}
	for _, d := range dirs {
		if other, err := os.Stat(d); err == nil && os.SameFile(info, other) {
			return true
		}
	}
	return false
}

// Start: on v1, start runs on an OS thread of its own that moves itself into
// the cgroup first (a child is born in the cgroups of the thread that forks
// it) and out to Parent after. Start returns as soon as start has: the
// thread leaves while the init starts up (half a millisecond here, off the
// path to the command), and Settle waits for it. The thread is never
// unlocked, so it ends with its goroutine, once hold is closed, rather than
// run other goroutines from another cgroup.
func (m *v1Manager) Start(_ *syscall.SysProcAttr, start func() error, hold <-chan struct{}) error {
	done := make(chan error, 1)
	m.left = make(chan struct{})
	go func() {
		runtime.LockOSThread()
		err := m.enterThread()
		if err == nil {
			err = start()
		}
		done <- err
		// A thread that could not leave ends at once (the init, if
		// any, with it: its parent-death signal) rather than keep this
		// process in the sandbox's cgroup, where the janitor kills what
		// it finds; it ends too when there is no init to hold for.
		stays := m.leaveThread() == nil && err == nil
		close(m.left)
		if stays {
			<-hold
		}
	}()
	return <-done
}

func (m *v1Manager) Settle() {
	if m.left != nil {
		<-m.left
	}
}

// enterThread writes "0" to the tasks file of each hierarchy: the calling
// thread moves itself. The kernel takes its global threadgroup lock only
// when one task moves another (cgroup.procs, or another thread's id), and
// taking it costs an RCU grace period when no migration happened lately,
// 7 to 12 ms here; a thread moving itself needs no lock and takes 0.1 ms.
func (m *v1Manager) enterThread() error {
	for _, c := range v1Controllers {
		if err := cgroupfile.Write(filepath.Join(m.dir(c), "tasks"), "0"); err != nil {
			return fmt.Errorf("enter cgroup %s: %w", m.path, err)
		}
	}
	return nil
}

// leaveThread moves the calling thread, which enterThread moved in, to the
// project's parent cgroup of each hierarchy, by the same lock-free path.
func (m *v1Manager) leaveThread() error {
	for _, c := range v1Controllers {
		if err := cgroupfile.Write(filepath.Join(v1Dir(c, Parent), "tasks"), "0"); err != nil {
			return fmt.Errorf("leave cgroup %s: %w", m.path, err)
		}
	}
	return nil
}

func (m *v1Manager) Placement() (Placement, error) {
	var p Placement
	for _, c := range v1Controllers {
		p.Enter = append(p.Enter, filepath.Join(m.dir(c), "tasks"))
		p.Leave = append(p.Leave, filepath.Join(v1Dir(c, Parent), "tasks"))
	}
	return p, nil
}

func (m *v1Manager) dir(c string) string { return v1Dir(c, m.path) }

// v1Dir is the directory of the cgroup at path (below each hierarchy's
// root) in controller c's hierarchy.
func v1Dir(c, path string) string { return filepath.Join(mountpoint, c, path) }

func v1Paths(path string) []string {
	var out []string
	for _, c := range v1Controllers {
		out = append(out, v1Dir(c, path))
	}
	return out
}

// Usage: cpuacct.usage, memory.max_usage_in_bytes (the high-water mark of
// memory charged to the cgroup, page cache included) and the oom_kill count
// of memory.oom_control.
func (m *v1Manager) Usage() (Usage, error) {
	var u Usage
	ns, err := readInt(filepath.Join(m.dir("cpuacct"), "cpuacct.usage"))
	if err != nil {
		return u, err
	}
	u.CPU = time.Duration(ns)
	if u.PeakMemory, err = readInt(filepath.Join(m.dir("memory"), "memory.max_usage_in_bytes")); err != nil {
		return u, err
	}
	oom, err := readKeyed(filepath.Join(m.dir("memory"), "memory.oom_control"))
	if err != nil {
		return u, err
	}
	u.OOMKills = oom["oom_kill"] - m.oomBase
	return u, nil
}

// Reuse: pids.current is 0 once the last task is reaped. What is still
// charged to the cgroup then is what the sandbox left in the kernel: per-CPU
// charge reserves (up to 64 pages a CPU, which the next charge from another
// cgroup on that CPU gives back), kernel objects such as dentries, and
// page cache of files it read first. The cgroup is reused only when that
// is at most maxLeftCharged, so that a run's peak counts no more of an
// earlier run's than a new cgroup holds in reserves after its first
// charges. (memory.stat's split of it lags by as much; memory.force_empty
// would reclaim it, but it drains every CPU's reserves and retries reclaim
// on what cannot be reclaimed, which cost more than a new cgroup.) Writing
// 0 restarts cpuacct.usage and sets each high-water mark to the usage now.
func (m *v1Manager) Reuse() error {
	if m.held == nil {
		return fmt.Errorf("cgroup %s: closed", m.path)
	}
	m.Settle()
	tasks, err := readInt(filepath.Join(m.dir("pids"), "pids.current"))
	if err != nil {
		return err
	}
	if tasks != 0 {
		return fmt.Errorf("cgroup %s: %d tasks left", m.path, tasks)
	}
	memory := m.dir("memory")
	if err := checkLeftCharged(filepath.Join(memory, "memory.usage_in_bytes")); err != nil {
		return err
	}
	for _, w := range []struct{ dir, file string }{
		{memory, "memory.max_usage_in_bytes"},
		{memory, "memory.memsw.max_usage_in_bytes"},
		{m.dir("cpuacct"), "cpuacct.usage"},
	} {
		err := cgroupfile.Write(filepath.Join(w.dir, w.file), "0")
		if err != nil && !(w.file == "memory.memsw.max_usage_in_bytes" && errors.Is(err, os.ErrNotExist)) {
			return fmt.Errorf("reset cgroup %s: %w", m.path, err)
		}
	}
	oom, err := readKeyed(filepath.Join(memory, "memory.oom_control"))
	if err != nil {
		return err
	}
	m.oomBase = oom["oom_kill"]
	return nil
}

// maxLeftCharged bounds the memory an ended sandbox may leave charged to a
// cgroup that is reused (Manager.Reuse): the charge reserves of four CPUs.
const maxLeftCharged = 1 << 20

// checkLeftCharged is ErrStillCharged when the usage file (v1's
// memory.usage_in_bytes, v2's memory.current) says more than
// maxLeftCharged.
func checkLeftCharged(usage string) error {
	charged, err := readInt(usage)
	if err != nil {
		return err
	}
	if charged > maxLeftCharged {
		return fmt.Errorf("%w: %s, %d bytes", ErrStillCharged, filepath.Dir(usage), charged)
	}
	return nil
}

func (m *v1Manager) Paths() []string { return v1Paths(m.path) }

func (m *v1Manager) Destroy() error {
	defer m.Close()
	return removeDirs(m.Paths())
}

func (m *v1Manager) Close() {
	release(m.held)
	m.held = nil
}
