package compile

import (
	"encoding/json"
	"testing"

	"github.com/jail-sandbox/jail/profiles"
	"github.com/jail-sandbox/jail/profiles/files"
	"github.com/jail-sandbox/jail/seccomp"
)

func TestBuiltinsCompile(t *testing.T) {
	for _, name := range []string{"default", "strict", "build"} {
		p, err := files.Resolve(nil, name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Compile(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// strict allows only terminal ioctls, so TIOCSTI needs no second
		// program there.
		if !f.Valid() || (len(f.Denials) == 0) != (name == "strict") {
			t.Errorf("%s: %d+%d bytes", name, len(f.Allowlist), len(f.Denials))
		}
	}
}

// BenchmarkCompileDefault is what the cache saves.
func BenchmarkCompileDefault(b *testing.B) {
	p, _ := files.Resolve(nil, "default")
	for i := 0; i < b.N; i++ {
		if _, err := Compile(p); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEmbeddedFiltersAreCurrent: the built-in profiles and filters made at
// build time are what resolving and compiling give now (run
// `go generate ./seccomp` after changing a built-in).
func TestEmbeddedFiltersAreCurrent(t *testing.T) {
	for _, name := range []string{"default", "strict", "build"} {
		p, _ := files.Resolve(nil, name)
		want, _ := Compile(p)
		pre, got, ok := seccomp.Builtin(name)
		if !ok {
			t.Errorf("%s: no build-time entry (go generate ./seccomp)", name)
			continue
		}
		if string(got.Allowlist) != string(want.Allowlist) || string(got.Denials) != string(want.Denials) {
			t.Errorf("%s: the build-time filter differs from a fresh compile (go generate ./seccomp)", name)
		}
		// Compared as JSON: what the table can hold.
		resolved := *p
		resolved.Seccomp = profiles.Seccomp{}
		gotJSON, _ := json.Marshal(pre)
		wantJSON, _ := json.Marshal(resolved)
		if string(gotJSON) != string(wantJSON) {
			t.Errorf("%s: the build-time profile differs from the YAML resolved now (go generate ./seccomp)", name)
		}
	}
}
