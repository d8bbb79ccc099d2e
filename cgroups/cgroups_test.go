package cgroups

import (
	"fmt"
	"os"
	"runtime"
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
