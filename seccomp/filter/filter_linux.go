// Package filter is a compiled seccomp policy as a sandbox's init receives
// and loads it: raw BPF programs and the seccomp(2) call that installs them.
// It also writes, by hand, jail's own small programs for one sandbox beyond
// its profile (Guard), which check a few syscalls' arguments; those refuse
// every architecture but the native one. It has no cgo and no dependency on
// libseccomp (which only the compiler, package seccomp, needs), so the init
// stays small.
package filter

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Filter is a compiled policy: one to three BPF programs (raw struct
// sock_filter instructions), loaded in order. The kernel runs every loaded
// program and the strictest answer wins, which is how an argument-specific
// denial (ioctl TIOCSTI) overrides an allowed syscall: libseccomp cannot
// express "allow, except when" within one program.
type Filter struct {
	// Allowlist is the profile's policy; Denials, if any, returns an errno
	// for argument-specific denials and allows everything else.
	Allowlist []byte `json:"allowlist"`
	Denials   []byte `json:"denials,omitempty"`
	// Guard, if any, is jail's own program for this sandbox, beyond its
	// profile (Guard).
	Guard []byte `json:"guard,omitempty"`
}

// maxInstructions is the kernel's limit on one program (BPF_MAXINSNS).
const maxInstructions = 4096

func validProgram(b []byte) bool {
	return len(b) > 0 && len(b)%8 == 0 && len(b)/8 <= maxInstructions
}

// Valid reports whether f holds well-formed programs.
func (f Filter) Valid() bool {
	return validProgram(f.Allowlist) && (f.Denials == nil || validProgram(f.Denials)) && (f.Guard == nil || validProgram(f.Guard))
}

// Load installs f on the calling OS thread (no other): children forked
// from the thread inherit it. no_new_privs must be set first.
func Load(f Filter) error {
	if !f.Valid() {
		return errors.New("seccomp: not a BPF program")
	}
	for _, prog := range [][]byte{f.Allowlist, f.Denials, f.Guard} {
		if prog == nil {
			continue
		}
		fprog := unix.SockFprog{Len: uint16(len(prog) / 8), Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0]))}
		if _, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
			return fmt.Errorf("seccomp: load filter: %w", errno)
		}
	}
	return nil
}
