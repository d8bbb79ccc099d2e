// Package janitor removes a sandbox's cgroup directories, and is the small
// process that does so when the supervisor is gone, whichever way it went
// (SIGKILL included): it waits for a pipe from the supervisor to close, then
// kills whatever is left in the directories and removes them. One janitor
// serves one sandbox (Start), or all the sandboxes of a long-lived
// supervisor (StartWatch).
//
// A supervisor names a cgroup to its janitor before it makes it (Start's
// arguments, Watch.Add), and makes it only once the janitor runs, in a
// session of its own: whenever the supervisor dies (killed alone, or with
// its process group or session), what it made of the cgroup has a janitor.
//
// It is apart from package cgroups so that what runs Main links only what
// removing directories needs. jail's one-sandbox janitor is the C helper
// program (internal/programs, janitor/janitor.c), which Start runs as this
// package's Main would run, with the same arguments and rules (the tests
// run both); Main is the watching one, the running binary re-executed
// (jail.Init dispatches Arg). Invariants: it removes only
// directories that are children of one named Parent inside the cgroup
// mount; it signals only processes in such a directory (cgroup.kill, or a
// pidfd checked against the process's cgroup: never a pid read earlier that
// another process has taken since, nor a process of jail's own with a
// thread passing through; see killMembers).
//
// Every janitor, once its own work is done, also sweeps, at most once per
// SweepAge in each parent: it removes the sandbox cgroups beside its own
// that no supervisor holds (Hold) and that are older than SweepAge. Such a
// cgroup is left where a supervisor could start no janitor, or its janitor
// was killed itself. Sweeping only removes empty directories (rmdir); it
// never kills.
package janitor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/cgroups/cgroupfile"
	"github.com/jail-sandbox/jail/internal/spawn"
)

// Arg is argv[0] of a janitor process.
const Arg = "jail:cgroup-janitor"

// Parent is the project's cgroup, at the root of each hierarchy (or of the
// delegated v2 subtree).
const Parent = "jail"

const mountpoint = "/sys/fs/cgroup"

// Start starts a janitor for dirs from the program at path, which must
// dispatch Arg to Main. It waits, in a session of its own, until the
// returned file is closed (by the supervisor when it is done, or by the
// kernel when the supervisor dies), then removes whatever of dirs exists.
// It returns once the janitor runs (after its exec), out of the caller's
// process group and session: dirs may be made from then on. wait reaps it.
func Start(path string, dirs []string) (release *os.File, wait func(), err error) {
	w, pid, err := launch(path, dirs)
	if err != nil {
		return nil, nil, err
	}
	return w, func() { _, _ = spawn.Wait(pid) }, nil
}

// launch starts a janitor with args, in a session of its own, reading its
// stdin from the returned pipe, and returns its pid.
func launch(path string, args []string) (*os.File, int, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, 0, err
	}
	defer r.Close()
	pid, err := spawn.Start(path, append([]string{Arg}, args...), []string{}, []*os.File{r, nil, nil}, &syscall.SysProcAttr{Setsid: true})
	if err != nil {
		w.Close()
		return nil, 0, fmt.Errorf("start cgroup janitor: %w", err)
	}
	return w, pid, nil
}

// Main is the janitor process: it waits for stdin to close, then removes
// the directories named in args, refusing any that is not a sandbox cgroup.
func Main(args []string) {
	var dirs, seen []string
	if len(args) == 1 && args[0] == watchArg {
		dirs, seen = watch(os.Stdin)
	} else {
		_, _ = io.Copy(io.Discard, os.Stdin)
		for _, d := range args {
			if ours(d) {
				dirs = append(dirs, d)
			}
		}
		seen = dirs
	}
	err := Remove(dirs)
	var due []string
	for _, p := range parents(seen) {
		if sweepDue(p, time.Now()) {
			due = append(due, p)
		}
	}
	Sweep(due, time.Now())
	if err != nil {
		fmt.Fprintln(os.Stderr, "jail: cgroup janitor:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// SweepAge is how old an unheld sandbox cgroup must be before a janitor
// sweeps it: far longer than a supervisor takes from making a cgroup to
// holding it (Hold), which is under a millisecond.
const SweepAge = time.Minute

// Hold opens dir and takes a shared lock on it, which tells sweeping
// janitors that a supervisor still uses the cgroup, however long it has
// been empty (its counters are read after its last process is gone). The
// kernel drops the lock when the file is closed or its holder dies. The
// descriptor is opened read-only, so a v2 init can be cloned into it.
func Hold(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open cgroup %s: %w", dir, err)
	}
	if err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("lock cgroup %s: %w", dir, err)
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// sweepDue reports whether parent was last swept SweepAge or more before
// now, and if so marks it swept. The mark is the directory's access time,
// which cgroupfs never moves by itself. A sweep costs a few microseconds per
// sandbox beside it, so that many janitors ending at once do not each pay
// for the others' cgroups; two that find the parent due at once both sweep,
// which is harmless.
func sweepDue(parent string, now time.Time) bool {
	var st unix.Stat_t
	if unix.Lstat(parent, &st) != nil || now.Sub(time.Unix(st.Atim.Unix())) < SweepAge {
		return false
	}
	stamp := []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_OMIT}}
	return unix.UtimesNanoAt(unix.AT_FDCWD, parent, stamp, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// Sweep removes, in each of parents (directories named Parent), the
// sandbox cgroups that nobody holds and that were made more than SweepAge
// before now. A directory's time on cgroupfs is never earlier than its
// making, so the age is never overstated. It removes only what is empty,
// and reports nothing: it is a janitor's spare work.
func Sweep(parents []string, now time.Time) {
	for _, parent := range parents {
		entries, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range entries {
			dir := filepath.Join(parent, e.Name())
			if !e.IsDir() || !ours(dir) {
				continue
			}
			var st unix.Stat_t
			if unix.Lstat(dir, &st) != nil || now.Sub(time.Unix(st.Mtim.Unix())) < SweepAge {
				continue
			}
			fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil {
				_ = unix.Rmdir(dir)
			}
			unix.Close(fd)
		}
	}
}

// parents returns the distinct parents of dirs, sorted.
func parents(dirs []string) []string {
	set := map[string]bool{}
	for _, d := range dirs {
		set[filepath.Dir(d)] = true
	}
	return sorted(set)
}

// ours reports whether dir is a sandbox cgroup: a child of a directory
// named Parent inside the cgroup mount.
func ours(dir string) bool {
	clean := filepath.Clean(dir)
	return clean == dir && strings.HasPrefix(clean, mountpoint+"/") &&
		filepath.Base(filepath.Dir(clean)) == Parent && !strings.Contains(filepath.Base(clean), ".")
}

// Remove kills what remains in each cgroup directory and removes it,
// retrying while the kernel still counts exiting processes. The directory
// is usually empty by then, so removing comes first and the list of
// processes is read only when that fails: on v1 each read of cgroup.procs
// builds a pid list that a kernel worker later frees.
func Remove(dirs []string) error {
	var firstErr error
	for _, dir := range dirs {
		deadline := time.Now().Add(5 * time.Second)
		for {
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
			killProcs(dir)
			if unix.Rmdir(dir) == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return firstErr
}

// killProcs SIGKILLs every process in a cgroup directory, and never one
// outside it, nor the caller (on v1 a supervisor thread passes through a
// sandbox's cgroup to fork its init, which lists the supervisor there until
// it has left). Where the kernel has cgroup.kill (v2, Linux 5.14+), the
// kernel kills by its own list, forking processes included; nothing of a
// supervisor ever enters a v2 sandbox cgroup (its init is cloned into it).
// Elsewhere it goes by cgroup.procs, through killMembers.
func killProcs(dir string) {
	if cgroupfile.Write(filepath.Join(dir, "cgroup.kill"), "1") == nil {
		return
	}
	b, err := cgroupfile.Read(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	killMembers(dir, pids)
}

// killMembers SIGKILLs those of pids (read from dir's cgroup.procs a moment
// ago) that are still processes in the cgroup, never another process that
// has taken a pid since, nor one that only has a thread passing through
// (jail's own: a v1 supervisor or forker thread forking an init). Each pid
// is pinned by a pidfd first, then its process's cgroup read from
// /proc/PID/cgroup (its thread group leader's), then the signal goes
// through the pidfd. The read describes the pidfd's process whenever the
// signal reaches it: a live process has held its pid all along. (Only a
// writer of the host's cgroup files could move it out between the read and
// the signal.) Without pidfds (before Linux 5.3) nothing is signalled: the
// sandbox's processes end with its init, whose pid namespace takes them.
func killMembers(dir string, pids []int) {
	m, ok := memberTest(dir)
	if !ok {
		return
	}
	for _, pid := range pids {
		if pid <= 0 || pid == os.Getpid() {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if m.holds(pid) {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
		unix.Close(fd)
	}
}

// membership tells whether a process is in one cgroup, by the line of
// /proc/PID/cgroup of the cgroup's hierarchy: "0::PATH" on v2, on v1
// "ID:CONTROLLERS:PATH" where CONTROLLERS names the hierarchy.
type membership struct {
	// hierarchy is the v1 hierarchy's name under the mount point
	// ("memory", "cpu", or "cpu,cpuacct"), "" on v2.
	hierarchy string
	// path is the cgroup's path within its hierarchy, as
	// /proc/PID/cgroup shows it.
	path string
}

// memberTest is the membership test of dir, a sandbox cgroup (ours).
func memberTest(dir string) (membership, bool) {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return membership{}, false
	}
	rel := strings.TrimPrefix(dir, mountpoint)
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return membership{path: rel}, true
	}
	hierarchy, path, ok := strings.Cut(strings.TrimPrefix(rel, "/"), "/")
	if !ok || hierarchy == "" {
		return membership{}, false
	}
	return membership{hierarchy: hierarchy, path: "/" + path}, true
}

// holds reports whether the process pid is in the cgroup.
func (m membership) holds(pid int) bool {
	b, err := cgroupfile.Read("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		id, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		controllers, path, ok := strings.Cut(rest, ":")
		if !ok || path != m.path {
			continue
		}
		if m.hierarchy == "" {
			if id == "0" && controllers == "" {
				return true
			}
			continue
		}
		if controllers == m.hierarchy {
			return true
		}
		for _, c := range strings.Split(controllers, ",") {
			if c == m.hierarchy || c == "name="+m.hierarchy {
				return true
			}
		}
	}
	return false
}

// watchArg, after Arg, makes a janitor that watches many sandboxes (Watch).
const watchArg = "--watch"

// Watch is one janitor for the sandboxes of a long-lived supervisor (a
// jail.Pool, the server): the supervisor tells it each cgroup before making
// it and each it has removed itself; when the supervisor goes, the janitor
// removes those it still knows. It saves a process per sandbox.
type Watch struct {
	mu  sync.Mutex
	w   *os.File
	pid int
}

// StartWatch starts a watching janitor from the program at path.
func StartWatch(path string) (*Watch, error) {
	w, pid, err := launch(path, []string{watchArg})
	if err != nil {
		return nil, err
	}
	return &Watch{w: w, pid: pid}, nil
}

// Add tells the janitor about dirs, before they are made.
func (w *Watch) Add(dirs []string) error { return w.send('+', dirs) }

// Forget tells the janitor that dirs are gone.
func (w *Watch) Forget(dirs []string) error { return w.send('-', dirs) }

func (w *Watch) send(op byte, dirs []string) error {
	var b strings.Builder
	for _, d := range dirs {
		if strings.ContainsRune(d, '\n') {
			return fmt.Errorf("cgroup path %q holds a newline", d)
		}
		b.WriteByte(op)
		b.WriteString(d)
		b.WriteByte('\n')
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.w == nil {
		return errors.New("cgroup janitor closed")
	}
	_, err := w.w.WriteString(b.String())
	return err
}

// Close lets the janitor go: it removes what it was not told is gone, and
// exits. Close waits for it.
func (w *Watch) Close() error {
	w.mu.Lock()
	f := w.w
	w.w = nil
	w.mu.Unlock()
	if f == nil {
		return nil
	}
	f.Close()
	_, err := spawn.Wait(w.pid)
	return err
}

// watch is the watching janitor's loop: once its input ends, it returns the
// directories it was told about and not told are gone, and every one it was
// told about.
func watch(in io.Reader) (left, seen []string) {
	known := map[string]bool{}
	all := map[string]bool{}
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		line := lines.Text()
		if len(line) < 2 {
			continue
		}
		dir := line[1:]
		switch line[0] {
		case '+':
			if ours(dir) {
				known[dir] = true
				all[dir] = true
			}
		case '-':
			delete(known, dir)
		}
	}
	return sorted(known), sorted(all)
}

func sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for d := range set {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
