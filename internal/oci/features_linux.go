package oci

import (
	"sort"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/runtime-spec/specs-go/features"
)

// Features is what `jail oci features` prints: what this runtime reads
// and realises (runtime-spec features.md). version is jail's.
func Features(version string) features.Features {
	yes, no := true, false
	var mountOptions []string
	for o := range mountFlags() {
		mountOptions = append(mountOptions, o)
	}
	for o := range propagationFlags() {
		mountOptions = append(mountOptions, o)
	}
	sort.Strings(mountOptions)
	var caps []string
	table := capabilities()
	for c := range table {
		caps = append(caps, c)
	}
	sort.Slice(caps, func(i, j int) bool { return table[caps[i]] < table[caps[j]] })
	var actions, operators []string
	for a := range seccompActions() {
		actions = append(actions, string(a))
	}
	for op := range seccompOperators() {
		operators = append(operators, string(op))
	}
	sort.Strings(actions)
	sort.Strings(operators)
	return features.Features{
		OCIVersionMin: "1.0.0",
		OCIVersionMax: specs.Version,
		Hooks:         []string{"prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"},
		MountOptions:  mountOptions,
		Linux: &features.Linux{
			Namespaces:   []string{"cgroup", "ipc", "mount", "network", "pid", "user", "uts"},
			Capabilities: caps,
			Cgroup:       &features.Cgroup{V1: &yes, V2: &yes, Systemd: &no, SystemdUser: &no, Rdma: &no},
			Seccomp: &features.Seccomp{
				Enabled:   &yes,
				Actions:   actions,
				Operators: operators,
				Archs: []string{
					"SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM", "SCMP_ARCH_X32", "SCMP_ARCH_X86", "SCMP_ARCH_X86_64",
				},
			},
			Apparmor: &features.Apparmor{Enabled: &yes},
			Selinux:  &features.Selinux{Enabled: &no},
			IntelRdt: &features.IntelRdt{Enabled: &no},
			MountExtensions: &features.MountExtensions{
				IDMap: &features.IDMap{Enabled: &no},
			},
		},
		Annotations: map[string]string{
			"io.github.jail-sandbox.jail.version": version,
		},
	}
}
