// Package compile turns a profile's syscall policy into seccomp BPF with
// libseccomp (cgo). Only the tools program of jail links it (see
// internal/programs): compiling costs tens of milliseconds and happens once
// per profile content, and keeping cgo and libseccomp out of the jail binary
// keeps its start-up, paid by every sandbox, short.
//
// Policy: syscalls the profile allows pass; syscalls this libseccomp knows
// for the architecture but the profile does not allow fail with EPERM;
// anything else (newer syscalls) fails with ENOSYS, so a libc falls back to
// an older call; and every other ABI of the machine (ia32 and x32 on
// x86_64) fails with ENOSYS whatever the syscall.
package compile

import (
	"fmt"
	"io"
	"os"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/profiles"
	"github.com/jail-sandbox/jail/seccomp/filter"
)

// maxSyscall bounds the numbers answered ENOSYS when libseccomp has no name
// for them: x86_64's table ends near 460 today, so this leaves room for new
// syscalls without bloating the program; numbers above it get EPERM.
const maxSyscall = 512

// Filter is a compiled policy.
type Filter = filter.Filter

// Compile builds the filter of p for the native architecture.
func Compile(p *profiles.Profile) (Filter, error) {
	allowlist, err := compileAllowlist(p)
	if err != nil {
		return Filter{}, err
	}
	denials, err := compileDenials(p)
	if err != nil {
		return Filter{}, err
	}
	return Filter{Allowlist: allowlist, Denials: denials}, nil
}

func newFilter(defaultAction libseccomp.ScmpAction) (*libseccomp.ScmpFilter, error) {
	f, err := libseccomp.NewFilter(defaultAction)
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	// Other ABIs of this machine (ia32, x32) reach no syscall at all.
	if err := f.SetBadArchAction(libseccomp.ActErrno.SetReturnCode(int16(unix.ENOSYS))); err != nil {
		f.Release()
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	// jail sets no_new_privs itself, in its own order of steps.
	if err := f.SetNoNewPrivsBit(false); err != nil {
		f.Release()
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	if err := f.SetOptimize(2); err != nil {
		f.Release()
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	return f, nil
}

// compileAllowlist: allowed syscalls pass, unconditional errno entries get
// their errno, syscall numbers libseccomp does not know get ENOSYS, and
// everything else (known syscalls not allowed, or allowed only with other
// arguments) gets EPERM.
func compileAllowlist(p *profiles.Profile) ([]byte, error) {
	f, err := newFilter(libseccomp.ActErrno.SetReturnCode(int16(unix.EPERM)))
	if err != nil {
		return nil, err
	}
	defer f.Release()
	policy := p.Seccomp
	allowed := map[libseccomp.ScmpSyscall]profiles.Syscall{}
	for _, s := range policy.Allow {
		nr, err := syscallNumber(p, s)
		if err != nil {
			return nil, err
		}
		allowed[nr] = s
		if err := f.AddRule(nr, libseccomp.ActAllow); err != nil {
			return nil, ruleError(p, s, err)
		}
	}
	conditional := map[libseccomp.ScmpSyscall]bool{}
	for _, c := range policy.AllowIf {
		nr, err := syscallNumber(p, c.Syscall)
		if err != nil {
			return nil, err
		}
		if _, ok := allowed[nr]; ok {
			return nil, &profiles.Error{Profile: from(p, c.Syscall), Line: c.Syscall.Line, Err: fmt.Errorf("%s is both allowed and allowed only on conditions", c.Syscall.Name)}
		}
		conditional[nr] = true
		conds, err := conditions(c.Args)
		if err != nil {
			return nil, &profiles.Error{Profile: p.Name, Line: c.Syscall.Line, Err: err}
		}
		if err := f.AddRuleConditional(nr, libseccomp.ActAllow, conds); err != nil {
			return nil, ruleError(p, c.Syscall, err)
		}
	}
	for _, d := range policy.Errno {
		if len(d.Args) > 0 {
			continue // in the denials program
		}
		errno := errnoOf(d)
		for _, s := range d.Syscalls {
			nr, err := syscallNumber(p, s)
			if err != nil {
				return nil, err
			}
			if a, ok := allowed[nr]; ok || conditional[nr] {
				if !ok {
					a = profiles.Syscall{Name: s.Name, From: p.Name}
				}
				return nil, &profiles.Error{Profile: from(p, a), Line: a.Line,
					Err: fmt.Errorf("%s is allowed and also denied (profile %s, line %d); list it under drop first", s.Name, from(p, s), s.Line)}
			}
			if errno == unix.EPERM {
				continue // the default
			}
			if err := f.AddRule(nr, libseccomp.ActErrno.SetReturnCode(int16(errno))); err != nil {
				return nil, ruleError(p, s, err)
			}
		}
	}
	// Numbers this libseccomp has no name for are newer than it (or
	// unassigned): ENOSYS, so a libc falls back to an older call.
	for n := 0; n < maxSyscall; n++ {
		nr := libseccomp.ScmpSyscall(n)
		if _, err := nr.GetName(); err == nil {
			continue
		}
		if err := f.AddRule(nr, libseccomp.ActErrno.SetReturnCode(int16(unix.ENOSYS))); err != nil {
			return nil, fmt.Errorf("seccomp: syscall %d: %w", n, err)
		}
	}
	return export(f)
}

// compileDenials builds the program of argument-specific errno entries, or
// nil when the profile has none.
func compileDenials(p *profiles.Profile) ([]byte, error) {
	var entries []profiles.Denial
	for _, d := range p.Seccomp.Errno {
		if len(d.Args) > 0 {
			entries = append(entries, d)
		}
	}
	if len(entries) == 0 {
		return nil, nil
	}
	f, err := newFilter(libseccomp.ActAllow)
	if err != nil {
		return nil, err
	}
	defer f.Release()
	for _, d := range entries {
		conds, err := conditions(d.Args)
		if err != nil {
			return nil, &profiles.Error{Profile: p.Name, Line: d.Syscalls[0].Line, Err: err}
		}
		for _, s := range d.Syscalls {
			nr, err := syscallNumber(p, s)
			if err != nil {
				return nil, err
			}
			if err := f.AddRuleConditional(nr, libseccomp.ActErrno.SetReturnCode(int16(errnoOf(d))), conds); err != nil {
				return nil, ruleError(p, s, err)
			}
		}
	}
	return export(f)
}

func errnoOf(d profiles.Denial) unix.Errno {
	if d.Errno == "" {
		return unix.EPERM
	}
	return profiles.ErrnoValue(d.Errno)
}

func syscallNumber(p *profiles.Profile, s profiles.Syscall) (libseccomp.ScmpSyscall, error) {
	nr, err := libseccomp.GetSyscallFromName(s.Name)
	if err != nil {
		return 0, &profiles.Error{Profile: from(p, s), Line: s.Line, Err: fmt.Errorf("unknown syscall %q", s.Name)}
	}
	return nr, nil
}

func ruleError(p *profiles.Profile, s profiles.Syscall, err error) error {
	return &profiles.Error{Profile: from(p, s), Line: s.Line, Err: fmt.Errorf("%s: %v", s.Name, err)}
}

// from names the profile file a syscall entry was written in.
func from(p *profiles.Profile, s profiles.Syscall) string {
	if s.From != "" {
		return s.From
	}
	return p.Name
}

func conditions(args []profiles.Arg) ([]libseccomp.ScmpCondition, error) {
	var out []libseccomp.ScmpCondition
	for _, a := range args {
		var c libseccomp.ScmpCondition
		var err error
		switch {
		case a.Not:
			c, err = libseccomp.MakeCondition(a.Index, libseccomp.CompareNotEqual, a.Equals)
		case a.Mask != 0:
			c, err = libseccomp.MakeCondition(a.Index, libseccomp.CompareMaskedEqual, a.Mask, a.Equals)
		default:
			c, err = libseccomp.MakeCondition(a.Index, libseccomp.CompareEqual, a.Equals)
		}
		if err != nil {
			return nil, fmt.Errorf("argument %d: %v", a.Index, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// export writes the filter's BPF into memory.
func export(f *libseccomp.ScmpFilter) ([]byte, error) {
	fd, err := unix.MemfdCreate("jail-seccomp", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("seccomp export: %w", err)
	}
	mem := os.NewFile(uintptr(fd), "jail-seccomp")
	defer mem.Close()
	if err := f.ExportBPF(mem); err != nil {
		return nil, fmt.Errorf("seccomp export: %w", err)
	}
	if _, err := mem.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(mem)
}

// Identity names this compiler and the libseccomp it links, for the keys
// of cached filters.
func Identity() string {
	maj, min, mic := libseccomp.GetLibraryVersion()
	return fmt.Sprintf("libseccomp %d.%d.%d", maj, min, mic)
}
