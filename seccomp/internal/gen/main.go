// Command gen resolves and compiles the built-in profiles for the native
// architecture and writes them where jail embeds them (see seccomp.Builtin):
// a sandbox using a built-in profile then never parses or compiles anything.
//
//	go generate ./seccomp
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jail-sandbox/jail/profiles"
	"github.com/jail-sandbox/jail/seccomp/compile"
)

func main() {
	dir := os.Args[1]
	infos, err := profiles.Store{}.List()
	if err != nil {
		fail(err)
	}
	// Only what this run writes stays: a profile removed from the
	// built-ins leaves nothing behind.
	old, _ := filepath.Glob(filepath.Join(dir, "*.*"))
	for _, f := range old {
		if ext := filepath.Ext(f); ext == ".json" || ext == ".bpf" {
			if err := os.Remove(f); err != nil {
				fail(err)
			}
		}
	}
	for _, info := range infos {
		p, err := profiles.Store{}.Resolve(info.Name)
		if err != nil {
			fail(err)
		}
		f, err := compile.Compile(p)
		if err != nil {
			fail(err)
		}
		resolved := *p
		resolved.Seccomp = profiles.Seccomp{}
		data, err := json.MarshalIndent(resolved, "", " ")
		if err != nil {
			fail(err)
		}
		write(filepath.Join(dir, info.Name+".json"), append(data, '\n'))
		write(filepath.Join(dir, info.Name+".allow.bpf"), f.Allowlist)
		write(filepath.Join(dir, info.Name+".deny.bpf"), f.Denials)
	}
}

func write(path string, data []byte) {
	if err := os.WriteFile(path, data, 0o644); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gen:", err)
	os.Exit(1)
}
