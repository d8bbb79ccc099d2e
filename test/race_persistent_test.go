package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// linkRace builds, for root's jail, the setting of a hostile local user:
// a root-owned sticky world-writable directory (as /tmp) holding a
// symbolic link owned by the unprivileged account, pointing at one of two
// root-private directories (good, other). It returns the link and a
// function that repoints it, as the other user can at any time.
func linkRace(t *testing.T) (link, good, other string, repoint func(to string)) {
	t.Helper()
	base, err := os.MkdirTemp("/tmp", "jail-race-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	sticky := filepath.Join(base, "shared")
	good = filepath.Join(base, "good")
	other = filepath.Join(base, "other")
	for _, d := range []string{sticky, good, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sticky, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	link = filepath.Join(sticky, "lnk")
	repoint = func(to string) {
		_ = os.Remove(link)
		if err := os.Symlink(to, link); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(link, rootless.uid, rootless.gid); err != nil {
			t.Fatal(err)
		}
	}
	repoint(good)
	return link, good, other, repoint
}

// A --from-file path through a symbolic link another user owns (in a
// sticky directory, where the kernel's protected_symlinks would refuse
// root to follow it) must be refused: the definition keeps the path, so
// the link's owner chooses, at every use, which root-private file root's
// jail reads into the sandbox.
func TestSecretFromFileRefusesALinkAnotherUserOwns(t *testing.T) {
	if os.Geteuid() != 0 || rootless == nil {
		t.Skip("needs root and the unprivileged account (the attacker)")
	}
	link, good, other, repoint := linkRace(t)
	cfg := sharedTempDir(t, nil)
	if err := os.Chmod(cfg, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(good, "val"), []byte("meant"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "val"), []byte("stolen"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := mode{}
	add := command(m, "secret", "add", "s", "--from-file", filepath.Join(link, "val"))
	add.Env = append(add.Env, "XDG_CONFIG_HOME="+cfg)
	r := runCmd(t, add)
	if r.code == 0 {
		repoint(other)
		run := command(m, "run", "--secret", "s", "--", "/bin/sh", "-c", `echo "$s" | rev`)
		run.Env = append(run.Env, "XDG_CONFIG_HOME="+cfg)
		got := runCmd(t, run)
		t.Fatalf("secret add through another user's link was accepted; after the link was repointed the sandbox got %q (reversed)", strings.TrimSpace(got.stdout))
	}
	t.Logf("stderr: %s", r.stderr)
	if r.code != 125 {
		t.Fatalf("exit %d, want 125: %s", r.code, r.stderr)
	}
}

// $XDG_CONFIG_HOME through a symbolic link another user owns must be
// refused (as $JAIL_STATE_DIR and $JAIL_AUDIT_LOG are): otherwise that
// user chooses the root-private directory root's jail writes
// secrets.json into, and reads definitions from.
func TestSecretStoreRefusesALinkAnotherUserOwns(t *testing.T) {
	if os.Geteuid() != 0 || rootless == nil {
		t.Skip("needs root and the unprivileged account (the attacker)")
	}
	link, good, _, _ := linkRace(t)
	cmd := command(mode{}, "secret", "add", "s", "--from-env", "HOME")
	cmd.Env = append(cmd.Env, "XDG_CONFIG_HOME="+link)
	r := runCmd(t, cmd)
	if _, err := os.Stat(filepath.Join(good, "jail", "secrets.json")); err == nil {
		t.Errorf("root's jail wrote secrets.json into %s, where another user's link led it", good)
	}
	t.Logf("stderr: %s", r.stderr)
	if r.code != 125 {
		t.Fatalf("exit %d, want 125 (refused): %s", r.code, r.stderr)
	}
}
