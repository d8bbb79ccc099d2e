package test

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// embedderMain is a program that uses jail as a library: it runs its
// arguments after the first (a profile name) in a sandbox.
const embedderMain = `package main

import (
	"context"
	"fmt"
	"os"

	"github.com/jail-sandbox/jail"
)

func main() {
	jail.Init()
	res, err := jail.Run(context.Background(), jail.Spec{Profile: os.Args[1], Command: os.Args[2:], Stdout: os.Stdout, Stderr: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "jail:", err)
		os.Exit(125)
	}
	os.Exit(res.ExitCode)
}
`

// forgetfulMain is a program that uses a jail.Pool and does not call
// jail.Init. Were the dispatch left to main, the pool's forker and cgroup
// janitor, which jail starts by re-executing the program, would run its
// main instead; where NewPool refuses, it notes the refusal beside the
// program and exits.
const forgetfulMain = `package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jail-sandbox/jail"
)

func main() {
	pool, err := jail.NewPool(jail.Spec{}, 1)
	if err != nil {
		exe, _ := os.Executable()
		f, ferr := os.OpenFile(filepath.Join(filepath.Dir(exe), "refused"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if ferr == nil {
			fmt.Fprintln(f, err)
			f.Close()
		}
		os.Exit(3)
	}
	defer pool.Close()
	var out bytes.Buffer
	res, err := pool.Run(context.Background(), jail.Spec{Command: []string{"echo", "ok"}, Stdout: &out})
	if err != nil {
		fmt.Fprintln(os.Stderr, "jail:", err)
		os.Exit(125)
	}
	fmt.Print(out.String())
	os.Exit(res.ExitCode)
}
`

// TestLibraryNeedsNoGenerate: the module as `go get` gives it (its
// committed files only: no go generate) builds a program that embeds jail,
// which runs sandboxes with the C init (the committed helper program)
// under the built-in profiles; a user profile, which needs the tools
// program, fails in one line saying so. The jail command from the same
// files does not build, and its error names what to run.
func TestLibraryNeedsNoGenerate(t *testing.T) {
	if os.Getenv("JAIL_TEST_BINARIES") != "" {
		t.Skip("built and tested on the host")
	}
	module := filepath.Join(t.TempDir(), "jail")
	files, err := exec.Command("git", "-C", "..", "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join("..", name))
		if os.IsNotExist(err) {
			continue // removed in the work tree
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(module, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(module, "embedder"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(module, "embedder", "main.go"), []byte(embedderMain), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(module, "forgetful"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(module, "forgetful", "main.go"), []byte(forgetfulMain), 0o644); err != nil {
		t.Fatal(err)
	}
	embedder := filepath.Join(workDir, "bin", "embedder")
	build := exec.Command("go", "build", "-o", embedder, "./embedder")
	build.Dir, build.Env = module, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build a program that embeds jail: %v\n%s", err, out)
	}
	forgetfulDir := sharedTempDir(t, rootless)
	forgetful := filepath.Join(forgetfulDir, "forgetful")
	build = exec.Command("go", "build", "-o", forgetful, "./forgetful")
	build.Dir, build.Env = module, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build a program that forgets jail.Init: %v\n%s", err, out)
	}
	build = exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), "jail"), "./cmd/jail")
	build.Dir, build.Env = module, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err == nil || !strings.Contains(string(out), "RunMakeBuildOrGoGenerateInternalPrograms") {
		t.Errorf("go build ./cmd/jail without go generate: %v\n%s", err, out)
	}

	forEachMode(t, func(t *testing.T, m mode) {
		home, dir := profileHome(t, m)
		if err := os.WriteFile(filepath.Join(dir, "mine.yaml"), []byte("version: 1\nextends: default\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		run := func(args ...string) result {
			// withProfiles runs jail's path with args: the embedder
			// takes them without a subcommand.
			return runCmd(t, withProfiles(m, embedder, home, args...))
		}
		if r := run("default", "sh", "-c", "echo ok"); r.code != 0 || r.stdout != "ok\n" {
			t.Errorf("run: exit %d, %q %q", r.code, r.stdout, r.stderr)
		}
		if r := run("mine", "true"); r.code != 125 || !strings.Contains(r.stderr, "no tools program") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("a user profile: exit %d, stderr %q", r.code, r.stderr)
		}
	})

	// A program that does not call jail.Init gets its pool's forker and
	// janitor all the same (the package's init dispatches), not its own
	// main started again as them, which started another pool and so on
	// until the host had no process left, once. Run as the unprivileged
	// account under RLIMIT_NPROC, so that a regression stops at 400 of its
	// processes, not the host's.
	t.Run("forgotten Init", func(t *testing.T) {
		if os.Geteuid() != 0 || rootless == nil {
			t.Skip("needs root, to run the program as the test account under a process limit")
		}
		checkNoLeaks(t)
		cmd := commandAs(rootless, nil, "prlimit", "--nproc=400:400", "--", forgetful)
		r := runCmd(t, cmd)
		refused, _ := os.ReadFile(filepath.Join(forgetfulDir, "refused"))
		lines := strings.Split(strings.TrimSpace(string(refused)), "\n")
		if r.code != 0 || r.stdout != "ok\n" {
			t.Errorf("a pool without jail.Init: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if len(refused) != 0 {
			t.Errorf("the program's main was started again as a helper (%d times): %q", len(lines), refused)
		}
	})
}

// TestProgramsFromAMemfd: a user with no private directory for jail's helper
// programs (no /run/user/UID, no home in the password database: a uid a
// container runs under) still runs sandboxes, from a sealed memfd, and jail
// keeps that memfd within the descriptor table a process starts with (64
// entries): growing it waits for an RCU grace period on every start.
func TestProgramsFromAMemfd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run jail as a uid without an account")
	}
	checkNoLeaks(t)
	const nobody = 4243 // in no password database entry
	if _, err := user.LookupId(strconv.Itoa(nobody)); err == nil {
		t.Skip("uid 4243 has an account here")
	}
	if _, err := os.Stat(fmt.Sprintf("/run/user/%d", nobody)); err == nil {
		t.Skip("uid 4243 has a runtime directory here")
	}
	cmd := commandAs(&account{uid: nobody, gid: nobody}, nil, jailBin, "run", "--", "sh", "-c", "echo ready; read line")
	var env []string
	for _, v := range cmd.Env {
		if !strings.HasPrefix(v, "HOME=") {
			env = append(env, v)
		}
	}
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 6)
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "ready\n" {
		stdin.Close()
		_ = cmd.Wait()
		t.Fatalf("sandbox did not start: %q, %v; stderr %q", line, err, stderr.String())
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	memfd := -1
	for _, fd := range fds {
		target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", cmd.Process.Pid, fd.Name()))
		if strings.HasPrefix(target, "/memfd:jail-helper") {
			memfd, _ = strconv.Atoi(fd.Name())
		}
	}
	_, _ = io.WriteString(stdin, "done\n")
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("jail run: %v; stderr %q", err, stderr.String())
	}
	switch {
	case memfd < 0:
		t.Errorf("jail ran its helper program from somewhere else than a memfd")
	case memfd >= 64:
		t.Errorf("the memfd is descriptor %d, which grows the descriptor table", memfd)
	}
}
