// Command jailprobe is run inside sandboxes by the integration tests: each
// subcommand tries one thing a sandboxed process should or should not be
// able to do and prints what happened. It is built static so it runs in any
// root filesystem.
package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: jailprobe connect ADDR | connect-unix PATH | ptrace PID | open-write PATH | flock PATH | tiocsti | fds | pids | growsdown MIB | uring-create PATH | maxrss CMD...")
		os.Exit(2)
	}
	arg := ""
	if len(os.Args) > 2 {
		arg = os.Args[2]
	}
	var err error
	switch os.Args[1] {
	case "connect":
		var c net.Conn
		if c, err = net.DialTimeout("tcp", arg, 2*time.Second); err == nil {
			c.Close()
		}
	case "connect-unix":
		var c net.Conn
		if c, err = net.DialTimeout("unix", arg, 2*time.Second); err == nil {
			_, err = c.Write([]byte("from the sandbox\n"))
			c.Close()
		}
	case "ptrace":
		pid, _ := strconv.Atoi(arg)
		if err = unix.PtraceAttach(pid); err == nil {
			_ = unix.PtraceDetach(pid)
		}
	case "open-write":
		var f *os.File
		if f, err = os.OpenFile(arg, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
	case "flock":
		// Holds an exclusive lock on a file opened read-only, for three
		// seconds once it says so.
		var f *os.File
		if f, err = os.Open(arg); err == nil {
			if err = unix.Flock(int(f.Fd()), unix.LOCK_EX); err == nil {
				fmt.Println("locked")
				time.Sleep(3 * time.Second)
			}
			f.Close()
		}
	case "tiocsti":
		b := byte('x')
		err = unix.IoctlSetPointerInt(0, unix.TIOCSTI, int(b))
	case "fds":
		entries, _ := os.ReadDir("/proc/self/fd")
		var names []string
		for _, e := range entries {
			// The directory handle ReadDir used is closed by now: an fd
			// that no longer resolves was that one.
			if _, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil {
				continue
			}
			names = append(names, e.Name())
		}
		sort.Strings(names)
		fmt.Println(names)
		return
	case "syscalls":
		trySyscalls()
		return
	case "growsdown":
		// Maps MiB of private memory as a stack mapping (MAP_GROWSDOWN),
		// which RLIMIT_DATA does not count, and touches every page.
		mib, _ := strconv.Atoi(arg)
		var mem []byte
		if mem, err = unix.Mmap(-1, 0, mib<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_GROWSDOWN); err == nil {
			for i := 0; i < len(mem); i += 4096 {
				mem[i] = 1
			}
			fmt.Printf("touched %d MiB\n", mib)
			return
		}
	case "uring-create":
		var res int32
		if res, err = uringCreate(arg); err == nil {
			var st unix.Stat_t
			if err = unix.Stat(arg, &st); err == nil {
				fmt.Printf("io_uring openat %d: mode %o\n", res, st.Mode)
				return
			}
		}
	case "maxrss":
		// Runs the rest of the arguments and prints the largest resident
		// set of it and its descendants, in KiB, on stderr. Measured here,
		// not by the test binary: a child exec'd from a process whose
		// memory it shared (vfork) inherits that process's high-water mark.
		cmd := exec.Command(os.Args[2], os.Args[3:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		err := cmd.Run()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			fmt.Fprintf(os.Stderr, "jailprobe: maxrss %d\n", ru.Maxrss)
		}
		if err != nil {
			os.Exit(cmd.ProcessState.ExitCode())
		}
		return
	case "pids":
		entries, _ := os.ReadDir("/proc")
		var pids []int
		for _, e := range entries {
			if n, err := strconv.Atoi(e.Name()); err == nil {
				pids = append(pids, n)
			}
		}
		sort.Ints(pids)
		fmt.Println(pids)
		return
	default:
		err = fmt.Errorf("unknown probe %q", os.Args[1])
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ok")
}
