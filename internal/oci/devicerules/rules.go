// Package devicerules reads a bundle's device cgroup rules
// (linux.resources.devices) for both ways jail applies them: the v1
// devices controller's files, written by package oci, and cgroup v2's
// BPF_PROG_TYPE_CGROUP_DEVICE program, built and attached by package
// internal/oci/devices in jail's tools program. It checks rules, drops
// what a later rule for every device decides, and puts them in the
// program's terms. It imports no eBPF library: package oci, linked into
// the jail binary that every `jail run` starts, uses it.
//
// The rules mean what they mean to the v1 devices controller, which runc
// emulates on v2: read in order, the last one that matches a device and an
// access decides it, and a device no rule matches is allowed (a new v1
// cgroup allows every device). A rule for every device (type a, no major,
// no minor, access rwm) decides everything before it, so it becomes the
// program's default and the rules before it are dropped: the usual list,
// "deny all" then exceptions, is a default-deny program with exceptions.
// Unlike v1, which reads any rule whose type is a as "every device, every
// access", a rule of type a with a major, a minor or part of rwm means
// what the runtime spec says: that access to those devices of both types
// (devices.allow would grant everything for an "allow read of all").
package devicerules

import (
	"errors"
	"fmt"
	"math"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// MaxRules bounds a bundle's (or an update's) device rules: each is up to
// 16 instructions and three branches the verifier walks (Linux 6.18
// refused a program of 2800), and real lists have tens.
const MaxRules = 1024

// The access_type word of struct bpf_cgroup_dev_ctx: the device's type in
// the low 16 bits, the access asked in the high ones (linux/bpf.h).
const (
	DevBlock = 1 // BPF_DEVCG_DEV_BLOCK
	DevChar  = 2 // BPF_DEVCG_DEV_CHAR

	AccMknod = 1 // BPF_DEVCG_ACC_MKNOD
	AccRead  = 2 // BPF_DEVCG_ACC_READ
	AccWrite = 4 // BPF_DEVCG_ACC_WRITE
	AccAll   = AccMknod | AccRead | AccWrite
)

// Validate checks one device cgroup rule: type a, c or b (or none: all),
// access a subset of rwm, major and minor -1 (any) or a u32.
func Validate(d specs.LinuxDeviceCgroup) error {
	switch d.Type {
	case "", "a", "c", "b":
	default:
		return fmt.Errorf("unknown type %q", d.Type)
	}
	for _, r := range d.Access {
		if !strings.ContainsRune("rwm", r) {
			return fmt.Errorf("access %q is not made of r, w and m", d.Access)
		}
	}
	if d.Major != nil && *d.Major < -1 || d.Minor != nil && *d.Minor < -1 {
		return errors.New("negative major or minor")
	}
	if d.Major != nil && *d.Major > math.MaxUint32 || d.Minor != nil && *d.Minor > math.MaxUint32 {
		return errors.New("major or minor above 2^32-1")
	}
	return nil
}

// Check validates a whole list: at most MaxRules, each valid.
func Check(rules []specs.LinuxDeviceCgroup) error {
	if len(rules) > MaxRules {
		return fmt.Errorf("%d device rules (at most %d)", len(rules), MaxRules)
	}
	for i, r := range rules {
		if err := Validate(r); err != nil {
			return fmt.Errorf("device rule %d: %w", i, err)
		}
	}
	return nil
}

// Compact drops the rules before the last one for every device, which
// decides everything they did.
func Compact(rules []specs.LinuxDeviceCgroup) ([]specs.LinuxDeviceCgroup, error) {
	from := 0
	for i, r := range rules {
		if err := Validate(r); err != nil {
			return nil, fmt.Errorf("device rule %d: %w", i, err)
		}
		if IsForEveryDevice(r) {
			from = i
		}
	}
	return rules[from:], nil
}

// IsForEveryDevice tells whether r decides every access to every device
// (type a or none, no major, no minor, access rwm or none).
func IsForEveryDevice(r specs.LinuxDeviceCgroup) bool {
	wild := func(p *int64) bool { return p == nil || *p == -1 }
	return (r.Type == "" || r.Type == "a") && wild(r.Major) && wild(r.Minor) && (r.Access == "" || AccessMask(r.Access) == AccAll)
}

// AccessMask is access (a subset of rwm) as a mask of Acc*.
func AccessMask(access string) int32 {
	var m int32
	for _, a := range access {
		switch a {
		case 'm':
			m |= AccMknod
		case 'r':
			m |= AccRead
		case 'w':
			m |= AccWrite
		}
	}
	return m
}

// Match is one rule as the program tests it: Type 0 for both types, Major
// and Minor -1 for any, Access a mask of Acc*.
type Match struct {
	Allow        bool
	Type         int32
	Major, Minor int64
	Access       int32
}

// Matches reads rules into the program's terms: defaultAllow, and the
// rules after the last one for every device, in order.
func Matches(rules []specs.LinuxDeviceCgroup) (defaultAllow bool, out []Match, err error) {
	defaultAllow = true
	for i, r := range rules {
		if err := Validate(r); err != nil {
			return false, nil, fmt.Errorf("device rule %d: %w", i, err)
		}
		m := Match{Allow: r.Allow, Major: -1, Minor: -1}
		switch r.Type {
		case "c":
			m.Type = DevChar
		case "b":
			m.Type = DevBlock
		}
		if r.Major != nil {
			m.Major = *r.Major
		}
		if r.Minor != nil {
			m.Minor = *r.Minor
		}
		m.Access = AccessMask(r.Access)
		if r.Access == "" {
			m.Access = AccAll
		}
		if IsForEveryDevice(r) {
			defaultAllow, out = m.Allow, out[:0]
			continue
		}
		out = append(out, m)
	}
	return defaultAllow, out, nil
}
