package test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// secretValue is the value of the secrets these tests define: no output
// of jail secret may show it.
const secretValue = "s3cr3t-0f-jail-test-7c1d"

// secretCmd is jail with args in mode m, its definitions in cfg
// ($XDG_CONFIG_HOME), run in dir, with the value in $SECRET_SRC.
func secretCmd(m mode, cfg, dir string, args ...string) *exec.Cmd {
	cmd := command(m, args...)
	cmd.Env = append(cmd.Env, "XDG_CONFIG_HOME="+cfg, "SECRET_SRC="+secretValue)
	cmd.Dir = dir
	return cmd
}

// ownedBy is the account of mode m (nil: root).
func ownedBy(m mode) *account {
	if m.rootless {
		return rootless
	}
	return nil
}

// writeOwned writes data to path with mode perm, owned by owner (nil: the
// caller).
func writeOwned(t *testing.T, path string, data string, perm os.FileMode, owner *account) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
	if owner != nil && os.Geteuid() == 0 {
		if err := os.Chown(path, owner.uid, owner.gid); err != nil {
			t.Fatal(err)
		}
	}
}

func isOneLine125(r result) bool {
	return r.code == 125 && strings.HasPrefix(r.stderr, "jail: ") && strings.Count(r.stderr, "\n") == 1 && r.stdout == ""
}

// TestSecretDefinitionsAddListRemoveNeverShowAValue: jail secret add of
// each source, ls (table and JSON) showing names and sources only, rm;
// the definitions file private to the user; and no output, error or file
// of jail's holding the value.
func TestSecretDefinitionsAddListRemoveNeverShowAValue(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		owner := ownedBy(m)
		dir := sharedTempDir(t, owner)
		cfg := filepath.Join(dir, "config")
		writeOwned(t, filepath.Join(dir, "token"), secretValue+"\n", 0o600, owner)
		writeOwned(t, filepath.Join(dir, "open"), secretValue, 0o644, owner)
		var outputs []string
		run := func(args ...string) result {
			t.Helper()
			r := runCmd(t, secretCmd(m, cfg, dir, args...))
			outputs = append(outputs, r.stdout, r.stderr)
			return r
		}
		for _, args := range [][]string{
			{"secret", "add", "FILE_TOKEN", "--from-file", "token"}, // relative: stored absolute
			{"secret", "add", "--from-env", "SECRET_SRC", "ENV_TOKEN"},
			{"secret", "add", "CMD_TOKEN", "--from-command", "cat " + filepath.Join(dir, "token")},
		} {
			if r := run(args...); r.code != 0 || r.stdout != "" || r.stderr != "" {
				t.Fatalf("jail %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
			}
		}

		ls := run("secret", "ls")
		want := []string{"CMD_TOKEN", "command cat " + filepath.Join(dir, "token"), "ENV_TOKEN", "env SECRET_SRC", "FILE_TOKEN", "file " + filepath.Join(dir, "token")}
		if ls.code != 0 || strings.Count(ls.stdout, "\n") != 3 {
			t.Fatalf("secret ls: exit %d\n%s%s", ls.code, ls.stdout, ls.stderr)
		}
		for _, w := range want {
			if !strings.Contains(ls.stdout, w) {
				t.Errorf("secret ls does not show %q:\n%s", w, ls.stdout)
			}
		}
		r := run("secret", "ls", "--json")
		var defs []map[string]string
		if err := json.Unmarshal([]byte(r.stdout), &defs); err != nil || len(defs) != 3 {
			t.Fatalf("secret ls --json: %v\n%s", err, r.stdout)
		}
		if defs[2]["name"] != "FILE_TOKEN" || defs[2]["file"] != filepath.Join(dir, "token") {
			t.Errorf("secret ls --json: FILE_TOKEN is %v; want its absolute path", defs[2])
		}

		// Refused: a duplicate, a file others can read, a link, a bad
		// name, no source, two sources. Each is one line and changes
		// nothing.
		if err := os.Symlink(filepath.Join(dir, "token"), filepath.Join(dir, "link")); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"add", "FILE_TOKEN", "--from-env", "X"}, "already defined"},
			{[]string{"add", "OPEN", "--from-file", "open"}, filepath.Join(dir, "open") + ": its group or others have access"},
			{[]string{"add", "LINK", "--from-file", "link"}, "a symbolic link"},
			{[]string{"add", "A-B", "--from-env", "X"}, "not a valid name"},
			{[]string{"add", "NONE"}, "exactly one source"},
			{[]string{"add", "TWO", "--from-env", "X", "--from-command", "true"}, "exactly one source"},
			{[]string{"add", "VALUE", "--value", secretValue}, "unknown option --value"},
			{[]string{"rm", "NOPE"}, "secret NOPE: no such secret"},
			{[]string{"ls", "--all"}, "takes only --json"},
		} {
			r := run(append([]string{"secret"}, c.args...)...)
			if !isOneLine125(r) || !strings.Contains(r.stderr, c.want) {
				t.Errorf("jail secret %v: exit %d, %q; want one line 125: %s", c.args, r.code, r.stderr, c.want)
			}
		}
		if again := run("secret", "ls"); again.stdout != ls.stdout {
			t.Errorf("a refused command changed the definitions:\n%s\nthen\n%s", ls.stdout, again.stdout)
		}

		// The definitions: 0600 in a 0700 directory, the user's, and
		// nothing there holds the value.
		jailCfg := filepath.Join(cfg, "jail")
		entries, _ := os.ReadDir(jailCfg)
		if len(entries) != 1 || entries[0].Name() != "secrets.json" {
			t.Errorf("%s holds %v; want secrets.json alone", jailCfg, entries)
		}
		wantUID := uint32(os.Geteuid())
		if owner != nil {
			wantUID = uint32(owner.uid)
		}
		for path, perm := range map[string]os.FileMode{jailCfg: 0o700, filepath.Join(jailCfg, "secrets.json"): 0o600} {
			st, err := os.Stat(path)
			if err != nil || st.Mode().Perm() != perm || st.Sys().(*syscall.Stat_t).Uid != wantUID {
				t.Errorf("%s: %v; want mode %v, uid %d", path, st.Mode(), perm, wantUID)
			}
		}
		data, _ := os.ReadFile(filepath.Join(jailCfg, "secrets.json"))
		outputs = append(outputs, string(data))

		if r := run("secret", "rm", "FILE_TOKEN"); r.code != 0 {
			t.Fatalf("secret rm: %d %s", r.code, r.stderr)
		}
		if r := run("secret", "ls"); strings.Contains(r.stdout, "FILE_TOKEN") || strings.Count(r.stdout, "\n") != 2 {
			t.Errorf("after rm, ls shows:\n%s", r.stdout)
		}
		for _, out := range outputs {
			if strings.Contains(out, secretValue) {
				t.Errorf("jail secret showed the value: %q", out)
			}
		}
	})
}

// TestSecretDefinitionsOfAnotherUserAreRefused: root does not follow an
// $XDG_CONFIG_HOME into another user's directory (as sudo -E would keep
// it), and a user cannot define a secret from root's file or read root's
// definitions.
func TestSecretDefinitionsOfAnotherUserAreRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root and the test user")
	}
	checkNoLeaks(t)
	userDir := sharedTempDir(t, rootless)
	rootDir := sharedTempDir(t, nil)
	writeOwned(t, filepath.Join(rootDir, "token"), secretValue, 0o600, nil)
	writeOwned(t, filepath.Join(userDir, "token"), secretValue, 0o600, rootless)
	writeOwned(t, filepath.Join(rootDir, "users"), secretValue, 0o600, rootless)
	userCfg, rootCfg := filepath.Join(userDir, "config"), filepath.Join(rootDir, "config")
	if r := runCmd(t, secretCmd(asRootless, userCfg, userDir, "secret", "add", "MINE", "--from-file", "token")); r.code != 0 {
		t.Fatalf("the user's add: %d %s", r.code, r.stderr)
	}
	if r := runCmd(t, secretCmd(asRoot, rootCfg, rootDir, "secret", "add", "ROOTS", "--from-env", "X")); r.code != 0 {
		t.Fatalf("root's add: %d %s", r.code, r.stderr)
	}
	for _, c := range []struct {
		what string
		cmd  *exec.Cmd
		want string
	}{
		{"root listing the user's definitions", secretCmd(asRoot, userCfg, rootDir, "secret", "ls"), "neither root nor uid 0"},
		{"root adding to the user's definitions", secretCmd(asRoot, userCfg, rootDir, "secret", "add", "X", "--from-env", "X"), "neither root nor uid 0"},
		{"root defining a secret from a file in the user's directory", secretCmd(asRoot, rootCfg, rootDir, "secret", "add", "X", "--from-file", filepath.Join(userDir, "token")), "neither root nor uid 0"},
		{"root defining a secret from the user's file", secretCmd(asRoot, rootCfg, rootDir, "secret", "add", "X", "--from-file", filepath.Join(rootDir, "users")), "owned by uid " + strconv.Itoa(rootless.uid) + ", not by uid 0"},
		{"the user listing root's definitions", secretCmd(asRootless, rootCfg, userDir, "secret", "ls"), "permission denied"},
		{"the user defining a secret from root's file", secretCmd(asRootless, userCfg, userDir, "secret", "add", "X", "--from-file", filepath.Join(rootDir, "token")), "permission denied"},
	} {
		r := runCmd(t, c.cmd)
		if !isOneLine125(r) || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, secretValue) {
			t.Errorf("%s: exit %d, %q; want one line 125: %s", c.what, r.code, r.stderr, c.want)
		}
	}
}
