package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Lesson 26 (issue 22, item 1): a writable mount's source is opened once and
// only that descriptor is used. A local user who owns the directory above a
// workspace exchanges the workspace with a symlink to / (and with a
// credential store) in a loop while jail starts sandboxes on it; the sandbox
// must never see the host's root or the refused directory.
func TestMountSourceSwappedDuringTheCheck(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		parent := sharedTempDir(t, rootless)
		ws := filepath.Join(parent, "ws")
		aws := filepath.Join(parent, ".aws")
		link := filepath.Join(parent, "link")
		awsLink := filepath.Join(parent, "aws-link")
		for _, d := range []string{ws, aws} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			os.Chown(d, rootless.uid, rootless.gid)
		}
		os.WriteFile(filepath.Join(ws, "ws-marker"), []byte("ws\n"), 0o644)
		os.WriteFile(filepath.Join(aws, "credentials"), []byte("secret\n"), 0o644)
		if err := os.Symlink("/", link); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(aws, awsLink); err != nil {
			t.Fatal(err)
		}
		for _, swap := range []string{link, awsLink} {
			var stop atomic.Bool
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					_ = unix.Renameat2(unix.AT_FDCWD, ws, unix.AT_FDCWD, swap, unix.RENAME_EXCHANGE)
				}
			}()
			escaped, ran := 0, 0
			for i := 0; i < raceRounds(60); i++ {
				r := jail(t, m, "run", "--workspace", ws, "--", "sh", "-c",
					"if test -e /workspace/etc/passwd || test -e /workspace/credentials; then echo ESCAPED; fi; ls /workspace")
				if r.code == 0 {
					ran++
				}
				if strings.Contains(r.stdout, "ESCAPED") {
					escaped++
				}
				if r.code != 0 && r.code != 125 {
					t.Errorf("exit %d: %s", r.code, r.stderr)
				}
			}
			stop.Store(true)
			wg.Wait()
			// Put the names back as they were.
			if st, err := os.Lstat(ws); err == nil && st.Mode()&os.ModeSymlink != 0 {
				unix.Renameat2(unix.AT_FDCWD, ws, unix.AT_FDCWD, swap, unix.RENAME_EXCHANGE)
			}
			if escaped > 0 {
				t.Errorf("swapping %s for the workspace: %d of %d sandboxes saw it (%d ran)", filepath.Base(swap), escaped, raceRounds(60), ran)
			}
		}
	})
}

// Lesson 26 for the read-only sources: as root a --mount source and a
// --rootfs reach the init as clones of the descriptor checked (before,
// as paths the init reopened and checked by inode). A local user who owns
// the directory above exchanges the source with a symlink to / or to a
// credential store while jail starts sandboxes on it: no sandbox sees
// either (a --rootfs that is not the busybox tree fails with 127).
func TestReadOnlySourcesSwappedDuringTheCheck(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		parent := sharedTempDir(t, rootless)
		src, aws := filepath.Join(parent, "src"), filepath.Join(parent, ".aws")
		link, awsLink := filepath.Join(parent, "link"), filepath.Join(parent, "aws-link")
		if _, err := makeBusyboxRootfs(src); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(aws, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(aws, "credentials"), []byte("secret\n"), 0o644)
		for _, p := range []string{src, aws, filepath.Join(aws, "credentials")} {
			os.Chown(p, rootless.uid, rootless.gid)
		}
		if err := os.Symlink("/", link); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(aws, awsLink); err != nil {
			t.Fatal(err)
		}
		for _, form := range []struct {
			name string
			args []string
			saw  string
		}{
			{"--mount", []string{"--mount", src + ":/data"}, "test -e /data/etc/passwd || test -e /data/credentials"},
			{"--rootfs", []string{"--rootfs", src}, "test -e /etc/passwd || test -e /credentials"},
		} {
			for _, swap := range []string{link, awsLink} {
				var stop atomic.Bool
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !stop.Load() {
						_ = unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, swap, unix.RENAME_EXCHANGE)
					}
				}()
				escaped, ran := 0, 0
				for i := 0; i < raceRounds(40); i++ {
					args := append(append([]string{"run"}, form.args...), "--", "sh", "-c", "if "+form.saw+"; then echo ESCAPED; fi")
					r := jail(t, m, args...)
					if r.code == 0 {
						ran++
					}
					if strings.Contains(r.stdout, "ESCAPED") || r.code != 0 && r.code != 125 {
						escaped++
						t.Logf("%s, %s swapped in: exit %d, stdout %q, stderr %q", form.name, filepath.Base(swap), r.code, r.stdout, r.stderr)
					}
				}
				stop.Store(true)
				wg.Wait()
				if st, err := os.Lstat(src); err == nil && st.Mode()&os.ModeSymlink != 0 {
					unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, swap, unix.RENAME_EXCHANGE)
				}
				t.Logf("%s, swapping %s for the source: %d of %d ran", form.name, filepath.Base(swap), ran, raceRounds(40))
				if escaped > 0 {
					t.Errorf("%s, swapping %s for the source: %d of %d sandboxes saw it (%d ran)", form.name, filepath.Base(swap), escaped, raceRounds(40), ran)
				}
			}
		}
	})
}

// Lesson 27 (issue 22, item 2): nothing a sandbox makes through a writable
// host mount is set-id on the host or owned by host root.
func TestSetIDFilesNeverReachTheHost(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		if !m.rootless {
			// A directory of host root's: refused rather than written
			// as root.
			rootWS := sharedTempDir(t, nil)
			r := jail(t, m, "run", "--workspace", rootWS, "--", "sh", "-c", "cp /usr/bin/id /workspace/id2; chmod 6755 /workspace/id2")
			if r.code != 125 || !strings.Contains(r.stderr, "owned by host root") {
				t.Errorf("a root-owned workspace: exit %d, stderr %q", r.code, r.stderr)
			}
			if _, err := os.Stat(filepath.Join(rootWS, "id2")); err == nil {
				t.Errorf("the sandbox wrote into a root-owned workspace")
			}
			group := sharedTempDir(t, rootless)
			os.Chown(group, rootless.uid, 0)
			if r := jail(t, m, "run", "--mount", group+":/data:rw", "--", "true"); r.code != 125 {
				t.Errorf("a directory of host root's group mounted writable: exit %d", r.code)
			}
		}
		ws := sharedTempDir(t, rootless)
		script := strings.Join([]string{
			"cd /workspace",
			"cp /usr/bin/id id2; chmod 6755 id2; chmod u+s id2; chmod g+s id2",
			"install -m 4755 /usr/bin/id id3",
			"python3 -c 'import os; os.close(os.open(\"id4\", os.O_CREAT|os.O_WRONLY, 0o6755))'",
			"python3 -c 'import os; os.mknod(\"id5\", 0o106755)'",
			"python3 -c 'import os; os.chmod(\"id2\", 0o4755)'",
			"cp -p /usr/bin/passwd id6",
			"tar -C /usr/bin -cf /tmp/a.tar passwd && tar -xpf /tmp/a.tar",
			"true",
		}, "; ")
		r := jail(t, m, "run", "--workspace", ws, "--", "sh", "-c", script+" 2>/dev/null; ls -l /workspace")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		entries, _ := os.ReadDir(ws)
		if len(entries) < 4 {
			t.Errorf("the sandbox made only %d files: %s", len(entries), r.stdout)
		}
		for _, e := range entries {
			var st syscall.Stat_t
			if err := syscall.Lstat(filepath.Join(ws, e.Name()), &st); err != nil {
				t.Fatal(err)
			}
			if st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
				t.Errorf("%s is set-id on the host: mode %o", e.Name(), st.Mode)
			}
			if st.Uid == 0 || st.Gid == 0 {
				t.Errorf("%s is owned by host root: %d:%d", e.Name(), st.Uid, st.Gid)
			}
		}
		// The guard holds only where the sandbox writes to the host: an
		// image's own files may still be set-id in its private layer.
		if out := mustRun(t, m, "run", "--rootfs", rootfsDir, "--", "sh", "-c", "cp /bin/busybox /x && chmod 4755 /x && ls -l /x"); !strings.HasPrefix(out, "-rws") {
			t.Errorf("without a host mount, chmod u+s in the private layer: %q", out)
		}
	})
}

// Lesson 28 (issue 22, item 3): the caller's stdin is copied in; the
// sandbox never holds the caller's descriptor.
func TestStdinIsACopy(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		dir := sharedTempDir(t, rootless)
		file := filepath.Join(dir, "input")
		os.WriteFile(file, []byte("original\n"), 0o666)
		os.Chmod(file, 0o666)
		cmd := command(m, "run", "--", "sh", "-c", "cat; echo overwritten >/proc/self/fd/0; echo appended >>/proc/self/fd/0; readlink /proc/self/fd/0")
		in, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		cmd.Stdin = in
		r := runCmd(t, cmd)
		if !strings.HasPrefix(r.stdout, "original\n") {
			t.Errorf("stdin not passed: %q (%s)", r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout, file) {
			t.Errorf("the sandbox sees the host path of its stdin: %q", r.stdout)
		}
		if b, _ := os.ReadFile(file); string(b) != "original\n" {
			t.Errorf("the sandbox wrote into the caller's stdin file: %q", b)
		}
		// A directory as stdin: refused, not a way out to the host tree.
		cmd = command(m, "run", "--", "sh", "-c", "cd /proc/self/fd/0 && ls && cd ../../../../.. && ls")
		d, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		cmd.Stdin = d
		r = runCmd(t, cmd)
		if r.code != 125 || !strings.Contains(r.stderr, "jail: stdin: is a directory") {
			t.Errorf("a directory as stdin: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
	})
}

// Lesson 31 (issue 22, item 7): jail's own state, configuration and stores
// are never mount sources nor a root layer, whatever the environment.
func TestJailStateIsNeverShown(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		home := os.Getenv("HOME")
		if m.rootless {
			home = rootless.home
		}
		store := sharedTempDir(t, rootless)
		os.MkdirAll(filepath.Join(store, "layers"), 0o755)
		other := sharedTempDir(t, rootless) // another environment's runtime dir
		dirs := []string{
			filepath.Join(home, ".config", "jail", "profiles"),
			filepath.Join(home, ".cache", "jail"),
			filepath.Join(home, ".local", "share", "jail"),
			filepath.Join(other, "jail"),
		}
		if !m.rootless {
			dirs = append(dirs, "/etc/jail/profiles", "/var/lib/jail", "/run/jail")
		}
		for _, d := range dirs {
			made := !exists(d)
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, top := range []string{home, other} {
				if m.rootless && strings.HasPrefix(d, top+"/") {
					for p := d; p != top; p = filepath.Dir(p) {
						os.Chown(p, rootless.uid, rootless.gid)
					}
				}
			}
			if made {
				t.Cleanup(func() { os.RemoveAll(d) })
			}
		}
		cases := [][]string{
			{"--mount", dirs[0] + ":/c:rw"},
			{"--mount", filepath.Dir(dirs[0]) + ":/c:rw"},
			{"--workspace", dirs[1]},
			{"--rootfs", dirs[2]},
			{"--rootfs", store},
			{"--workspace", filepath.Join(store, "layers")},
			{"--workspace", dirs[3]},
		}
		if !m.rootless {
			cases = append(cases, []string{"--mount", "/etc/jail:/c:rw"}, []string{"--rootfs", "/var/lib/jail"})
		}
		for _, c := range cases {
			cmd := command(m, append(append([]string{"run"}, c...), "--", "true")...)
			cmd.Env = append(cmd.Env, "JAIL_IMAGE_STORE="+store, "XDG_RUNTIME_DIR="+other)
			r := runCmd(t, cmd)
			if r.code != 125 || !strings.Contains(r.stderr, "refused") {
				t.Errorf("%v: exit %d, stderr %q", c, r.code, r.stderr)
			}
		}
	})
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// Lesson 31 (issue 22, item 7): the init joins a fresh, anonymous session
// keyring, so even a profile that allows keyctl cannot reach the keys of
// the caller's session.
func TestCallersKeyringIsOutOfReach(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("needs python3")
	}
	const profile = "version: 1\nextends: default\nseccomp:\n  drop: [keyctl, add_key, request_key]\n  allow: [keyctl, add_key, request_key]\n"
	// The caller: a new session keyring holding a key, then jail.
	const caller = `import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
SYS_keyctl, SYS_add_key = 250, 248
if libc.syscall(SYS_keyctl, 1, b"jail-test-caller") < 0: sys.exit("join: %d" % ctypes.get_errno())
if libc.syscall(SYS_add_key, b"user", b"jail-test-key", b"top secret", 10, -3) < 0: sys.exit("add_key: %d" % ctypes.get_errno())
os.execvp(sys.argv[1], sys.argv[1:])
`
	const inside = `import ctypes
libc = ctypes.CDLL(None, use_errno=True)
k = libc.syscall(250, 10, -3, b"user", b"jail-test-key", 0)
print("FOUND" if k >= 0 else "absent %d" % ctypes.get_errno())
`
	forEachMode(t, func(t *testing.T, m mode) {
		env := []string{}
		var dir string
		if m.rootless {
			cfg := sharedTempDir(t, rootless)
			dir = filepath.Join(cfg, "jail", "profiles")
			os.MkdirAll(dir, 0o755)
			for p := dir; p != cfg; p = filepath.Dir(p) {
				os.Chown(p, rootless.uid, rootless.gid)
			}
			env = append(env, "XDG_CONFIG_HOME="+cfg)
		} else {
			dir = "/etc/jail/profiles"
			if !exists("/etc/jail") {
				t.Cleanup(func() { os.RemoveAll("/etc/jail") })
			}
			os.MkdirAll(dir, 0o755)
		}
		name := "jail-test-keyring"
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(profile), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(path) })
		cmd := command(m, "run", "--profile", name, "--", "python3", "-c", inside)
		cmd.Args = append([]string{"python3", "-c", caller}, cmd.Args...)
		cmd.Path, _ = exec.LookPath("python3")
		cmd.Env = append(cmd.Env, env...)
		r := runCmd(t, cmd)
		if r.code != 0 {
			t.Fatalf("exit %d: %s%s", r.code, r.stdout, r.stderr)
		}
		if !strings.HasPrefix(r.stdout, "absent") {
			t.Errorf("the sandbox reached the caller's session keyring: %q", r.stdout)
		}
	})
}

// Lesson 37 (issue 22, item 18): a home outside /home (a CI user's
// /var/lib/...) is masked as /home is, for its own user and for root.
func TestHomesOutsideHomeAreMasked(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make the account")
	}
	const name = "jail-test-ci"
	home := "/var/lib/" + name
	if out, err := exec.Command("id", "-u", name).Output(); err != nil || len(out) == 0 {
		if out, err := exec.Command("useradd", "--system", "--home-dir", home, "--create-home", "--shell", "/bin/bash", name).CombinedOutput(); err != nil {
			t.Fatalf("useradd: %v: %s", err, out)
		}
	}
	uidOut, _ := exec.Command("id", "-u", name).Output()
	gidOut, _ := exec.Command("id", "-g", name).Output()
	uid, _ := strconv.Atoi(strings.TrimSpace(string(uidOut)))
	gid, _ := strconv.Atoi(strings.TrimSpace(string(gidOut)))
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o755)
	os.Chmod(home, 0o755)
	os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), []byte("PRIVATE KEY\n"), 0o644)
	for _, p := range []string{home, filepath.Join(home, ".ssh"), filepath.Join(home, ".ssh", "id_ed25519")} {
		os.Chown(p, uid, gid)
	}
	probe := "cat " + home + "/.ssh/id_ed25519 2>/dev/null; ls -A " + home
	for _, who := range []string{"root", name} {
		t.Run(who, func(t *testing.T) {
			checkNoLeaks(t)
			var cmd *exec.Cmd
			if who == "root" {
				cmd = command(asRoot, "run", "--", "sh", "-c", probe)
			} else {
				cmd = exec.Command("setpriv", "--reuid", strconv.Itoa(uid), "--regid", strconv.Itoa(gid), "--clear-groups", "--",
					jailBin, "run", "--", "sh", "-c", probe)
				cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + jailTmp, "HOME=" + home}
			}
			r := runCmd(t, cmd)
			if strings.Contains(r.stdout, "PRIVATE KEY") || strings.Contains(r.stdout, ".ssh") {
				t.Errorf("%s's home is visible: %q (%s)", name, r.stdout, r.stderr)
			}
			if r.code == 125 {
				t.Errorf("exit 125: %s", r.stderr)
			}
		})
	}
	// A mount into a masked home would be hidden by the mask: refused.
	dir := sharedTempDir(t, nil)
	r := jail(t, asRoot, "run", "--mount", dir+":"+home+"/x", "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "does not see") {
		t.Errorf("a mount into a masked home: exit %d, stderr %q", r.code, r.stderr)
	}
}

// Issue 22, item 11: --rootfs obeys the mount-source policy.
func TestRootfsObeysTheMountPolicy(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		home := os.Getenv("HOME")
		if m.rootless {
			home = rootless.home
			os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
			os.Chown(filepath.Join(home, ".ssh"), rootless.uid, rootless.gid)
		}
		for _, dir := range []string{"/", home, "/etc", filepath.Join(home, ".ssh"), "/proc/1/root"} {
			r := jail(t, m, "run", "--rootfs", dir, "--", "true")
			if r.code != 125 || !strings.Contains(r.stderr, "refused") {
				t.Errorf("--rootfs %s: exit %d, stderr %q", dir, r.code, r.stderr)
			}
		}
	})
}

// The root that works inside (issue 22): sandbox root keeps the namespaced
// capabilities, so archives with other owners unpack and users switch;
// the host stays out of reach (the isolation tests run with them too).
func TestRootInsideCanChownAndSwitchUsers(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		script := strings.Join([]string{
			"set -e",
			"cd /tmp && mkdir src && echo x > src/f && chown 1000:1000 src/f",
			"tar -cf a.tar src && rm -rf src && tar -xpf a.tar && stat -c %u:%g src/f",
			"cp -a src copy && stat -c %u:%g copy/f",
			"setpriv --reuid 1000 --regid 1000 --clear-groups id -u",
			"chmod 000 src/f && cat src/f",
			"cat /etc/shadow | wc -c",
			"touch /etc/jail-probe 2>/dev/null && echo WROTE || echo read-only",
		}, "\n")
		r := jail(t, m, "run", "--", "sh", "-c", script)
		if m.rootless {
			// One id only, without subordinate ids: chown to 1000 has
			// nothing to map onto.
			if r.code == 0 && !strings.Contains(r.stdout, "1000:1000") {
				t.Errorf("rootless: %q %s", r.stdout, r.stderr)
			}
			return
		}
		want := "1000:1000\n1000:1000\n1000\nx\n0\nread-only\n"
		if r.code != 0 || r.stdout != want {
			t.Errorf("exit %d, stdout %q (want %q), stderr %q", r.code, r.stdout, want, r.stderr)
		}
		if exists("/etc/jail-probe") {
			t.Errorf("the sandbox wrote the host's /etc")
			os.Remove("/etc/jail-probe")
		}
		// A non-zero user has none.
		out := mustRun(t, m, "run", "--user", "1000", "--", "grep", "CapEff", "/proc/self/status")
		if !strings.Contains(out, "0000000000000000") {
			t.Errorf("--user 1000 has capabilities: %q", out)
		}
	})
}

// subIDAccount is a second unprivileged account that has subordinate ids
// (made with a range in /etc/subuid and /etc/subgid when missing), for the
// rootless runs that map them; the suite's main rootless account has none.
func subIDAccount(t *testing.T) (*account, int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make the account")
	}
	for _, h := range []string{"newuidmap", "newgidmap"} {
		if _, err := exec.LookPath(h); err != nil {
			t.Skipf("needs %s (Debian's uidmap)", h)
		}
	}
	const name = "jail-test-sub"
	if err := exec.Command("id", "-u", name).Run(); err != nil {
		if out, err := exec.Command("useradd", "--system", "--create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
			t.Fatalf("useradd: %v: %s", err, out)
		}
	}
	for _, file := range []string{"/etc/subuid", "/etc/subgid"} {
		data, _ := os.ReadFile(file)
		if !strings.Contains("\n"+string(data), "\n"+name+":") {
			f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(f, "%s:%d:%d\n", name, 1500000000, 65536)
			f.Close()
		}
	}
	uidOut, _ := exec.Command("id", "-u", name).Output()
	gidOut, _ := exec.Command("id", "-g", name).Output()
	uid, _ := strconv.Atoi(strings.TrimSpace(string(uidOut)))
	gid, _ := strconv.Atoi(strings.TrimSpace(string(gidOut)))
	start := 0
	data, _ := os.ReadFile("/etc/subuid")
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Split(line, ":"); len(f) == 3 && f[0] == name {
			start, _ = strconv.Atoi(f[1])
			break
		}
	}
	return &account{uid: uid, gid: gid, home: "/home/" + name}, start
}

// Rootless with subordinate ids (issue 22, "root that works inside"): the
// sandbox's ids 0..65535 map onto the caller and its subordinate range, so
// archives with several owners keep them, users switch and groups drop;
// what sandbox root writes to a workspace is still the caller's.
func TestRootlessSubordinateIDs(t *testing.T) {
	acct, subStart := subIDAccount(t)
	checkNoLeaks(t)
	ws := sharedTempDir(t, acct)
	run := func(args ...string) result {
		cmd := exec.Command("setpriv", append([]string{"--reuid", strconv.Itoa(acct.uid), "--regid", strconv.Itoa(acct.gid), "--clear-groups", "--", jailBin}, args...)...)
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + jailTmp, "HOME=" + acct.home}
		return runCmd(t, cmd)
	}
	script := strings.Join([]string{
		"set -e",
		"cat /proc/self/uid_map | wc -l",
		"cd /tmp && mkdir src && echo x > src/f && chown 1000:1000 src/f",
		"tar -cf a.tar src && rm -rf src && tar -xpf a.tar && stat -c %u:%g src/f",
		"echo root > /workspace/by-root",
		"mkdir /workspace/sub && chown 1000:1000 /workspace/sub",
	}, "\n")
	r := run("run", "--workspace", ws, "--", "sh", "-c", script)
	if want := "2\n1000:1000\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("exit %d, stdout %q (want %q), stderr %q", r.code, r.stdout, want, r.stderr)
	}
	if r := run("run", "--workspace", ws, "--user", "1000", "--", "sh", "-c", "id -u; echo u > /workspace/sub/by-1000"); r.code != 0 || r.stdout != "1000\n" {
		t.Fatalf("--user 1000: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// Sandbox root switches users itself only where a cgroup bounds the
	// sandbox's tasks: RLIMIT_NPROC, the fallback, counts one user's.
	r = run("run", "--", "setpriv", "--reuid", "1000", "--regid", "1000", "--clear-groups", "id", "-u")
	if fallback := strings.Contains(r.stderr, "no cgroup"); fallback {
		if r.code == 0 || !strings.Contains(r.stderr, "cannot switch users") {
			t.Errorf("without a cgroup, sandbox root switched users: exit %d, %q %q", r.code, r.stdout, r.stderr)
		}
	} else if r.code != 0 || r.stdout != "1000\n" {
		t.Errorf("sandbox root could not switch users: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	for name, want := range map[string]int{"by-root": acct.uid, "sub/by-1000": subStart + 999} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(ws, name), &st); err != nil {
			t.Fatal(err)
		}
		if int(st.Uid) != want {
			t.Errorf("%s is owned by host uid %d; want %d", name, st.Uid, want)
		}
	}
	if r := run("check"); !strings.Contains(r.stdout, fmt.Sprintf("subordinate uids %d-", subStart)) {
		t.Errorf("jail check does not say the subordinate ids are mapped: %s", r.stdout)
	}
	// And a command that is not root gets no capabilities.
	if r := run("run", "--user", "1000", "--", "grep", "CapEff", "/proc/self/status"); !strings.Contains(r.stdout, "0000000000000000") {
		t.Errorf("--user 1000: %q %s", r.stdout, r.stderr)
	}
}

// Issue 22, item 9, as far as it can be done: a lock a sandbox takes on a
// file of its root filesystem stays in the sandbox when that root is an
// overlay (--rootfs, --image): the overlay's inode is locked, not the
// host's. (On the host tree and on bind mounts, which are the host's own
// inodes, a sandbox can flock a file it can read; README, Known limits.)
func TestLocksOnLayersStayInside(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		cmd := command(m, withProbe("--rootfs", rootfsDir, "--", "/opt/probe/jailprobe", "flock", "/etc/image-release")...)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		buf := make([]byte, 7)
		if n, _ := stdout.Read(buf); string(buf[:n]) != "locked\n" {
			cmd.Process.Kill()
			t.Fatalf("the sandbox did not take its lock: %q", buf[:n])
		}
		f, err := os.Open(filepath.Join(rootfsDir, "etc", "image-release"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			t.Errorf("the host cannot lock the layer's file while a sandbox holds it: %v", err)
		}
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
	})
}
