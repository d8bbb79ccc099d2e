// Package spawn starts, signals and reaps the child processes of a `jail
// run` (the sandbox's init, its cgroup janitor) with syscall.ForkExec and
// pidfds rather than os/exec.
//
// The first process a Go program starts through package os makes os check,
// once, whether pidfds work: it opens one of itself, waits on it, signals
// it and forks a child that exits at once. That cost every `jail run` 0.2
// ms and 0.25 ms of CPU (a program that starts /bin/true: 2.68 against
// 2.50 ms). The callers hold the pidfd the kernel gives them at the clone
// (SysProcAttr.PidFD) where they need one.
//
// StartAs starts a child whose new user namespace another host uid creates
// (namespaces.NamespaceOwner), from a thread whose real and effective uid
// it changes for the clone alone: nothing else runs on that thread
// meanwhile, and it goes back to the Go scheduler only as it was (ids,
// capabilities, securebits), or else ends with its goroutine.
package spawn

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Start starts path with args and env. files are the child's descriptors
// from 0 up: stdin, stdout and stderr (nil ones get /dev/null, as os/exec
// gives them) and the rest from 3 on. It returns once the child has
// exec'd, or failed to.
func Start(path string, args, env []string, files []*os.File, attr *syscall.SysProcAttr) (int, error) {
	fds := make([]uintptr, len(files))
	var devNull *os.File
	for i, f := range files {
		if f == nil {
			if i > 2 {
				return 0, fmt.Errorf("start %s: no file for descriptor %d", path, i)
			}
			if devNull == nil {
				var err error
				if devNull, err = os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
					return 0, fmt.Errorf("start %s: %w", path, err)
				}
				defer devNull.Close()
			}
			f = devNull
		}
		fds[i] = f.Fd()
	}
	exe, moved, err := clearOfSetup(path, fds)
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", path, err)
	}
	if moved >= 0 {
		defer unix.Close(moved)
	}
	pid, err := syscall.ForkExec(exe, args, &syscall.ProcAttr{Env: env, Files: fds, Sys: attr})
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", path, err)
	}
	return pid, nil
}

// clearOfSetup returns what to execute for path in a child given fds: path
// itself, unless path is a descriptor of this process (/proc/self/fd/N, a
// program run from its descriptor) that the child's descriptor setup
// writes over before the exec; then the path of a close-on-exec copy of N
// above all that setup writes, and that copy, for the caller to close
// once the child has started (-1: none made). ForkExec's child puts fds[i]
// on i (0..len-1), having first moved its error pipe, then each fds[i]
// below i, onto the numbers just above the highest of len(fds) and fds:
// a program's descriptor there (as a plan's many files, each a mount
// source, put it) was the pipe or another file by the exec.
func clearOfSetup(path string, fds []uintptr) (string, int, error) {
	rest, ok := strings.CutPrefix(path, "/proc/self/fd/")
	if !ok {
		return path, -1, nil
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 {
		return path, -1, nil
	}
	top := len(fds)
	for _, fd := range fds {
		top = max(top, int(fd))
	}
	// The pipe, a number skipped for it, and at most one per descriptor.
	last := top + 2 + len(fds)
	if n >= len(fds) && (n <= top || n > last) {
		return path, -1, nil
	}
	moved, err := unix.FcntlInt(uintptr(n), unix.F_DUPFD_CLOEXEC, last+1)
	if err != nil {
		return "", -1, fmt.Errorf("move program descriptor: %w", err)
	}
	return "/proc/self/fd/" + strconv.Itoa(moved), moved, nil
}

// Signal sends sig to the process pidfd refers to, which can never be
// another process that took its pid. A closed pidfd is os.ErrProcessDone.
func Signal(pidfd *os.File, sig syscall.Signal) error {
	raw, err := pidfd.SyscallConn()
	if err != nil {
		return os.ErrProcessDone
	}
	var sendErr error
	if err := raw.Control(func(fd uintptr) { sendErr = unix.PidfdSendSignal(int(fd), sig, nil, 0) }); err != nil {
		return os.ErrProcessDone
	}
	return sendErr
}

// Wait reaps the child pid and returns its resource usage, and an error
// when it did not exit with status 0: "exit status N" or "signal: NAME".
func Wait(pid int) (*syscall.Rusage, error) {
	var status syscall.WaitStatus
	var usage syscall.Rusage
	for {
		_, err := syscall.Wait4(pid, &status, 0, &usage)
		if err == nil {
			break
		}
		if err != syscall.EINTR {
			return nil, fmt.Errorf("wait for %d: %w", pid, err)
		}
	}
	return &usage, StatusError(status.ExitStatus(), signalOf(status))
}

func signalOf(status syscall.WaitStatus) syscall.Signal {
	if status.Signaled() {
		return status.Signal()
	}
	return 0
}

// StatusError says how a child ended when not with status 0, in os/exec's
// words, and is nil otherwise.
func StatusError(code int, sig syscall.Signal) error {
	switch {
	case sig != 0:
		return fmt.Errorf("signal: %v", sig)
	case code != 0:
		return fmt.Errorf("exit status %d", code)
	}
	return nil
}

// StartAs is Start with the child's new user namespace (CLONE_NEWUSER in
// attr) created, and so owned, by host uid owner rather than by the caller,
// which must be root (namespaces.NamespaceOwner says why); owner -1 is
// Start. The clone is made from this goroutine's thread, locked to it,
// with that thread's real and effective uid set to owner for the clone
// alone and its capabilities kept (SECBIT_NO_SETUID_FIXUP; the child's
// securebits start afresh in its new user namespace, and the inits clear
// them anyway). Nothing else runs on the thread meanwhile.
func StartAs(owner int, path string, args, env []string, files []*os.File, attr *syscall.SysProcAttr) (int, error) {
	if owner < 0 {
		return Start(path, args, env, files, attr)
	}
	runtime.LockOSThread()
	bits, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, unix.PR_GET_SECUREBITS, 0, 0)
	if errno != 0 {
		runtime.UnlockOSThread()
		return 0, fmt.Errorf("start %s: securebits: %w", path, errno)
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, unix.PR_SET_SECUREBITS, bits|secbitNoSetuidFixup, 0); errno != 0 {
		runtime.UnlockOSThread()
		return 0, fmt.Errorf("start %s: securebits: %w", path, errno)
	}
	// Real and effective uid both: an exec with the two apart counts as
	// a set-uid one, which (before Linux 6.x) clears the ambient
	// capabilities an unmapped init keeps across its exec. The saved uid
	// stays, to come back.
	keep := ^uintptr(0) // -1: leave the id as it is
	ruid := syscall.Getuid()
	_, _, errno = syscall.RawSyscall(syscall.SYS_SETRESUID, uintptr(owner), uintptr(owner), keep)
	var pid int
	err := error(nil)
	if errno != 0 {
		err = fmt.Errorf("start %s: become namespace owner %d: %w", path, owner, errno)
	} else {
		pid, err = Start(path, args, env, files, attr)
		if _, _, errno := syscall.RawSyscall(syscall.SYS_SETRESUID, uintptr(ruid), 0, keep); errno != 0 {
			// The thread stays locked and so ends with its goroutine;
			// it keeps every capability meanwhile, which is all this
			// goroutine needs.
			return pid, fmt.Errorf("start %s: back from namespace owner %d: %w", path, owner, errno)
		}
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, unix.PR_SET_SECUREBITS, bits, 0); errno != 0 {
		return pid, fmt.Errorf("start %s: securebits: %w", path, errno)
	}
	runtime.UnlockOSThread()
	return pid, err
}

// secbitNoSetuidFixup keeps a thread's capabilities when its uids change
// (linux/securebits.h).
const secbitNoSetuidFixup = 1 << 2
