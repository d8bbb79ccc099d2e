package oneline

import "testing"

// TestEscape: control characters are escaped as Go quotes them; printable
// text, UTF-8 included, is unchanged.
func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"exec ./a\nb: not found", `exec ./a\nb: not found`},
		{"x\x1b[2J\ry\t\x7f", `x\x1b[2J\ry\t\x7f`},
		{"\u0085next line", `\u0085next line`},
		{`"/é": a "quoted" \ name`, `"/é": a "quoted" \ name`},
		{"", ""},
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
