package test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jail-sandbox/jail/api"
)

// inspectSandbox prints what the sandbox a command lands in is made of,
// through the busybox that both the host tree and the busybox root have:
// every mount with its options (mount ids and the descriptor numbers an
// init names its layers by left out), credentials, capabilities, filter,
// identity, environment, limits, the root's entries, /dev, the processes
// in sight and the cgroup.
const inspectSandbox = `set -e
busybox sed -e 's#/proc/self/fd/[0-9]*#/proc/self/fd/N#g' /proc/self/mountinfo |
	busybox awk '{ i = 7; while ($i != "-") i++; print $4, $5, $6, $(i+1), $(i+2), $(i+3) }'
busybox grep -E '^(Uid|Gid|Groups|Cap|NoNewPrivs|Seccomp)' /proc/self/status
busybox id; busybox hostname; pwd; umask; ulimit -a
busybox env | busybox sort
busybox ls -A /
busybox stat -c '%A %U:%G %t:%T %N' /dev/* /dev/pts /dev/shm
busybox ls /proc >/tmp/processes; busybox grep -c '^[0-9]' /tmp/processes
busybox cat /proc/self/cgroup
`

// TestInitsBuildTheSameSandbox: the C init, which jail runs where the build
// has it, and the Go init, which a build without the helper programs runs,
// build the same sandbox: the same mounts with the same options in the same
// order, the same credentials, capabilities, filter, environment and
// limits; and they answer a command that cannot start alike. The
// isolation tests check the C init; this holds the Go init to it.
func TestInitsBuildTheSameSandbox(t *testing.T) {
	plain := plainBuild(t)
	workspace := sharedTempDir(t, rootless)
	cases := []struct {
		name string
		args []string
	}{
		{"host tree", []string{"run", "--", "sh", "-c", inspectSandbox}},
		{"busybox root", []string{"run", "--rootfs", rootfsDir, "--", "sh", "-c", inspectSandbox}},
		{"options", []string{"run", "--user", "1000:1000", "--workspace", workspace, "--mount", probeDir + ":/opt/probe",
			"--env", "A=1", "--hostname", "box", "--read-only", "--", "sh", "-c", inspectSandbox}},
		{"image-like root with a workspace", []string{"run", "--rootfs", rootfsDir, "--workspace", workspace, "--workdir", "/workspace",
			"--", "sh", "-c", inspectSandbox}},
		{"missing command", []string{"run", "--", "/no/such/command"}},
		{"command not on PATH", []string{"run", "--", "no-such-command"}},
		{"not executable", []string{"run", "--", "/etc/passwd"}},
		{"missing workdir", []string{"run", "--workdir", "/no/such/dir", "--", "true"}},
		{"killed by a signal", []string{"run", "--", "sh", "-c", "kill -TERM $$"}},
		{"stdin", []string{"run", "--", "sh", "-c", "busybox wc -c"}},
	}
	forEachMode(t, func(t *testing.T, m mode) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				withC := runWithStdin(t, command(m, c.args...), "four")
				goCmd := command(m, c.args...)
				goCmd.Args[len(goCmd.Args)-len(c.args)-1] = plain
				if goCmd.Path == jailBin {
					goCmd.Path = plain
				}
				withGo := runWithStdin(t, goCmd, "four")
				if withC.code != withGo.code || withC.stdout != withGo.stdout || withC.stderr != withGo.stderr {
					t.Errorf("the inits differ:\nC init: exit %d, stderr %q\nGo init: exit %d, stderr %q\n%s",
						withC.code, withC.stderr, withGo.code, withGo.stderr, lineDiff(withC.stdout, withGo.stdout))
				}
				if strings.Contains(c.args[len(c.args)-1], "busybox sed") && (withC.code != 0 || !strings.Contains(withC.stdout, "NoNewPrivs:\t1")) {
					t.Errorf("the inspection did not run: exit %d\n%s\n%s", withC.code, withC.stdout, withC.stderr)
				}
			})
		}
	})
}

// runWithStdin runs cmd with stdin as its standard input.
func runWithStdin(t *testing.T, cmd *exec.Cmd, stdin string) result {
	t.Helper()
	cmd.Stdin = strings.NewReader(stdin)
	return runCmd(t, cmd)
}

// lineDiff lists the lines of a and b that the other lacks.
func lineDiff(a, b string) string {
	var out strings.Builder
	for _, l := range minus(strings.Split(a, "\n"), strings.Split(b, "\n")) {
		out.WriteString("only with the C init:  " + l + "\n")
	}
	for _, l := range minus(strings.Split(b, "\n"), strings.Split(a, "\n")) {
		out.WriteString("only with the Go init: " + l + "\n")
	}
	if out.Len() == 0 && a != b {
		out.WriteString("the same lines in another order:\n" + a + "\n---\n" + b)
	}
	return out.String()
}

// plainBuild returns a jail binary without the helper programs (a plain
// `go build`), which runs its own Go init. Under $JAIL_TEST_BINARIES it is
// the jail-plain built there.
func plainBuild(t *testing.T) string {
	t.Helper()
	plain := filepath.Join(workDir, "bin", "jail-plain")
	if dir := os.Getenv("JAIL_TEST_BINARIES"); dir != "" {
		data, err := os.ReadFile(filepath.Join(dir, "jail-plain"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(plain, data, 0o755); err != nil {
			t.Fatal(err)
		}
		return plain
	}
	build := exec.Command("go", "build", "-tags", "jail_noprograms", "-o", plain, "../cmd/jail")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return plain
}

// TestInitIsTheCProgram: a full build starts the init of a sandbox from
// the C program, a single thread with no language runtime (the Go init has
// several), for a cold start and for a pool's ready sandbox alike; a build
// that silently fell back to the Go init would lose its start-up gain.
func TestInitIsTheCProgram(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		_, initPid := startSleeperAndInit(t, m, "7.125")
		if threads := statusOf(t, initPid, "Threads"); threads != "1" {
			t.Errorf("a cold start's init has %s threads; want the C init's 1", threads)
		}

		s := startServe(t, m, "--pool", "1")
		s.waitReady(t, 1)
		done := make(chan error, 1)
		go func() {
			_, err := s.client.Run(context.Background(), api.RunRequest{Cmd: "sleep", Args: []string{"7.375"}, TimeoutS: 30})
			done <- err
		}()
		sleeper := findProcess(t, "sleep\x007.375\x00")
		ppid, err := strconv.Atoi(statusOf(t, sleeper, "PPid"))
		if err != nil {
			t.Fatal(err)
		}
		if name, threads := statusOf(t, ppid, "Name"), statusOf(t, ppid, "Threads"); name != "jail-init" || threads != "1" {
			t.Errorf("a pool's sandbox runs under %q with %s threads; want jail-init, the C init's 1 thread", name, threads)
		}
		if err := syscall.Kill(sleeper, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
