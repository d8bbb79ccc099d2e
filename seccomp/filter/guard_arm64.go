package filter

import "golang.org/x/sys/unix"

const (
	nativeArch = unix.AUDIT_ARCH_AARCH64
	x32Bit     = 0
)

// setIDCalls are what the set-id guard inspects.
var setIDCalls = []guardedCall{
	{nr: unix.SYS_FCHMOD, arg: 1, flags: -1, bits: setIDBits},
	{nr: unix.SYS_FCHMODAT, arg: 2, flags: -1, bits: setIDBits},
	{nr: unix.SYS_FCHMODAT2, arg: 2, flags: -1, bits: setIDBits},
	{nr: unix.SYS_MKNODAT, arg: 2, flags: -1, bits: setIDBits},
	{nr: unix.SYS_OPENAT, arg: 3, flags: 2, bits: setIDBits},
	{nr: unix.SYS_OPENAT2, arg: -1, flags: -1},
	// io_uring opens files (with a mode) where no filter looks.
	{nr: unix.SYS_IO_URING_SETUP, arg: -1, flags: -1},
}
