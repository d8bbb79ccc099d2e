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
	pid, err := syscall.ForkExec(path, args, &syscall.ProcAttr{Env: env, Files: fds, Sys: attr})
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", path, err)
	}
	return pid, nil
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
