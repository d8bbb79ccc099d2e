package seccomp

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/profiles"
)

func TestBuiltinsCompile(t *testing.T) {
	for _, name := range []string{"default", "strict", "build"} {
		p, err := profiles.Store{}.Resolve(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Compile(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// strict allows only terminal ioctls, so TIOCSTI needs no second
		// program there.
		if !f.valid() || (len(f.Denials) == 0) != (name == "strict") {
			t.Errorf("%s: %d+%d bytes", name, len(f.Allowlist), len(f.Denials))
		}
		k1, _ := Key(p)
		p.Seccomp.Allow = p.Seccomp.Allow[1:]
		if k2, _ := Key(p); k1 == k2 {
			t.Errorf("%s: the cache key ignores the policy", name)
		}
	}
}

// onThrowawayThread runs f on an OS thread that exits afterwards, taking
// any filter f loaded with it.
func onThrowawayThread(f func()) {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer close(done)
		f()
	}()
	<-done
}

// BenchmarkLoadDefault is what a sandbox pays for its filter: loading the
// cached default profile (two programs) with seccomp(2).
func BenchmarkLoadDefault(b *testing.B) {
	p, err := profiles.Store{}.Resolve("default")
	if err != nil {
		b.Fatal(err)
	}
	f, err := Compile(p)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		onThrowawayThread(func() {
			_ = unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
			if err := Load(f); err != nil {
				b.Error(err)
			}
		})
	}
}

// BenchmarkCompileDefault is what the cache saves.
func BenchmarkCompileDefault(b *testing.B) {
	p, _ := profiles.Store{}.Resolve("default")
	for i := 0; i < b.N; i++ {
		if _, err := Compile(p); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEmbeddedFiltersAreCurrent: the build-time filters are what Compile
// makes now (run `go generate ./seccomp` after changing a built-in).
func TestEmbeddedFiltersAreCurrent(t *testing.T) {
	for _, name := range []string{"default", "strict", "build"} {
		p, _ := profiles.Store{}.Resolve(name)
		key, _ := Key(p)
		got, ok := embedded(key)
		if !ok {
			t.Errorf("%s: no build-time filter for key %s (go generate ./seccomp)", name, key[:12])
			continue
		}
		want, _ := Compile(p)
		if string(got.Allowlist) != string(want.Allowlist) || string(got.Denials) != string(want.Denials) {
			t.Errorf("%s: the build-time filter differs from a fresh compile", name)
		}
	}
}
