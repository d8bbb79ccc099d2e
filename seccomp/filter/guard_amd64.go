package filter

import "golang.org/x/sys/unix"

const (
	nativeArch = unix.AUDIT_ARCH_X86_64
	x32Bit     = 0x40000000
)

var guardedCalls = []guardedCall{
	{nr: unix.SYS_CHMOD, mode: 1, flags: -1},
	{nr: unix.SYS_FCHMOD, mode: 1, flags: -1},
	{nr: unix.SYS_FCHMODAT, mode: 2, flags: -1},
	{nr: unix.SYS_FCHMODAT2, mode: 2, flags: -1},
	{nr: unix.SYS_CREAT, mode: 1, flags: -1},
	{nr: unix.SYS_MKNOD, mode: 1, flags: -1},
	{nr: unix.SYS_MKNODAT, mode: 2, flags: -1},
	{nr: unix.SYS_OPEN, mode: 2, flags: 1},
	{nr: unix.SYS_OPENAT, mode: 3, flags: 2},
	{nr: unix.SYS_OPENAT2, mode: -1, flags: -1},
	// io_uring opens files (with a mode) where no filter looks.
	{nr: unix.SYS_IO_URING_SETUP, mode: -1, flags: -1},
}
