package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildWithoutPrograms: a build that embeds neither helper program (a
// plain `go build`, as a library user gets) still runs sandboxes, its own
// binary re-executed as their init, under the built-in profiles; what needs
// the tools program (a user profile, image pull) or the server program says
// so in one line.
func TestBuildWithoutPrograms(t *testing.T) {
	if os.Getenv("JAIL_TEST_BINARIES") != "" {
		t.Skip("built and tested on the host")
	}
	plain := filepath.Join(workDir, "bin", "jail-plain")
	build := exec.Command("go", "build", "-tags", "jail_noprograms", "-o", plain, "../cmd/jail")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	profiles := sharedTempDir(t, rootless)
	dir := filepath.Join(profiles, "jail", "profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mine.yaml"), []byte("version: 1\nextends: default\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	forEachMode(t, func(t *testing.T, m mode) {
		run := func(args ...string) result {
			cmd := command(m, args...)
			cmd.Args[len(cmd.Args)-len(args)-1] = plain
			if cmd.Path == jailBin {
				cmd.Path = plain
			}
			cmd.Env = append(cmd.Env, "XDG_CONFIG_HOME="+profiles)
			return runCmd(t, cmd)
		}
		if r := run("run", "--", "sh", "-c", "echo ok"); r.code != 0 || r.stdout != "ok\n" {
			t.Errorf("run: exit %d, %q %q", r.code, r.stdout, r.stderr)
		}
		for _, c := range []struct {
			args    []string
			program string
		}{
			{[]string{"run", "--profile", "mine", "--", "true"}, "tools"},
			{[]string{"image", "pull", "localhost/x:1"}, "tools"},
			{[]string{"serve", "--socket", filepath.Join(profiles, "x.sock")}, "server"},
		} {
			args := c.args
			r := run(args...)
			if r.code != 125 || !strings.Contains(r.stderr, "no "+c.program+" program") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
			}
		}
	})
}
