package images

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jail-sandbox/jail/namespaces"
)

const (
	layerA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	layerB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// subIDIdentity is a rootless identity mapping sandbox ids 1..size onto uids
// from uid and gids from gid, as namespaces.ForCaller makes it.
func subIDIdentity(uid, gid, size int) namespaces.Identity {
	return namespaces.Identity{
		Rootless: true, SubIDs: true,
		UIDMap: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 1000, Size: 1}, {ContainerID: 1, HostID: uid, Size: size}},
		GIDMap: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 1000, Size: 1}, {ContainerID: 1, HostID: gid, Size: size}},
	}
}

// TestImagesJSONOwnersCompatibility: an images.json of a store made before
// subordinate ids (no owners records) still reads, and its images run
// under any rootless mapping; one with records reads them back, and a run
// is refused when its mapping is not the one a layer was stored under.
func TestImagesJSONOwnersCompatibility(t *testing.T) {
	s, _ := testStore(t, func(string) {})
	old := `{
  "localhost/old:1": {"name": "localhost/old:1", "digest": "sha256:00", "layers": ["` + layerA + `"],
    "config": {"cmd": ["/bin/sh"]}, "size": 10, "imported": "2025-01-01T00:00:00Z"}
}`
	if err := os.WriteFile(filepath.Join(s.Root, "images.json"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := s.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	img, err := o.Lookup("localhost/old:1")
	if err != nil || img.Owners != nil || len(img.Layers) != 1 {
		t.Fatalf("a store made before owners records: %+v, %v", img, err)
	}
	single := namespaces.Identity{Rootless: true,
		UIDMap: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 1000, Size: 1}},
		GIDMap: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 1000, Size: 1}}}
	for _, id := range []namespaces.Identity{single, subIDIdentity(100000, 200000, 65535)} {
		if err := img.CheckOwners(id); err != nil {
			t.Errorf("an image without owners records under %+v: %v", id.UIDMap, err)
		}
	}

	// A record written is read back, next to the image without one.
	stored := IDMapping{UID: 100000, GID: 200000, Size: 65535}
	mixed := Image{Name: "localhost/new:1", Layers: []string{layerB, layerA}, Owners: map[string]IDMapping{layerB: stored}}
	if err := o.Update(func(all map[string]Image) error { all[mixed.Name] = mixed; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, err := o.Lookup("localhost/new:1"); err != nil || got.Owners[layerB] != stored || len(got.Owners) != 1 {
		t.Fatalf("owners record read back: %+v, %v", got.Owners, err)
	}
	if got, err := o.Lookup("localhost/old:1"); err != nil || got.Owners != nil {
		t.Errorf("the old image after an update: %+v, %v", got, err)
	}
	data, _ := os.ReadFile(filepath.Join(s.Root, "images.json"))
	if strings.Count(string(data), `"owners"`) != 1 {
		t.Errorf("images.json writes owners only where there are some:\n%s", data)
	}

	for _, c := range []struct {
		what string
		id   namespaces.Identity
		want string // "" when it may run
	}{
		{"the same mapping", subIDIdentity(100000, 200000, 65535), ""},
		{"only the caller's id", single, "which this sandbox cannot map"},
		{"other subordinate uids", subIDIdentity(300000, 200000, 65535), "maps ids 1-65535 onto uids 300000-"},
		{"other subordinate gids", subIDIdentity(100000, 300000, 65535), "gids 300000-"},
		{"a smaller range", subIDIdentity(100000, 200000, 1000), "maps ids 1-1000"},
		{"root's sandboxes", namespaces.Identity{}, "root's sandboxes do not map"},
	} {
		err := mixed.CheckOwners(c.id)
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.what, err, c.want)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "layer bbbbbbbbbbbb keeps files owned by your subordinate ids (uids 100000-165534, gids 200000-265534)") {
			t.Errorf("%s: the refusal does not say which layer and ids: %v", c.what, err)
		}
	}
	// A range grown since the layer was stored maps its ids the same.
	small := Image{Layers: []string{layerB}, Owners: map[string]IDMapping{layerB: {UID: 100000, GID: 200000, Size: 1000}}}
	if err := small.CheckOwners(subIDIdentity(100000, 200000, 65535)); err != nil {
		t.Errorf("a larger range from the same ids: %v", err)
	}
}

// TestImagesJSONOwnersRecordsChecked: an owners record must name one of the
// image's layers and a possible mapping, or the store is refused.
func TestImagesJSONOwnersRecordsChecked(t *testing.T) {
	for _, c := range []struct {
		what   string
		owners string
		want   string
	}{
		{"not one of its layers", `{"` + layerB + `": {"uid": 1, "gid": 1, "size": 1}}`, "none of its layers"},
		{"a path for a layer", `{"sha256:../../x": {"uid": 1, "gid": 1, "size": 1}}`, "none of its layers"},
		{"no ids", `{"` + layerA + `": {"uid": 100000, "gid": 100000, "size": 0}}`, "not a mapping of subordinate ids"},
		{"more ids than a sandbox has", `{"` + layerA + `": {"uid": 100000, "gid": 100000, "size": 65536}}`, "not a mapping of subordinate ids"},
		{"host root", `{"` + layerA + `": {"uid": 0, "gid": 0, "size": 10}}`, "not a mapping of subordinate ids"},
	} {
		t.Run(c.what, func(t *testing.T) {
			s, _ := testStore(t, func(string) {})
			index := `{"localhost/x:1": {"name": "localhost/x:1", "layers": ["` + layerA + `"], "owners": ` + c.owners + `}}`
			os.WriteFile(filepath.Join(s.Root, "images.json"), []byte(index), 0o600)
			_, err := s.Lookup("localhost/x:1")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v; want %q", err, c.want)
			}
		})
	}
}
