package jail

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jail-sandbox/jail/internal/programs"
)

// profileHomeEnv names, in the child TestPoolFollowsAnEditedProfile runs as
// root, the home it has bound onto /root.
const profileHomeEnv = "JAIL_TEST_POOL_PROFILE_HOME"

// TestPoolFollowsAnEditedProfile: a pool whose template names a user
// profile builds its sandboxes with the profile's limits as the file says
// now, not as it said when the pool was made. The template kept the limits
// prepare had filled in from the first reading, so after an edit every run
// missed the pool while it went on building sandboxes of the old limits.
// After the edit, runs take ready sandboxes again (the first may miss: it
// has the pool check its template).
//
// Root's jail reads only the profiles of root's home in the password
// database: as root, the test runs itself again in a mount namespace of
// its own where a temporary home is bound onto /root.
func TestPoolFollowsAnEditedProfile(t *testing.T) {
	if programs.Version(programs.Tools) == "" {
		t.Skip("a user profile needs the tools program (go generate ./internal/programs)")
	}
	home := os.Getenv(profileHomeEnv)
	switch {
	case home != "":
		home = "/root"
	case os.Geteuid() == 0:
		home = t.TempDir()
		cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--",
			"sh", "-c", `mount --bind "$0" /root && exec "$@"`, home,
			os.Args[0], "-test.run=^TestPoolFollowsAnEditedProfile$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), profileHomeEnv+"="+home)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the test in a mount namespace with %s as /root: %v\n%s", home, err, out)
		}
		t.Logf("in a mount namespace with %s as /root:\n%s", home, out)
		return
	default:
		home = t.TempDir()
		t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	}
	dir := filepath.Join(home, ".config", "jail", "profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "edited.yaml")
	writeProfile := func(memory string) {
		t.Helper()
		if err := os.WriteFile(path, []byte("version: 1\nextends: default\nlimits: {memory: "+memory+"}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeProfile("96M")

	template := Spec{Profile: "edited"}
	pool, err := NewPool(template, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// run runs a command of the template, and reports whether a ready
	// sandbox took it (a pooled run starts no init of its own).
	run := func() bool {
		t.Helper()
		spec := template
		spec.Command, spec.Capture = []string{"true"}, true
		res, tm, err := pool.runTimed(context.Background(), spec)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run: %v %+v", err, res)
		}
		return tm.InitStarted.IsZero()
	}
	// untilPooled runs until a ready sandbox takes a run (20 s: a guard
	// against a hang, not a timing check).
	untilPooled := func(when string) {
		t.Helper()
		cold := 0
		for deadline := time.Now().Add(20 * time.Second); !run(); time.Sleep(20 * time.Millisecond) {
			if cold++; time.Now().After(deadline) {
				t.Fatalf("%s: %d runs in 20 s, none in a ready sandbox (pool: %v)", when, cold, pool.Err())
			}
		}
	}
	untilPooled("before the edit")
	writeProfile("128M")
	untilPooled("after the edit")
}
