package oci

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// procStat is what /proc/PID/stat says of a process that jail checks:
// its state letter, parent and start time (clock ticks after boot, field
// 22), which, with the pid, names one process for the machine's uptime.
type procStat struct {
	State     byte
	Ppid      int
	StartTime uint64
}

// readProcStat reads /proc/PID/stat. The command name (field 2) may hold
// anything, spaces and parentheses included: the fields are read after
// its last ')'.
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(b)
}

func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("stat: no command name")
	}
	// Fields 3 on: state, ppid, ..., starttime is field 22.
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 || len(fields[0]) != 1 {
		return procStat{}, errors.New("stat: too few fields")
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return procStat{}, fmt.Errorf("stat: ppid: %w", err)
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("stat: start time: %w", err)
	}
	return procStat{State: fields[0][0], Ppid: ppid, StartTime: start}, nil
}

// openProcess returns a pidfd of process pid if it is still the process
// that started at startTime and has not exited; nil (and no error) when it
// is gone or another process has its pid. The pidfd is opened first and
// the start time read after: a pid reused before the open fails the
// comparison, and one reused after cannot be, since the pidfd names the
// process, not the pid.
func openProcess(pid int, startTime uint64) (*os.File, error) {
	if pid <= 0 {
		return nil, nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	// EINVAL (before Linux 6.9) and ENOENT: the pid names no process
	// leader: a thread that now has its number, or (before 6.9) a
	// process just released.
	if errors.Is(err, unix.ESRCH) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	st, err := readProcStat(pid)
	if err != nil || st.StartTime != startTime || st.State == 'Z' || st.State == 'X' {
		f.Close()
		return nil, nil
	}
	return f, nil
}

// signalPidfd sends sig through pidfd.
func signalPidfd(pidfd *os.File, sig syscall.Signal) error {
	return unix.PidfdSendSignal(int(pidfd.Fd()), sig, nil, 0)
}

// exited reports whether the process of pidfd has ended (its pidfd reads
// as readable then), without waiting.
func exited(pidfd *os.File) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd.Fd()), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// waitExit waits for the process of pidfd to end.
func waitExit(pidfd *os.File) error {
	fds := []unix.PollFd{{Fd: int32(pidfd.Fd()), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		return err
	}
}
