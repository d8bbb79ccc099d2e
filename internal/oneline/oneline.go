// Package oneline keeps jail's messages on one line: it escapes the
// control characters (a newline, a terminal escape) of text that names
// what a caller or an image gave, as Go quotes them (\n, \x1b), so that no
// name can print a second line that reads as jail's, nor reach the
// caller's terminal as an escape sequence. Other text is returned as is.
package oneline

import (
	"strconv"
	"strings"
	"unicode"
)

// Escape returns s with its control characters escaped.
func Escape(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
