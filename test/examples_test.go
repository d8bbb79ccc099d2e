package test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The examples of examples/, run as their README says, as root and as the
// unprivileged user: the agent tool through a real `jail serve`, the CI
// step on a real project's test suite, the Go program embedding
// jail.Manager. Each is copied where the mode's user may read it (the
// checkout may be in root's private home).

// examplesFrom skips the test where the tree is not (the cgroup v2 VM
// runs the built suite without it).
func examplesFrom(t *testing.T, dir string) string {
	t.Helper()
	src := filepath.Join("..", "examples", dir)
	if _, err := os.Stat(src); err != nil {
		t.Skipf("the examples' sources are not here (%v): they run from a checkout", err)
	}
	return src
}

func needPython(t *testing.T) string {
	t.Helper()
	python := systemPython()
	if python == "" {
		t.Skip("python3 is not installed: the Python examples need it")
	}
	return python
}

// agentToolSetup copies the agent tool (from src) and the SDK into a
// directory of m's user and starts a jail serve of m's with a state
// directory and an audit log of its own there.
func agentToolSetup(t *testing.T, m mode, src string) (string, *server) {
	t.Helper()
	dir := sharedTempDir(t, ownerOf(m))
	for from, to := range map[string]string{src: "agent-tool", "../sdk/python/jail_sandbox": "sdk/jail_sandbox"} {
		if err := copySDK(from, filepath.Join(dir, to), ownerOf(m)); err != nil {
			t.Fatal(err)
		}
	}
	// ownerOf(m) made dir: its subdirectories are made by copySDK.
	if owner := ownerOf(m); owner != nil {
		os.Chown(filepath.Join(dir, "sdk"), owner.uid, owner.gid)
	}
	state, audit := filepath.Join(dir, "state"), filepath.Join(dir, "audit", "audit.log")
	return dir, startServeWith(t, m, []string{"JAIL_STATE_DIR=" + state, "JAIL_AUDIT_LOG=" + audit})
}

// TestExampleAgentTool: examples/agent-tool's scripted conversation
// through the Python SDK and a real `jail serve`: the tool's schema is
// printed, one sandbox serves every call (a file written by one call is
// read by the next), an exception, no network, and a call past its time
// limit are text for the model, and the sandbox is gone at the end.
func TestExampleAgentTool(t *testing.T) {
	src := examplesFrom(t, "agent-tool")
	python := needPython(t)
	forEachMode(t, func(t *testing.T, m mode) {
		dir, srv := agentToolSetup(t, m, src)

		cmd := programAs(m, python, "-B", filepath.Join(dir, "agent-tool", "run_python_tool.py"),
			"--socket", srv.socket, "--image", "", "--timeout", "2", "--conversation", "test:"+m.name)
		cmd.Env = append(cmd.Env, "PYTHONPATH="+filepath.Join(dir, "sdk"))
		r := runCmd(t, cmd)
		if r.code != 0 {
			t.Fatalf("the agent tool example: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		var schema struct {
			Tool struct {
				Name        string         `json:"name"`
				InputSchema map[string]any `json:"input_schema"`
			} `json:"tool"`
		}
		if err := json.Unmarshal([]byte(lines[0]), &schema); err != nil || schema.Tool.Name != "run_python" || schema.Tool.InputSchema["type"] != "object" {
			t.Fatalf("first line is not the tool's schema: %v: %s", err, lines[0])
		}
		want := []struct{ what, has string }{
			{"a file written", "exit code: 0\nstdout:\nwrote 5 rows\n"},
			{"read by the next call", "exit code: 0\nstdout:\n55\n"},
			{"an exception", "exit code: 1\nstderr:\nTraceback"},
			{"no network", "network: unreachable"},
			{"a time limit", "exit code: 124\nnote: stopped after 2 s"},
		}
		if len(lines) != 1+len(want) {
			t.Fatalf("%d lines, want %d:\n%s", len(lines), 1+len(want), r.stdout)
		}
		for i, w := range want {
			var call struct{ Call, Result string }
			if err := json.Unmarshal([]byte(lines[1+i]), &call); err != nil {
				t.Fatalf("line %d: %v: %s", 2+i, err, lines[1+i])
			}
			if !strings.Contains(call.Result, w.has) {
				t.Errorf("%s: the tool answered %q, want it to hold %q", w.what, call.Result, w.has)
			}
		}
		if !strings.Contains(lines[3], "NameError") {
			t.Errorf("the exception's answer lacks its NameError: %s", lines[3])
		}
		if infos, err := srv.client.ListSandboxes(t.Context(), nil); err != nil || len(infos) != 0 {
			t.Errorf("after the conversation, the server has %v (%v), want no sandbox", infos, err)
		}
	})
}

// TestExampleAgentToolKeepsConversationsApart: two conversations never
// share a sandbox, whatever their ids: the tool named a conversation's
// sandbox after its id with every other character made '-' and cut to 48,
// so "team/alice" and "team-alice", or two long ids alike in their first
// 48 characters, got one sandbox (create's reuse returned it, same spec),
// and the second conversation read what the first had left in it.
func TestExampleAgentToolKeepsConversationsApart(t *testing.T) {
	src := examplesFrom(t, "agent-tool")
	python := needPython(t)
	forEachMode(t, func(t *testing.T, m mode) {
		dir, srv := agentToolSetup(t, m, src)
		driver := `
import asyncio, sys
from jail_sandbox import SandboxClient
from run_python_tool import PythonSandboxTool

async def main():
    client = SandboxClient(sys.argv[1])
    long = "tenant-0123456789-user-0123456789-conversation-"
    for first, second in (("team/alice", "team-alice"), (long + "0001", long + "0002")):
        a = PythonSandboxTool(client, first, image=None, timeout=20)
        b = PythonSandboxTool(client, second, image=None, timeout=20)
        try:
            await a("open('/tmp/left-by-a', 'w').write('x')")
            print(first, "|", second, "|", (await b("import os; print(os.path.exists('/tmp/left-by-a'))")).replace("\n", " "))
        finally:
            await a.close()
            await b.close()

asyncio.run(main())
`
		cmd := programAs(m, python, "-B", "-c", driver, srv.socket)
		cmd.Env = append(cmd.Env, "PYTHONPATH="+filepath.Join(dir, "sdk")+":"+filepath.Join(dir, "agent-tool"))
		r := runCmd(t, cmd)
		if r.code != 0 {
			t.Fatalf("the driver: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 2 {
			t.Fatalf("the driver printed %q, want two lines", r.stdout)
		}
		for _, line := range lines {
			if !strings.HasSuffix(strings.TrimSpace(line), "exit code: 0 stdout: False") {
				t.Errorf("conversations %s: the second saw the first's file, or failed", line)
			}
		}
		if infos, err := srv.client.ListSandboxes(t.Context(), nil); err != nil || len(infos) != 0 {
			t.Errorf("after the conversations, the server has %v (%v), want no sandbox", infos, err)
		}
	})
}

// TestExampleCIStep: examples/ci-step/jail-ci-step.sh runs a project's
// unittest suite with the checkout as /workspace: a pass is 0 and its
// report lands in the checkout; a failing test is the suite's exit status;
// a step out of time is 124 and a refused option 125, each said on
// stderr. As root, a checkout of root's is lent to an unprivileged owner
// for the step and is root's again afterwards, whatever the step did.
func TestExampleCIStep(t *testing.T) {
	src := examplesFrom(t, "ci-step")
	needPython(t)
	forEachMode(t, func(t *testing.T, m mode) {
		dir := sharedTempDir(t, ownerOf(m))
		if err := copySDK(src, filepath.Join(dir, "ci-step"), ownerOf(m)); err != nil {
			t.Fatal(err)
		}
		script := filepath.Join(dir, "ci-step", "jail-ci-step.sh")
		// The checkout: the mode's user's own (root's as root, which is
		// what the script must lend).
		checkout := filepath.Join(dir, "project")
		files := map[string]string{
			"calc.py":             "def add(a, b):\n    return a + b\n",
			"tests/__init__.py":   "",
			"tests/test_calc.py":  "import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
			"tests/test_place.py": "import os, unittest\n\nclass T(unittest.TestCase):\n    def test_in_workspace(self):\n        self.assertEqual(os.getcwd(), '/workspace')\n        self.assertEqual(os.environ.get('CI'), 'true')\n",
		}
		for name, body := range files {
			path := filepath.Join(checkout, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if owner := ownerOf(m); owner != nil {
			filepath.Walk(checkout, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, owner.uid, owner.gid) })
		}
		step := func(env []string, args ...string) result {
			cmd := programAs(m, "sh", append([]string{script}, args...)...)
			cmd.Dir = checkout
			cmd.Env = append(append(cmd.Env, "JAIL="+jailBin, "JAIL_CI_MEMORY=512M", "JAIL_CI_CPUS=1"), env...)
			return runCmd(t, cmd)
		}
		ownedAsBefore := func(when string) {
			t.Helper()
			want := os.Getuid()
			if owner := ownerOf(m); owner != nil {
				want = owner.uid
			}
			filepath.Walk(checkout, func(p string, fi os.FileInfo, err error) error {
				if err == nil && int(fi.Sys().(*syscall.Stat_t).Uid) != want {
					t.Errorf("%s: %s is uid %d's, want %d's", when, p, fi.Sys().(*syscall.Stat_t).Uid, want)
				}
				return nil
			})
		}

		suite := []string{"--", "sh", "-c", "python3 -B -m unittest discover -s tests -t . -v 2> test-report.txt"}
		if r := step(nil, suite...); r.code != 0 {
			t.Fatalf("a passing suite: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		report, err := os.ReadFile(filepath.Join(checkout, "test-report.txt"))
		if err != nil || !strings.Contains(string(report), "Ran 2 tests") || !strings.HasSuffix(strings.TrimSpace(string(report)), "OK") {
			t.Errorf("the report in the checkout: %v\n%s", err, report)
		}
		ownedAsBefore("after a passing step")

		failing := filepath.Join(checkout, "tests", "test_fails.py")
		if err := os.WriteFile(failing, []byte("import unittest\n\nclass T(unittest.TestCase):\n    def test_no(self):\n        self.fail('on purpose')\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if owner := ownerOf(m); owner != nil {
			os.Chown(failing, owner.uid, owner.gid)
		}
		if r := step(nil, suite...); r.code != 1 || !strings.Contains(r.stderr, "jail-ci-step: the step failed with exit status 1") {
			t.Errorf("a failing suite: exit %d, stderr %q; want 1, said", r.code, r.stderr)
		}
		if r := step([]string{"JAIL_CI_TIMEOUT=1s"}, "--", "sleep", "30"); r.code != 124 || !strings.Contains(r.stderr, "ran out of time") {
			t.Errorf("a step out of time: exit %d, stderr %q; want 124, said", r.code, r.stderr)
		}
		if r := step(nil, "--memory", "lots", "--", "true"); r.code != 125 || !strings.Contains(r.stderr, "jail: ") || !strings.Contains(r.stderr, "could not run the step") {
			t.Errorf("a refused option: exit %d, stderr %q; want 125 with jail's reason", r.code, r.stderr)
		}
		ownedAsBefore("after failed steps")
	})
}

// TestExampleCIStepLeavesGitToTheHost: the step reads the checkout's
// .git (git works in it) but cannot change it. Git on the host (the job's
// later steps, the next job's checkout on a runner that keeps its
// workspace) runs what .git/config and .git/hooks name, outside any
// sandbox: a step that planted an fsmonitor command and a post-checkout
// hook there ran code on the host at the next git status or checkout.
func TestExampleCIStepLeavesGitToTheHost(t *testing.T) {
	src := examplesFrom(t, "ci-step")
	forEachMode(t, func(t *testing.T, m mode) {
		dir := sharedTempDir(t, ownerOf(m))
		if err := copySDK(src, filepath.Join(dir, "ci-step"), ownerOf(m)); err != nil {
			t.Fatal(err)
		}
		checkout, marker := filepath.Join(dir, "project"), filepath.Join(dir, "ran-on-the-host")
		git := func(args ...string) result {
			cmd := programAs(m, "git", append([]string{"-C", checkout, "-c", "user.name=ci", "-c", "user.email=ci@invalid"}, args...)...)
			return runCmd(t, cmd)
		}
		if err := os.Mkdir(checkout, 0o755); err != nil {
			t.Fatal(err)
		}
		if owner := ownerOf(m); owner != nil {
			os.Chown(checkout, owner.uid, owner.gid)
		}
		for _, args := range [][]string{{"init", "-q"}, {"commit", "-q", "--allow-empty", "-m", "first"}} {
			if r := git(args...); r.code != 0 {
				t.Fatalf("git %v: %s", args, r.stderr)
			}
		}
		hook := "#!/bin/sh\ntouch " + marker + "\n"
		plant := `git rev-parse --verify -q HEAD >/dev/null && echo git works
printf '` + hook + `' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout && echo planted a hook
git config core.fsmonitor "$PWD/.git/hooks/post-checkout" && echo set fsmonitor
exit 0`
		cmd := programAs(m, "sh", filepath.Join(dir, "ci-step", "jail-ci-step.sh"), "--", "sh", "-c", plant)
		cmd.Dir = checkout
		cmd.Env = append(cmd.Env, "JAIL="+jailBin, "JAIL_CI_MEMORY=512M", "JAIL_CI_CPUS=1")
		r := runCmd(t, cmd)
		if r.code != 0 || r.stdout != "git works\n" {
			t.Errorf("the step: exit %d, stdout %q, want 0 and only %q\nstderr: %s", r.code, r.stdout, "git works\n", r.stderr)
		}
		git("status", "--short")
		git("checkout", "-q", "-b", "next")
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("git on the host ran what the step put in .git")
		}
	})
}

// TestExampleCIStepFailsClosed: the CI step's own failures are 125 with
// its reason, and leave the checkout as it was: a checkout that is not
// there (it was 2, from the shell); and as root one that could not all be
// lent (an immutable file in it): chown went on past the file and the
// step ended at once, leaving the rest of the checkout to the step's owner
// for good, since the give-back was set up only after the lending.
func TestExampleCIStepFailsClosed(t *testing.T) {
	src := examplesFrom(t, "ci-step")
	forEachMode(t, func(t *testing.T, m mode) {
		dir := sharedTempDir(t, ownerOf(m))
		if err := copySDK(src, filepath.Join(dir, "ci-step"), ownerOf(m)); err != nil {
			t.Fatal(err)
		}
		step := func(checkout string) result {
			cmd := programAs(m, "sh", filepath.Join(dir, "ci-step", "jail-ci-step.sh"), "--", "true")
			cmd.Env = append(cmd.Env, "JAIL="+jailBin, "JAIL_CI_WORKSPACE="+checkout, "JAIL_CI_MEMORY=512M", "JAIL_CI_CPUS=1")
			return runCmd(t, cmd)
		}
		if r := step(filepath.Join(dir, "missing")); r.code != 125 || !strings.Contains(r.stderr, "jail-ci-step: "+filepath.Join(dir, "missing")+": ") {
			t.Errorf("a missing checkout: exit %d, stderr %q; want 125 with the step's reason", r.code, r.stderr)
		}
		if m.rootless {
			return
		}
		checkout := filepath.Join(dir, "project")
		if err := os.MkdirAll(filepath.Join(checkout, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		stuck := filepath.Join(checkout, "stuck")
		if err := os.WriteFile(stuck, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("chattr", "+i", stuck).CombinedOutput(); err != nil {
			t.Skipf("chattr +i: %v: %s", err, out)
		}
		defer exec.Command("chattr", "-i", stuck).Run()
		if r := step(checkout); r.code != 125 || !strings.Contains(r.stderr, "jail-ci-step: ") {
			t.Errorf("a checkout that cannot be lent: exit %d, stderr %q; want 125 with the step's reason", r.code, r.stderr)
		}
		filepath.Walk(checkout, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Sys().(*syscall.Stat_t).Uid != 0 {
				t.Errorf("%s is uid %d's after the step, want root's", p, fi.Sys().(*syscall.Stat_t).Uid)
			}
			return nil
		})
	})
}

// TestExampleEmbedGo: examples/embed-go, built as its comment says and
// run, makes a persistent sandbox through jail.Manager, runs commands in
// it (a file kept from one to the next, an exit status, a time limit),
// reads its use and log, runs a one-shot beside it and removes it.
func TestExampleEmbedGo(t *testing.T) {
	examplesFrom(t, "embed-go")
	if os.Getenv("JAIL_TEST_BINARIES") != "" {
		t.Skip("the suite's binaries were built elsewhere: the example is not among them")
	}
	bin := filepath.Join(sharedTempDir(t, nil), "embed-go")
	build := exec.Command("go", "build", "-o", bin, "../examples/embed-go")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/embed-go: %v\n%s", err, out)
	}
	forEachMode(t, func(t *testing.T, m mode) {
		dir := sharedTempDir(t, ownerOf(m))
		cmd := programAs(m, bin, "-name", "embedded")
		cmd.Env = append(cmd.Env, "JAIL_STATE_DIR="+filepath.Join(dir, "state"), "JAIL_AUDIT_LOG="+filepath.Join(dir, "audit", "audit.log"))
		r := runCmd(t, cmd)
		if r.code != 0 {
			t.Fatalf("embed-go: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		for _, want := range []string{
			"created embedded\n",
			"second command read: made by the first command\n",
			"exit 3, stdout \"0\\njail\\n",
			"stderr \"oops\\n\"\n",
			"sleep 60 with a 300ms limit: exit 124, timed out true\n",
			"state running, labels map[made-by:embed-go]",
			"one-shot run: one-shot\n",
			"removed embedded\n",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("embed-go printed no %q:\n%s", want, r.stdout)
			}
		}
		if r := jailIn(t, m, dir, "ls", "--json"); r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
			t.Errorf("after embed-go, jail ls: exit %d, %q; want no sandbox", r.code, r.stdout)
		}
	})
}

// jailIn runs jail in mode m with the state directory and audit log under
// dir.
func jailIn(t *testing.T, m mode, dir string, args ...string) result {
	t.Helper()
	cmd := command(m, args...)
	cmd.Env = append(cmd.Env, "JAIL_STATE_DIR="+filepath.Join(dir, "state"), "JAIL_AUDIT_LOG="+filepath.Join(dir, "audit", "audit.log"))
	return runCmd(t, cmd)
}
