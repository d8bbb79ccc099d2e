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

// testCgroup makes a sandbox cgroup for a test, as root only, removed when
// the test ends.
func testCgroup(t *testing.T, prefix string) (Layout, Manager) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	l, err := Detect()
	if err != nil || l.Version == None {
		t.Skipf("no cgroups: %v", err)
	}
	m, err := New(l, fmt.Sprintf("%s-%d", prefix, os.Getpid()), benchLimits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Destroy() })
	return l, m
}

// TestStartThenSettle: the init is born in the cgroup, and once Settle
// returns nothing of the supervisor is listed there, although the forking
// thread still lives (hold is open): what the janitor finds in the cgroup
// is the sandbox's own.
func TestStartThenSettle(t *testing.T) {
	_, m := testCgroup(t, "test")
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

// peakResettable reports whether the v2 cgroup dir's memory.peak can be
// written, which restarts it (Linux 6.12).
func peakResettable(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, "memory.peak"))
	return err == nil && st.Mode().Perm()&0o200 != 0
}

// TestReuseRefusesWhatIsStillInUse: a cgroup is readied for another
// sandbox only once no task is left in it and no more than the kernel's
// reserves stay charged to it; once readied, its counters start afresh. On
// a v2 kernel that cannot restart memory.peak, no cgroup is reusable.
func TestReuseRefusesWhatIsStillInUse(t *testing.T) {
	l, m := testCgroup(t, "test-reuse")
	if l.Version == V2 && !peakResettable(m.Paths()[0]) {
		if err := m.Reuse(); err != ErrNotReusable {
			t.Errorf("v2 reuse without a resettable memory.peak: %v, want ErrNotReusable", err)
		}
		return
	}
	runIn := func(script string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command("sh", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		hold := make(chan struct{})
		defer close(hold)
		if err := m.Start(cmd.SysProcAttr, cmd.Start, hold); err != nil {
			t.Fatal(err)
		}
		m.Settle()
		return cmd
	}

	sleeper := runIn("exec sleep 10")
	if err := m.Reuse(); err == nil {
		t.Error("reused with a task in it")
	}
	_ = sleeper.Process.Kill()
	_ = sleeper.Wait()

	// Page cache of a new file stays charged to the cgroup that wrote it
	// until the file goes.
	file := filepath.Join("/var/tmp", fmt.Sprintf("jail-reuse-%d", os.Getpid()))
	defer os.Remove(file)
	if err := runIn("dd if=/dev/zero of=" + file + " bs=1M count=8 2>/dev/null").Wait(); err != nil {
		t.Fatal(err)
	}
	if err := m.Reuse(); err == nil {
		t.Error("reused with 8 MB of page cache charged")
	}
	os.Remove(file)

	if err := runIn("dd if=/dev/zero of=/dev/null bs=16M count=4 2>/dev/null").Wait(); err != nil {
		t.Fatal(err)
	}
	used, err := m.Usage()
	if err != nil || used.PeakMemory < 16<<20 || used.CPU == 0 {
		t.Fatalf("usage of a 16 MB run: %+v %v", used, err)
	}
	if err := m.Reuse(); err != nil {
		t.Fatalf("reuse once the sandbox is gone: %v", err)
	}
	after, err := m.Usage()
	if err != nil || after.PeakMemory > maxLeftCharged || after.CPU != 0 || after.OOMKills != 0 {
		t.Errorf("usage once readied: %+v %v, want counters afresh", after, err)
	}
}
