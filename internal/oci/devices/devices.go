// Package devices sets a cgroup v2 directory's device rules: the kernel
// has no devices.allow there, only a BPF_PROG_TYPE_CGROUP_DEVICE program
// attached to the cgroup that answers, for each mknod or open of a device
// node by a process of the cgroup (or of one below it), whether it may.
// Set builds that program from the rules (package devicerules says what
// they mean) with github.com/cilium/ebpf's assembler, loads it and
// attaches it with BPF_PROG_ATTACH and BPF_F_ALLOW_MULTI, as runc does:
//
//   - an attachment made with BPF_PROG_ATTACH belongs to the cgroup, not to
//     a descriptor (a BPF link dies with its last descriptor unless pinned),
//     so it outlives the process that made it (`jail oci create`, or the
//     tools program it runs), and goes when the cgroup is removed, taking
//     the program with it: nothing to pin, nothing left;
//   - with BPF_F_ALLOW_MULTI the kernel runs the programs of the cgroup and
//     of every cgroup above it, and allows only what all of them allow: a
//     process that makes a cgroup below its own (where the container may
//     write its cgroup mount) and attaches a program there can only take
//     more away;
//   - an update attaches the new program first and detaches the old ones
//     after, so that the container is never without one (in between both
//     run, the stricter of the two).
//
// Loading, attaching and detaching need CAP_SYS_ADMIN (or CAP_BPF) in the
// host's user namespace, which a container given runc's default
// capabilities, or any capability in a user namespace of its own, has not.
//
// Only jail's tools program (`jail-tools oci devices`, which package oci
// runs) and tests may import this package: github.com/cilium/ebpf's
// package initialisation and size would otherwise be paid by every start
// of the jail binary (0.13-0.17 ms per `jail run`, and 1.8 MB), when the
// program is set once per `jail oci create` or `update`.
// TestStartPathLinksNothingHeavy (package programs) keeps it out of the
// jail binary.
package devices

import (
	"errors"
	"fmt"
	"math"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/oci/devicerules"
)

// Program is the program for rules: it walks them from the last one,
// keeping in R3 the accesses asked that no rule has decided yet; a
// matching deny rule that covers one of them denies, a matching allow rule
// decides those it covers and allows once none is left; what is left at
// the end gets the default. So each access asked is decided by the last
// rule that matches it, and an open for reading and writing is allowed
// only when both are.
func Program(rules []specs.LinuxDeviceCgroup) (asm.Instructions, error) {
	defaultAllow, matches, err := devicerules.Matches(rules)
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
		}{{asm.R2, int64(m.Type)}, {asm.R4, m.Major}, {asm.R5, m.Minor}}
		if m.Type == 0 {
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
		emit(asm.And.Imm(asm.R0, m.Access))
		emit(asm.JEq.Imm(asm.R0, 0, next))
		if m.Allow {
			emit(asm.And.Imm(asm.R3, ^m.Access))
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

// Load loads the program for rules.
func Load(rules []specs.LinuxDeviceCgroup) (*ebpf.Program, error) {
	insns, err := Program(rules)
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

// Set makes rules the device rules of the v2 cgroup directory open at
// cgroupFD: their program attached, then every other device program
// attached to that cgroup itself (the one create or a former update
// attached) detached. It refuses a descriptor of anything but a cgroup v2
// directory, and more than devicerules.MaxRules rules, before loading
// anything.
func Set(cgroupFD int, rules []specs.LinuxDeviceCgroup) error {
	if err := devicerules.Check(rules); err != nil {
		return err
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(cgroupFD, &fs); err != nil {
		return fmt.Errorf("the cgroup's descriptor: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(cgroupFD, &st); err != nil {
		return fmt.Errorf("the cgroup's descriptor: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return errors.New("the cgroup's descriptor is not of a directory")
	}
	if fs.Type != unix.CGROUP2_SUPER_MAGIC {
		return errors.New("the cgroup's descriptor is not of a cgroup v2 directory")
	}
	prog, err := Load(rules)
	if err != nil {
		return err
	}
	defer prog.Close()
	old, err := link.QueryPrograms(link.QueryOptions{Target: cgroupFD, Attach: ebpf.AttachCGroupDevice})
	if err != nil {
		return fmt.Errorf("query the cgroup's device programs: %w", err)
	}
	if err := link.RawAttachProgram(link.RawAttachProgramOptions{
		Target: cgroupFD, Program: prog, Attach: ebpf.AttachCGroupDevice, Flags: unix.BPF_F_ALLOW_MULTI,
	}); err != nil {
		return fmt.Errorf("attach the device program: %w", err)
	}
	var errs []error
	for _, p := range old.Programs {
		if err := detach(cgroupFD, p.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("detach the former device program: %w", err)
	}
	return nil
}

// detach detaches program id from the cgroup at cgroupFD.
func detach(cgroupFD int, id ebpf.ProgramID) error {
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
