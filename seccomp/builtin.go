package seccomp

import (
	"embed"

	"github.com/jail-sandbox/jail/profiles"
)

//go:generate go run ./internal/gen builtin

// builtinFS holds the built-in profiles compiled at build time for this
// architecture: the raw programs NAME.allow.bpf and NAME.deny.bpf (and
// builtinProfiles, generated beside this file, the profiles resolved). A
// sandbox under a built-in profile then neither parses YAML, nor hashes the
// policy, nor compiles: it takes the programs as they are.
//
//go:embed builtin
var builtinFS embed.FS

// Builtin returns the built-in profile name as resolved at build time, with
// its filter. The profile's Seccomp rules are empty: the filter is their
// compiled form. ok is false when the build knew no such profile.
func Builtin(name string) (p *profiles.Profile, f Filter, ok bool) {
	resolved, ok := builtinProfiles[name]
	if !ok {
		return nil, Filter{}, false
	}
	f.Allowlist, _ = builtinFS.ReadFile("builtin/" + name + ".allow.bpf")
	if deny, err := builtinFS.ReadFile("builtin/" + name + ".deny.bpf"); err == nil && len(deny) > 0 {
		f.Denials = deny
	}
	if !f.Valid() {
		return nil, Filter{}, false
	}
	// The caller gets its own copy of the lists.
	if resolved.Masks != nil {
		resolved.Masks = append(make([]string, 0, len(resolved.Masks)), resolved.Masks...)
	}
	if resolved.ReadOnly != nil {
		resolved.ReadOnly = append(make([]string, 0, len(resolved.ReadOnly)), resolved.ReadOnly...)
	}
	if resolved.Capabilities != nil {
		caps := append(make([]string, 0, len(*resolved.Capabilities)), *resolved.Capabilities...)
		resolved.Capabilities = &caps
	}
	if resolved.Env != nil {
		env := make(map[string]string, len(resolved.Env))
		for k, v := range resolved.Env {
			env[k] = v
		}
		resolved.Env = env
	}
	return &resolved, f, true
}
