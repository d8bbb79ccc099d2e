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
