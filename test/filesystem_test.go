package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jail-sandbox/jail/api"
)

func TestRootfsDirectory(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		out := mustRun(t, m, "run", "--rootfs", rootfsDir, "--", "sh", "-c", "cat /etc/image-release; ls /bin/busybox; echo new > /new-file && cat /new-file")
		if !strings.Contains(out, "busybox test image") || !strings.Contains(out, "new") {
			t.Errorf("rootfs run: %q", out)
		}
		// The writable layer is private: nothing reached the directory.
		if _, err := os.Stat(filepath.Join(rootfsDir, "new-file")); err == nil {
			t.Errorf("a write in the sandbox landed in the --rootfs directory")
		}
		// --read-only: no writable layer at all.
		r := jail(t, m, "run", "--rootfs", rootfsDir, "--read-only", "--", "sh", "-c", "echo x > /new-file")
		if r.code == 0 {
			t.Errorf("--read-only root was writable")
		}
		if out := mustRun(t, m, "run", "--rootfs", rootfsDir, "--read-only", "--", "sh", "-c", "echo x > /tmp/ok && cat /tmp/ok"); out != "x\n" {
			t.Errorf("/tmp not writable with --read-only: %q", out)
		}
	})
}

func TestWorkspace(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		ws := sharedTempDir(t, rootless)
		if err := os.WriteFile(filepath.Join(ws, "input.txt"), []byte("from host\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chown(filepath.Join(ws, "input.txt"), rootless.uid, rootless.gid)
		out := mustRun(t, m, "run", "--workspace", ws, "--", "sh", "-c", "pwd; cat input.txt; echo made > output.txt; mkdir sub && touch sub/f")
		if out != "/workspace\nfrom host\n" {
			t.Errorf("workspace run printed %q", out)
		}
		// On the host, what the sandbox made belongs to the directory's owner.
		for _, name := range []string{"output.txt", "sub", "sub/f"} {
			var st syscall.Stat_t
			if err := syscall.Stat(filepath.Join(ws, name), &st); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if int(st.Uid) != rootless.uid || int(st.Gid) != rootless.gid {
				t.Errorf("%s is owned by %d:%d on the host; want the workspace owner %d:%d", name, st.Uid, st.Gid, rootless.uid, rootless.gid)
			}
		}
	})
}

func TestMounts(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		dir := sharedTempDir(t, rootless)
		os.WriteFile(filepath.Join(dir, "data"), []byte("shared\n"), 0o644)
		// Read-only unless :rw, at a destination that exists nowhere
		// (created in the sandbox only, inside the read-only host /usr).
		r := jail(t, m, "run", "--mount", dir+":/usr/share/jail-test-data", "--", "sh", "-c", "cat /usr/share/jail-test-data/data; touch /usr/share/jail-test-data/x")
		if r.stdout != "shared\n" || r.code == 0 {
			t.Errorf("ro mount: stdout %q exit %d", r.stdout, r.code)
		}
		if _, err := os.Stat("/usr/share/jail-test-data"); err == nil {
			t.Errorf("the mountpoint was created on the host")
		}
		mustRun(t, m, "run", "--mount", dir+":/data:rw", "--", "sh", "-c", "echo written > /data/out")
		if b, _ := os.ReadFile(filepath.Join(dir, "out")); string(b) != "written\n" {
			t.Errorf("rw mount: host sees %q", b)
		}
		// A file mounted on a file.
		if out := mustRun(t, m, "run", "--mount", filepath.Join(dir, "data")+":/etc/jail-data", "--", "cat", "/etc/jail-data"); out != "shared\n" {
			t.Errorf("file mount: %q", out)
		}
	})
}

func TestEnvWorkdirUser(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		cmd := command(m, "run", "--env", "A=1", "--env", "FROM_CALLER", "--env", "PATH=/bin:/usr/bin", "--workdir", "/usr", "--user", "1000", "--", "sh", "-c", `echo "$A $FROM_CALLER $PATH $(pwd) $(id -u):$(id -g) $HOME"`)
		cmd.Env = append(cmd.Env, "FROM_CALLER=copied")
		r := runCmd(t, cmd)
		if want := "1 copied /bin:/usr/bin /usr 1000:1000 /tmp\n"; r.stdout != want {
			t.Errorf("got %q (stderr %q), want %q", r.stdout, r.stderr, want)
		}
	})
}

// TestBadInput: every bad request is one `jail: ` line, exit 125, and
// changes nothing on the host (checkNoLeaks, and no mountpoint created).
func TestBadInput(t *testing.T) {
	long := strings.Repeat("a", 200)
	link := filepath.Join(workDir, "link-to-etc")
	os.Symlink("/etc", link)
	sshDir := filepath.Join(os.Getenv("HOME"), ".ssh")
	cases := []struct {
		name string
		args []string
		hint string
	}{
		{"unknown flag", []string{"run", "--frobnicate", "--", "true"}, "unknown option --frobnicate (see 'jail help run')"},
		{"unknown subcommand", []string{"frobnicate"}, "unknown command"},
		{"no command", []string{"run"}, "no command"},
		{"missing rootfs", []string{"run", "--rootfs", "/no/such/dir", "--", "true"}, "--rootfs /no/such/dir"},
		{"rootfs is a file", []string{"run", "--rootfs", "/etc/hostname", "--", "true"}, "not a directory"},
		{"missing workspace", []string{"run", "--workspace", "/no/such/ws", "--", "true"}, "--workspace /no/such/ws"},
		{"relative mount source", []string{"run", "--mount", "etc:/x", "--", "true"}, "absolute"},
		{"mount of /", []string{"run", "--mount", "/:/host", "--", "true"}, "refused"},
		{"mount of /proc", []string{"run", "--mount", "/proc:/p", "--", "true"}, "refused"},
		{"mount of /sys", []string{"run", "--mount", "/sys/kernel:/k", "--", "true"}, "refused"},
		{"mount of /dev", []string{"run", "--mount", "/dev:/d", "--", "true"}, "refused"},
		{"mount of /etc/shadow", []string{"run", "--mount", "/etc/shadow:/s", "--", "true"}, "refused"},
		{"mount of the docker socket", []string{"run", "--mount", "/var/run/docker.sock:/d.sock", "--", "true"}, "refused"},
		{"mount of ~/.ssh", []string{"run", "--mount", sshDir + ":/k", "--", "true"}, "refused"},
		{"mount of ~/.aws", []string{"run", "--mount", "/root/.aws:/k", "--", "true"}, "refused"},
		{"mount of ~/.gnupg", []string{"run", "--mount", "/home/someone/.gnupg:/k", "--", "true"}, "refused"},
		{"symlink to a sensitive tree", []string{"run", "--mount", link + ":/x", "--", "true"}, "refused"},
		{"destination escapes", []string{"run", "--mount", workDir + ":../../x", "--", "true"}, "absolute"},
		{"destination with ..", []string{"run", "--mount", workDir + ":/a/../../x", "--", "true"}, "leaves the sandbox root"},
		{"destination in /proc", []string{"run", "--mount", workDir + ":/proc/x", "--", "true"}, "/proc"},
		{"bad mount mode", []string{"run", "--mount", workDir + ":/x:rwx", "--", "true"}, "ro or rw"},
		{"host name too long", []string{"run", "--hostname", long, "--", "true"}, "--hostname"},
		{"bad host name", []string{"run", "--hostname", "a b", "--", "true"}, "--hostname"},
		{"env name too long", []string{"run", "--env", strings.Repeat("K", 300) + "=v", "--", "true"}, "--env"},
		{"arguments and environment too large", bigEnv(10, 120<<10), "exceed"},
		{"bad env name", []string{"run", "--env", "1A=v", "--", "true"}, "--env"},
		{"unknown profile", []string{"run", "--profile", "no-such-profile", "--", "true"}, "profile no-such-profile"},
		{"bad memory", []string{"run", "--memory", "lots", "--", "true"}, "--memory"},
		{"bad user", []string{"run", "--user", "bob", "--", "true"}, "--user"},
		{"relative workdir", []string{"run", "--workdir", "rel", "--", "true"}, "--workdir"},
		{"workdir through /proc fds", []string{"run", "--workdir", "/proc/self/fd/3", "--", "true"}, "--workdir"},
		{"missing workdir", []string{"run", "--workdir", "/no/such/dir", "--", "true"}, "workdir /no/such/dir"},
	}
	forEachMode(t, func(t *testing.T, m mode) {
		for _, c := range cases {
			r := jail(t, m, c.args...)
			lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
			if r.code != 125 || len(lines) != 1 || !strings.HasPrefix(lines[0], "jail: ") || !strings.Contains(lines[0], c.hint) {
				t.Errorf("%s: exit %d, stderr %.300q; want 125 and one `jail: ` line mentioning %q", c.name, r.code, r.stderr, c.hint)
			}
			if r.stdout != "" {
				t.Errorf("%s: printed %q on stdout", c.name, r.stdout)
			}
		}
	})
	for _, p := range []string{"/x", "/host", "/a", "/k"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created on the host", p)
		}
	}
}

// bigEnv returns run arguments with n --env values of size bytes each.
func bigEnv(n, size int) []string {
	args := []string{"run"}
	for i := 0; i < n; i++ {
		args = append(args, "--env", "K"+strconv.Itoa(i)+"="+strings.Repeat("v", size))
	}
	return append(args, "--", "true")
}

// TestMountsBelowAPrivateDirectory: a mount source and a workspace inside
// a directory only their caller may search (mode 0700: /root, pytest's
// and mktemp's temporary directories) are shown to the sandbox as
// asked. As root the sandbox's init, in its own user namespace, has no
// right to search host root's private directory: jail hands it clones of
// the sources it opened and checked, never their paths; a --rootfs there
// too. The read-only one stays read-only, and neither carries set-id or device files' powers.
func TestMountsBelowAPrivateDirectory(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		private := filepath.Join(sharedTempDir(t, ownerOf(m)), "private")
		data, ws := filepath.Join(private, "data"), filepath.Join(private, "ws")
		// Only the directory above is private: the sandbox's users are
		// not its caller, and read what others may read.
		for _, dir := range []string{private, data, ws} {
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		rootfs, err := makeBusyboxRootfs(filepath.Join(private, "rootfs"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(private, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, "f"), []byte("private\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if owner := ownerOf(m); owner != nil {
			for _, p := range []string{private, data, filepath.Join(data, "f")} {
				if err := os.Chown(p, owner.uid, owner.gid); err != nil {
					t.Fatal(err)
				}
			}
		}
		// A workspace of root's is refused as root: its owner is the
		// unprivileged user in both modes.
		if err := os.Chown(ws, rootless.uid, rootless.gid); err != nil {
			t.Fatal(err)
		}
		script := `cat /data/f; echo made > /workspace/out; touch /data/x 2>/dev/null && echo data is writable
grep -E ' /(data|workspace) ' /proc/self/mountinfo | while read -r _ _ _ _ point opts _; do
  case ",$opts," in *,nosuid,*) ;; *) echo "$point lacks nosuid";; esac
  case ",$opts," in *,nodev,*) ;; *) echo "$point lacks nodev";; esac
  case "$point,$opts" in /data,ro,*) ;; /data,*) echo "/data is $opts";; esac
done`
		for _, root := range []string{"", rootfs} {
			args := []string{"run", "--mount", data + ":/data", "--workspace", ws, "--", "sh", "-c", script}
			if root != "" {
				args = append([]string{"run", "--rootfs", root}, args[1:]...)
			}
			os.Remove(filepath.Join(ws, "out"))
			out := mustRun(t, m, args...)
			if out != "private\n" {
				t.Errorf("%v: the sandbox printed %q, want only the private file's content", args, out)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "out")); err != nil || string(b) != "made\n" {
				t.Errorf("%v: the workspace's file on the host: %q, %v", args, b, err)
			}
		}
	})
}

// TestMountsBelowASharedHostMountStayInTheSandbox: a mount source on a
// mount the host shares (systemd makes every mount shared) reaches the
// sandbox as a private mount. As root jail hands the init clones made in
// the host's mount namespace, which join the host mount's peer group
// unless made private: then what the init mounts on them (a nested mount,
// a mask over /etc/shadow) propagated back onto the host and stayed there
// after the run, and what the host mounted below a source later (here a
// writable tmpfs) showed up in a sandbox that was given it read-only.
func TestMountsBelowASharedHostMountStayInTheSandbox(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		shared := filepath.Join(sharedTempDir(t, nil), "shared")
		if err := os.Mkdir(shared, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("jail-test-shared", shared, "tmpfs", 0, "mode=0755"); err != nil {
			t.Fatal(err)
		}
		// Detached with whatever is below it, before the leak check runs.
		t.Cleanup(func() { syscall.Unmount(shared, syscall.MNT_DETACH) })
		if err := syscall.Mount("", shared, "", syscall.MS_SHARED, ""); err != nil {
			t.Fatal(err)
		}
		data, other, etc, ws := filepath.Join(shared, "data"), filepath.Join(shared, "other"), filepath.Join(shared, "etc"), filepath.Join(shared, "ws")
		for _, dir := range []string{data, filepath.Join(data, "sub"), filepath.Join(data, "late"), other, etc, ws, filepath.Join(ws, "sub")} {
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range []string{ws, filepath.Join(ws, "sub")} {
			if err := os.Chown(p, rootless.uid, rootless.gid); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(other, "f"), []byte("other\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(etc, "shadow"), []byte("host's\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		// Mounts the host has below the shared one, besides itself.
		below := func() []string {
			b, err := os.ReadFile("/proc/self/mountinfo")
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], shared+"/") {
					out = append(out, f[4])
				}
			}
			return out
		}
		for _, args := range [][]string{
			{"--mount", data + ":/data", "--mount", other + ":/data/sub"},
			{"--mount", etc + ":/etc"},
			{"--workspace", ws, "--mount", other + ":/workspace/sub"},
		} {
			run := append(append([]string{"run"}, args...), "--", "true")
			mustRun(t, m, run...)
			if left := below(); len(left) > 0 {
				t.Errorf("jail %v left mounts on the host: %v", run, left)
				for _, p := range left {
					syscall.Unmount(p, syscall.MNT_DETACH)
				}
			}
		}
		if b, err := os.ReadFile(filepath.Join(etc, "shadow")); err != nil || string(b) != "host's\n" {
			t.Errorf("the host's %s/shadow reads %q, %v", etc, b, err)
		}

		// A mount the host makes below a source once the sandbox runs is
		// not the sandbox's.
		h := newSandboxHost(t, m)
		h.must("create", "--mount", data+":/data", "s1")
		late := filepath.Join(data, "late")
		if err := syscall.Mount("jail-test-late", late, "tmpfs", 0, "mode=1777"); err != nil {
			t.Fatal(err)
		}
		defer syscall.Unmount(late, syscall.MNT_DETACH)
		out := h.must("exec", "s1", "--", "sh", "-c", "grep -c ' /data/late ' /proc/self/mountinfo; touch /data/late/x 2>/dev/null && echo wrote; true")
		if out != "0\n" {
			t.Errorf("the host's later mount below the source reached the sandbox: %q", out)
		}
		h.must("rm", "-f", "s1")
	})
}

// TestReadOnlyMountsStayReadOnlyInside: a read-only mount source, with a
// host mount below it, is as read-only inside whichever way the sandbox
// tries (as root these are clones made in the host's namespace, attached
// by the init): remounting it, clearing its read-only attribute with
// mount_setattr, cloning it anew with open_tree, doing so in a nested user
// namespace, or unmounting the mount below to uncover what it hides.
func TestReadOnlyMountsStayReadOnlyInside(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		src := filepath.Join(sharedTempDir(t, ownerOf(m)), "src")
		sub := filepath.Join(src, "sub")
		if err := os.MkdirAll(sub, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(src, 0o777)
		os.Chmod(sub, 0o777)
		if err := os.WriteFile(filepath.Join(sub, "hidden"), []byte("below\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("jail-test-sub", sub, "tmpfs", 0, "mode=0777"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Unmount(sub, syscall.MNT_DETACH) })
		script := `
mount -o remount,rw,bind /data 2>/dev/null && echo remounted
mount -o remount,rw,bind /data/sub 2>/dev/null && echo remounted sub
umount /data/sub 2>/dev/null && echo unmounted sub
umount -l /data/sub 2>/dev/null && echo detached sub
unshare -Urm sh -c 'mount -o remount,rw,bind /data; umount -l /data/sub' 2>/dev/null && echo nested
python3 - <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
class Attr(ctypes.Structure):
    _fields_ = [("set", ctypes.c_uint64), ("clr", ctypes.c_uint64), ("prop", ctypes.c_uint64), ("userns", ctypes.c_uint64)]
RDONLY, AT_EMPTY_PATH, AT_RECURSIVE = 1, 0x1000, 0x8000
a = Attr(0, RDONLY, 0, 0)
if libc.syscall(442, -100, b"/data", AT_RECURSIVE, ctypes.byref(a), ctypes.sizeof(a)) == 0:
    print("mount_setattr")
tree = libc.syscall(428, -100, b"/data", 1 | 0x80000 | AT_RECURSIVE)
if tree >= 0:
    print("open_tree")
    if libc.syscall(442, tree, b"", AT_EMPTY_PATH | AT_RECURSIVE, ctypes.byref(a), ctypes.sizeof(a)) == 0:
        print("mount_setattr on a clone")
    if libc.syscall(429, tree, b"", -100, b"/tmp", 4) == 0:
        print("move_mount")
PY
for f in /data/x /data/sub/x /tmp/x; do touch $f 2>/dev/null && echo wrote $f; done
cat /data/sub/hidden 2>/dev/null
true`
		out := mustRun(t, m, "run", "--mount", src+":/data", "--", "sh", "-c", script)
		if out != "wrote /tmp/x\n" {
			t.Errorf("the sandbox changed its read-only mount: %q", out)
		}
		for _, p := range []string{filepath.Join(src, "x"), filepath.Join(sub, "x")} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s was made on the host", p)
			}
		}
	})
}

// TestManyMountsStart: a sandbox with as many mounts as jail takes (the
// workspace and 63 more) starts, from the CLI and from jail serve (whose
// pool's forker starts it). As root every mount source is a descriptor
// handed to the init; the child's descriptor setup (ForkExec's) moved
// descriptors onto the numbers just above the highest one handed over,
// where the init's program descriptor was: from 25 mounts on, the init
// could not be started ("start /proc/self/fd/58: permission denied": the
// error pipe had been put in the program's place), where before only
// writable mounts were descriptors.
func TestManyMountsStart(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		dir := sharedTempDir(t, rootless)
		src, ws := filepath.Join(dir, "src"), filepath.Join(dir, "ws")
		for _, d := range []string{src, ws} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			os.Chown(d, rootless.uid, rootless.gid)
		}
		for _, n := range []int{25, 63} {
			var mounts []string
			args := []string{"run", "--workspace", ws}
			for i := 0; i < n; i++ {
				mounts = append(mounts, fmt.Sprintf("%s:/m/%d", src, i))
				args = append(args, "--mount", mounts[i])
			}
			script := "ls /m | wc -l; touch /workspace/ok"
			if out := mustRun(t, m, append(args, "--", "sh", "-c", script)...); strings.TrimSpace(out) != strconv.Itoa(n) {
				t.Errorf("%d mounts: the sandbox saw %q", n, out)
			}
			srv := startServeWith(t, m, nil)
			res, err := srv.client.Run(t.Context(), api.RunRequest{Cmd: "sh", Args: []string{"-c", script}, Workspace: ws, Mounts: mounts})
			if err != nil || res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != strconv.Itoa(n) {
				t.Errorf("%d mounts through jail serve: %+v, %v", n, res, err)
			}
		}
	})
}
