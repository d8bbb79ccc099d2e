package seccomp

import (
	_ "embed"
	"encoding/json"
	"sync"
)

//go:generate go run ./internal/gen builtin_filters.json

// builtinFilters are the built-in profiles compiled at build time for this
// architecture and libseccomp version, keyed by Key. A profile whose key is
// not here (a user profile, another libseccomp) is compiled on first use.
//
//go:embed builtin_filters.json
var builtinFilters []byte

var (
	builtinOnce sync.Once
	builtin     map[string]Filter
)

// embedded returns the build-time filter for key, decoding the table the
// first time it is needed rather than at every start of the binary.
func embedded(key string) (Filter, bool) {
	builtinOnce.Do(func() {
		_ = json.Unmarshal(builtinFilters, &builtin)
	})
	f, ok := builtin[key]
	return f, ok && f.valid()
}
