package test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Found by the adversarial review of issue 22's fixes.

// Issue 22, item 6 (review): without a cgroup (rootless on cgroup v1) the
// notice says each process's private memory is bounded by RLIMIT_DATA
// (--memory). A stack mapping (MAP_GROWSDOWN) is private memory that
// RLIMIT_DATA does not count, and RLIMIT_STACK only bounds its growth, not
// its size at mmap: one process held 1 GiB under --memory 64M.
func TestFallbackMemoryLimitCoversStackMappings(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		r := jail(t, m, withProbe("--memory", "64M", "--", "/opt/probe/jailprobe", "growsdown", "512")...)
		if strings.Contains(r.stdout, "touched 512 MiB") {
			t.Errorf("--memory 64M: one process touched 512 MiB of a MAP_GROWSDOWN mapping (exit %d, %s)", r.code, r.stderr)
		}
	})
}

// symlinkedHome runs the rest of its arguments in a private mount namespace
// whose root is the host's, except that /home is a symlink to /varhome,
// which holds the host's homes: as on ostree systems (Fedora Silverblue,
// CoreOS: /home -> var/home). $1 is an empty directory for the new root.
const symlinkedHome = `set -e
PATH=/usr/sbin:/sbin:$PATH
N=$1; shift
mount -t tmpfs review-root "$N"
for e in /*; do
  name=${e#/}
  [ "$name" = home ] && continue
  if [ -L "$e" ]; then ln -s "$(readlink "$e")" "$N/$name"
  elif [ -d "$e" ]; then mkdir "$N/$name"; mount --rbind "$e" "$N/$name"
  elif [ -f "$e" ]; then touch "$N/$name"; mount --bind "$e" "$N/$name"; fi
done
mkdir "$N/varhome"; mount --rbind /home "$N/varhome"; ln -s varhome "$N/home"
cd "$N"; mkdir .old; pivot_root . .old; umount -l /.old; rmdir /.old
exec "$@"
`

// Issue 22, item 18 (review): homes are masked when /home is a symlink. The
// init replaces /home with an empty directory and HomeMasks skips every
// home below /home, but the directory /home points to is bound with the
// rest of the host tree: every home, ~/.ssh and ~/.cache/jail included,
// was readable there (rootless: the caller's own private files).
func TestHomesMaskedWhenHomeIsASymlink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a mount namespace with another /home")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare")
	}
	if !strings.HasPrefix(rootless.home, "/home/") {
		t.Skipf("the test account's home %s is not under /home", rootless.home)
	}
	marker := filepath.Join(rootless.home, "jail-review-home-marker")
	if err := os.WriteFile(marker, []byte("PRIVATE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chown(marker, rootless.uid, rootless.gid)
	t.Cleanup(func() { os.Remove(marker) })
	target := "/varhome/" + strings.TrimPrefix(marker, "/home/")
	forEachMode(t, func(t *testing.T, m mode) {
		cmd := command(m, "run", "--", "sh", "-c", "cat "+marker+" "+target+" 2>/dev/null; ls /varhome 2>/dev/null")
		newRoot := sharedTempDir(t, nil)
		cmd.Args = append([]string{"unshare", "-m", "--propagation", "private", "sh", "-c", symlinkedHome, "sh", newRoot}, cmd.Args...)
		cmd.Path, _ = exec.LookPath("unshare")
		r := runCmd(t, cmd)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		if strings.Contains(r.stdout, "PRIVATE") || strings.Contains(r.stdout, filepath.Base(rootless.home)) {
			t.Errorf("with /home -> varhome, the homes are visible at /varhome: %q", r.stdout)
		}
	})
}

// Issue 22, item 2 (review): the set-id guard holds whatever the profile
// allows. io_uring's openat takes its mode in a ring that no seccomp filter
// reads: with a profile that allows io_uring, a sandbox created a 6755
// file owned by the workspace's owner on the host.
func TestSetIDGuardCoversIOUring(t *testing.T) {
	const profile = "version: 1\nextends: default\nseccomp:\n  drop: [io_uring_setup, io_uring_enter, io_uring_register]\n  allow: [io_uring_setup, io_uring_enter, io_uring_register]\n"
	const name = "jail-review-uring"
	forEachMode(t, func(t *testing.T, m mode) {
		var env []string
		dir := "/etc/jail/profiles"
		if m.rootless {
			cfg := sharedTempDir(t, rootless)
			dir = filepath.Join(cfg, "jail", "profiles")
			os.MkdirAll(dir, 0o755)
			for p := dir; p != cfg; p = filepath.Dir(p) {
				os.Chown(p, rootless.uid, rootless.gid)
			}
			env = append(env, "XDG_CONFIG_HOME="+cfg)
		} else {
			if !exists("/etc/jail") {
				t.Cleanup(func() { os.RemoveAll("/etc/jail") })
			}
			os.MkdirAll(dir, 0o755)
		}
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(profile), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(path) })
		ws := sharedTempDir(t, rootless)
		cmd := command(m, withProbe("--profile", name, "--workspace", ws, "--", "/opt/probe/jailprobe", "uring-create", "/workspace/suid")...)
		cmd.Env = append(cmd.Env, env...)
		r := runCmd(t, cmd)
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(ws, "suid"), &st); err == nil && st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
			t.Errorf("through io_uring the sandbox made a set-id file on the host: mode %o, owner %d:%d (%s%s)", st.Mode, st.Uid, st.Gid, r.stdout, r.stderr)
		}
	})
}

// Issue 22, items 1 and 2 (review): root's jail gives a writable mount's
// sandbox the powers of the directory's owner (an id-mapped mount), so the
// directory must be the one the path's owner meant. A user who owns the
// directory holding a workspace path made it a symlink to another user's
// private project (behind a 0700 directory she cannot even enter): the
// sandbox read that user's 0600 file and wrote files as that user. A
// symlink another user planted (a checkout, an earlier sandbox writing its
// own workspace) steers root the same way.
func TestWritableSourceThroughAnotherUsersSymlink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("root's jail id-maps writable mounts")
	}
	checkNoLeaks(t)
	const other = 12345 // another user, with no account needed
	victim := sharedTempDir(t, nil)
	os.Chown(victim, other, other)
	os.Chmod(victim, 0o700)
	project := filepath.Join(victim, "project")
	os.Mkdir(project, 0o755)
	os.Chown(project, other, other)
	secret := filepath.Join(project, "secret")
	os.WriteFile(secret, []byte("VICTIM'S SECRET\n"), 0o600)
	os.Chown(secret, other, other)

	attacker := sharedTempDir(t, rootless)
	ws := filepath.Join(attacker, "ws")
	if err := os.Symlink(project, ws); err != nil {
		t.Fatal(err)
	}
	os.Lchown(ws, rootless.uid, rootless.gid)
	r := jail(t, asRoot, "run", "--workspace", ws, "--", "sh", "-c", "cat /workspace/secret; echo x > /workspace/planted")
	if strings.Contains(r.stdout, "VICTIM'S SECRET") {
		t.Errorf("through a symlink of uid %d, the sandbox read a 0600 file of uid %d", rootless.uid, other)
	}
	if exists(filepath.Join(project, "planted")) {
		t.Errorf("through a symlink of uid %d, the sandbox wrote into uid %d's directory", rootless.uid, other)
	}
}

// Issue 22, item 6 (review): without a cgroup, the notice says tasks are
// bounded by RLIMIT_NPROC (--pids). RLIMIT_NPROC counts the tasks of one
// user: with subordinate ids, sandbox root (which keeps SETUID) starts
// --pids tasks under each of its 65535 other users. With --pids 16, 430
// tasks lived at once.
func TestFallbackPidsBoundAcrossUsers(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("needs python3")
	}
	acct, _ := subIDAccount(t)
	checkNoLeaks(t)
	const spread = `import os, time
for u in range(1, 40):
    if os.fork() == 0:
        os.setgroups([]); os.setgid(u); os.setuid(u)
        n = 0
        for i in range(10):
            try:
                if os.fork() == 0:
                    time.sleep(2); os._exit(0)
                n += 1
            except OSError:
                pass
        os.write(1, b"%d\n" % (n + 1)); time.sleep(2); os._exit(0)
    time.sleep(0.02)
time.sleep(2)
`
	cmd := exec.Command("setpriv", "--reuid", strconv.Itoa(acct.uid), "--regid", strconv.Itoa(acct.gid), "--clear-groups", "--",
		jailBin, "run", "--pids", "16", "--", "python3", "-c", spread)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + jailTmp, "HOME=" + acct.home}
	r := runCmd(t, cmd)
	live := 0
	for _, f := range strings.Fields(r.stdout) {
		n, _ := strconv.Atoi(f)
		live += n
	}
	if live > 16 {
		t.Errorf("--pids 16: %d tasks lived at once, spread over the sandbox's users (exit %d, %s)", live, r.code, r.stderr)
	}
}

// Issue 22, items 7 and 15 (review): root's image store is hidden from
// sandboxes on the host tree only where it is by default (/var/lib/jail is
// masked). With JAIL_IMAGE_STORE elsewhere, every root sandbox sees it, and
// since the layers' files belong to the sandboxes' own host ids (shifted
// into HostRangeStart...), sandbox root is their owner and reads another
// image's 0600 files.
func TestImageStoreHiddenFromHostTree(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("root's store")
	}
	checkNoLeaks(t)
	parent, err := os.MkdirTemp("/var/lib", "jail-review-")
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	os.Chmod(parent, 0o755)
	store := filepath.Join(parent, "store")
	dir := sharedTempDir(t, rootless)
	layer := layerOf(t, append(busyboxEntries(t), entry{name: "etc/api-token", body: "IMAGE SECRET\n", mode: 0o600}))
	writeLayout(t, filepath.Join(dir, "layout"), "localhost/private:1", image(t, nil, []string{"PATH=/bin"}, layer))
	run := func(args ...string) result {
		cmd := storeCommand(asRoot, store, args...)
		return runCmd(t, cmd)
	}
	if r := run("image", "import", filepath.Join(dir, "layout")); r.code != 0 {
		t.Fatalf("import: %s", r.stderr)
	}
	r := run("run", "--", "sh", "-c", "cat "+store+"/layers/*/etc/api-token 2>/dev/null; ls "+store+"/layers 2>/dev/null")
	if strings.Contains(r.stdout, "IMAGE SECRET") || r.stdout != "" {
		t.Errorf("a sandbox on the host tree sees root's image store %s: %q (%s)", store, r.stdout, r.stderr)
	}
}

// Review of issue 22 (the boundary beyond its items): --net none leaves
// only loopback, but a sandbox on the host tree sees the host's own inodes,
// and connect() to a unix socket needs only write permission on it, which
// a read-only mount does not take away. What can be done: the directories
// where host services keep sockets outside the replaced /run and /tmp
// (MySQL's /var/lib/mysql on Red Hat systems, sssd's /var/lib/sss/pipes,
// postfix, libvirt, lxd, incus) are masked, and on an image or --rootfs
// (an overlay: a socket is found by its inode, and the overlay's is not
// the bound one) no socket of the layers is reachable. Elsewhere on the
// host tree it is a known limit (README).
func TestHostTreeUnixSocketsAreOutOfReach(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs to make a directory in /var/lib")
	}
	dir := "/var/lib/mysql"
	if !exists(dir) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Skip(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	layers := hostileRootfs(t, func(string) {})
	got := make(chan string, 4)
	var paths []string
	for _, d := range []string{dir, filepath.Join(layers, "etc")} {
		path := filepath.Join(d, "jail-test-service.sock")
		os.Remove(path)
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close(); os.Remove(path) })
		os.Chmod(path, 0o777)
		paths = append(paths, path)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				b := make([]byte, 64)
				n, _ := c.Read(b)
				c.Close()
				got <- string(b[:n])
			}
		}()
	}
	forEachMode(t, func(t *testing.T, m mode) {
		r := jail(t, m, withProbe("--", "/opt/probe/jailprobe", "connect-unix", paths[0])...)
		if r.stdout == "ok\n" {
			t.Errorf("with --net none, the sandbox connected to the host's %s", paths[0])
		}
		r = jail(t, m, withProbe("--rootfs", layers, "--", "/opt/probe/jailprobe", "connect-unix", "/etc/jail-test-service.sock")...)
		if r.stdout == "ok\n" {
			t.Errorf("the sandbox connected to a socket of its --rootfs layer")
		}
	})
	select {
	case msg := <-got:
		t.Errorf("a host service received %q from a sandbox", msg)
	default:
	}
}
