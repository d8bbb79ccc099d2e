package profiles

import (
	"fmt"
	"strings"
)

// A profile's `capabilities:` says which capabilities sandbox root keeps
// in the sandbox's own user namespace. Only those whose reach the kernel
// confines to that namespace and to files whose owners are mapped into it
// may be named (Grantable); the others (DAC_READ_SEARCH, SYS_ADMIN,
// NET_ADMIN, NET_RAW, SYS_PTRACE, SYS_MODULE, SYS_RAWIO, BPF, PERFMON,
// SETFCAP, MKNOD, ...) are refused wherever a profile names them.
//
// In the profile: absent, the profile keeps its parent's set (and a
// profile that extends nothing keeps none); `capabilities: []` keeps
// none; a list keeps exactly those. The built-in default names all of
// Grantable; strict names none.

// capability is a capability's name (without CAP_) and number.
type capability struct {
	name   string
	number int
}

// grantable are the capabilities a profile may give, in the order
// CapabilitySet lists them.
var grantable = [...]capability{
	{"CHOWN", 0}, {"DAC_OVERRIDE", 1}, {"FOWNER", 3}, {"FSETID", 4},
	{"KILL", 5}, {"SETGID", 6}, {"SETUID", 7},
}

// knownCapabilities are the kernel's capability names by number
// (linux/capability.h), for telling a refused capability from a misspelt
// one.
var knownCapabilities = [...]string{
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL",
	"SETGID", "SETUID", "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE",
	"NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
	"SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
	"SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME",
	"SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL",
	"SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM",
	"BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
}

// Grantable lists the capabilities a profile may keep: CHOWN,
// DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID.
func Grantable() []string {
	out := make([]string, len(grantable))
	for i, c := range grantable {
		out[i] = c.name
	}
	return out
}

// CapabilityNumber returns the number of a grantable capability (named
// with or without CAP_), and false for any other name.
func CapabilityNumber(name string) (int, bool) {
	name = strings.TrimPrefix(name, "CAP_")
	for _, c := range grantable {
		if c.name == name {
			return c.number, true
		}
	}
	return 0, false
}

// CheckCapability returns the canonical name (without CAP_) of a
// capability a profile names, or why it cannot be given.
func CheckCapability(name string) (string, error) {
	bare := strings.TrimPrefix(name, "CAP_")
	if _, ok := CapabilityNumber(bare); ok {
		return bare, nil
	}
	for _, known := range knownCapabilities {
		if known == bare {
			return "", fmt.Errorf("capability %s is never given to a sandbox: its reach is not confined to the sandbox (a profile may keep %s)", bare, strings.Join(Grantable(), ", "))
		}
	}
	return "", fmt.Errorf("unknown capability %q (a profile may keep %s)", name, strings.Join(Grantable(), ", "))
}

// CapabilitySet is what sandbox root keeps under the profile as resolved:
// the names of its capabilities (without CAP_) in the order of Grantable,
// each once. A profile that does not say (nil) keeps none. Names that are
// not grantable are left out whatever the profile holds: a profile read
// from elsewhere than a profile file (a cache, the tools program) cannot
// widen the set.
func (p *Profile) CapabilitySet() []string {
	if p == nil || p.Capabilities == nil {
		return nil
	}
	keep := map[string]bool{}
	for _, name := range *p.Capabilities {
		keep[strings.TrimPrefix(name, "CAP_")] = true
	}
	var out []string
	for _, c := range grantable {
		if keep[c.name] {
			out = append(out, c.name)
		}
	}
	return out
}

// CapabilityNumbers is CapabilitySet as capability numbers.
func (p *Profile) CapabilityNumbers() []int {
	var out []int
	for _, name := range p.CapabilitySet() {
		n, _ := CapabilityNumber(name)
		out = append(out, n)
	}
	return out
}
