package oci

// Device rules on cgroup v2: the kernel has no devices.allow there, only a
// BPF_PROG_TYPE_CGROUP_DEVICE program attached to the cgroup that answers,
// for each mknod or open of a device node by a process of the cgroup (or
// of one below it), whether it may. jail builds that program from the
// bundle's rules (with github.com/cilium/ebpf's assembler), loads it and
// attaches it with BPF_PROG_ATTACH and BPF_F_ALLOW_MULTI, as runc does:
//
//   - an attachment made with BPF_PROG_ATTACH belongs to the cgroup, not to
//     a descriptor (a BPF link dies with its last descriptor unless pinned),
//     so it outlives `jail oci create`, and goes when the cgroup is
//     removed, taking the program with it: nothing to pin, nothing left;
//   - with BPF_F_ALLOW_MULTI the kernel runs the programs of the cgroup and
//     of every cgroup above it, and allows only what all of them allow: a
//     process that makes a cgroup below its own (where the container may
//     write its cgroup mount) and attaches a program there can only take
//     more away;
//   - `update` attaches the new program first and detaches the old ones
//     after, so that the container is never without one (in between both
//     run, the stricter of the two).
//
// Loading, attaching and detaching need CAP_SYS_ADMIN (or CAP_BPF) in the
// host's user namespace, which a container given runc's default
// capabilities, or any capability in a user namespace of its own, has not.
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

import (
	"errors"
	"fmt"
	"math"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// The access_type word of struct bpf_cgroup_dev_ctx: the device's type in
// the low 16 bits, the access asked in the high ones (linux/bpf.h).
const (
	devcgDevBlock = 1 // BPF_DEVCG_DEV_BLOCK
	devcgDevChar  = 2 // BPF_DEVCG_DEV_CHAR

	devcgAccMknod = 1 // BPF_DEVCG_ACC_MKNOD
	devcgAccRead  = 2 // BPF_DEVCG_ACC_READ
	devcgAccWrite = 4 // BPF_DEVCG_ACC_WRITE
	devcgAccAll   = devcgAccMknod | devcgAccRead | devcgAccWrite
)

// maxDeviceRules bounds a bundle's (or an update's) device rules: each is
// up to 16 instructions and three branches the verifier walks (Linux 6.18
// refused a program of 2800), and real lists have tens.
const maxDeviceRules = 1024

// deviceMatch is one rule as the program tests it: typ 0 for both types,
// major and minor -1 for any, access a mask of devcgAcc*.
type deviceMatch struct {
	allow        bool
	typ          int32
	major, minor int64
	access       int32
}

// deviceMatches reads rules into the program's terms: defaultAllow, and
// the rules after the last one for every device, in order.
func deviceMatches(rules []specs.LinuxDeviceCgroup) (defaultAllow bool, out []deviceMatch, err error) {
	defaultAllow = true
	for i, r := range rules {
		if err := validateDeviceRule(r); err != nil {
			return false, nil, fmt.Errorf("device rule %d: %w", i, err)
		}
		m := deviceMatch{allow: r.Allow, major: -1, minor: -1}
		switch r.Type {
		case "c":
			m.typ = devcgDevChar
		case "b":
			m.typ = devcgDevBlock
		}
		if r.Major != nil {
			m.major = *r.Major
		}
		if r.Minor != nil {
			m.minor = *r.Minor
		}
		m.access = accessMask(r.Access)
		if r.Access == "" {
			m.access = devcgAccAll
		}
		if isRuleForEveryDevice(r) {
			defaultAllow, out = m.allow, out[:0]
			continue
		}
		out = append(out, m)
	}
	return defaultAllow, out, nil
}

// compactDeviceRules drops the rules before the last one for every
// device, which decides everything they did.
func compactDeviceRules(rules []specs.LinuxDeviceCgroup) ([]specs.LinuxDeviceCgroup, error) {
	from := 0
	for i, r := range rules {
		if err := validateDeviceRule(r); err != nil {
			return nil, fmt.Errorf("device rule %d: %w", i, err)
		}
		if isRuleForEveryDevice(r) {
			from = i
		}
	}
	return rules[from:], nil
}

func isRuleForEveryDevice(r specs.LinuxDeviceCgroup) bool {
	wild := func(p *int64) bool { return p == nil || *p == -1 }
	return (r.Type == "" || r.Type == "a") && wild(r.Major) && wild(r.Minor) && (r.Access == "" || accessMask(r.Access) == devcgAccAll)
}

func accessMask(access string) int32 {
	var m int32
	for _, a := range access {
		switch a {
		case 'm':
			m |= devcgAccMknod
		case 'r':
			m |= devcgAccRead
		case 'w':
			m |= devcgAccWrite
		}
	}
	return m
}

// deviceAllows are the allow rules runc appends to a bundle's for the
// devices the container is given: the runtime spec's defaults, the
// bundle's linux.devices, and its terminals (/dev/ptmx, /dev/pts/*).
func deviceAllows(devices []specs.LinuxDevice) []specs.LinuxDeviceCgroup {
	var out []specs.LinuxDeviceCgroup
	allow := func(typ string, major, minor int64) {
		out = append(out, specs.LinuxDeviceCgroup{Allow: true, Type: typ, Major: &major, Minor: &minor, Access: "rwm"})
	}
	for _, d := range defaultDevices() {
		allow(d.Type, d.Major, d.Minor)
	}
	for _, d := range devices {
		switch d.Type {
		case "c", "u": // u: unbuffered, a character device to the kernel
			allow("c", d.Major, d.Minor)
		case "b":
			allow("b", d.Major, d.Minor)
		}
	}
	allow("c", 5, 2) // /dev/ptmx
	pts := int64(136)
	out = append(out, specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &pts, Access: "rwm"}) // /dev/pts/*
	return out
}

// deviceProgram is the program for rules: it walks them from the last
// one, keeping in R3 the accesses asked that no rule has decided yet; a
// matching deny rule that covers one of them denies, a matching allow rule
// decides those it covers and allows once none is left; what is left at
// the end gets the default. So each access asked is decided by the last
// rule that matches it, and an open for reading and writing is allowed
// only when both are.
func deviceProgram(rules []specs.LinuxDeviceCgroup) (asm.Instructions, error) {
	defaultAllow, matches, err := deviceMatches(rules)
	if err != nil {
		return nil, err
	}
	prog := asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, 0, asm.Word), // access_type
		asm.Mov.Reg(asm.R3, asm.R2),
		asm.RSh.Imm(asm.R3, 16),                  // R3: the accesses asked
		asm.And.Imm(asm.R2, 0xffff),              // R2: the device's type
		asm.LoadMem(asm.R4, asm.R1, 4, asm.Word), // major
		asm.LoadMem(asm.R5, asm.R1, 8, asm.Word), // minor
	}
	label := ""
	emit := func(ins asm.Instruction) {
		if label != "" {
			ins = ins.WithSymbol(label)
			label = ""
		}
		prog = append(prog, ins)
	}
	for i := len(matches) - 1; i >= 0; i-- {
		m := matches[i]
		next := fmt.Sprintf("rule%d", i)
		// Each field is compared through a scratch register, R0 = field
		// XOR value: a jump on the field itself would teach the verifier
		// its value on one side, and the states it then tells apart at
		// every later rule multiply (a few hundred rules passed its
		// million instructions).
		fields := []struct {
			reg asm.Register
			v   int64
		}{{asm.R2, int64(m.typ)}, {asm.R4, m.major}, {asm.R5, m.minor}}
		if m.typ == 0 {
			fields[0].v = -1
		}
		for _, f := range fields {
			if f.v == -1 {
				continue
			}
			if f.v < 0 || f.v > math.MaxUint32 {
				return nil, fmt.Errorf("device rule %d: major or minor %d is out of range", i, f.v)
			}
			emit(asm.Mov.Reg32(asm.R0, f.reg))
			// 32 bits: the fields are u32s.
			emit(asm.Xor.Imm32(asm.R0, int32(uint32(f.v))))
			emit(asm.JNE.Imm(asm.R0, 0, next))
		}
		emit(asm.Mov.Reg(asm.R0, asm.R3))
		emit(asm.And.Imm(asm.R0, m.access))
		emit(asm.JEq.Imm(asm.R0, 0, next))
		if m.allow {
			emit(asm.And.Imm(asm.R3, ^m.access))
			emit(asm.JNE.Imm(asm.R3, 0, next))
			emit(asm.Mov.Imm(asm.R0, 1))
		} else {
			emit(asm.Mov.Imm(asm.R0, 0))
		}
		emit(asm.Return())
		label = next
	}
	result := int32(0)
	if defaultAllow {
		result = 1
	}
	emit(asm.Mov.Imm(asm.R0, result))
	emit(asm.Return())
	return prog, nil
}

// loadDeviceProgram loads the program for rules.
func loadDeviceProgram(rules []specs.LinuxDeviceCgroup) (*ebpf.Program, error) {
	insns, err := deviceProgram(rules)
	if err != nil {
		return nil, err
	}
	prog, err := ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
		Name:         "jail_devices",
		Type:         ebpf.CGroupDevice,
		Instructions: insns,
	}, ebpf.ProgramOptions{})
	if err != nil {
		return nil, fmt.Errorf("load the device program: %w", err)
	}
	return prog, nil
}

// setDeviceProgram makes rules the device rules of the v2 cgroup at dir:
// their program attached, then every other device program attached to
// dir itself (the one create or a former update attached) detached.
func setDeviceProgram(dir string, rules []specs.LinuxDeviceCgroup) error {
	if len(rules) > maxDeviceRules {
		return fmt.Errorf("%d device rules (at most %d)", len(rules), maxDeviceRules)
	}
	prog, err := loadDeviceProgram(rules)
	if err != nil {
		return err
	}
	defer prog.Close()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(fd)
	old, err := link.QueryPrograms(link.QueryOptions{Target: fd, Attach: ebpf.AttachCGroupDevice})
	if err != nil {
		return fmt.Errorf("the device programs of %s: %w", dir, err)
	}
	if err := link.RawAttachProgram(link.RawAttachProgramOptions{
		Target: fd, Program: prog, Attach: ebpf.AttachCGroupDevice, Flags: unix.BPF_F_ALLOW_MULTI,
	}); err != nil {
		return fmt.Errorf("attach the device program to %s: %w", dir, err)
	}
	var errs []error
	for _, p := range old.Programs {
		if err := detachDeviceProgram(fd, p.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("detach the former device program of %s: %w", dir, err)
	}
	return nil
}

func detachDeviceProgram(cgroupFD int, id ebpf.ProgramID) error {
	prog, err := ebpf.NewProgramFromID(id)
	if errors.Is(err, unix.ENOENT) {
		return nil // detached and freed meanwhile
	}
	if err != nil {
		return fmt.Errorf("program %d: %w", id, err)
	}
	defer prog.Close()
	return link.RawDetachProgram(link.RawDetachProgramOptions{Target: cgroupFD, Program: prog, Attach: ebpf.AttachCGroupDevice})
}
