package cgroups

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// layoutOrSkip is the layout a benchmark creates cgroups in, as root only:
// benchmarks never touch the cgroups of an ordinary user's session.
func layoutOrSkip(b *testing.B) Layout {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	l, err := Detect()
	if err != nil || l.Version == None {
		b.Skipf("no cgroups: %v", err)
	}
	return l
}

var benchLimits = Limits{Memory: 512 << 20, CPUs: 1, Pids: 256}

// BenchmarkCreateDestroy: a sandbox's cgroup made with its limits and
// removed again, empty.
func BenchmarkCreateDestroy(b *testing.B) {
	l := layoutOrSkip(b)
	for i := 0; i < b.N; i++ {
		m, err := New(l, fmt.Sprintf("bench-%d-%d", os.Getpid(), i), benchLimits)
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Destroy(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEnterThread: on v1, a thread moving itself into the cgroup and
// out again, the way the supervisor forks the init inside it.
func BenchmarkEnterThread(b *testing.B) {
	l := layoutOrSkip(b)
	if l.Version != V1 {
		b.Skip("v1 only: v2 clones into the cgroup")
	}
	m, err := New(l, fmt.Sprintf("bench-%d", os.Getpid()), benchLimits)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Destroy()
	v1 := m.(*v1Manager)
	done := make(chan error)
	go func() {
		// The thread ends with the goroutine: it was in other cgroups.
		runtime.LockOSThread()
		for i := 0; i < b.N; i++ {
			if err := v1.enterThread(); err != nil {
				done <- err
				return
			}
			if err := v1.leaveThread(); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// TestStartThenSettle: the init is born in the cgroup, and once Settle
// returns nothing of the supervisor is listed there, although the forking
// thread still lives (hold is open): what the janitor finds in the cgroup
// is the sandbox's own.
func TestStartThenSettle(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	l, err := Detect()
	if err != nil || l.Version == None {
		t.Skipf("no cgroups: %v", err)
	}
	m, err := New(l, fmt.Sprintf("test-%d", os.Getpid()), benchLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Destroy()
	hold := make(chan struct{})
	defer close(hold)
	cmd := exec.Command("sleep", "10")
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if err := m.Start(cmd.SysProcAttr, cmd.Start, hold); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	m.Settle()
	for _, dir := range m.Paths() {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		procs := strings.Fields(string(b))
		if len(procs) != 1 || procs[0] != strconv.Itoa(cmd.Process.Pid) {
			t.Errorf("%s holds %v, want only the child %d", dir, procs, cmd.Process.Pid)
		}
	}
}
