package test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPythonSDK runs the Python SDK's own tests (sdk/python/tests, with
// Debian's python3-pytest) as root and as the unprivileged user: they start
// a real `jail serve` of the jail under test, as that user, and drive real
// sandboxes through every method of package jail_sandbox. The SDK is
// copied into a directory of the mode's user, where pytest and pip may
// write; the leak check sees whatever sandbox, server, socket or
// temporary file they leave.
func TestPythonSDK(t *testing.T) {
	const path = systemPath
	python := systemPython()
	if python == "" {
		t.Skip("python3 is not installed: the Python SDK's tests need python3 and python3-pytest")
	}
	// The cgroup v2 VM runs the built test binaries only, without the
	// tree they came from.
	if _, err := os.Stat("../sdk/python/tests"); err != nil {
		t.Skipf("the Python SDK's sources are not here (%v): its tests run from a checkout", err)
	}
	if out, err := exec.Command(python, "-c", "import pytest").CombinedOutput(); err != nil {
		t.Skipf("%s has no pytest (apt-get install python3-pytest): the Python SDK's tests are skipped: %s", python, bytes.TrimSpace(out))
	}
	forEachMode(t, func(t *testing.T, m mode) {
		dir := sharedTempDir(t, ownerOf(m))
		sdk := filepath.Join(dir, "sdk")
		if err := copySDK("../sdk/python", sdk, ownerOf(m)); err != nil {
			t.Fatal(err)
		}
		args := []string{"-B", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", filepath.Join(dir, "pytest"), filepath.Join(sdk, "tests")}
		env := []string{"PATH=" + path, "TMPDIR=" + jailTmp, "PYTHONDONTWRITEBYTECODE=1", "JAIL_TEST_BIN=" + jailBin}
		var cmd *exec.Cmd
		if m.rootless && os.Geteuid() == 0 {
			cmd = exec.Command("setpriv", append([]string{"--reuid", strconv.Itoa(rootless.uid), "--regid", strconv.Itoa(rootless.gid), "--clear-groups", "--", python}, args...)...)
			env = append(env, "HOME="+rootless.home)
		} else {
			cmd = exec.Command(python, args...)
			home, _ := os.UserHomeDir()
			env = append(env, "HOME="+home)
		}
		cmd.Env, cmd.Dir = env, sdk
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("python3 -m pytest sdk/python/tests as %s: %v\n%s", m.name, err, out.String())
			}
		case <-time.After(10 * time.Minute):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("the Python SDK's tests did not end within 10 minutes (a hang, not a timing check)\n%s", out.String())
		}
		summary := strings.TrimSpace(out.String())
		if i := strings.LastIndexByte(summary, '\n'); i >= 0 {
			summary = summary[i+1:]
		}
		t.Logf("%s: %s", m.name, summary)
	})
}

// systemPath is the PATH the suite's commands get (see programAs).
const systemPath = "/usr/local/bin:/usr/bin:/bin"

// systemPython is the python3 found on systemPath, which every user of the
// suite may run (not one of the caller's own, such as a pyenv shim in
// root's home); "" when there is none.
func systemPython() string {
	for _, dir := range filepath.SplitList(systemPath) {
		if p := filepath.Join(dir, "python3"); isExecutable(p) {
			return p
		}
	}
	return ""
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// copySDK copies the SDK's sources (not what Python or pip made there) to
// dst, owned by owner when given.
func copySDK(src, dst string, owner *account) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "__pycache__" || d.Name() == "build" || strings.HasSuffix(d.Name(), ".egg-info")) {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case d.Type().IsRegular():
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if err := os.WriteFile(target, data, 0o644); err != nil {
				return err
			}
		default:
			return nil
		}
		if owner != nil && os.Geteuid() == 0 {
			return os.Chown(target, owner.uid, owner.gid)
		}
		return nil
	})
}
