package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// profileHome makes a home for the user of mode m with an empty
// .config/jail/profiles, owned by that user, and returns the home and the
// profile directory.
func profileHome(t *testing.T, m mode) (home, dir string) {
	t.Helper()
	owner := (*account)(nil)
	if m.rootless {
		owner = rootless
	}
	home = sharedTempDir(t, owner)
	dir = filepath.Join(home, ".config", "jail", "profiles")
	for d := dir; d != home; d = filepath.Dir(d) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for d := dir; d != home; d = filepath.Dir(d) {
		chownTo(t, d, owner)
	}
	return home, dir
}

// chownTo gives path to owner (nil: root), when the suite runs as root.
func chownTo(t *testing.T, path string, owner *account) {
	t.Helper()
	if owner == nil || os.Geteuid() != 0 {
		return
	}
	if err := os.Lchown(path, owner.uid, owner.gid); err != nil {
		t.Fatal(err)
	}
}

// withProfiles returns the command that runs bin (jailBin, or another jail
// binary) with args in mode m, reading the user profiles of home
// (home/.config/jail/profiles). Rootless, home is named by
// $XDG_CONFIG_HOME. Root's jail reads only root's home in the password
// database: it runs in a mount namespace of its own where home is bound
// onto /root, so the host's /root and /etc/jail stay untouched.
func withProfiles(m mode, bin, home string, args ...string) *exec.Cmd {
	cmd := command(m, args...)
	if m.rootless {
		if cmd.Path == jailBin {
			cmd.Path = bin
		}
		for i, a := range cmd.Args {
			if a == jailBin {
				cmd.Args[i] = bin
			}
		}
		cmd.Env = append(cmd.Env, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
		return cmd
	}
	wrapped := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "--",
		"sh", "-c", `mount --bind "$0" /root && exec "$@"`, home, bin}, args...)...)
	wrapped.Env = cmd.Env
	return wrapped
}

// TestRootReadsNoOtherUsersProfiles: root's jail, given another user's
// $HOME and $XDG_CONFIG_HOME (sudo -E, env_keep, a CI step), applies none
// of that user's profiles: their default.yaml, which would plant an
// environment variable and allow io_uring, is not read (row 35).
func TestRootReadsNoOtherUsersProfiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	checkNoLeaks(t)
	home, dir := profileHome(t, asRootless)
	planted := "version: 1\nextends: default\nenv: {PLANTED: yes}\nseccomp:\n  drop: [io_uring_setup]\n  allow: [io_uring_setup]\n"
	path := filepath.Join(dir, "default.yaml")
	if err := os.WriteFile(path, []byte(planted), 0o644); err != nil {
		t.Fatal(err)
	}
	chownTo(t, path, rootless)
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
	cmd := command(asRoot, withProbe("--", "sh", "-c", `echo "[$PLANTED]"; /opt/probe/jailprobe syscalls | grep io_uring_setup`)...)
	cmd.Env = append(cmd.Env, env...)
	if r := runCmd(t, cmd); r.code != 0 || r.stdout != "[]\nio_uring_setup: EPERM\n" {
		t.Errorf("root's run with another user's HOME: exit %d, stdout %q, stderr %q; want their profile ignored", r.code, r.stdout, r.stderr)
	}
	cmd = command(asRoot, "profile", "show", "default")
	cmd.Env = append(cmd.Env, env...)
	if r := runCmd(t, cmd); r.code != 0 || strings.Contains(r.stdout, "PLANTED") || !strings.Contains(r.stdout, "(built-in)") {
		t.Errorf("root's profile show with another user's HOME: exit %d, %.300q", r.code, r.stdout)
	}
}

// TestProfilesOthersCouldChangeAreRefused: a profile file that group or
// others may write, one in a directory they may write or that belongs to
// someone else, and a symbolic link (even to a good profile) are refused
// with one line saying why, exit 125, and nothing runs; a good file next
// to them works.
func TestProfilesOthersCouldChangeAreRefused(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		owner := (*account)(nil)
		if m.rootless {
			owner = rootless
		}
		home, dir := profileHome(t, m)
		seen := dir // the directory as jail names it
		if !m.rootless {
			seen = "/root/.config/jail/profiles"
		}
		write := func(path string, mode os.FileMode) {
			if err := os.WriteFile(path, []byte("version: 1\nextends: default\nenv: {MINE: yes}\n"), mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, mode); err != nil {
				t.Fatal(err)
			}
			chownTo(t, path, owner)
		}
		write(filepath.Join(dir, "good.yaml"), 0o644)
		write(filepath.Join(dir, "shared.yaml"), 0o664)
		write(filepath.Join(dir, "anyone.yaml"), 0o666)
		elsewhere := filepath.Join(home, "good-elsewhere.yaml")
		write(elsewhere, 0o644)
		if err := os.Symlink(elsewhere, filepath.Join(dir, "linked.yaml")); err != nil {
			t.Fatal(err)
		}
		chownTo(t, filepath.Join(dir, "linked.yaml"), owner)
		cases := []struct{ profile, want string }{
			{"shared", "jail: profile shared: " + filepath.Join(seen, "shared.yaml") + ": writable by group or others"},
			{"anyone", "jail: profile anyone: " + filepath.Join(seen, "anyone.yaml") + ": writable by group or others"},
			{"linked", "jail: profile linked: " + filepath.Join(seen, "linked.yaml") + ": a symbolic link"},
		}
		for _, c := range cases {
			r := runCmd(t, withProfiles(m, jailBin, home, "run", "--profile", c.profile, "--", "echo", "ran"))
			if r.code != 125 || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, c.want) || r.stdout != "" {
				t.Errorf("--profile %s: exit %d, stdout %q, stderr %q; want 125 and %q", c.profile, r.code, r.stdout, r.stderr, c.want)
			}
		}
		if r := runCmd(t, withProfiles(m, jailBin, home, "run", "--profile", "good", "--", "sh", "-c", `echo "$MINE"`)); r.code != 0 || r.stdout != "yes\n" {
			t.Errorf("--profile good: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		// A profile directory others may write: its files are refused.
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		r := runCmd(t, withProfiles(m, jailBin, home, "run", "--profile", "good", "--", "echo", "ran"))
		if want := "jail: profile good: " + seen + ": writable by group or others"; r.code != 125 || !strings.HasPrefix(r.stderr, want) {
			t.Errorf("a world-writable profile directory: exit %d, stderr %q; want 125 and %q", r.code, r.stderr, want)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// A profile directory of another user (root's jail trusts only
		// root's; a user's, only theirs and root's).
		if os.Geteuid() == 0 {
			other := 4242
			if !m.rootless {
				other = rootless.uid
			}
			if err := os.Chown(dir, other, other); err != nil {
				t.Fatal(err)
			}
			r := runCmd(t, withProfiles(m, jailBin, home, "run", "--profile", "good", "--", "echo", "ran"))
			if r.code != 125 || !strings.Contains(r.stderr, seen+": owned by uid ") {
				t.Errorf("a profile directory of uid %d: exit %d, stderr %q; want refused", other, r.code, r.stderr)
			}
		}
	})
}
