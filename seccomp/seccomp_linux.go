// Package seccomp finds the compiled seccomp filter of a profile: built-in
// profiles come resolved and compiled at build time, and user profiles are
// compiled on first use (by package compile, run in jail's tools program)
// and cached, keyed by a hash of the policy, the architecture and the
// compiler. A sandbox's init only loads raw BPF (package filter), which
// takes well under a millisecond. This package has no cgo.
package seccomp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/jail-sandbox/jail/profiles"
	"github.com/jail-sandbox/jail/seccomp/filter"
)

// compilerVersion changes whenever the compiler's output for the same
// profile would change, invalidating cached filters.
const compilerVersion = 3

// Filter is a compiled policy (see package filter, which loads it).
type Filter = filter.Filter

// Compiler compiles a profile; Identity names it (and the libseccomp it
// uses) for cache keys.
type Compiler struct {
	Identity string
	Compile  func(*profiles.Profile) (Filter, error)
}

// Key identifies a compiled filter: the policy, the architecture and the
// compiler.
func Key(p *profiles.Profile, compiler string) (string, error) {
	policy, err := json.Marshal(p.Seccomp)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "jail-seccomp %d\n%s\n%s\n", compilerVersion, runtime.GOARCH, compiler)
	h.Write(policy)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// CacheDir is where compiled filters are kept: /var/cache/jail/seccomp for
// root, $XDG_CACHE_HOME/jail/seccomp (~/.cache/...) for others.
func CacheDir() string {
	if os.Geteuid() == 0 {
		return "/var/cache/jail/seccomp"
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "jail", "seccomp")
	}
	return ""
}

// Cached returns p's filter from the cache, compiling and storing it the
// first time. A cache that cannot be written only costs the compile.
func Cached(p *profiles.Profile, c Compiler) (Filter, error) {
	key, err := Key(p, c.Identity)
	if err != nil {
		return Filter{}, err
	}
	dir := CacheDir()
	path := filepath.Join(dir, key+".json")
	if dir != "" {
		if data, err := os.ReadFile(path); err == nil {
			var f Filter
			if json.Unmarshal(data, &f) == nil && f.Valid() {
				return f, nil
			}
		}
	}
	f, err := c.Compile(p)
	if err != nil {
		return Filter{}, err
	}
	data, err := json.Marshal(f)
	if err != nil {
		return Filter{}, err
	}
	if dir != "" && os.MkdirAll(dir, 0o755) == nil {
		// Written under a temporary name and renamed: a reader never
		// sees half a filter.
		if tmp, err := os.CreateTemp(dir, ".tmp-*"); err == nil {
			_, werr := tmp.Write(data)
			cerr := tmp.Close()
			if werr == nil && cerr == nil && os.Chmod(tmp.Name(), 0o644) == nil && os.Rename(tmp.Name(), path) == nil {
				return f, nil
			}
			os.Remove(tmp.Name())
		}
	}
	return f, nil
}
