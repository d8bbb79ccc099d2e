package oci

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/cgroups/cgroupfile"
	"github.com/jail-sandbox/jail/cgroups/janitor"
)

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// v1Hierarchies are the v1 hierarchies a container gets a directory in:
// those its resources, pause and ps use.
var v1Hierarchies = []string{"memory", "cpu", "cpuacct", "cpuset", "pids", "freezer", "devices", "hugetlb", "blkio", "net_cls", "net_prio"}

// Cgroup is a container's cgroup as its state records it.
type Cgroup struct {
	V2 bool `json:"v2,omitempty"`
	// Paths are its directories, one per hierarchy (v1) or one (v2).
	Paths []string `json:"paths"`
	// Made are the directories create made, deepest first: what delete
	// removes (those above the container's own only when empty).
	Made []string `json:"made,omitempty"`
	// Devices are the device rules in force (devicerules.Compact), from
	// which update makes v2's program again.
	Devices []specs.LinuxDeviceCgroup `json:"devices,omitempty"`
	// DeviceDefaults are the allow rules for the container's own devices
	// (deviceAllows), which update appends to its rules as create did.
	DeviceDefaults []specs.LinuxDeviceCgroup `json:"deviceDefaults,omitempty"`
}

// cgroupMounts are the hierarchy roots the container's directories go in
// (v1: one per mounted hierarchy of v1Hierarchies, the same hierarchy
// mounted under two names counted once), and whether it is v2.
func cgroupMounts() (roots []string, v2 bool, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(cgroupRoot, &st); err != nil {
		return nil, false, fmt.Errorf("%s: %w", cgroupRoot, err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return []string{cgroupRoot}, true, nil
	}
	var seen []os.FileInfo
	for _, h := range v1Hierarchies {
		dir := filepath.Join(cgroupRoot, h)
		var hs unix.Statfs_t
		if unix.Statfs(dir, &hs) != nil || hs.Type != unix.CGROUP_SUPER_MAGIC {
			continue
		}
		info, err := os.Stat(dir)
		if err != nil {
			continue
		}
		dup := false
		for _, s := range seen {
			dup = dup || os.SameFile(s, info)
		}
		if !dup {
			seen = append(seen, info)
			roots = append(roots, dir)
		}
	}
	if len(roots) == 0 {
		return nil, false, errors.New("no cgroup hierarchy is mounted")
	}
	return roots, false, nil
}

// NewCgroup makes the container's cgroup at path (CgroupPath) in every
// hierarchy and writes its resources. Its own directory must not exist
// (it would be someone else's); the directories above it are made when
// missing. On failure, what was made is removed.
func NewCgroup(path string, r *specs.LinuxResources) (*Cgroup, error) {
	roots, v2, err := cgroupMounts()
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	cg := &Cgroup{V2: v2}
	fail := func(err error) (*Cgroup, error) {
		cg.Remove()
		return nil, fmt.Errorf("cgroup %s: %w", path, err)
	}
	for _, root := range roots {
		dir, err := cg.makeIn(root, path, r)
		if err != nil {
			return fail(err)
		}
		cg.Paths = append(cg.Paths, dir)
	}
	if err := cg.apply(r); err != nil {
		return fail(err)
	}
	return cg, nil
}

// makeIn makes path under the hierarchy root, each missing directory in
// turn, recording the ones it made.
func (cg *Cgroup) makeIn(root, path string, r *specs.LinuxResources) (string, error) {
	dir := root
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, part := range parts {
		parent := dir
		dir = filepath.Join(dir, part)
		if cg.V2 {
			if err := enableV2Controllers(parent, neededV2Controllers(r)); err != nil {
				return "", err
			}
		}
		err := unix.Mkdir(dir, 0o755)
		last := i == len(parts)-1
		if errors.Is(err, unix.EEXIST) && !last {
			continue
		}
		if err != nil {
			if errors.Is(err, unix.EEXIST) {
				return "", fmt.Errorf("%s exists already", dir)
			}
			return "", fmt.Errorf("make %s: %w", dir, err)
		}
		cg.Made = append([]string{dir}, cg.Made...)
		if !cg.V2 && filepath.Base(root) == "cpuset" {
			// A v1 cpuset takes no task until it has cpus and mems.
			if err := inheritCpuset(parent, dir); err != nil {
				return "", err
			}
		}
	}
	return dir, nil
}

func inheritCpuset(parent, dir string) error {
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		b, err := cgroupfile.Read(filepath.Join(parent, f))
		if err != nil {
			return err
		}
		if err := cgroupfile.Write(filepath.Join(dir, f), strings.TrimSpace(string(b))); err != nil {
			return err
		}
	}
	return nil
}

// neededV2Controllers are the v2 controllers r's limits need, besides
// pids (for ps and kill --all nothing is needed).
func neededV2Controllers(r *specs.LinuxResources) []string {
	if r == nil {
		return nil
	}
	var out []string
	if r.Memory != nil {
		out = append(out, "memory")
	}
	if r.CPU != nil && (r.CPU.Shares != nil || r.CPU.Quota != nil || r.CPU.Period != nil) {
		out = append(out, "cpu")
	}
	if r.CPU != nil && (r.CPU.Cpus != "" || r.CPU.Mems != "") {
		out = append(out, "cpuset")
	}
	if r.Pids != nil {
		out = append(out, "pids")
	}
	if len(r.HugepageLimits) > 0 {
		out = append(out, "hugetlb")
	}
	if r.BlockIO != nil {
		out = append(out, "io")
	}
	return append(out, unifiedControllers(r.Unified)...)
}

// enableV2Controllers makes dir pass controllers down, those not passed
// already.
func enableV2Controllers(dir string, controllers []string) error {
	if len(controllers) == 0 {
		return nil
	}
	b, err := cgroupfile.Read(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	var missing []string
	for _, c := range controllers {
		if !hasField(string(b), c) {
			missing = append(missing, "+"+c)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := cgroupfile.Write(filepath.Join(dir, "cgroup.subtree_control"), strings.Join(missing, " ")); err != nil {
		return fmt.Errorf("enable %s in %s: %w", strings.Join(missing, " "), dir, err)
	}
	return nil
}

func hasField(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// dir is the container's directory in hierarchy h (v1), or its one
// directory (v2); "" when that hierarchy is not mounted.
func (cg *Cgroup) dir(h string) string {
	if cg.V2 {
		return cg.Paths[0]
	}
	for _, p := range cg.Paths {
		if strings.HasPrefix(p, filepath.Join(cgroupRoot, h)+"/") {
			return p
		}
	}
	// cpu and cpuacct are often one hierarchy mounted under both names.
	if h == "cpu" || h == "cpuacct" {
		for _, p := range cg.Paths {
			if strings.HasPrefix(p, cgroupRoot+"/cpu,cpuacct/") || strings.HasPrefix(p, cgroupRoot+"/cpuacct,cpu/") {
				return p
			}
		}
	}
	return ""
}

// Enter moves process pid into the cgroup, in every hierarchy.
func (cg *Cgroup) Enter(pid int) error {
	for _, p := range cg.Paths {
		if err := cgroupfile.Write(filepath.Join(p, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("cgroup: enter %d: %w", pid, err)
		}
	}
	return nil
}

// Pids lists the processes in the cgroup.
func (cg *Cgroup) Pids() ([]int, error) {
	if len(cg.Paths) == 0 {
		return nil, errors.New("cgroup: the container has none")
	}
	b, err := cgroupfile.Read(filepath.Join(cg.Paths[0], "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			pids = append(pids, n)
		}
	}
	return pids, nil
}

// Contains reports whether process pid is in the cgroup now (its
// /proc/PID/cgroup names the container's directory).
func (cg *Cgroup) Contains(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil || len(cg.Paths) == 0 {
		return false
	}
	want := cg.Paths[0]
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		hier := cgroupRoot
		if !cg.V2 {
			if parts[1] == "" {
				continue
			}
			hier = filepath.Join(cgroupRoot, parts[1])
		} else if parts[0] != "0" {
			continue
		}
		if filepath.Join(hier, parts[2]) == want {
			return true
		}
	}
	return false
}

// Frozen reports whether the cgroup is frozen (pause).
func (cg *Cgroup) Frozen() bool {
	if cg.V2 {
		b, err := cgroupfile.Read(filepath.Join(cg.Paths[0], "cgroup.freeze"))
		return err == nil && strings.TrimSpace(string(b)) == "1"
	}
	dir := cg.dir("freezer")
	if dir == "" {
		return false
	}
	b, err := cgroupfile.Read(filepath.Join(dir, "freezer.state"))
	return err == nil && strings.TrimSpace(string(b)) != "THAWED"
}

// Freeze freezes (pause) or thaws (resume) the cgroup, and returns once
// the kernel says it is done.
func (cg *Cgroup) Freeze(freeze bool) error {
	if len(cg.Paths) == 0 {
		return errors.New("cgroup: the container has none")
	}
	file, value, done := "cgroup.freeze", "0", "0"
	dir := cg.Paths[0]
	if freeze {
		value, done = "1", "1"
	}
	if !cg.V2 {
		if dir = cg.dir("freezer"); dir == "" {
			return errors.New("cgroup: no freezer hierarchy is mounted")
		}
		file, value, done = "freezer.state", "THAWED", "THAWED"
		if freeze {
			value, done = "FROZEN", "FROZEN"
		}
	}
	if err := cgroupfile.Write(filepath.Join(dir, file), value); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	// The kernel freezes task by task: FREEZING (v1), or frozen 0 in
	// cgroup.events (v2), until every one is.
	for i := 0; ; i++ {
		state, err := cg.freezeState(dir)
		if err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
		if state == done {
			return nil
		}
		if i == 1000 {
			return fmt.Errorf("cgroup: %s stays %s", dir, state)
		}
		if !cg.V2 && freeze && i%10 == 9 {
			// A v1 freeze can stall on a task in the kernel: ask again.
			_ = cgroupfile.Write(filepath.Join(dir, file), value)
		}
		time.Sleep(time.Millisecond)
	}
}

func (cg *Cgroup) freezeState(dir string) (string, error) {
	if !cg.V2 {
		b, err := cgroupfile.Read(filepath.Join(dir, "freezer.state"))
		return strings.TrimSpace(string(b)), err
	}
	b, err := cgroupfile.Read(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "frozen "); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", errors.New("cgroup.events has no frozen line")
}

// Remove kills what is left in the container's directories and removes
// them (janitor.Remove waits for them to empty), then the directories
// create made above them, when empty.
func (cg *Cgroup) Remove() error {
	if cg == nil {
		return nil
	}
	// Thawed first: a frozen task cannot die.
	if len(cg.Paths) > 0 && cg.Frozen() {
		_ = cg.Freeze(false)
	}
	var own, above []string
	for _, d := range cg.Made {
		if isOneOfPaths(d, cg.Paths) {
			own = append(own, d)
		} else {
			above = append(above, d)
		}
	}
	err := janitor.Remove(own)
	for _, d := range above {
		_ = unix.Rmdir(d) // still holding another container's: left
	}
	return err
}

func isOneOfPaths(p string, paths []string) bool {
	for _, q := range paths {
		if p == q {
			return true
		}
	}
	return false
}
