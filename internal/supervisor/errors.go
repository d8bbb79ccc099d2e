package supervisor

import (
	"strconv"
	"strings"
	"unicode"
)

// SetupError means jail could not build or start the sandbox; nothing of the
// command ran (jail.SetupError).
type SetupError struct {
	Step string
	Err  error
	// Refused: the request itself was refused (a bad option, an unknown
	// profile or image, a mount source that may not be mounted) before
	// anything was started on the host.
	Refused bool
}

func (e *SetupError) Error() string { return oneLine(e.Step + ": " + e.Err.Error()) }
func (e *SetupError) Unwrap() error { return e.Err }

// ExecError means the sandbox was built but the command could not be
// executed: Code is 127 when it was not found, 126 otherwise
// (jail.ExecError).
type ExecError struct {
	Code   int
	Reason string
}

func (e *ExecError) Error() string { return oneLine(e.Reason) }

// oneLine escapes the control characters of an error's text (as Go
// quotes them: \n, \x1b). The text names what the caller or an image gave
// (a command, a path, a working directory) as it was given, and jail's
// errors are one line: a name with a newline must not print a second line
// that reads as jail's, nor a terminal escape reach the caller's terminal.
func oneLine(s string) string {
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
