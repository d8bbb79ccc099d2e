// Command gen compiles the built-in profiles for the native architecture
// and writes them, keyed as seccomp.Key keys them, to the file jail embeds:
// a sandbox using a built-in profile then never compiles anything.
//
//	go generate ./seccomp
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/jail-sandbox/jail/profiles"
	"github.com/jail-sandbox/jail/seccomp"
)

func main() {
	out := map[string]seccomp.Filter{}
	infos, err := profiles.Store{}.List()
	if err != nil {
		fail(err)
	}
	for _, info := range infos {
		p, err := profiles.Store{}.Resolve(info.Name)
		if err != nil {
			fail(err)
		}
		key, err := seccomp.Key(p)
		if err != nil {
			fail(err)
		}
		if out[key], err = seccomp.Compile(p); err != nil {
			fail(err)
		}
	}
	data, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(os.Args[1], append(data, '\n'), 0o644); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gen:", err)
	os.Exit(1)
}
