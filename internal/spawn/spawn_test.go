package spawn

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStartAndWait: the child gets /dev/null for missing stdio and the
// extra files from descriptor 3; Wait says how it ended as os/exec would.
func TestStartAndWait(t *testing.T) {
	cases := []struct {
		name, script, wantErr string
	}{
		{"exit 0", "exit 0", ""},
		{"exit 3", "exit 3", "exit status 3"},
		{"killed", "kill -KILL $$", "signal: killed"},
		{"stdin is /dev/null", `[ "$(readlink /proc/self/fd/0)" = /dev/null ]`, ""},
		{"descriptor 3 is the extra file", `echo hello >&3`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			pid, err := Start("/bin/sh", []string{"sh", "-c", c.script}, []string{}, []*os.File{nil, os.Stderr, os.Stderr, w}, &syscall.SysProcAttr{})
			w.Close()
			if err != nil {
				t.Fatal(err)
			}
			usage, err := Wait(pid)
			if (err == nil) != (c.wantErr == "") || (err != nil && err.Error() != c.wantErr) {
				t.Errorf("Wait: %v; want %q", err, c.wantErr)
			}
			if usage == nil {
				t.Errorf("no resource usage")
			}
			out := make([]byte, 16)
			n, _ := r.Read(out)
			if strings.Contains(c.script, ">&3") && string(out[:n]) != "hello\n" {
				t.Errorf("descriptor 3 got %q", out[:n])
			}
		})
	}
	if _, err := Start("/nonexistent", []string{"x"}, nil, []*os.File{nil, nil, nil}, &syscall.SysProcAttr{}); err == nil || !strings.Contains(err.Error(), "/nonexistent") {
		t.Errorf("a missing program: %v", err)
	}
}

// TestSignal: a signal sent through the pidfd ends the child, and a closed
// pidfd is os.ErrProcessDone.
func TestSignal(t *testing.T) {
	pidfd := -1
	pid, err := Start("/bin/sleep", []string{"sleep", "60"}, nil, []*os.File{nil, nil, nil}, &syscall.SysProcAttr{PidFD: &pidfd})
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	if err := Signal(f, syscall.SIGTERM); err != nil {
		t.Errorf("Signal: %v", err)
	}
	if _, err := Wait(pid); err == nil || err.Error() != "signal: terminated" {
		t.Errorf("Wait after SIGTERM: %v", err)
	}
	f.Close()
	if err := Signal(f, syscall.SIGTERM); err != os.ErrProcessDone {
		t.Errorf("Signal through a closed pidfd: %v; want os.ErrProcessDone", err)
	}
}

// TestStartAsOwnsTheNamespace: a user namespace started with StartAs
// belongs to the owner given, the starting thread comes back as it was, and
// the child inherits the securebits it must clear (as the init does).
func TestStartAsOwnsTheNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("StartAs needs root")
	}
	const owner = 1999999999
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
	pid, err := StartAs(owner, "/bin/sh", []string{"sh", "-c", "grep -E '^(Uid|Gid)' /proc/self/status; read x"}, nil, []*os.File{r, w, nil}, attr)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { syscall.Kill(pid, syscall.SIGKILL); Wait(pid) }()
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	got, err := unix.IoctlGetUint32(int(ns.Fd()), nsGetOwnerUID)
	if err != nil {
		t.Fatal(err)
	}
	if got != owner {
		t.Errorf("the namespace belongs to uid %d; want %d", got, owner)
	}
	if os.Geteuid() != 0 {
		t.Errorf("the caller's effective uid stayed %d", os.Geteuid())
	}
	// Every thread of this process is as it was: no uid changed for
	// good, and no securebits left set.
	for i := 0; i < 20; i++ {
		if bits, err := unix.PrctlRetInt(unix.PR_GET_SECUREBITS, 0, 0, 0, 0); err != nil || bits != 0 {
			t.Fatalf("securebits %#x left on a thread (%v)", bits, err)
		}
		if uid, euid := syscall.Getuid(), syscall.Geteuid(); uid != 0 || euid != 0 {
			t.Fatalf("uid %d, euid %d left on a thread", uid, euid)
		}
		runtime.Gosched()
	}
}

// nsGetOwnerUID is NS_GET_OWNER_UID (linux/nsfs.h).
const nsGetOwnerUID = 0xb704

// TestStartFromADescriptorInTheSetupsWay: a program run from its
// descriptor (/proc/self/fd/N) starts whatever the numbers of the files
// handed over, including where the child's descriptor setup writes before
// the exec: just above the highest of them (its error pipe first), and
// below their count.
func TestStartFromADescriptorInTheSetupsWay(t *testing.T) {
	const program = "/bin/true"
	for _, c := range []struct {
		name     string
		prog     int // the program's descriptor
		highest  int // the highest file's, 0: none besides stdio
		nfiles   int
		wantSame bool // path is used as it is
	}{
		{"just above the highest file (the pipe's place)", 200, 199, 4, false},
		{"among the moved ones", 203, 199, 4, false},
		{"below the files' count", -1, 0, 16, false}, // -1: a free one below 16
		{"well above", 300, 199, 4, true},
		{"between the count and the highest", 150, 199, 4, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := os.Open(program)
			if err != nil {
				t.Skip(err)
			}
			defer f.Close()
			inUse := func(fd int) bool {
				_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
				return err == nil
			}
			if c.prog < 0 {
				for fd := 3; fd < c.nfiles && c.prog < 0; fd++ {
					if !inUse(fd) {
						c.prog = fd
					}
				}
				if c.prog < 0 {
					t.Skipf("no descriptor below %d is free here", c.nfiles)
				}
			}
			// Only numbers nothing holds: a dup3 over one of the Go
			// runtime's own (its netpoller's, at a low number) crashed
			// the test binary (netpoll failed).
			for _, fd := range []int{c.prog, c.highest} {
				if fd > 2 && inUse(fd) && fd != int(f.Fd()) {
					t.Skipf("descriptor %d is in use here", fd)
				}
			}
			if err := unix.Dup3(int(f.Fd()), c.prog, unix.O_CLOEXEC); err != nil {
				t.Fatal(err)
			}
			defer unix.Close(c.prog)
			files := make([]*os.File, c.nfiles)
			null, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			defer null.Close()
			for i := 3; i < c.nfiles; i++ {
				files[i] = null
			}
			if c.highest > 0 {
				if err := unix.Dup3(int(null.Fd()), c.highest, unix.O_CLOEXEC); err != nil {
					t.Fatal(err)
				}
				defer unix.Close(c.highest)
				files[c.nfiles-1] = os.NewFile(uintptr(c.highest), "highest")
			}
			path := fmt.Sprintf("/proc/self/fd/%d", c.prog)
			fds := make([]uintptr, len(files))
			for i, f := range files {
				if f != nil {
					fds[i] = f.Fd()
				}
			}
			if got, moved, err := clearOfSetup(path, fds); err != nil || (got == path) != c.wantSame {
				t.Errorf("clearOfSetup(%s) = %s, %d, %v", path, got, moved, err)
			} else if moved >= 0 {
				unix.Close(moved)
			}
			pid, err := Start(path, []string{"true"}, nil, files, &syscall.SysProcAttr{})
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			if _, err := Wait(pid); err != nil {
				t.Errorf("the program: %v", err)
			}
		})
	}
}
