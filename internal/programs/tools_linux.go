package programs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"syscall"

	"github.com/jail-sandbox/jail/profiles"
	"github.com/jail-sandbox/jail/seccomp"
)

// RunTools runs the tools program with args and the given stdio and
// returns its exit status.
func RunTools(args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	p, err := Open(Tools)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	// The tools program dies with its caller, as if it were the caller:
	// an import killed midway must not go on writing. The parent-death
	// signal follows the thread that started the child, so that thread
	// stays for the child's life.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := &exec.Cmd{
		Path: p.Path, Args: append([]string{"jail-tools"}, args...),
		Stdin: stdin, Stdout: stdout, Stderr: stderr,
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	}
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("tools program: %w", err)
	}
	return 0, nil
}

// SeccompCompiler compiles profiles in the tools program. Its identity, part
// of the cache key, is the tools program's version, which covers the
// libseccomp linked into it.
func SeccompCompiler() seccomp.Compiler {
	return seccomp.Compiler{Identity: "tools " + Version(Tools), Compile: compileInTools}
}

// compileError mirrors the tools program's answer on failure.
type compileError struct {
	Profile string `json:"profile"`
	Line    int    `json:"line"`
	Message string `json:"message"`
}

func compileInTools(p *profiles.Profile) (seccomp.Filter, error) {
	in, err := json.Marshal(p)
	if err != nil {
		return seccomp.Filter{}, err
	}
	var out, stderr bytes.Buffer
	code, err := RunTools([]string{"compile"}, bytes.NewReader(in), &out, &stderr)
	if err != nil {
		return seccomp.Filter{}, err
	}
	if code != 0 {
		var ce compileError
		if json.Unmarshal(out.Bytes(), &ce) != nil || ce.Message == "" {
			return seccomp.Filter{}, fmt.Errorf("tools program: compile: status %d: %s", code, bytes.TrimSpace(stderr.Bytes()))
		}
		if ce.Profile != "" {
			return seccomp.Filter{}, &profiles.Error{Profile: ce.Profile, Line: ce.Line, Err: errors.New(ce.Message)}
		}
		return seccomp.Filter{}, errors.New(ce.Message)
	}
	var f seccomp.Filter
	if err := json.Unmarshal(out.Bytes(), &f); err != nil || !f.Valid() {
		return seccomp.Filter{}, fmt.Errorf("tools program: compile: not a filter")
	}
	return f, nil
}
