package oci

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/seccomp"
	"github.com/jail-sandbox/jail/seccomp/filter"
)

// CompileSeccompInTools compiles a bundle's seccomp policy in jail's tools
// program (`jail-tools oci seccomp`), which links libseccomp: the jail
// binary does not.
func CompileSeccompInTools(s *specs.LinuxSeccomp) (filter.Filter, error) {
	in, err := json.Marshal(s)
	if err != nil {
		return filter.Filter{}, err
	}
	return compileInTools(in)
}

func compileInTools(in []byte) (filter.Filter, error) {
	var out, stderr bytes.Buffer
	code, err := programs.RunTools([]string{"oci", "seccomp"}, bytes.NewReader(in), &out, &stderr)
	if err != nil {
		return filter.Filter{}, err
	}
	if code != 0 {
		var re seccomp.ResolveError
		if json.Unmarshal(out.Bytes(), &re) != nil || re.Message == "" {
			return filter.Filter{}, fmt.Errorf("tools program: oci seccomp: status %d: %s", code, bytes.TrimSpace(stderr.Bytes()))
		}
		return filter.Filter{}, errors.New(re.Message)
	}
	var f filter.Filter
	if err := json.Unmarshal(out.Bytes(), &f); err != nil || !f.Valid() {
		return filter.Filter{}, errors.New("tools program: oci seccomp: not a compiled filter")
	}
	return f, nil
}

// seccompCompiler is the compiler create and exec use: the tools
// program's, with the caller's cache.
func seccompCompiler() SeccompCompiler {
	return CompileSeccompCached(seccomp.CacheDir(nil))
}

// seccompCacheVersion changes when what a cached entry means does.
const seccompCacheVersion = 1

// maxSeccompEntry bounds a cached filter (three programs of at most 4096
// instructions, in JSON).
const maxSeccompEntry = 1 << 20

// CompileSeccompCached is CompileSeccompInTools with each compiled filter
// kept in dir (seccomp.CacheDir; "" keeps none), keyed by the policy's
// JSON, the architecture and the tools program's version: a pod's policy
// is compiled on its first create, and every later create and exec (a
// kubelet's probes) takes it from there. An entry is trusted only as
// package seccomp trusts a profile's: in a directory private to the
// caller, a regular file of the caller's that group and others cannot
// write; anything else is compiled again. A cache that cannot be written
// costs the compiling only.
func CompileSeccompCached(dir string) SeccompCompiler {
	return func(s *specs.LinuxSeccomp) (filter.Filter, error) {
		in, err := json.Marshal(s)
		if err != nil {
			return filter.Filter{}, err
		}
		h := sha256.New()
		fmt.Fprintf(h, "jail-oci-seccomp %d\n%s\ntools %s\n", seccompCacheVersion, runtime.GOARCH, programs.Version(programs.Tools))
		h.Write(in)
		entry := "oci-" + hex.EncodeToString(h.Sum(nil)) + ".json"
		cache := seccomp.OpenCache(dir)
		defer cache.Close()
		if data, ok := cache.Read(entry, maxSeccompEntry); ok {
			var f filter.Filter
			if json.Unmarshal(data, &f) == nil && f.Valid() {
				return f, nil
			}
		}
		f, err := compileInTools(in)
		if err != nil {
			return filter.Filter{}, err
		}
		if data, err := json.Marshal(f); err == nil {
			cache.Write(entry, data)
		}
		return f, nil
	}
}
