package test

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestBuildWithoutPrograms: a build that embeds neither helper program (a
// plain `go build`, as a library user gets) still runs sandboxes, its own
// binary re-executed as their init, under the built-in profiles; what needs
// the tools program (a user profile, reading profile files, image pull) or
// the server program says so in one line.
func TestBuildWithoutPrograms(t *testing.T) {
	if os.Getenv("JAIL_TEST_BINARIES") != "" {
		t.Skip("built and tested on the host")
	}
	plain := plainBuild(t)
	forEachMode(t, func(t *testing.T, m mode) {
		home, dir := profileHome(t, m)
		if err := os.WriteFile(filepath.Join(dir, "mine.yaml"), []byte("version: 1\nextends: default\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		run := func(args ...string) result {
			return runCmd(t, withProfiles(m, plain, home, args...))
		}
		if r := run("run", "--", "sh", "-c", "echo ok"); r.code != 0 || r.stdout != "ok\n" {
			t.Errorf("run: exit %d, %q %q", r.code, r.stdout, r.stderr)
		}
		for _, c := range []struct {
			args    []string
			program string
		}{
			{[]string{"run", "--profile", "mine", "--", "true"}, "tools"},
			{[]string{"profile", "show", "default"}, "tools"},
			{[]string{"image", "pull", "localhost/x:1"}, "tools"},
			{[]string{"serve", "--socket", filepath.Join(home, "x.sock")}, "server"},
		} {
			args := c.args
			r := run(args...)
			if r.code != 125 || !strings.Contains(r.stderr, "no "+c.program+" program") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
			}
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
		if strings.HasPrefix(target, "/memfd:jail-init") {
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
		t.Errorf("jail ran its init program from somewhere else than a memfd")
	case memfd >= 64:
		t.Errorf("the memfd is descriptor %d, which grows the descriptor table", memfd)
	}
}
