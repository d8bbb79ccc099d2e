package main

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// heldConns starts a child of the test (sleep) that holds n connected TCP
// clients on loopback among many other descriptors, and returns the
// clients' and the server's addresses and the child's pid.
func heldConns(t *testing.T, n, filler int) (clients []netip.AddrPort, server netip.AddrPort, pid int) {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var files []*os.File
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	for i := 0; i < filler; i++ {
		files = append(files, devnull)
	}
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp4", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		f, err := c.(*net.TCPConn).File()
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, addrPortOf(c.LocalAddr()))
		c.Close()
		defer f.Close()
		files = append(files, f)
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	}
	cmd := exec.Command("sleep", "1000")
	cmd.ExtraFiles = files
	if err := cmd.Start(); err != nil {
		t.Skipf("start a child holding %d descriptors: %v", len(files), err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return clients, addrPortOf(l.Addr()), cmd.Process.Pid
}

// selfFinder is a finder whose "init" is the test process: its children
// are the processes looked through.
func selfFinder(t *testing.T) *pidFinder {
	t.Helper()
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		t.Skipf("pidfd_open: %v", err)
	}
	pidfd := os.NewFile(uintptr(fd), "pidfd")
	t.Cleanup(func() { pidfd.Close() })
	f := newPidFinder(pidfd)
	if f == nil {
		t.Fatal("no finder for the test process")
	}
	return f
}

func TestPidLookupFindsTheProcessHoldingTheSocket(t *testing.T) {
	clients, server, pid := heldConns(t, 1, 0)
	f := selfFinder(t)
	if got := f.find("tcp", clients[0], server); got != pid {
		t.Fatalf("find: pid %d, want %d", got, pid)
	}
	f.start("tcp", clients[0], server)
	if got, _ := f.pid(clients[0]); got != pid {
		t.Fatalf("start then pid: pid %d, want %d", got, pid)
	}
}

// TestPidLookupsAtOnceAreBounded: the sandbox decides how many lookups
// the gateway makes (one per connection and per query) and how long each
// takes (its descriptors): each used to run in a goroutine of its own, as
// many at once as the sandbox opened connections, on the host's CPUs
// outside the sandbox's cgroup. Now at most 2 run; the
// others give pid 0 at once.
func TestPidLookupsAtOnceAreBounded(t *testing.T) {
	const conns = 200
	clients, server, _ := heldConns(t, conns, 4000)
	f := selfFinder(t)
	before := runtime.NumGoroutine()
	for _, c := range clients {
		f.start("tcp", c, server)
	}
	if running := runtime.NumGoroutine() - before; running > maxActiveLookups {
		t.Errorf("%d lookups started for %d connections run at once; want at most %d", running, conns, maxActiveLookups)
	}
	found := 0
	for _, c := range clients {
		if got, _ := f.pid(c); got != 0 {
			found++
		}
	}
	if found > maxActiveLookups {
		t.Errorf("%d lookups found their process; want at most %d of the connections started at once", found, maxActiveLookups)
	}
	// Once they are done, a lookup runs again.
	if got := f.find("tcp", clients[0], server); got == 0 {
		t.Errorf("a lookup after the others ended found nothing")
	}
}
