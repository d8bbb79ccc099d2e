package main

import (
	"fmt"
	"sort"
	"unsafe"

	"golang.org/x/sys/unix"
)

// int80 makes the ia32 syscall nr through int $0x80 and returns the raw
// result (a negative errno on failure).
func int80(nr uintptr) uintptr

// attempt is one syscall tried with arguments that make it fail harmlessly
// if it does reach the kernel.
type attempt struct {
	name string
	call func() unix.Errno
}

func raw(nr uintptr, args ...uintptr) func() unix.Errno {
	return func() unix.Errno {
		var a [6]uintptr
		copy(a[:], args)
		_, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		return e
	}
}

var bad = uintptr(unsafe.Pointer(nil))

// sock makes a socket of the family, type and protocol given, and closes
// it if that worked.
func sock(nr, family, typ, proto uintptr) func() unix.Errno {
	return func() unix.Errno {
		fd, _, e := unix.Syscall(nr, family, typ, proto)
		if e == 0 {
			unix.Close(int(fd))
		}
		return e
	}
}

// persona sets the personality given, and the plain Linux one again if
// that worked.
func persona(p uintptr) func() unix.Errno {
	return func() unix.Errno {
		_, _, e := unix.Syscall(unix.SYS_PERSONALITY, p, 0, 0)
		if e == 0 {
			_, _, _ = unix.Syscall(unix.SYS_PERSONALITY, 0, 0, 0)
		}
		return e
	}
}

// pair makes a socketpair of the family given, and closes it if that
// worked.
func pair(family uintptr) func() unix.Errno {
	return func() unix.Errno {
		var fds [2]int32
		_, _, e := unix.Syscall6(unix.SYS_SOCKETPAIR, family, unix.SOCK_STREAM, 0, uintptr(unsafe.Pointer(&fds)), 0, 0)
		if e == 0 {
			unix.Close(int(fds[0]))
			unix.Close(int(fds[1]))
		}
		return e
	}
}

var attempts = []attempt{
	{"io_uring_setup", raw(unix.SYS_IO_URING_SETUP, 1, bad)},
	{"io_uring_enter", raw(unix.SYS_IO_URING_ENTER, ^uintptr(0))},
	{"io_uring_register", raw(unix.SYS_IO_URING_REGISTER, ^uintptr(0))},
	{"userfaultfd", raw(unix.SYS_USERFAULTFD, 0)},
	{"bpf", raw(unix.SYS_BPF, ^uintptr(0), bad, 0)},
	{"perf_event_open", raw(unix.SYS_PERF_EVENT_OPEN, bad, 0, ^uintptr(0), ^uintptr(0), 0)},
	{"keyctl", raw(unix.SYS_KEYCTL, ^uintptr(0))},
	{"add_key", raw(unix.SYS_ADD_KEY, bad, bad, bad, 0, 0)},
	{"request_key", raw(unix.SYS_REQUEST_KEY, bad, bad, bad, 0)},
	{"kexec_load", raw(unix.SYS_KEXEC_LOAD, 0, 0, bad, 0)},
	{"init_module", raw(unix.SYS_INIT_MODULE, bad, 0, bad)},
	{"finit_module", raw(unix.SYS_FINIT_MODULE, ^uintptr(0), bad, 0)},
	{"delete_module", raw(unix.SYS_DELETE_MODULE, bad, 0)},
	{"mount", raw(unix.SYS_MOUNT, bad, bad, bad, 0, 0)},
	{"umount2", raw(unix.SYS_UMOUNT2, bad, 0)},
	{"pivot_root", raw(unix.SYS_PIVOT_ROOT, bad, bad)},
	{"move_mount", raw(unix.SYS_MOVE_MOUNT, ^uintptr(0), bad, ^uintptr(0), bad, 0)},
	{"open_tree", raw(unix.SYS_OPEN_TREE, ^uintptr(0), bad, 0)},
	{"fsopen", raw(unix.SYS_FSOPEN, bad, 0)},
	{"mount_setattr", raw(unix.SYS_MOUNT_SETATTR, ^uintptr(0), bad, 0, bad, 0)},
	{"setns", raw(unix.SYS_SETNS, ^uintptr(0), 0)},
	{"unshare(CLONE_NEWUSER)", raw(unix.SYS_UNSHARE, unix.CLONE_NEWUSER)},
	{"unshare(CLONE_NEWNS)", raw(unix.SYS_UNSHARE, unix.CLONE_NEWNS)},
	{"clone(CLONE_NEWUSER)", raw(unix.SYS_CLONE, unix.CLONE_NEWUSER|uintptr(unix.SIGCHLD), bad, bad, bad, 0)},
	{"clone3", raw(unix.SYS_CLONE3, bad, 0)},
	// A pid that cannot exist: ESRCH when ptrace is allowed, EPERM when not.
	{"ptrace", raw(unix.SYS_PTRACE, unix.PTRACE_ATTACH, 0x3fffffff)},
	{"process_vm_readv", raw(unix.SYS_PROCESS_VM_READV, 1, bad, 0, bad, 0, 0)},
	{"personality(READ_IMPLIES_EXEC)", raw(unix.SYS_PERSONALITY, 0x0400000)},
	{"personality(PER_LINUX32)", persona(0x0008)},
	{"personality(UNAME26)", persona(0x0020000)},
	{"ioctl(TIOCSTI)", raw(unix.SYS_IOCTL, 0, unix.TIOCSTI, bad)},
	{"ioctl(TIOCSTI|1<<32)", raw(unix.SYS_IOCTL, 0, 1<<32|unix.TIOCSTI, bad)},
	{"ioctl(TIOCLINUX)", raw(unix.SYS_IOCTL, 0, unix.TIOCLINUX, bad)},
	{"open_by_handle_at", raw(unix.SYS_OPEN_BY_HANDLE_AT, ^uintptr(0), bad, 0)},
	{"syscall 500 (unknown)", raw(500)},
	{"x32 getpid", raw(0x40000000 + unix.SYS_GETPID)},
	{"ia32 getpid (int 0x80)", func() unix.Errno {
		r := int80(20)
		if int(r) < 0 && int(r) > -4096 {
			return unix.Errno(-int(r))
		}
		return 0
	}},
	{"socket(AF_INET)", sock(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, 0)},
	{"socket(AF_INET6)", sock(unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_DGRAM, 0)},
	{"socket(AF_UNIX)", sock(unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM, 0)},
	{"socket(AF_NETLINK, NETLINK_ROUTE)", sock(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)},
	{"socket(AF_NETLINK, NETLINK_AUDIT)", sock(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT)},
	{"socket(AF_VSOCK)", sock(unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM, 0)},
	{"socket(AF_VSOCK|1<<32)", sock(unix.SYS_SOCKET, 1<<32|unix.AF_VSOCK, unix.SOCK_STREAM, 0)},
	{"socket(AF_PACKET)", sock(unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_DGRAM, 0)},
	{"socket(AF_ALG)", sock(unix.SYS_SOCKET, unix.AF_ALG, unix.SOCK_SEQPACKET, 0)},
	{"socket(AF_KCM)", sock(unix.SYS_SOCKET, unix.AF_KCM, unix.SOCK_DGRAM, 0)},
	{"socket(AF_TIPC)", sock(unix.SYS_SOCKET, unix.AF_TIPC, unix.SOCK_RDM, 0)},
	{"socket(AF_BLUETOOTH)", sock(unix.SYS_SOCKET, unix.AF_BLUETOOTH, unix.SOCK_RAW, 0)},
	{"socket(AF_XDP)", sock(unix.SYS_SOCKET, unix.AF_XDP, unix.SOCK_RAW, 0)},
	{"socketpair(AF_UNIX)", pair(unix.AF_UNIX)},
	{"socketpair(AF_VSOCK)", pair(unix.AF_VSOCK)},
	{"getpid", raw(unix.SYS_GETPID)},
}

// trySyscalls prints "name: ERRNO" (or "name: ok") for each attempt.
func trySyscalls() {
	var lines []string
	for _, a := range attempts {
		e := a.call()
		res := "ok"
		if e != 0 {
			res = unix.ErrnoName(e)
		}
		lines = append(lines, fmt.Sprintf("%s: %s", a.name, res))
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
}
