package oci

import (
	"errors"
	"fmt"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/jail-sandbox/jail/internal/oci/devicerules"
)

// validateResources allows the limits jail writes (cgroup_linux.go):
// memory (limit, reservation, swap; on v1 also kernelTCP, swappiness,
// disableOOMKiller, useHierarchy; kernel is ignored with a warning, as
// the spec allows), cpu (shares, quota, period, cpus, mems), pids,
// hugepage limits and device rules (a v2 cgroup gets them as an eBPF
// program: cgroup_devices_linux.go); anything else set
// is refused rather than left unapplied.
func validateResources(r *specs.LinuxResources) error {
	if r == nil {
		return nil
	}
	if m := r.Memory; m != nil {
		if m.Swappiness != nil && *m.Swappiness > 100 {
			return fmt.Errorf("oci: linux.resources.memory.swappiness %d is above 100", *m.Swappiness)
		}
		for name, v := range map[string]*int64{"limit": m.Limit, "reservation": m.Reservation, "swap": m.Swap, "kernelTCP": m.KernelTCP} {
			if v != nil && *v < -1 {
				return fmt.Errorf("oci: linux.resources.memory.%s %d is neither a size nor -1", name, *v)
			}
		}
		if m.Swap != nil && *m.Swap > 0 {
			// swap is memory and swap together, as runc reads it.
			if m.Limit == nil || *m.Limit <= 0 {
				return errors.New("oci: linux.resources.memory.swap needs memory.limit")
			}
			if *m.Swap < *m.Limit {
				return fmt.Errorf("oci: linux.resources.memory.swap %d is below memory.limit %d (it counts both)", *m.Swap, *m.Limit)
			}
		}
	}
	if c := r.CPU; c != nil {
		for name, set := range map[string]bool{
			"burst": c.Burst != nil, "realtimeRuntime": c.RealtimeRuntime != nil,
			"realtimePeriod": c.RealtimePeriod != nil, "idle": c.Idle != nil,
		} {
			if set {
				return fmt.Errorf("oci: linux.resources.cpu.%s is not supported", name)
			}
		}
		if c.Quota != nil && *c.Quota < -1 {
			return fmt.Errorf("oci: linux.resources.cpu.quota %d is neither a duration nor -1", *c.Quota)
		}
		for name, v := range map[string]string{"cpus": c.Cpus, "mems": c.Mems} {
			if !wellFormedCPUList(v) {
				return fmt.Errorf("oci: linux.resources.cpu.%s %q is not a list of ranges", name, v)
			}
		}
	}
	if p := r.Pids; p != nil && p.Limit != nil && *p.Limit < -1 {
		return fmt.Errorf("oci: linux.resources.pids.limit %d is neither a count nor -1", *p.Limit)
	}
	for i, h := range r.HugepageLimits {
		if !wellFormedPageSize(h.Pagesize) {
			return fmt.Errorf("oci: linux.resources.hugepageLimits[%d]: %q is not a page size", i, h.Pagesize)
		}
	}
	if len(r.Devices) > devicerules.MaxRules {
		return fmt.Errorf("oci: linux.resources.devices: %d rules (at most %d)", len(r.Devices), devicerules.MaxRules)
	}
	for i, d := range r.Devices {
		if err := devicerules.Validate(d); err != nil {
			return fmt.Errorf("oci: linux.resources.devices[%d]: %v", i, err)
		}
	}
	if err := validateBlockIO(r.BlockIO); err != nil {
		return err
	}
	if err := validateUnified(r.Unified); err != nil {
		return err
	}
	if n := r.Network; n != nil {
		for i, p := range n.Priorities {
			if p.Name == "" || len(p.Name) >= 16 || strings.ContainsAny(p.Name, " /\n\x00") {
				return fmt.Errorf("oci: linux.resources.network.priorities[%d]: %q is not an interface name", i, p.Name)
			}
		}
	}
	for name, set := range map[string]bool{
		"rdma": len(r.Rdma) > 0,
	} {
		if set {
			return fmt.Errorf("oci: linux.resources.%s is not supported yet", name)
		}
	}
	return nil
}

// wellFormedCPUList: "" or ranges like 0-3,5 (cpuset's list format).
func wellFormedCPUList(s string) bool {
	if s == "" {
		return true
	}
	if len(s) > 4096 {
		return false
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !digits(lo) || isRange && !digits(hi) {
			return false
		}
	}
	return true
}

func digits(s string) bool {
	if s == "" || len(s) > 10 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// wellFormedPageSize: a number and a unit, as the hugetlb files name them
// (2MB, 1GB, 64KB).
func wellFormedPageSize(s string) bool {
	for _, unit := range []string{"KB", "MB", "GB"} {
		if n, ok := strings.CutSuffix(s, unit); ok {
			return digits(n)
		}
	}
	return false
}

// seccompActions returns the actions jail compiles (SCMP_ACT_NOTIFY needs a
// listener jail does not have).
func seccompActions() map[specs.LinuxSeccompAction]bool {
	return map[specs.LinuxSeccompAction]bool{
		specs.ActKill: true, specs.ActKillProcess: true, specs.ActKillThread: true, specs.ActTrap: true,
		specs.ActErrno: true, specs.ActTrace: true, specs.ActAllow: true, specs.ActLog: true,
	}
}

func seccompOperators() map[specs.LinuxSeccompOperator]bool {
	return map[specs.LinuxSeccompOperator]bool{
		specs.OpNotEqual: true, specs.OpLessThan: true, specs.OpLessEqual: true, specs.OpEqualTo: true,
		specs.OpGreaterEqual: true, specs.OpGreaterThan: true, specs.OpMaskedEqual: true,
	}
}

func validateSeccomp(s *specs.LinuxSeccomp) error {
	if s == nil {
		return nil
	}
	if s.DefaultAction == specs.ActNotify || s.ListenerPath != "" || s.ListenerMetadata != "" {
		return errors.New("oci: linux.seccomp: notifications (SCMP_ACT_NOTIFY, listenerPath) are not supported")
	}
	if !seccompActions()[s.DefaultAction] {
		return fmt.Errorf("oci: linux.seccomp.defaultAction %q is not an action", s.DefaultAction)
	}
	if len(s.Flags) > 0 {
		return fmt.Errorf("oci: linux.seccomp.flags (%s) are not supported yet", s.Flags[0])
	}
	for i, a := range s.Architectures {
		if !strings.HasPrefix(string(a), "SCMP_ARCH_") {
			return fmt.Errorf("oci: linux.seccomp.architectures[%d]: %q is not an architecture", i, a)
		}
	}
	for i, sc := range s.Syscalls {
		if len(sc.Names) == 0 {
			return fmt.Errorf("oci: linux.seccomp.syscalls[%d]: no names", i)
		}
		for _, n := range sc.Names {
			if n == "" || hasNUL(n) {
				return fmt.Errorf("oci: linux.seccomp.syscalls[%d]: an empty name", i)
			}
		}
		if sc.Action == specs.ActNotify {
			return errors.New("oci: linux.seccomp: notifications (SCMP_ACT_NOTIFY, listenerPath) are not supported")
		}
		if !seccompActions()[sc.Action] {
			return fmt.Errorf("oci: linux.seccomp.syscalls[%d].action %q is not an action", i, sc.Action)
		}
		for _, a := range sc.Args {
			if a.Index > 5 {
				return fmt.Errorf("oci: linux.seccomp.syscalls[%d]: argument index %d (0 to 5)", i, a.Index)
			}
			if !seccompOperators()[a.Op] {
				return fmt.Errorf("oci: linux.seccomp.syscalls[%d]: %q is not an operator", i, a.Op)
			}
		}
	}
	return nil
}
