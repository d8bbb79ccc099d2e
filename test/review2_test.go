package test

// Reproductions from the second adversarial review of issue 22 (helper
// programs, the image store, jail serve, profiles, janitors).

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// hostVisibleDir makes a directory, removed when the test ends, where a
// sandbox on the host tree sees it (not below /tmp, /run, /var/tmp or a
// home, which sandboxes get their own of or do not see), owned by owner
// (nil: root).
func hostVisibleDir(t *testing.T, owner *account) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/lib", "jail-review2-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// rm copes with trees deeper than the descriptors a process
		// may hold, which os.RemoveAll does not.
		if out, err := exec.Command("rm", "-rf", "--one-file-system", dir).CombinedOutput(); err != nil {
			t.Errorf("remove %s: %v %s", dir, err, out)
		}
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if owner != nil {
		if err := os.Chown(dir, owner.uid, owner.gid); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startUntil starts cmd, a sandbox that runs on, and returns once its
// output begins with want; it is stopped (SIGTERM) and reaped when the test
// ends.
func startUntil(t *testing.T, cmd *exec.Cmd, want string) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	got := make([]byte, len(want))
	if _, err := io.ReadFull(out, got); err != nil || string(got) != want {
		t.Fatalf("the sandbox did not start or report: %q %v; want %q", got, err, want)
	}
}

// TestSandboxCannotDriveItsUsersServer: a rootless sandbox runs as its
// user, so the 0600 socket of that user's `jail serve` lets it connect
// wherever the socket is visible on the host tree (a read-only mount does
// not stop connect(); only /run, /tmp and homes are the sandbox's own or
// hidden). Through it the sandbox asked for a new sandbox with a writable
// workspace of a host directory it could only read, and wrote there. The
// server must not take requests from a process of another user namespace
// (a sandbox), whatever the socket's permissions let through.
func TestSandboxCannotDriveItsUsersServer(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is needed inside the sandbox")
	}
	m := asRootless
	checkNoLeaks(t)
	dir := hostVisibleDir(t, rootless)
	proj := filepath.Join(dir, "proj")
	if err := os.Mkdir(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(proj, "file")
	if err := os.WriteFile(victim, []byte("original\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{proj, victim} {
		os.Chown(p, rootless.uid, rootless.gid)
	}
	// A CI step without XDG_RUNTIME_DIR gives the socket a place of the
	// user's own.
	socket := filepath.Join(dir, "serve", "jail.sock")
	startServeAt(t, m, socket, nil)

	body := `{"cmd":"sh","args":["-c","echo PWNED > /workspace/file"],"workspace":"` + proj + `"}`
	r := jail(t, m, "run", "--", "sh", "-c",
		"echo x >> "+victim+" 2>/dev/null && echo WROTE-DIRECTLY; curl -s -m 20 --unix-socket "+socket+" --data-binary '"+body+"' http://jail/v1/run; echo; echo curl-exit=$?")
	t.Logf("sandbox: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	if strings.Contains(r.stdout, "WROTE-DIRECTLY") {
		t.Fatal("the host tree is writable: the test's premise is wrong")
	}
	data, _ := os.ReadFile(victim)
	if string(data) != "original\n" {
		t.Errorf("the host file read-only to the sandbox now holds %q: the sandbox had its user's server run a sandbox with it writable", data)
	}
	if strings.Contains(r.stdout, `"exit_code"`) {
		t.Errorf("the server answered a request from inside a sandbox: %s", r.stdout)
	}
}

// deepName is a path of depth directories named "d", then file.
func deepName(depth int, file string) string {
	return strings.Repeat("d/", depth) + file
}

// TestImageImportCountsTheDirectoriesAPathMakes (SECURITY-LESSONS row
// 30): an entry's parent directories that no entry of their own names are
// made all the same (os.Root.MkdirAll), and cost an inode and a block
// each, but only the entry was charged: one entry of a 4 KiB name made
// 2000 directories (8 MB on ext4, 2000 inodes) under a 1 MiB bound, and a
// 1 MiB PAX name, a few hundred bytes compressed, makes half a million
// (and costs time in the square of its length). Every directory an import
// makes counts against the bounds, and a name no path could hold
// (PATH_MAX) is refused.
func TestImageImportCountsTheDirectoriesAPathMakes(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		store := filepath.Join(hostVisibleDir(t, ownerOf(m)), "store")
		jailS := withStoreAt(t, m, store)
		dir := sharedTempDir(t, rootless)
		for _, c := range []struct {
			depth int
			want  string
		}{
			{2000, "exceeds the bound of 1 MiB per layer"},
			{20000, "a name longer than 4095 bytes"},
		} {
			layout := filepath.Join(dir, strconv.Itoa(c.depth))
			writeLayout(t, layout, "localhost/deep:1", image(t, nil, nil,
				layerOf(t, []entry{{name: deepName(c.depth, "f"), body: "x"}})))
			r := jailS("image", "import", layout, "--quiet", "--max-layer-size", "1M")
			if r.code != 125 || !strings.Contains(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 || len(r.stderr) > 512 {
				t.Errorf("import of one entry %d directories deep under --max-layer-size 1M: exit %d, %.300q; want one short `jail:` line saying %q", c.depth, r.code, r.stderr, c.want)
			}
			var dirs int
			filepath.WalkDir(store, func(_ string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs++
				}
				return nil
			})
			if dirs > 16 {
				t.Errorf("the store holds %d directories after the import", dirs)
			}
		}
	})
}

// TestImageStoreRemovesDeepLayers: a layer (or an import's leftover) whose
// tree is deeper than the descriptors jail may hold (RLIMIT_NOFILE: 4096
// on some distributions) cannot be removed by jail at all:
// os.Root.RemoveAll keeps a descriptor per level and fails with EMFILE,
// so `jail image rm` and `prune` fail for good (and an import that failed
// after unpacking leaves its tmp/ entry). Names of at most 4 KiB reach
// 6000 levels through two links of the layer's own. Removing must not
// depend on the tree's depth.
func TestImageStoreRemovesDeepLayers(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		store := filepath.Join(hostVisibleDir(t, ownerOf(m)), "store")
		jailS := func(args ...string) result {
			t.Helper()
			cmd := storeCommand(m, store, args...)
			// A hard limit some distributions ship.
			cmd.Args = append([]string{"prlimit", "--nofile=4096:4096", "--", cmd.Path}, cmd.Args[1:]...)
			cmd.Path = "/usr/bin/prlimit"
			return runCmd(t, cmd)
		}
		if _, err := os.Stat("/usr/bin/prlimit"); err != nil {
			t.Skip("prlimit is needed")
		}
		dir := sharedTempDir(t, rootless)
		levels := func(name string) string { return strings.TrimSuffix(strings.Repeat(name+"/", 2000), "/") }
		es := []entry{
			{name: levels("a") + "/", typ: tar.TypeDir},
			{name: "T", typ: tar.TypeSymlink, link: levels("a")},
			{name: "T/" + levels("b") + "/", typ: tar.TypeDir},
			{name: "U", typ: tar.TypeSymlink, link: "T/" + levels("b")},
			{name: "U/" + levels("c") + "/f", body: "x"},
		}
		writeLayout(t, filepath.Join(dir, "deep"), "localhost/deep:1", image(t, nil, nil, layerOf(t, es)))
		if r := jailS("image", "import", filepath.Join(dir, "deep"), "--quiet"); r.code != 0 {
			t.Fatalf("import: %d %q", r.code, r.stderr)
		}
		rm := jailS("image", "rm", "localhost/deep:1")
		prune := jailS("image", "prune")
		entries, _ := os.ReadDir(filepath.Join(store, "layers"))
		if rm.code != 0 || prune.code != 0 || len(entries) != 0 {
			t.Errorf("image rm and prune of a layer 6000 directories deep: exit %d %q, exit %d %q; layers/ holds %d entries: jail cannot remove it",
				rm.code, rm.stderr, prune.code, prune.stderr, len(entries))
		}
	})
}

// TestOtherUsersCannotLockSandboxCgroups: a sandbox's cgroup directories
// were made 0755, so any local user could open one and flock it: an
// exclusive lock taken between the mkdir and the supervisor's shared one
// (janitor.Hold, LOCK_NB) made root's `jail run` fail ("lock cgroup ...:
// resource temporarily unavailable", 12 runs of 20 with a user's loop
// watching /sys/fs/cgroup/memory/jail), and a shared lock on a leftover
// kept every janitor's sweep from removing it. No one but the supervisor's
// user may open a sandbox's cgroup directory.
func TestOtherUsersCannotLockSandboxCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("root's cgroups")
	}
	checkNoLeaks(t)
	before, _ := filepath.Glob("/sys/fs/cgroup/*/jail/*")
	startUntil(t, command(asRoot, "run", "--", "sh", "-c", "echo started; exec sleep 60"), "started\n")
	after, _ := filepath.Glob("/sys/fs/cgroup/*/jail/*")
	var dirs []string
	for _, d := range after {
		if st, err := os.Stat(d); err == nil && st.IsDir() && !slices.Contains(before, d) && !slices.ContainsFunc(dirs, func(o string) bool {
			ost, err := os.Stat(o)
			return err == nil && os.SameFile(st, ost) // cpu and cpuacct are one hierarchy
		}) {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		t.Skip("the sandbox has no cgroup")
	}
	for _, d := range dirs {
		lock := exec.Command("setpriv", "--reuid", strconv.Itoa(rootless.uid), "--regid", strconv.Itoa(rootless.gid), "--clear-groups",
			"--", "flock", "--nonblock", "--shared", d, "true")
		if o, err := lock.CombinedOutput(); err == nil {
			t.Errorf("user %d opened and locked the sandbox's cgroup %s (%s): taken exclusively before the supervisor's lock, it keeps the sandbox from starting; kept shared, it keeps a leftover from every sweep", rootless.uid, d, o)
		}
	}
}

// TestImageStoreHiddenUnderAnotherEnvironment: root's image store outside
// /var/lib/jail is masked on the host tree only when the run's own
// environment names it (stateMasks reads JAIL_IMAGE_STORE), but its
// directories belong to the sandboxes' host group (0750) and its files to
// their host ids: a later `jail run` as root without the variable (a
// service, a CI step that sets it only for image commands) read every
// image's 0600 files. A store is jail's state whatever the environment of
// the run that sees it (cf. SECURITY-LESSONS row 33).
func TestImageStoreHiddenUnderAnotherEnvironment(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("root's store")
	}
	checkNoLeaks(t)
	store := filepath.Join(hostVisibleDir(t, nil), "store")
	dir := sharedTempDir(t, rootless)
	layer := layerOf(t, append(busyboxEntries(t), entry{name: "etc/api-token", body: "IMAGE SECRET\n", mode: 0o600}))
	writeLayout(t, filepath.Join(dir, "layout"), "localhost/private:1", image(t, nil, []string{"PATH=/bin"}, layer))
	imp := storeCommand(asRoot, store, "image", "import", filepath.Join(dir, "layout"), "--quiet")
	if r := runCmd(t, imp); r.code != 0 {
		t.Fatalf("import: %s", r.stderr)
	}
	for _, env := range []string{"", "JAIL_IMAGE_STORE=" + filepath.Join(hostVisibleDir(t, nil), "other")} {
		cmd := command(asRoot, "run", "--", "sh", "-c", "cat "+store+"/layers/*/etc/api-token 2>/dev/null; ls "+store+"/layers 2>/dev/null")
		if env != "" {
			cmd.Env = append(cmd.Env, env)
		}
		if r := runCmd(t, cmd); strings.Contains(r.stdout, "IMAGE SECRET") || r.stdout != "" {
			t.Errorf("with %q, a sandbox on the host tree sees root's image store %s: %q (%s)", env, store, r.stdout, r.stderr)
		}
	}
}

// TestSandboxCannotExhaustRootsInotifyInstances: the kernel charges what a
// user namespace's processes take of the per-user counts (inotify
// instances and watches, ...) to the namespace's creator in the parent as
// well, and a root-run sandbox's user namespace is created by root: a
// sandbox that made 128 inotify instances (fs.inotify.max_user_instances)
// left host root none (inotify_init1: EMFILE) while it ran, so systemd,
// udev and every root service watching files broke. What a sandbox takes
// must count against its own bound, not root's.
func TestSandboxCannotExhaustRootsInotifyInstances(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("root's counts")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 on the host tree is needed")
	}
	checkNoLeaks(t)
	limit, _ := os.ReadFile("/proc/sys/fs/inotify/max_user_instances")
	script := `import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
n = 0
while n < ` + strings.TrimSpace(string(limit)) + ` + 8 and libc.inotify_init1(0) >= 0:
    n += 1
print("held", n, flush=True)
time.sleep(60)
`
	startUntil(t, command(asRoot, "run", "--", "/usr/bin/python3", "-c", script), "held ")
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
	if err != nil {
		t.Errorf("host root's inotify_init1 while the sandbox holds its instances: %v", err)
		return
	}
	syscall.Close(fd)
}

// TestSandboxCannotExhaustRootsMessageQueueBytes: the same as
// TestSandboxCannotExhaustRootsInotifyInstances for RLIMIT_MSGQUEUE, which
// the kernel counts per user up the user namespaces: a root-run sandbox's
// message queues (its own ipc namespace's) took root's 800 KiB, and host
// root's mq_open failed with EMFILE while it ran.
func TestSandboxCannotExhaustRootsMessageQueueBytes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("root's counts")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 is needed")
	}
	checkNoLeaks(t)
	mq := `import ctypes, os, sys, time
libc = ctypes.CDLL("libc.so.6", use_errno=True)
class Attr(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long), ("msgsize", ctypes.c_long), ("cur", ctypes.c_long), ("pad", ctypes.c_long * 4)]
n = 0
for i in range(int(sys.argv[1])):
    name = ("/jail-review2-%d-%d" % (os.getpid(), i)).encode()
    if libc.mq_open(name, os.O_CREAT | os.O_RDWR, 0o600, ctypes.byref(Attr(0, 10, 8192, 0))) < 0:
        break
    libc.mq_unlink(name)
    n += 1
print("held", n, flush=True)
time.sleep(float(sys.argv[2]))
`
	startUntil(t, command(asRoot, "run", "--", "/usr/bin/python3", "-c", mq, "200", "60"), "held ")
	host, err := exec.Command("/usr/bin/python3", "-c", mq, "1", "0").Output()
	if err != nil || string(host) != "held 1\n" {
		t.Errorf("host root's mq_open while the sandbox holds its queues: %q %v", host, err)
	}
}

// rawLayer is a layer given as its blob and digests, which the test
// library neither compresses nor decompresses (it decompresses zstd with
// the decoder under test).
type rawLayer struct {
	blob           []byte
	digest, diffID v1.Hash
	mediaType      types.MediaType
}

func (l rawLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l rawLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l rawLayer) Size() (int64, error)                { return int64(len(l.blob)), nil }
func (l rawLayer) MediaType() (types.MediaType, error) { return l.mediaType, nil }
func (l rawLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.blob)), nil
}
func (l rawLayer) Uncompressed() (io.ReadCloser, error) { return nil, errors.New("not kept") }

// zstdRLELayer is a zstd layer of a tar holding one file of n bytes 'A'
// (n a multiple of 128 KiB), written as a raw block for the tar header
// and run-length blocks of 128 KiB: 4 bytes of blob per 128 KiB of
// content, as no ordinary encoder would write it.
func zstdRLELayer(t *testing.T, n int64) v1.Layer {
	t.Helper()
	var hdr bytes.Buffer
	tw := tar.NewWriter(&hdr)
	tw.WriteHeader(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Mode: 0o644, Size: n, ModTime: time.Unix(1700000000, 0)})
	header := hdr.Bytes()[:512]
	blockHeader := func(last bool, typ, size int) []byte {
		h := typ<<1 | size<<3
		if last {
			h |= 1
		}
		return []byte{byte(h), byte(h >> 8), byte(h >> 16)}
	}
	const run = 128 << 10
	blob := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x68} // frame, 8 MiB window
	blob = append(append(blob, blockHeader(false, 0, 512)...), header...)
	content := sha256.New()
	content.Write(header)
	chunk := bytes.Repeat([]byte{'A'}, run)
	for i := int64(0); i < n/run; i++ {
		blob = append(append(blob, blockHeader(false, 1, run)...), 'A')
		content.Write(chunk)
	}
	blob = append(append(blob, blockHeader(true, 1, 1024)...), 0)
	content.Write(make([]byte, 1024))
	sum := sha256.Sum256(blob)
	return rawLayer{
		blob:      blob,
		digest:    v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])},
		diffID:    v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(content.Sum(nil))},
		mediaType: types.OCILayerZStd,
	}
}

// TestImageImportOfAZstdBombStaysSmall (SECURITY-LESSONS row 30): a zstd
// layer of run-length blocks (4 bytes of blob per 128 KiB of content,
// within the default bounds). klauspost/compress's decoder, fed such a
// stream from memory and read as fast as it decodes, held about three
// times what it produced (256 MiB: 860 MB resident, 1 GiB: 4.4 GB); the
// import's own pipeline (blob file, tar reader, writes) stayed at 20 MB.
// This keeps it so: what an import holds must not grow with what it
// unpacks.
func TestImageImportOfAZstdBombStaysSmall(t *testing.T) {
	skipEmulatedKernelAgnostic(t)
	forEachMode(t, func(t *testing.T, m mode) {
		store := storeDir(t, m)
		dir := sharedTempDir(t, rootless)
		writeLayout(t, filepath.Join(dir, "bomb"), "localhost/zstd-bomb:1", image(t, nil, nil, zstdRLELayer(t, 256<<20)))
		cmd := storeCommand(m, store, "image", "import", filepath.Join(dir, "bomb"), "--quiet")
		r, rss := runMeasured(t, cmd)
		t.Logf("import: exit %d, %q; largest resident set %d MiB", r.code, r.stderr, rss>>20)
		if rss > 192<<20 {
			t.Errorf("importing 256 MiB of zstd run-length blocks took a resident set of %d MiB", rss>>20)
		}
		if r.code != 0 && (r.code != 125 || !strings.HasPrefix(r.stderr, "jail: image import ") || strings.Count(r.stderr, "\n") != 1) {
			t.Errorf("a refusal must be one `jail: image import` line: exit %d, %q", r.code, r.stderr)
		}
	})
}
