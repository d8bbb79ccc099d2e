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

// ProfileResolver resolves and compiles user profiles in the tools program,
// which links the YAML reader and libseccomp. Its identity, part of the
// cache key, is the tools program's version, which covers both and the
// built-in profiles a user profile may extend.
func ProfileResolver() seccomp.Resolver {
	return seccomp.Resolver{Identity: "tools " + Version(Tools), Resolve: resolveInTools}
}

func resolveInTools(user profiles.Files, name string) (*profiles.Profile, seccomp.Filter, error) {
	in, err := json.Marshal(seccomp.ResolveRequest{Name: name, Files: user})
	if err != nil {
		return nil, seccomp.Filter{}, err
	}
	var out, stderr bytes.Buffer
	code, err := RunTools([]string{"profile", "resolve"}, bytes.NewReader(in), &out, &stderr)
	if err != nil {
		return nil, seccomp.Filter{}, err
	}
	if code != 0 {
		var re seccomp.ResolveError
		if json.Unmarshal(out.Bytes(), &re) != nil || re.Message == "" {
			return nil, seccomp.Filter{}, fmt.Errorf("tools program: profile resolve: status %d: %s", code, bytes.TrimSpace(stderr.Bytes()))
		}
		if re.Profile != "" {
			return nil, seccomp.Filter{}, &profiles.Error{Profile: re.Profile, Line: re.Line, Err: errors.New(re.Message)}
		}
		return nil, seccomp.Filter{}, errors.New(re.Message)
	}
	var r seccomp.Resolved
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Profile == nil || !r.Filter.Valid() {
		return nil, seccomp.Filter{}, fmt.Errorf("tools program: profile resolve: not a resolved profile")
	}
	return r.Profile, r.Filter, nil
}
