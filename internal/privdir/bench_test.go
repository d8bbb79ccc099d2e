package privdir

import "testing"

// BenchmarkHomeOf is what finding a home in the password database costs,
// read anew: what each of the several askers of a sandbox's start (its
// profiles, its programs' directory, the directories kept from it, the
// homes masked in it) paid before they shared one Passwd.
func BenchmarkHomeOf(b *testing.B) {
	for b.Loop() {
		if _, err := (*Passwd)(nil).HomeOf(0); err != nil {
			b.Fatal(err)
		}
	}
}
