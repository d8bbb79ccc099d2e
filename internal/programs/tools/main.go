// Command tools is the tools program of jail (see package programs): image
// import and pull, and compiling seccomp filters. jail runs it with the
// caller's arguments and stdio; it is embedded in jail at build time and
// never installed on its own.
//
//	tools compile          profile JSON on stdin, filter JSON on stdout
//	tools image import PATH [--name NAME[:TAG]] [--quiet]
//	tools image pull REF [--quiet]
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/jail-sandbox/jail/internal/procname"
	"github.com/jail-sandbox/jail/profiles"
	"github.com/jail-sandbox/jail/seccomp/compile"
)

func main() {
	procname.Set("jail-tools")
	if len(os.Args) < 2 {
		os.Exit(fail("tools: which command? (compile, image)"))
	}
	switch os.Args[1] {
	case "compile":
		os.Exit(compileCommand(os.Stdin, os.Stdout))
	case "image":
		os.Exit(imageCommand(os.Args[2:]))
	}
	os.Exit(fail("tools: unknown command %q", os.Args[1]))
}

// CompileError is how a compile failure travels back: a profile error keeps
// its profile and line.
type CompileError struct {
	Profile string `json:"profile,omitempty"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// compileCommand reads a resolved profile and writes its filter, or a
// CompileError with status 1.
func compileCommand(in io.Reader, out io.Writer) int {
	var p profiles.Profile
	if err := json.NewDecoder(in).Decode(&p); err != nil {
		return answer(out, CompileError{Message: "read profile: " + err.Error()}, 1)
	}
	f, err := compile.Compile(&p)
	if err != nil {
		var pe *profiles.Error
		if errors.As(err, &pe) {
			return answer(out, CompileError{Profile: pe.Profile, Line: pe.Line, Message: pe.Err.Error()}, 1)
		}
		return answer(out, CompileError{Message: err.Error()}, 1)
	}
	return answer(out, f, 0)
}

func answer(out io.Writer, v any, code int) int {
	if err := json.NewEncoder(out).Encode(v); err != nil {
		return 1
	}
	return code
}

// fail prints a one-line error as jail does and returns jail's status for
// its own failures.
func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "jail: "+format+"\n", args...)
	return 125
}
