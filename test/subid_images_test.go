package test

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ownersEntries is an image whose files have several owners: root's, 1000's
// (with a directory only 1000 may enter), one above any sandbox's ids, and
// set-id files.
func ownersEntries(t *testing.T) []entry {
	return append(busyboxEntries(t),
		entry{name: "bin/su", typ: tar.TypeSymlink, link: "busybox"},
		entry{name: "etc/passwd", body: "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/:/bin/sh\nother:x:1001:1001::/:/bin/sh\n"},
		entry{name: "root-owned", body: "r\n"},
		entry{name: "app-owned", body: "a\n", uid: 1000, gid: 1000},
		entry{name: "private/", typ: tar.TypeDir, mode: 0o700, uid: 1000, gid: 1000},
		entry{name: "private/secret", body: "only 1000\n", mode: 0o600, uid: 1000, gid: 1000},
		entry{name: "app-link", typ: tar.TypeSymlink, link: "app-owned", uid: 1000, gid: 1000},
		entry{name: "far", body: "f\n", uid: 70000, gid: 70000},
		entry{name: "suid", body: "#!/bin/sh\n", mode: 0o4755},
		entry{name: "sgid-app", body: "#!/bin/sh\n", mode: 0o6755, uid: 1000, gid: 1000},
	)
}

// ownersScript prints what of the image's owners and modes a sandbox sees;
// the sandbox's users 1000 and 1001 then try the directory only 1000 may
// enter (each its own run: without a cgroup, as on cgroup v1, sandbox root
// keeps no SETUID to switch users itself, but --user still does).
const ownersScript = `stat -c %u:%g /root-owned /app-owned /private /private/secret /far; stat -c %a /suid /sgid-app`

// subGIDStart is the first subordinate gid of user name.
func subGIDStart(t *testing.T, name string) int {
	data, _ := os.ReadFile("/etc/subgid")
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Split(line, ":"); len(f) == 3 && f[0] == name {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatalf("%s has no range in /etc/subgid", name)
	return 0
}

// storeEntries lists a directory of the store (layers/, tmp/).
func storeEntries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, d := range des {
		names = append(names, d.Name())
	}
	return names
}

// Issue 22, "root that works inside": a rootless caller with subordinate
// ids keeps an image's owners. The layers are unpacked in a user namespace
// mapped as the caller's sandboxes are (0 onto the caller, 1..N onto the
// subordinate ids), so a sandbox reads each file as owned by its own id,
// and a directory only 1000 may enter is 1000's; set-id bits are dropped;
// rm and prune remove what the caller itself could not (a 0700 directory
// of a subordinate id), in that namespace; images.json records the mapping
// and a run under another refuses. The plain rootless account (no
// subordinate ids) stores everything as its own, as before.
func TestRootlessSubIDImagesKeepOwners(t *testing.T) {
	acct, subUID := subIDAccount(t)
	subGID := subGIDStart(t, "jail-test-sub")
	checkNoLeaks(t)
	store := filepath.Join(sharedTempDir(t, acct), "store")
	jailSub := func(args ...string) result {
		t.Helper()
		cmd := exec.Command("setpriv", append([]string{"--reuid", strconv.Itoa(acct.uid), "--regid", strconv.Itoa(acct.gid), "--clear-groups", "--", jailBin}, args...)...)
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + jailTmp, "HOME=" + acct.home, "JAIL_IMAGE_STORE=" + store}
		return runCmd(t, cmd)
	}
	dir := sharedTempDir(t, rootless)
	layer := layerOf(t, ownersEntries(t))
	diffID, err := layer.DiffID()
	if err != nil {
		t.Fatal(err)
	}
	writeLayout(t, filepath.Join(dir, "owners"), "localhost/owners:1", image(t, nil, []string{"PATH=/bin"}, layer))
	// A layer that fails midway (a hard link to nothing) after laying a
	// directory only 1000 may enter: its temporary copy must go.
	broken := layerOf(t, []entry{
		{name: "private/", typ: tar.TypeDir, mode: 0o700, uid: 1000, gid: 1000},
		{name: "private/f", body: "x", uid: 1000, gid: 1000},
		{name: "private/sub/", typ: tar.TypeDir, mode: 0o755, uid: 1000, gid: 1000},
		{name: "private/sub/g", body: "y", uid: 1000, gid: 1000},
		{name: "dangling", typ: tar.TypeLink, link: "no-such-file"},
	})
	writeLayout(t, filepath.Join(dir, "broken"), "localhost/broken:1", image(t, nil, nil, broken))

	want := "0:0\n1000:1000\n1000:1000\n1000:1000\n65534:65534\n755\n755\n"
	importAndRun := func(what string) {
		t.Helper()
		if r := jailSub("image", "import", filepath.Join(dir, "owners")); r.code != 0 {
			t.Fatalf("%s: import: %d %s", what, r.code, r.stderr)
		}
		if r := jailSub("run", "--image", "localhost/owners:1", "--", "sh", "-c", ownersScript); r.code != 0 || r.stdout != want {
			t.Fatalf("%s: the sandbox sees\n%s(exit %d, stderr %q); want\n%s", what, r.stdout, r.code, r.stderr, want)
		}
		if r := jailSub("run", "--image", "localhost/owners:1", "--user", "1000", "--", "sh", "-c", "id -u; cat /private/secret"); r.stdout != "1000\nonly 1000\n" {
			t.Fatalf("%s: user 1000 in its own directory: %q (exit %d, stderr %q)", what, r.stdout, r.code, r.stderr)
		}
		if r := jailSub("run", "--image", "localhost/owners:1", "--user", "1001", "--", "cat", "/private/secret"); r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
			t.Fatalf("%s: user 1001 read a directory only 1000 may enter: exit %d, %q %q", what, r.code, r.stdout, r.stderr)
		}
	}
	importAndRun("first import")

	// On the host: the subordinate ids own the files, the caller root's.
	layerDir := filepath.Join(store, "layers", diffID.Hex)
	for name, owner := range map[string][2]int{
		"root-owned": {acct.uid, acct.gid}, "app-owned": {subUID + 999, subGID + 999},
		"private": {subUID + 999, subGID + 999}, "far": {subUID + 65533, subGID + 65533},
		"app-link": {subUID + 999, subGID + 999},
	} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(layerDir, name), &st); err != nil {
			t.Fatal(err)
		}
		if int(st.Uid) != owner[0] || int(st.Gid) != owner[1] {
			t.Errorf("host owner of %s: %d:%d, want %d:%d", name, st.Uid, st.Gid, owner[0], owner[1])
		}
		if st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
			t.Errorf("%s has a set-id bit on the host", name)
		}
	}
	for _, name := range []string{"suid", "sgid-app"} {
		if st, err := os.Stat(filepath.Join(layerDir, name)); err != nil || st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s: %v, %v: the set-id bit reached the store", name, st.Mode(), err)
		}
	}
	index := filepath.Join(store, "images.json")
	var all map[string]struct {
		Owners map[string]struct{ UID, GID, Size int } `json:"owners"`
	}
	data, _ := os.ReadFile(index)
	if err := json.Unmarshal(data, &all); err != nil {
		t.Fatal(err)
	}
	if rec := all["localhost/owners:1"].Owners[diffID.String()]; rec.UID != subUID || rec.GID != subGID || rec.Size != 65535 {
		t.Errorf("images.json records the layer's owners as %+v; want uids from %d, gids from %d, 65535 ids", rec, subUID, subGID)
	}

	// A run whose mapping is not the one the layer was stored under is
	// refused (images.json made to say another range).
	tampered := strings.Replace(string(data), fmt.Sprintf(`"uid": %d`, subUID), fmt.Sprintf(`"uid": %d`, subUID+1), 1)
	if tampered == string(data) {
		t.Fatalf("images.json has no uid record to change: %s", data)
	}
	os.WriteFile(index, []byte(tampered), 0o600)
	if r := jailSub("run", "--image", "localhost/owners:1", "--", "true"); r.code != 125 ||
		!strings.HasPrefix(r.stderr, "jail: image localhost/owners:1: layer "+diffID.Hex[:12]+" keeps files owned by your subordinate ids") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("run under another mapping: %d %q", r.code, r.stderr)
	}
	os.WriteFile(index, data, 0o600)

	// A failed import leaves nothing, though what it laid was not the
	// caller's to remove.
	if r := jailSub("image", "import", filepath.Join(dir, "broken")); r.code != 125 || !strings.HasPrefix(r.stderr, "jail: image import") {
		t.Errorf("broken import: %d %q", r.code, r.stderr)
	}
	if left := storeEntries(t, filepath.Join(store, "tmp")); len(left) != 0 {
		t.Errorf("the failed import left %v in tmp/", left)
	}
	if got := storeEntries(t, filepath.Join(store, "layers")); len(got) != 1 || got[0] != diffID.Hex {
		t.Errorf("layers/ holds %v; want only %s", got, diffID.Hex)
	}

	// A layer left by an interrupted import (no image names it) has no
	// owners record: prune removes it, and a new import replaces it.
	os.WriteFile(index, []byte("{}"), 0o600)
	if r := jailSub("image", "import", filepath.Join(dir, "owners")); r.code != 0 {
		t.Fatalf("import over an unnamed layer: %s", r.stderr)
	}
	importAndRun("import over an unnamed layer")
	os.WriteFile(index, []byte("{}"), 0o600)
	if r := jailSub("image", "prune"); r.code != 0 || r.stdout != "removed 1 unused layers\n" {
		t.Errorf("prune of an unnamed layer: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if got := storeEntries(t, filepath.Join(store, "layers")); len(got) != 0 {
		t.Errorf("prune left layers %v", got)
	}

	// rm and prune remove the image and its layer, all of it.
	importAndRun("import after prune")
	if ls := jailSub("image", "ls").stdout; !strings.Contains(ls, "localhost/owners:1") {
		t.Errorf("image ls before rm: %q", ls)
	}
	if r := jailSub("image", "rm", "localhost/owners:1"); r.code != 0 {
		t.Errorf("rm: %d %s", r.code, r.stderr)
	}
	if r := jailSub("image", "prune"); r.code != 0 || r.stdout != "removed 0 unused layers\n" {
		t.Errorf("prune after rm: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if ls := jailSub("image", "ls"); ls.code != 0 || ls.stdout != "" {
		t.Errorf("image ls after rm: %d %q %q", ls.code, ls.stdout, ls.stderr)
	}
	for _, sub := range []string{"layers", "tmp"} {
		if got := storeEntries(t, filepath.Join(store, sub)); len(got) != 0 {
			t.Errorf("%s/ after rm and prune: %v", sub, got)
		}
	}

	// Pulled, the same.
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/owners:1"
	pushed, _ := name.ParseReference(ref)
	if err := remote.Write(pushed, image(t, nil, []string{"PATH=/bin"}, layer)); err != nil {
		t.Fatal(err)
	}
	if r := jailSub("image", "pull", ref, "--quiet"); r.code != 0 {
		t.Fatalf("pull: %d %s", r.code, r.stderr)
	}
	if r := jailSub("run", "--image", ref, "--", "sh", "-c", ownersScript); r.stdout != want {
		t.Errorf("pulled: the sandbox sees %q (stderr %q)", r.stdout, r.stderr)
	}

	// A hostile layer gets no further with these capabilities than
	// without: a link out of the layer is neither followed to lay a
	// directory of 1000's nor to change the owner or mode of what it
	// names; the refused import leaves nothing.
	outside := sharedTempDir(t, acct)
	writeLayout(t, filepath.Join(dir, "hostile"), "localhost/hostile:1", image(t, nil, nil, layerOf(t, []entry{
		{name: "esc", typ: tar.TypeSymlink, link: outside},
		{name: "esc", typ: tar.TypeDir, mode: 0o4777, uid: 1000, gid: 1000},
		{name: "esc/pwned", body: "x", uid: 1000, gid: 1000},
	})))
	if r := jailSub("image", "import", filepath.Join(dir, "hostile")); r.code != 125 || !strings.Contains(r.stderr, "escapes") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("hostile layer: %d %q; want a one-line refusal", r.code, r.stderr)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(outside, &st); err != nil || int(st.Uid) != acct.uid || st.Mode&0o7777 != 0o755 {
		t.Errorf("the directory the link named: %v, owner %d, mode %o", err, st.Uid, st.Mode&0o7777)
	}
	if got := storeEntries(t, outside); len(got) != 0 {
		t.Errorf("the hostile layer wrote %v outside the store", got)
	}
	if left := storeEntries(t, filepath.Join(store, "tmp")); len(left) != 0 {
		t.Errorf("the hostile import left %v in tmp/", left)
	}
	if r := jailSub("image", "rm", ref); r.code != 0 {
		t.Errorf("rm of the pulled image: %s", r.stderr)
	}
	if got := storeEntries(t, filepath.Join(store, "layers")); len(got) != 0 {
		t.Errorf("layers/ after removing every image: %v", got)
	}

	// The plain rootless account has no subordinate ids: every file is
	// its own, read as root's inside, set-id bits dropped, as before.
	jailS := withStore(t, asRootless)
	if r := jailS("image", "import", filepath.Join(dir, "owners")); r.code != 0 {
		t.Fatalf("rootless import: %s", r.stderr)
	}
	script := `stat -c %u:%g /root-owned /app-owned /private /private/secret /far; stat -c %a /suid /sgid-app`
	if r := jailS("run", "--image", "localhost/owners:1", "--", "sh", "-c", script); r.stdout != "0:0\n0:0\n0:0\n0:0\n0:0\n755\n755\n" {
		t.Errorf("rootless without subordinate ids: %q (stderr %q)", r.stdout, r.stderr)
	}
}
