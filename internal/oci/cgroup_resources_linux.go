package oci

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/jail-sandbox/jail/cgroups/cgroupfile"
	"github.com/jail-sandbox/jail/internal/oci/devicerules"
)

// cgroupWrite is one control file and what goes in it.
type cgroupWrite struct {
	dir, file, value string
}

// apply writes r's limits (validateResources allowed them).
func (cg *Cgroup) apply(r *specs.LinuxResources) error {
	if r == nil {
		return nil
	}
	var writes []cgroupWrite
	var err error
	if cg.V2 {
		writes, err = cg.v2Writes(r)
	} else {
		writes, err = cg.v1Writes(r)
	}
	if err != nil {
		return err
	}
	if len(r.Devices) > 0 {
		// The rules in force: v1's kernel adds r's to its list, v2's
		// program is made again from the whole.
		rules, err := devicerules.Compact(append(append([]specs.LinuxDeviceCgroup(nil), cg.Devices...), r.Devices...))
		if err != nil {
			return fmt.Errorf("linux.resources.devices: %w", err)
		}
		if cg.V2 {
			if err := setDeviceProgram(cg.Paths[0], rules); err != nil {
				return fmt.Errorf("linux.resources.devices: %w", err)
			}
		}
		cg.Devices = rules
	}
	for _, w := range writes {
		if err := cgroupfile.Write(filepath.Join(w.dir, w.file), w.value); err != nil {
			return fmt.Errorf("set %s: %w", w.file, err)
		}
	}
	return nil
}

// need returns the directory of hierarchy h, or an error naming what
// needs it.
func (cg *Cgroup) need(h, what string) (string, error) {
	if d := cg.dir(h); d != "" {
		return d, nil
	}
	return "", fmt.Errorf("%s needs the %s cgroup controller, which this host has not mounted", what, h)
}

func limitValue(v int64, unlimited string) string {
	if v == -1 {
		return unlimited
	}
	return strconv.FormatInt(v, 10)
}

// v1Writes are r's files on v1, in runc's order: the memory limit before
// memory+swap (which may not be below it), the CFS period before the
// quota.
func (cg *Cgroup) v1Writes(r *specs.LinuxResources) ([]cgroupWrite, error) {
	var out []cgroupWrite
	if m := r.Memory; m != nil {
		dir, err := cg.need("memory", "linux.resources.memory")
		if err != nil {
			return nil, err
		}
		if m.Limit != nil && *m.Limit != 0 {
			out = append(out, cgroupWrite{dir, "memory.limit_in_bytes", limitValue(*m.Limit, "-1")})
		}
		if m.Swap != nil && *m.Swap != 0 {
			if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err != nil {
				return nil, errors.New("linux.resources.memory.swap: this kernel does not account swap (memory.memsw)")
			}
			out = append(out, cgroupWrite{dir, "memory.memsw.limit_in_bytes", limitValue(*m.Swap, "-1")})
		}
		if m.Reservation != nil && *m.Reservation != 0 {
			out = append(out, cgroupWrite{dir, "memory.soft_limit_in_bytes", limitValue(*m.Reservation, "-1")})
		}
		if m.KernelTCP != nil && *m.KernelTCP != 0 {
			out = append(out, cgroupWrite{dir, "memory.kmem.tcp.limit_in_bytes", limitValue(*m.KernelTCP, "-1")})
		}
		if m.Swappiness != nil {
			out = append(out, cgroupWrite{dir, "memory.swappiness", strconv.FormatUint(*m.Swappiness, 10)})
		}
		if m.DisableOOMKiller != nil && *m.DisableOOMKiller {
			out = append(out, cgroupWrite{dir, "memory.oom_control", "1"})
		}
		if m.UseHierarchy != nil && *m.UseHierarchy {
			out = append(out, cgroupWrite{dir, "memory.use_hierarchy", "1"})
		}
	}
	if c := r.CPU; c != nil {
		if c.Shares != nil || c.Period != nil || c.Quota != nil {
			dir, err := cg.need("cpu", "linux.resources.cpu")
			if err != nil {
				return nil, err
			}
			if c.Shares != nil && *c.Shares != 0 {
				out = append(out, cgroupWrite{dir, "cpu.shares", strconv.FormatUint(*c.Shares, 10)})
			}
			if c.Period != nil && *c.Period != 0 {
				out = append(out, cgroupWrite{dir, "cpu.cfs_period_us", strconv.FormatUint(*c.Period, 10)})
			}
			if c.Quota != nil && *c.Quota != 0 {
				out = append(out, cgroupWrite{dir, "cpu.cfs_quota_us", strconv.FormatInt(*c.Quota, 10)})
			}
		}
		if c.Cpus != "" || c.Mems != "" {
			dir, err := cg.need("cpuset", "linux.resources.cpu.cpus and mems")
			if err != nil {
				return nil, err
			}
			if c.Cpus != "" {
				out = append(out, cgroupWrite{dir, "cpuset.cpus", c.Cpus})
			}
			if c.Mems != "" {
				out = append(out, cgroupWrite{dir, "cpuset.mems", c.Mems})
			}
		}
	}
	if p := r.Pids; p != nil && p.Limit != nil && *p.Limit != 0 {
		dir, err := cg.need("pids", "linux.resources.pids")
		if err != nil {
			return nil, err
		}
		out = append(out, cgroupWrite{dir, "pids.max", pidsValue(*p.Limit)})
	}
	if len(r.HugepageLimits) > 0 {
		dir, err := cg.need("hugetlb", "linux.resources.hugepageLimits")
		if err != nil {
			return nil, err
		}
		for _, h := range r.HugepageLimits {
			out = append(out, cgroupWrite{dir, "hugetlb." + h.Pagesize + ".limit_in_bytes", strconv.FormatUint(h.Limit, 10)})
		}
	}
	if r.BlockIO != nil {
		dir, err := cg.need("blkio", "linux.resources.blockIO")
		if err != nil {
			return nil, err
		}
		w, err := blockIOWritesV1(dir, r.BlockIO)
		if err != nil {
			return nil, err
		}
		out = append(out, w...)
	}
	if n := r.Network; n != nil {
		if n.ClassID != nil {
			dir, err := cg.need("net_cls", "linux.resources.network.classID")
			if err != nil {
				return nil, err
			}
			out = append(out, cgroupWrite{dir, "net_cls.classid", strconv.FormatUint(uint64(*n.ClassID), 10)})
		}
		if len(n.Priorities) > 0 {
			dir, err := cg.need("net_prio", "linux.resources.network.priorities")
			if err != nil {
				return nil, err
			}
			for _, p := range n.Priorities {
				out = append(out, cgroupWrite{dir, "net_prio.ifpriomap", fmt.Sprintf("%s %d", p.Name, p.Priority)})
			}
		}
	}
	if len(r.Unified) > 0 {
		return nil, errors.New("linux.resources.unified: this host's cgroups are v1")
	}
	if len(r.Devices) > 0 {
		dir, err := cg.need("devices", "linux.resources.devices")
		if err != nil {
			return nil, err
		}
		for _, d := range r.Devices {
			file := "devices.deny"
			if d.Allow {
				file = "devices.allow"
			}
			for _, line := range deviceRuleLines(d) {
				out = append(out, cgroupWrite{dir, file, line})
			}
		}
	}
	return out, nil
}

// pidsValue: -1 (or any negative) is no limit.
func pidsValue(n int64) string {
	if n < 0 {
		return "max"
	}
	return strconv.FormatInt(n, 10)
}

// deviceRuleLines are the v1 devices.allow/deny lines of a rule: "TYPE
// MAJOR:MINOR ACCESS", "a" alone for every device and access. The kernel
// reads any line that starts with "a" as that, whatever follows, so a rule
// of type a for some devices or accesses is written as one line for
// character devices and one for block devices: "allow read of every
// device" must not allow everything (nor v1 differ from v2's program).
func deviceRuleLines(d specs.LinuxDeviceCgroup) []string {
	access := d.Access
	if access == "" {
		access = "rwm"
	}
	wild := func(p *int64) bool { return p == nil || *p == -1 }
	if (d.Type == "" || d.Type == "a") && wild(d.Major) && wild(d.Minor) && access == "rwm" {
		return []string{"a"}
	}
	num := func(p *int64) string {
		if wild(p) {
			return "*"
		}
		return strconv.FormatInt(*p, 10)
	}
	types := []string{d.Type}
	if d.Type == "" || d.Type == "a" {
		types = []string{"c", "b"}
	}
	var out []string
	for _, t := range types {
		out = append(out, fmt.Sprintf("%s %s:%s %s", t, num(d.Major), num(d.Minor), access))
	}
	return out
}

// v2Writes are r's files on v2, converted as runc converts them: swap is
// memory+swap in the spec and swap alone in memory.swap.max, shares become
// a weight. Device rules are no file there (setDeviceProgram).
func (cg *Cgroup) v2Writes(r *specs.LinuxResources) ([]cgroupWrite, error) {
	dir := cg.Paths[0]
	var out []cgroupWrite
	if n := r.Network; n != nil && (n.ClassID != nil || len(n.Priorities) > 0) {
		return nil, errors.New("linux.resources.network: cgroup v2 has no net_cls or net_prio")
	}
	if m := r.Memory; m != nil {
		if err := v2MemoryRefusals(m); err != nil {
			return nil, err
		}
		if m.Swap != nil && *m.Swap != 0 {
			swap := "max"
			if *m.Swap > 0 {
				swap = strconv.FormatInt(*m.Swap-*m.Limit, 10)
			}
			out = append(out, cgroupWrite{dir, "memory.swap.max", swap})
		}
		if m.Limit != nil && *m.Limit != 0 {
			out = append(out, cgroupWrite{dir, "memory.max", limitValue(*m.Limit, "max")})
		}
		if m.Reservation != nil && *m.Reservation != 0 {
			out = append(out, cgroupWrite{dir, "memory.low", limitValue(*m.Reservation, "max")})
		}
	}
	if c := r.CPU; c != nil {
		if c.Shares != nil && *c.Shares != 0 {
			out = append(out, cgroupWrite{dir, "cpu.weight", strconv.FormatUint(sharesToWeight(*c.Shares), 10)})
		}
		if c.Quota != nil && *c.Quota != 0 || c.Period != nil && *c.Period != 0 {
			quota, period := "max", uint64(100000)
			if c.Quota != nil && *c.Quota > 0 {
				quota = strconv.FormatInt(*c.Quota, 10)
			}
			if c.Period != nil && *c.Period != 0 {
				period = *c.Period
			}
			out = append(out, cgroupWrite{dir, "cpu.max", quota + " " + strconv.FormatUint(period, 10)})
		}
		if c.Cpus != "" {
			out = append(out, cgroupWrite{dir, "cpuset.cpus", c.Cpus})
		}
		if c.Mems != "" {
			out = append(out, cgroupWrite{dir, "cpuset.mems", c.Mems})
		}
	}
	if p := r.Pids; p != nil && p.Limit != nil && *p.Limit != 0 {
		out = append(out, cgroupWrite{dir, "pids.max", pidsValue(*p.Limit)})
	}
	for _, h := range r.HugepageLimits {
		out = append(out, cgroupWrite{dir, "hugetlb." + h.Pagesize + ".max", strconv.FormatUint(h.Limit, 10)})
	}
	if r.BlockIO != nil {
		w, err := blockIOWritesV2(dir, r.BlockIO)
		if err != nil {
			return nil, err
		}
		out = append(out, w...)
	}
	// The unified files last: they are the bundle's word over the fields.
	w, err := unifiedWrites(dir, r.Unified)
	if err != nil {
		return nil, err
	}
	return append(out, w...), nil
}

// sharesToWeight is runc's conversion of cpu.shares (2..262144) to
// cpu.weight (1..10000).
func sharesToWeight(shares uint64) uint64 {
	if shares == 0 {
		return 0
	}
	if shares < 2 {
		shares = 2
	}
	if shares > 262144 {
		shares = 262144
	}
	return 1 + ((shares-2)*9999)/262142
}

// Update writes new resources into an existing cgroup (jail oci update).
// Device rules are added after those in force (as v1's kernel adds them),
// then the container's own devices allowed again; the caller saves cg,
// whose Devices changed.
func (cg *Cgroup) Update(r *specs.LinuxResources) error {
	if err := validateResources(r); err != nil {
		return err
	}
	if len(cg.Paths) == 0 {
		return errors.New("oci: the container has no cgroup")
	}
	if len(r.Devices) > 0 && len(cg.DeviceDefaults) > 0 {
		// The container's own devices stay allowed, as after create: an
		// update's rules are its bundle's again (containerd's: deny all,
		// then exceptions), which would deny them.
		withDefaults := *r
		withDefaults.Devices = append(append([]specs.LinuxDeviceCgroup(nil), r.Devices...), cg.DeviceDefaults...)
		r = &withDefaults
	}
	if err := cg.apply(r); err != nil {
		return fmt.Errorf("oci: cgroup: %w", err)
	}
	return nil
}

// v2MemoryRefusals names the v1 memory settings that cgroup v2 has no file
// for (useHierarchy is always so on v2; kernel is ignored everywhere).
func v2MemoryRefusals(m *specs.LinuxMemory) error {
	for name, set := range map[string]bool{
		"kernelTCP":        m.KernelTCP != nil && *m.KernelTCP != 0,
		"swappiness":       m.Swappiness != nil,
		"disableOOMKiller": m.DisableOOMKiller != nil && *m.DisableOOMKiller,
	} {
		if set {
			return fmt.Errorf("linux.resources.memory.%s: cgroup v2 has no such setting", name)
		}
	}
	return nil
}
