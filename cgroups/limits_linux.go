package cgroups

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/jail-sandbox/jail/cgroups/cgroupfile"
)

// A sandbox's limits are a handful of control files, written here with
// plain system calls rather than through containerd/cgroups: linking that
// module (its protobuf statistics types, systemd's D-Bus client, cilium/ebpf
// for v2 device filters) cost every start of the jail binary 0.8 ms of
// package initialisation (`jail version` 2.8 ms against 2.0), an eighth of
// a cold `jail run`. What is written, and in which order, is what
// containerd/cgroups writes for the same runtime-spec resources: the tests
// make a cgroup each way and compare the files (TestLimitsMatchContainerd),
// on v1 here and on v2 in the VM.

// setting is one control file of a sandbox's cgroup and what goes in it.
type setting struct {
	dir, file, value string
}

// v1Settings are the limit files of the v1 cgroup at path (below each
// hierarchy's root), in containerd's order: the memory limit before the
// memory+swap limit, which may not be below it, and the CFS period before
// the quota. memory.memsw.limit_in_bytes equal to the memory limit allows
// no swap past it.
func v1Settings(path string, limits Limits) []setting {
	quota, period := cpuQuota(limits.CPUs)
	memory, cpu := v1Dir("memory", path), v1Dir("cpu", path)
	out := []setting{
		{memory, "memory.limit_in_bytes", strconv.FormatInt(limits.Memory, 10)},
		{memory, "memory.memsw.limit_in_bytes", strconv.FormatInt(limits.Memory, 10)},
		{cpu, "cpu.cfs_period_us", strconv.FormatUint(period, 10)},
		{cpu, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)},
	}
	if limits.Pids > 0 {
		out = append(out, setting{v1Dir("pids", path), "pids.max", strconv.FormatInt(limits.Pids, 10)})
	}
	return out
}

// v2Settings are the limit files of the v2 cgroup dir, in containerd's
// order. memory.swap.max 0: no swap at all.
func v2Settings(dir string, limits Limits) []setting {
	quota, period := cpuQuota(limits.CPUs)
	out := []setting{
		{dir, "cpu.max", strconv.FormatInt(quota, 10) + " " + strconv.FormatUint(period, 10)},
		{dir, "memory.swap.max", "0"},
		{dir, "memory.max", strconv.FormatInt(limits.Memory, 10)},
	}
	if limits.Pids > 0 {
		out = append(out, setting{dir, "pids.max", strconv.FormatInt(limits.Pids, 10)})
	}
	return out
}

// apply writes each setting in turn.
func apply(settings []setting) error {
	for _, s := range settings {
		if err := cgroupfile.Write(filepath.Join(s.dir, s.file), s.value); err != nil {
			return fmt.Errorf("set %s: %w", s.file, err)
		}
	}
	return nil
}
