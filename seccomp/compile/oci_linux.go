package compile

import (
	"errors"
	"fmt"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// CompileOCI builds the filter of an OCI bundle's linux.seccomp (jail oci)
// as runc does: its default action for what no rule names, its rules in
// order (a rule whose action is the default is skipped, a name this
// libseccomp does not know is ignored), conditions on one argument each
// ORed and on distinct arguments ANDed, and the architectures it lists
// added beside the native one. Notifications and filter flags are
// refused (package oci refuses them first, with the bundle's words).
func CompileOCI(s *specs.LinuxSeccomp) (Filter, error) {
	if s == nil {
		return Filter{}, errors.New("seccomp: no policy")
	}
	if len(s.Flags) > 0 || s.ListenerPath != "" {
		return Filter{}, errors.New("seccomp: flags and notifications are not supported")
	}
	def, err := ociAction(s.DefaultAction, s.DefaultErrnoRet)
	if err != nil {
		return Filter{}, fmt.Errorf("seccomp: defaultAction: %w", err)
	}
	f, err := libseccomp.NewFilter(def)
	if err != nil {
		return Filter{}, fmt.Errorf("seccomp: %w", err)
	}
	defer f.Release()
	// jail's role sets no_new_privs itself when the bundle asks for it.
	if err := f.SetNoNewPrivsBit(false); err != nil {
		return Filter{}, fmt.Errorf("seccomp: %w", err)
	}
	for _, a := range s.Architectures {
		arch, err := libseccomp.GetArchFromString(strings.TrimPrefix(string(a), "SCMP_ARCH_"))
		if err != nil {
			return Filter{}, fmt.Errorf("seccomp: architecture %s: %w", a, err)
		}
		if err := f.AddArch(arch); err != nil {
			return Filter{}, fmt.Errorf("seccomp: architecture %s: %w", a, err)
		}
	}
	for i, rule := range s.Syscalls {
		act, err := ociAction(rule.Action, rule.ErrnoRet)
		if err != nil {
			return Filter{}, fmt.Errorf("seccomp: syscalls[%d]: %w", i, err)
		}
		if act == def {
			continue
		}
		conds, separate, err := ociConditions(rule.Args)
		if err != nil {
			return Filter{}, fmt.Errorf("seccomp: syscalls[%d]: %w", i, err)
		}
		for _, name := range rule.Names {
			nr, err := libseccomp.GetSyscallFromName(name)
			if err != nil {
				continue // newer than this libseccomp, or another arch's: as runc
			}
			if err := addOCIRule(f, nr, act, conds, separate); err != nil {
				return Filter{}, fmt.Errorf("seccomp: syscalls[%d]: %s: %w", i, name, err)
			}
		}
	}
	prog, err := export(f)
	if err != nil {
		return Filter{}, err
	}
	out := Filter{Allowlist: prog}
	if !out.Valid() {
		return Filter{}, fmt.Errorf("seccomp: the compiled filter has %d instructions, more than the kernel takes", len(prog)/8)
	}
	return out, nil
}

func addOCIRule(f *libseccomp.ScmpFilter, nr libseccomp.ScmpSyscall, act libseccomp.ScmpAction, conds []libseccomp.ScmpCondition, separate bool) error {
	switch {
	case len(conds) == 0:
		return f.AddRule(nr, act)
	case separate:
		for _, c := range conds {
			if err := f.AddRuleConditional(nr, act, []libseccomp.ScmpCondition{c}); err != nil {
				return err
			}
		}
		return nil
	}
	return f.AddRuleConditional(nr, act, conds)
}

// ociAction is the libseccomp action of an OCI one; an errno action
// without errnoRet returns EPERM, and so does a trace one (runc's).
func ociAction(a specs.LinuxSeccompAction, errnoRet *uint) (libseccomp.ScmpAction, error) {
	ret := int16(unix.EPERM)
	if errnoRet != nil {
		if *errnoRet > 4095 {
			return 0, fmt.Errorf("errnoRet %d is not an errno", *errnoRet)
		}
		ret = int16(*errnoRet)
	}
	switch a {
	case specs.ActKill, specs.ActKillThread:
		return libseccomp.ActKillThread, nil
	case specs.ActKillProcess:
		return libseccomp.ActKillProcess, nil
	case specs.ActTrap:
		return libseccomp.ActTrap, nil
	case specs.ActErrno:
		return libseccomp.ActErrno.SetReturnCode(ret), nil
	case specs.ActTrace:
		return libseccomp.ActTrace.SetReturnCode(ret), nil
	case specs.ActAllow:
		return libseccomp.ActAllow, nil
	case specs.ActLog:
		return libseccomp.ActLog, nil
	}
	return 0, fmt.Errorf("action %q is not supported", a)
}

var ociOperators = map[specs.LinuxSeccompOperator]libseccomp.ScmpCompareOp{
	specs.OpNotEqual:     libseccomp.CompareNotEqual,
	specs.OpLessThan:     libseccomp.CompareLess,
	specs.OpLessEqual:    libseccomp.CompareLessOrEqual,
	specs.OpEqualTo:      libseccomp.CompareEqual,
	specs.OpGreaterEqual: libseccomp.CompareGreaterEqual,
	specs.OpGreaterThan:  libseccomp.CompareGreater,
	specs.OpMaskedEqual:  libseccomp.CompareMaskedEqual,
}

// ociConditions makes the rule's conditions; separate says that one
// argument has several, which are then ORed (one rule each), as runc does,
// since libseccomp cannot AND two conditions on one argument.
func ociConditions(args []specs.LinuxSeccompArg) ([]libseccomp.ScmpCondition, bool, error) {
	var out []libseccomp.ScmpCondition
	var count [6]int
	separate := false
	for _, a := range args {
		op, ok := ociOperators[a.Op]
		if !ok {
			return nil, false, fmt.Errorf("operator %q is not supported", a.Op)
		}
		if a.Index > 5 {
			return nil, false, fmt.Errorf("argument index %d", a.Index)
		}
		values := []uint64{a.Value}
		if op == libseccomp.CompareMaskedEqual {
			values = append(values, a.ValueTwo)
		}
		c, err := libseccomp.MakeCondition(a.Index, op, values...)
		if err != nil {
			return nil, false, fmt.Errorf("argument %d: %w", a.Index, err)
		}
		if count[a.Index]++; count[a.Index] > 1 {
			separate = true
		}
		out = append(out, c)
	}
	return out, separate, nil
}
