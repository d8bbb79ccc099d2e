package filter

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// Guards are jail's own refusals for one sandbox, beyond its profile,
// compiled into one program by Guard.
type Guards struct {
	// SetID: the sandbox writes to host directories (a writable
	// --workspace or --mount). Every mode with the set-user-ID or
	// set-group-ID bit is refused, so that nothing a sandbox makes there
	// can run with its owner's ids on the host (nosuid on the mount only
	// protects the inside). A filter cannot see which filesystem a path or
	// a descriptor is on, so the refusal holds for every file of the
	// sandbox: chmod and its kin with S_ISUID or S_ISGID, and a file
	// created with them (open, openat, creat, mknod, mknodat with O_CREAT
	// or O_TMPFILE). openat2 carries its mode where a filter cannot read
	// it and fails with ENOSYS, which libcs and Go answer by falling back
	// to openat; so does io_uring_setup, whatever the profile allows: a
	// ring's openat takes its mode from memory no filter reads (liburing's
	// users fall back to plain syscalls). mkdir is left alone: a
	// set-group-ID directory only passes its group on.
	SetID bool
	// NoGrowsDown: the sandbox has no cgroup, and RLIMIT_DATA bounds each
	// process's private memory, which a MAP_GROWSDOWN (stack) mapping
	// escapes: such an mmap is refused (EPERM). Nothing common makes one.
	NoGrowsDown bool
}

// Guard compiles the guards g asks for into one program, or returns nil
// when it asks for none. Other architectures' calls fail with ENOSYS (the
// profiles refuse them anyway).
func Guard(g Guards) []byte {
	var calls []guardedCall
	if g.SetID {
		calls = append(calls, setIDCalls...)
	}
	if g.NoGrowsDown {
		calls = append(calls, guardedCall{nr: unix.SYS_MMAP, arg: 3, bits: unix.MAP_GROWSDOWN, flags: -1})
	}
	if len(calls) == 0 {
		return nil
	}
	var b guardBuilder
	b.load(offsetArch)
	b.jump(bpfJEQ, nativeArch, 1, 0)
	b.ret(retErrno | uint32(unix.ENOSYS))
	b.load(offsetNr)
	if x32Bit != 0 {
		// x32 calls are the native numbers with bit 30 set.
		b.emit(bpfALU|bpfAND|bpfK, 0, 0, ^uint32(x32Bit))
	}
	for _, r := range calls {
		block := r.block()
		b.jump(bpfJEQ, uint32(r.nr), 0, uint8(len(block)))
		b.prog = append(b.prog, block...)
	}
	b.ret(retAllow)
	out := make([]byte, 0, 8*len(b.prog))
	for _, in := range b.prog {
		out = binary.LittleEndian.AppendUint16(out, in.code)
		out = append(out, in.jt, in.jf)
		out = binary.LittleEndian.AppendUint32(out, in.k)
	}
	return out
}

// setIDBits are the mode bits the set-id guard refuses.
const setIDBits = unix.S_ISUID | unix.S_ISGID

// createFlags make open and openat create a file, taking their mode
// (O_TMPFILE without its O_DIRECTORY part, which alone creates nothing).
const createFlags = unix.O_CREAT | (unix.O_TMPFILE &^ unix.O_DIRECTORY)

// guardedCall is a syscall the guard inspects: it is refused (EPERM) when
// argument arg has any of bits, and, when flags is not -1, only when
// argument flags has one of createFlags too. A call with arg -1 is
// refused outright with ENOSYS.
type guardedCall struct {
	nr         int
	arg, flags int
	bits       uint32
}

func (r guardedCall) block() []instruction {
	var g guardBuilder
	switch {
	case r.arg < 0:
		g.ret(retErrno | uint32(unix.ENOSYS))
	case r.flags < 0:
		g.load(offsetArg(r.arg))
		g.jump(bpfJSET, r.bits, 0, 1)
		g.ret(retErrno | uint32(unix.EPERM))
		g.ret(retAllow)
	default:
		g.load(offsetArg(r.flags))
		g.jump(bpfJSET, createFlags, 0, 3)
		g.load(offsetArg(r.arg))
		g.jump(bpfJSET, r.bits, 0, 1)
		g.ret(retErrno | uint32(unix.EPERM))
		g.ret(retAllow)
	}
	return g.prog
}

// Classic BPF as seccomp runs it (linux/filter.h, linux/seccomp.h).
const (
	bpfLD   = 0x00
	bpfW    = 0x00
	bpfABS  = 0x20
	bpfALU  = 0x04
	bpfAND  = 0x50
	bpfJMP  = 0x05
	bpfJEQ  = bpfJMP | 0x10
	bpfJSET = bpfJMP | 0x40
	bpfK    = 0x00
	bpfRET  = 0x06

	retAllow = 0x7fff0000
	retErrno = 0x00050000

	offsetNr   = 0
	offsetArch = 4
)

// offsetArg is where the low 32 bits of argument i lie in seccomp_data
// (little-endian: the architectures jail builds for).
func offsetArg(i int) uint32 { return uint32(16 + 8*i) }

type instruction struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

type guardBuilder struct{ prog []instruction }

func (g *guardBuilder) emit(code uint16, jt, jf uint8, k uint32) {
	g.prog = append(g.prog, instruction{code, jt, jf, k})
}
func (g *guardBuilder) load(offset uint32) { g.emit(bpfLD|bpfW|bpfABS, 0, 0, offset) }
func (g *guardBuilder) ret(v uint32)       { g.emit(bpfRET|bpfK, 0, 0, v) }
func (g *guardBuilder) jump(op uint16, k uint32, jt, jf uint8) {
	g.emit(op|bpfK, jt, jf, k)
}
