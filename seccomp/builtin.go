package seccomp

import (
	"embed"
	"encoding/json"

	"github.com/jail-sandbox/jail/profiles"
)

//go:generate go run ./internal/gen builtin

// builtinFS holds the built-in profiles resolved and compiled at build time
// for this architecture, three files each: NAME.json (the resolved profile
// without its seccomp rules, which the programs stand for) and the
// raw programs NAME.allow.bpf and NAME.deny.bpf. A sandbox under a built-in
// profile then neither parses YAML, nor hashes the policy, nor compiles: it
// reads a few hundred bytes of JSON and takes the programs as they are.
//
//go:embed builtin
var builtinFS embed.FS

// Builtin returns the built-in profile name as resolved at build time, with
// its filter. The profile's Seccomp rules are empty: the filter is their
// compiled form. ok is false when the build knew no such profile.
func Builtin(name string) (p *profiles.Profile, f Filter, ok bool) {
	var resolved profiles.Profile
	data, err := builtinFS.ReadFile("builtin/" + name + ".json")
	if err != nil || json.Unmarshal(data, &resolved) != nil {
		return nil, Filter{}, false
	}
	f.Allowlist, _ = builtinFS.ReadFile("builtin/" + name + ".allow.bpf")
	if deny, err := builtinFS.ReadFile("builtin/" + name + ".deny.bpf"); err == nil && len(deny) > 0 {
		f.Denials = deny
	}
	if !f.Valid() {
		return nil, Filter{}, false
	}
	return &resolved, f, true
}
