package supervisor

import (
	"errors"
	"testing"
)

// TestErrorsAreOneLine: what a request or an image names in an error (a
// command, a path) is shown with its control characters escaped, so every
// error is one line and no terminal escape passes through; other text is
// unchanged.
func TestErrorsAreOneLine(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&ExecError{Code: 127, Reason: "exec ./a\nb: no such file or directory"}, `exec ./a\nb: no such file or directory`},
		{&ExecError{Code: 127, Reason: "exec \x1b]0;x\a: command not found"}, `exec \x1b]0;x\a: command not found`},
		{&SetupError{Step: "workdir /a\r\nb", Err: errors.New("no such directory in the sandbox")}, `workdir /a\r\nb: no such directory in the sandbox`},
		{&SetupError{Step: "--mount /tmp/x", Err: errors.New("refused:\tsensitive")}, `--mount /tmp/x: refused:\tsensitive`},
		{&SetupError{Step: "--workdir", Err: errors.New(`"/é": not here`)}, `--workdir: "/é": not here`},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}
