package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestImageConfigWithNULIsRefused: an image's environment, command or
// working directory holding a NUL byte, which the init could not be handed,
// is refused while the run is prepared, naming what is at fault, with one
// line and exit 125 (the environment and working directory were refused only
// once the sandbox had started, as "start: control: send config").
func TestImageConfigWithNULIsRefused(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		jailS := withStore(t, m)
		dir := sharedTempDir(t, rootless)
		want := []string{"image localhost/nul:0: the image's environment: ", "image localhost/nul:1: the image's working directory: ", "command: "}
		edits := []func(c *v1.Config){
			func(c *v1.Config) { c.Env = append(c.Env, "X=a\x00b") },
			func(c *v1.Config) { c.WorkingDir = "/etc\x00x" },
			func(c *v1.Config) { c.Entrypoint = []string{"/bin/sh\x00x"} },
		}
		for i, edit := range edits {
			ref := "localhost/nul:" + strconv.Itoa(i)
			img := imageWithConfig(t, edit, layerOf(t, busyboxEntries(t)))
			writeLayout(t, filepath.Join(dir, strconv.Itoa(i)), ref, img)
			if r := jailS("image", "import", filepath.Join(dir, strconv.Itoa(i)), "--quiet"); r.code != 0 {
				t.Fatalf("import: %q", r.stderr)
			}
			args := []string{"run", "--image", ref}
			if i != 2 {
				args = append(args, "--", "true")
			}
			r := jailS(args...)
			if r.code != 125 || !strings.HasPrefix(r.stderr, "jail: "+want[i]) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("case %d: exit %d, %q; want a one-line refusal", i, r.code, r.stderr)
			}
		}
	})
}

// TestErrorNamingANewlineIsOneLine: a command, a working directory or a
// host path whose name holds a newline or a terminal escape (typed, or an
// image's) gives one `jail:` line with the character escaped, for the
// command's failure (126/127, from the init) as for a refusal (125), from
// jail run as from its other commands.
func TestErrorNamingANewlineIsOneLine(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, c := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"run", "--", "./a\nb"}, 127, `jail: exec ./a\nb: `},
			{[]string{"run", "--", "no-such\x1b[2J"}, 127, `jail: exec no-such\x1b[2J: `},
			{[]string{"run", "--workdir", "/a\njail: b", "--", "true"}, 125, `jail: workdir /a\njail: b: `},
			{[]string{"run", "--mount", "/tmp/no\nsuch:/d", "--", "true"}, 125, `jail: --mount /tmp/no\nsuch: `},
			{[]string{"run", "--x\ny", "--", "true"}, 125, `jail: run: unknown option --x\ny `},
			{[]string{"run", "--profile", "a\nb", "--", "true"}, 125, `jail: profile a\nb: `},
			{[]string{"image", "rm", "a\nb"}, 125, `jail: image a\nb: `},
			{[]string{"profile", "show", "a\nb"}, 125, `jail: profile a\nb: `},
		} {
			r := jail(t, m, c.args...)
			if r.code != c.code || !strings.HasPrefix(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%q: exit %d, %q; want %d and one line starting %q", c.args, r.code, r.stderr, c.code, c.want)
			}
		}
	})
}

// TestHelperRolesRefuseSecureExec: the roles jail starts by re-executing
// its caller's program (a pool's forker and janitor, a probe, a namespace
// holder) refuse to run in a program the kernel started in secure mode: a
// set-user-ID copy of jail, started by another user with argv[0] naming a
// role, would otherwise act with root's rights on descriptors that user
// chose (the forker starts inits on descriptor 3's say).
func TestHelperRolesRefuseSecureExec(t *testing.T) {
	if os.Geteuid() != 0 || rootless == nil {
		t.Skip("needs root, to make a set-user-ID copy and start it as another user")
	}
	dir := sharedTempDir(t, nil)
	if out, err := exec.Command("findmnt", "-no", "OPTIONS", "-T", dir).Output(); err != nil || strings.Contains(string(out), "nosuid") {
		t.Skipf("%s is on a nosuid mount (or findmnt failed: %v)", dir, err)
	}
	setuid := filepath.Join(dir, "jail")
	data, err := os.ReadFile(jailBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(setuid, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(setuid, os.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"jail:forker", "jail:cgroup-janitor", "jail:probe", "jail:userns-holder"} {
		r := runCmd(t, commandAs(rootless, nil, "bash", "-c", `exec -a "$1" "$2" 3</dev/null </dev/null`, "bash", role, setuid))
		if r.code != 125 || !strings.Contains(r.stderr, "refused in a program started set-user-ID") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%s from a set-user-ID jail: exit %d, stderr %q", role, r.code, r.stderr)
		}
	}
	// The same role from a plain copy is the forker, which ends at once
	// on a descriptor 3 that is no socket.
	r := runCmd(t, commandAs(rootless, nil, "bash", "-c", `exec -a jail:forker "$1" 3</dev/null </dev/null`, "bash", jailBin))
	if r.code == 125 {
		t.Errorf("the forker of a plain jail was refused: %q", r.stderr)
	}
}
