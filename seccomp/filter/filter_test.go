package filter_test

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/seccomp"
	"github.com/jail-sandbox/jail/seccomp/filter"
)

// onThrowawayThread runs f on an OS thread that exits afterwards, taking
// any filter f loaded with it.
func onThrowawayThread(f func()) {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with f
		defer close(done)
		f()
	}()
	<-done
}

// TestLoadRefusesGarbage: a program that is not whole BPF instructions never
// reaches the kernel.
func TestLoadRefusesGarbage(t *testing.T) {
	for _, f := range []filter.Filter{{}, {Allowlist: []byte{1, 2, 3}}, {Allowlist: make([]byte, 8), Denials: []byte{1}}} {
		if err := filter.Load(f); err == nil {
			t.Errorf("loaded %v", f)
		}
	}
}

// BenchmarkLoadDefault is what a sandbox pays for its filter: loading the
// built-in default profile (two programs) with seccomp(2).
func BenchmarkLoadDefault(b *testing.B) {
	_, f, ok := seccomp.Builtin("default")
	if !ok {
		b.Fatal("no built-in default profile")
	}
	for i := 0; i < b.N; i++ {
		onThrowawayThread(func() {
			_ = unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
			if err := filter.Load(f); err != nil {
				b.Error(err)
			}
		})
	}
}
