package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Environment of the wrapper (childMain) that starts every validation
// program and cleanup command: where it moves itself before the exec.
const (
	childEnvProcs = "OCISUITE_CGROUP_PROCS" // cgroup.procs files, ':'-separated
	childEnvHide  = "OCISUITE_HIDE_UNIFIED" // "1": unmount the v2 hierarchy of a hybrid host first
)

const (
	cgroupRoot = "/sys/fs/cgroup"
	// unifiedDir is where systemd's hybrid layout mounts cgroup v2.
	unifiedDir = cgroupRoot + "/unified"
)

// rootTestCgroups are the cgroups the suite's programs make, or have a
// runtime make, at the root of a hierarchy: the absolute cgroupsPath
// "/cgrouptest" (runtime-tools' cgroups.AbsCgroupPath), and the first
// part of the relative one, "testdir/cgrouptest/container", which some
// runtimes resolve against the hierarchy's root rather than their caller's
// cgroup (crun on v1; runc for the v2 part of a hybrid host).
var rootTestCgroups = []string{"cgrouptest", "testdir"}

// cgroupJar is a cgroup of the harness's own at the root of each mounted
// hierarchy. Every validation program starts inside it, so whatever the
// runtime places relative to its caller's cgroup (the default when a
// config has no cgroupsPath, and the suite's relative paths) lands below it,
// never below the cgroup the harness itself was started in; and every
// process a program leaves behind is found in it.
type cgroupJar struct {
	dirs []string
}

// newCgroupJar makes the jar's cgroups, named after this process.
func newCgroupJar() (*cgroupJar, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	j := &cgroupJar{}
	name := fmt.Sprintf("jail-ocisuite-%d", os.Getpid())
	for _, m := range mounts {
		dir := filepath.Join(m, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			j.remove()
			return nil, fmt.Errorf("make the suite's cgroup: %w", err)
		}
		j.dirs = append(j.dirs, dir)
		// A v1 cpuset cgroup starts with no CPUs or memory nodes: a task
		// could not join it.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(m, f)); err == nil && !isV2(m) {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					j.remove()
					return nil, fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
				}
			}
		}
	}
	if len(j.dirs) == 0 {
		return nil, errors.New("no cgroup hierarchy mounted under " + cgroupRoot)
	}
	return j, nil
}

// procsFiles are the files a wrapper writes its pid to.
func (j *cgroupJar) procsFiles() string {
	files := make([]string, len(j.dirs))
	for i, d := range j.dirs {
		files[i] = filepath.Join(d, "cgroup.procs")
	}
	return strings.Join(files, ":")
}

// sweep kills every process left in the jar or in the suite's root test
// cgroups that were not there before the program ran (had), then removes
// every cgroup below the jar and those test cgroups. It returns what it
// found, for the results.
func (j *cgroupJar) sweep(had map[string]bool) []string {
	var found []string
	trees := append([]string(nil), j.dirs...)
	for _, d := range j.rootTestCgroups() {
		if !had[d] {
			trees = append(trees, d)
		}
	}
	// Kill until no task is left: a dying runtime may still fork.
	for round := 0; round < 50; round++ {
		pids := map[int]string{}
		for _, t := range trees {
			for _, pid := range tasksBelow(t) {
				pids[pid] = t
			}
		}
		if len(pids) == 0 {
			break
		}
		for pid, t := range pids {
			if round == 0 {
				found = append(found, fmt.Sprintf("process %d (%s) in %s", pid, comm(pid), t))
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// One line per cgroup path, with the hierarchies it was found in.
	hierarchies := map[string][]string{}
	var names []string
	for _, t := range trees {
		dirs := cgroupsBelow(t)
		sort.Slice(dirs, func(a, b int) bool { return len(dirs[a]) > len(dirs[b]) })
		for _, d := range dirs {
			if d == t && isJarDir(j.dirs, d) {
				continue
			}
			rel, _ := filepath.Rel(cgroupRoot, d)
			hierarchy, name, _ := strings.Cut(rel, "/")
			if isJarDir(j.dirs, filepath.Join(cgroupRoot, hierarchy, strings.Split(name, "/")[0])) {
				name = "<suite cgroup>/" + strings.SplitN(name, "/", 2)[1]
			} else {
				name = "/" + name
			}
			if hierarchies[name] == nil {
				names = append(names, name)
			}
			hierarchies[name] = append(hierarchies[name], hierarchy)
			if err := os.Remove(d); err != nil {
				found = append(found, fmt.Sprintf("cannot remove cgroup %s: %v", d, err))
			}
		}
	}
	for _, name := range names {
		found = append(found, fmt.Sprintf("cgroup %s (%s)", name, strings.Join(hierarchies[name], ",")))
	}
	return found
}

// rootTestCgroups lists the suite's root test cgroups that exist now.
func (j *cgroupJar) rootTestCgroups() []string {
	var dirs []string
	for _, d := range j.dirs {
		for _, name := range rootTestCgroups {
			p := filepath.Join(filepath.Dir(d), name)
			if _, err := os.Stat(p); err == nil {
				dirs = append(dirs, p)
			}
		}
	}
	return dirs
}

// existing says which of the suite's root test cgroups exist now, so that
// sweep leaves alone those it did not see made.
func (j *cgroupJar) existing() map[string]bool {
	had := map[string]bool{}
	for _, d := range j.rootTestCgroups() {
		had[d] = true
	}
	return had
}

// remove removes the jar's own cgroups (empty by then: sweep ran).
func (j *cgroupJar) remove() {
	for _, d := range j.dirs {
		if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
			fmt.Fprintf(os.Stderr, "ocisuite: remove %s: %v\n", d, err)
		}
	}
}

func isJarDir(dirs []string, d string) bool {
	for _, x := range dirs {
		if x == d {
			return true
		}
	}
	return false
}

// cgroupMounts lists the cgroup hierarchies mounted under /sys/fs/cgroup.
func cgroupMounts() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// mount ID, parent, dev, root, mount point, options, optional fields..., "-", fstype, ...
		for i := 6; i < len(fields)-1; i++ {
			if fields[i] == "-" {
				fstype := fields[i+1]
				mp := unescapeMountinfo(fields[4])
				if (fstype == "cgroup" || fstype == "cgroup2") && strings.HasPrefix(mp, cgroupRoot) {
					mounts = append(mounts, mp)
				}
				break
			}
		}
	}
	return mounts, sc.Err()
}

func isV2(mount string) bool {
	var st unix.Statfs_t
	return unix.Statfs(mount, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
}

// cgroupsBelow lists dir and every cgroup under it.
func cgroupsBelow(dir string) []string {
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	return dirs
}

// tasksBelow lists the processes in dir and its descendants.
func tasksBelow(dir string) []int {
	var pids []int
	for _, d := range cgroupsBelow(dir) {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// childMain is the wrapper: it moves itself into the jar, optionally hides
// the cgroup v2 hierarchy of a hybrid host in a mount namespace of its own
// (crun 1.8 refuses a hybrid layout whose v2 part holds a controller), and
// executes its arguments.
func childMain() {
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "ocisuite wrapper: %v\n", err)
		os.Exit(126)
	}
	for _, f := range strings.Split(os.Getenv(childEnvProcs), ":") {
		if err := os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			fail(fmt.Errorf("join %s: %w", f, err))
		}
	}
	if os.Getenv(childEnvHide) == "1" {
		// The mount namespace is the thread's: the exec below must come
		// from the same thread.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			fail(fmt.Errorf("unshare the mount namespace: %w", err))
		}
		// Slave, not private: the host's mounts still propagate in (the
		// propagation tests see the host's shared mounts as shared peers'
		// slaves either way), and nothing done here propagates out.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
			fail(fmt.Errorf("make / a slave mount: %w", err))
		}
		if err := unix.Unmount(unifiedDir, unix.MNT_DETACH); err != nil {
			fail(fmt.Errorf("unmount %s: %w", unifiedDir, err))
		}
	}
	os.Unsetenv(childEnvProcs)
	os.Unsetenv(childEnvHide)
	path := os.Args[1]
	if err := syscall.Exec(path, os.Args[1:], os.Environ()); err != nil {
		fail(fmt.Errorf("exec %s: %w", path, err))
	}
}
