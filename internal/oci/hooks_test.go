package oci

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestHookFailures: a failing hook stops the hooks after it where the
// spec makes the failure an error (prestart, createRuntime, poststart),
// and only warns where it does not (poststop), the rest still running
// with the state on stdin.
func TestHookFailures(t *testing.T) {
	dir := t.TempDir()
	saved := filepath.Join(dir, "state")
	hooks := []specs.Hook{
		{Path: "/bin/false"},
		{Path: "/bin/sh", Args: []string{"sh", "-c", "cat > " + saved}},
	}
	state := specs.State{Version: specs.Version, ID: "hooked", Status: specs.StateStopped}

	err := runHooks("poststart", hooks, state)
	if err == nil || !strings.Contains(err.Error(), "poststart hook #0 (/bin/false)") {
		t.Errorf("runHooks: %v, want poststart hook #0's failure", err)
	}
	if _, err := os.Stat(saved); !os.IsNotExist(err) {
		t.Errorf("a hook after the failed one ran (%v)", err)
	}

	var warnings []string
	runHooksWarning("poststop", hooks, state, func(w string) { warnings = append(warnings, w) })
	if len(warnings) != 1 || !strings.Contains(warnings[0], "poststop hook #0 (/bin/false)") {
		t.Errorf("warnings %q, want poststop hook #0's failure alone", warnings)
	}
	if b, err := os.ReadFile(saved); err != nil || !strings.Contains(string(b), `"id":"hooked"`) {
		t.Errorf("the hook after the failed one: %q, %v", b, err)
	}
}

// TestCreateSendsTheInitTheHookStateAfterCreateRuntime: a container with
// createContainer (or startContainer) hooks is sent the state once the
// prestart and createRuntime hooks have run (the init waits for it before
// it runs its own and pivots): status created, the container's pid.
func TestCreateSendsTheInitTheHookStateAfterCreateRuntime(t *testing.T) {
	root, hooks := t.TempDir(), t.TempDir()
	spec := lifecycleSpec(t, "sleep", hooks)
	recorded := filepath.Join(hooks, "createContainer")
	spec.Hooks.CreateContainer = []specs.Hook{{Path: recorded}}
	// The state is sent after this hook: the record must not exist yet.
	spec.Hooks.CreateRuntime = append(spec.Hooks.CreateRuntime, specs.Hook{Path: "/bin/sh", Args: []string{"sh", "-c", "test ! -e " + recorded}})
	bundle := writeBundle(t, spec)
	rt := fakeRuntime(t, root)
	pid := createBox(t, rt, bundle)
	if s := hookState(t, recorded); s.Status != specs.StateCreated || s.Pid != pid || s.ID != "box" {
		t.Errorf("the init was sent %+v; want created, pid %d", s, pid)
	}
}

// TestStartFailsWithWhatTheInitWroteToTheFifo: an init that cannot start
// its process once started (a startContainer hook failed) writes why to
// the exec FIFO in place of its byte; start fails with that, made one
// line (the container's side wrote it), and the container is stopped.
func TestStartFailsWithWhatTheInitWroteToTheFifo(t *testing.T) {
	root := t.TempDir()
	bundle := writeBundle(t, lifecycleSpec(t, "fail-at-start", ""))
	rt := fakeRuntime(t, root)
	pid := createBox(t, rt, bundle)
	err := rt.Start("box")
	if want := "startContainer hook #0 (/hook): exit status 1: no GPU [2J"; err == nil || err.Error() != want {
		t.Fatalf("start: %v; want %q", err, want)
	}
	reap(t, pid)
	if st := statusOf(t, rt, "box"); st != specs.StateStopped {
		t.Errorf("status %s after a failed start, want stopped", st)
	}
}

func TestOneLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a\nb\tc\x00d\x7f", "a b c d"},
		{"  padded \n", "padded"},
		{"ünï" + strings.Repeat("é", 10), "ünïéé..."}, // cut between runes
		{"x\xffy", "x y"},
		{"a\u0085b\u2028c", "a b c"},   // NEL, line separator
		{"x\u202ey\u009b2J", "x y 2J"}, // right-to-left override, CSI
	} {
		if got := oneLine(c.in, 10); got != c.want {
			t.Errorf("oneLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// createBox creates container box of bundle through rt and returns its
// init's pid; the container is deleted and the init reaped when the test
// ends.
func createBox(t *testing.T, rt *Runtime, bundle string) int {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "init.pid")
	if err := rt.Create(CreateOptions{ID: "box", Bundle: bundle, PidFile: pidFile}); err != nil {
		t.Fatal(err)
	}
	pid := readPidFile(t, pidFile)
	t.Cleanup(func() {
		rt.Delete("box", true)
		reap(t, pid)
	})
	return pid
}
