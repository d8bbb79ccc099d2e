package privdir

import "testing"

// BenchmarkHomeOf is what finding a home in the password database costs:
// a rootless `jail run` without /run/user/UID pays it for each program it
// opens, and root's for its profile directory.
func BenchmarkHomeOf(b *testing.B) {
	for b.Loop() {
		if _, err := HomeOf(0); err != nil {
			b.Fatal(err)
		}
	}
}
