package oci

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/runtime-spec/specs-go/features"
)

// runCLI runs `jail-runc args...` in process.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cli := &CLI{Name: "jail-runc", Version: "test", Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut}
	code = cli.Main(args)
	return out.String(), errOut.String(), code
}

func TestCLIFailuresAreOneLineAndStatus1(t *testing.T) {
	root := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--bogus", "state", "x"}, "jail: oci: flag provided but not defined: -bogus"},
		{[]string{"--root", root, "frob"}, `jail: oci frob: no such command "frob"`},
		{[]string{"--root", root, "--log-format", "xml", "state", "x"}, `jail: oci state: unknown log-format "xml" (text or json)`},
		{[]string{"--root", root, "state", "nothere"}, "jail: oci state: container does not exist"},
		{[]string{"--root", root, "state"}, `jail: oci state: "state" requires exactly 1 argument(s)`},
		{[]string{"--root", root, "state", "a", "b"}, `jail: oci state: "state" requires exactly 1 argument(s)`},
		{[]string{"--root", root, "state", "../etc"}, `jail: oci state: invalid id format: "../etc"`},
		{[]string{"--root", root, "kill", "nothere", "KILL"}, "jail: oci kill: container does not exist"},
		{[]string{"--root", root, "kill", "nothere", "SIGBOGUS"}, `jail: oci kill: unknown signal "SIGBOGUS"`},
		{[]string{"--root", root, "kill", "--all", "nothere"}, "jail: oci kill: container does not exist"},
		{[]string{"--root", root, "delete", "nothere"}, "jail: oci delete: container does not exist"},
		{[]string{"--root", root, "start", "nothere"}, "jail: oci start: container does not exist"},
		{[]string{"--root", root, "pause", "nothere"}, "jail: oci pause: container does not exist"},
		{[]string{"--root", root, "ps", "--format", "json", "nothere"}, "jail: oci ps: container does not exist"},
		{[]string{"--root", root, "ps", "--format", "yaml", "x"}, `jail: oci ps: invalid format option "yaml"`},
		{[]string{"--root", root, "delete", "--frobnicate", "x"}, "jail: oci delete: flag provided but not defined: -frobnicate"},
		{[]string{"--root", root, "exec", "--process", "p.json", "--detach", "--pid-file", "p", "box"}, "jail: oci exec: container does not exist"},
		{[]string{"--root", root, "create", "--bundle", filepath.Join(root, "nobundle"), "box"}, "jail: oci create: bundle " + filepath.Join(root, "nobundle") + ": no such file or directory"},
		{[]string{"--root", root, "create", "--preserve-fds", "33", "box"}, "jail: oci create: --preserve-fds 33: must be from 0 to 32"},
		{[]string{"--root", root, "exec", "--preserve-fds", "-1", "box", "true"}, "jail: oci exec: --preserve-fds -1: must be from 0 to 32"},
		{[]string{"--root", root, "create", "-b", root, "bad/id"}, `jail: oci create: invalid id format: "bad/id"`},
	}
	for _, c := range cases {
		stdout, stderr, code := runCLI(t, c.args...)
		if code != 1 || stdout != "" || stderr != c.want+"\n" {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want 1 and %q", c.args, code, stdout, stderr, c.want)
		}
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("failed commands left %d entries in the root", len(entries))
	}
}

func TestCLIDeleteForceOfNothingSucceeds(t *testing.T) {
	root := filepath.Join(t.TempDir(), "state")
	if _, stderr, code := runCLI(t, "--root", root, "delete", "--force", "nothere"); code != 0 {
		t.Errorf("status %d: %s", code, stderr)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("delete made the root: %v", err)
	}
	// A create that died before writing its state leaves a directory,
	// which delete --force removes.
	if err := os.MkdirAll(filepath.Join(root, "half"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI(t, "--root", root, "delete", "half"); code != 1 || !strings.Contains(stderr, "container does not exist") {
		t.Errorf("without --force: %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "--root", root, "delete", "-f", "half"); code != 0 {
		t.Errorf("status %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(root, "half")); !os.IsNotExist(err) {
		t.Errorf("left: %v", err)
	}
}

// TestCLICreateRefusesABadBundleAndChangesNothing: a bundle refused by
// Validate fails create with its one line, before any state or cgroup.
func TestCLICreateRefusesABadBundleAndChangesNothing(t *testing.T) {
	cases := []struct {
		change func(*specs.Spec)
		want   string
	}{
		{func(s *specs.Spec) { s.Mounts = []specs.Mount{{Destination: "tmp", Type: "tmpfs", Source: "tmpfs"}} }, `mounts[0].destination "tmp" is not an absolute path`},
		{func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: "pid"})
		}, `"pid" is listed twice`},
		{func(s *specs.Spec) { s.Linux.UIDMappings = []specs.LinuxIDMapping{{Size: 1}} }, "need a user namespace"},
		{func(s *specs.Spec) { s.Process.Terminal = true }, "process.terminal needs --console-socket"},
		{func(s *specs.Spec) { s.Linux.CgroupsPath = "system.slice:x:y" }, "pass --systemd-cgroup"},
	}
	for _, c := range cases {
		spec := baseSpec()
		c.change(spec)
		bundle := writeBundle(t, spec)
		root := filepath.Join(t.TempDir(), "state")
		stdout, stderr, code := runCLI(t, "--root", root, "create", "--bundle", bundle, "box")
		if code != 1 || stdout != "" || stderr != "jail: oci create: "+c.want+"\n" && !strings.HasSuffix(stderr, c.want+"\n") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: status %d, stderr %q", c.want, code, stderr)
		}
		if _, err := os.Stat(root); !os.IsNotExist(err) {
			t.Errorf("%s: the root was made", c.want)
		}
	}
}

func TestCLIErrorsGoToTheLogAsJSON(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log.json")
	_, stderr, code := runCLI(t, "--root", dir, "--log", log, "--log-format", "json", "state", "nothere")
	if code != 1 || stderr != "jail: oci state: container does not exist\n" {
		t.Fatalf("%d %q", code, stderr)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var line struct{ Level, Msg, Time string }
	if err := json.Unmarshal(b, &line); err != nil || line.Level != "error" || line.Msg != "jail: oci state: container does not exist" || line.Time == "" {
		t.Errorf("log %q: %v", b, err)
	}
	// Text format, appended.
	runCLI(t, "--root", dir, "--log", log, "delete", "nothere")
	b, _ = os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `level=error msg="jail: oci delete: container does not exist"`) {
		t.Errorf("text log %q", lines)
	}
}

func TestCLIVersionAndFeatures(t *testing.T) {
	for _, flag := range []string{"--version", "-v"} {
		stdout, _, code := runCLI(t, flag)
		if code != 0 || !strings.HasPrefix(stdout, "jail-runc version test\nspec: "+specs.Version+"\n") {
			t.Errorf("%s: %d %q", flag, code, stdout)
		}
	}
	stdout, _, code := runCLI(t, "features")
	if code != 0 {
		t.Fatal(code)
	}
	var f features.Features
	if err := json.Unmarshal([]byte(stdout), &f); err != nil {
		t.Fatal(err)
	}
	if f.OCIVersionMax != specs.Version || f.Linux == nil || len(f.Linux.Capabilities) != 41 || f.Linux.Capabilities[0] != "CAP_CHOWN" ||
		!contains(f.MountOptions, "rbind") || !contains(f.Linux.Namespaces, "user") || contains(f.Linux.Namespaces, "time") ||
		!*f.Linux.Apparmor.Enabled || *f.Linux.Selinux.Enabled || !*f.Linux.Seccomp.Enabled || contains(f.Linux.Seccomp.Actions, "SCMP_ACT_NOTIFY") {
		t.Errorf("features %s", stdout)
	}
	stdout, _, code = runCLI(t, "--help")
	if code != 0 || !strings.Contains(stdout, "usage: jail-runc") {
		t.Errorf("help: %d %q", code, stdout)
	}
}

func TestCLIListOfAnEmptyRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "none")
	stdout, stderr, code := runCLI(t, "--root", root, "list", "--format", "json")
	if code != 0 || stdout != "[]\n" {
		t.Errorf("%d %q %q", code, stdout, stderr)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
