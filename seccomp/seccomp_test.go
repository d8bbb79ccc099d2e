package seccomp

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/jail-sandbox/jail/profiles"
)

// TestKeyCoversEveryInput: the cache key changes with any profile file's
// content or path, the name and the resolver, and only with them.
func TestKeyCoversEveryInput(t *testing.T) {
	user := profiles.Files{
		"mine":  {Path: "/p/mine.yaml", Data: []byte("version: 1\nextends: other\n")},
		"other": {Path: "/p/other.yaml", Data: []byte("version: 1\n")},
	}
	base, _ := Key(user, "mine", "tools 1")
	if again, _ := Key(profiles.Files{"other": user["other"], "mine": user["mine"]}, "mine", "tools 1"); again != base {
		t.Errorf("the same files in another order give another key")
	}
	changed := func(f func(profiles.Files) profiles.Files) profiles.Files {
		c := profiles.Files{}
		for k, v := range user {
			c[k] = v
		}
		return f(c)
	}
	cases := []struct {
		what           string
		user           profiles.Files
		name, resolver string
	}{
		{"a parent's content", changed(func(c profiles.Files) profiles.Files {
			c["other"] = profiles.File{Path: "/p/other.yaml", Data: []byte("version: 1\nnetwork: none\n")}
			return c
		}), "mine", "tools 1"},
		{"a file's path", changed(func(c profiles.Files) profiles.Files {
			c["other"] = profiles.File{Path: "/q/other.yaml", Data: user["other"].Data}
			return c
		}), "mine", "tools 1"},
		{"a file more", changed(func(c profiles.Files) profiles.Files {
			c["third"] = profiles.File{Path: "/p/third.yaml", Data: []byte("version: 1\n")}
			return c
		}), "mine", "tools 1"},
		{"the name", user, "other", "tools 1"},
		{"the resolver", user, "mine", "tools 2"},
	}
	for _, c := range cases {
		if k, _ := Key(c.user, c.name, c.resolver); k == base {
			t.Errorf("%s: same key", c.what)
		}
	}
}

// TestCachedResolvesOnce: the first use resolves and stores, the next one
// reads the store; failures are not stored, and a cache that cannot be
// written still answers.
func TestCachedResolvesOnce(t *testing.T) {
	filter := Filter{Allowlist: make([]byte, 8)}
	calls := 0
	r := Resolver{Identity: "test", Resolve: func(user profiles.Files, name string) (*profiles.Profile, Filter, error) {
		calls++
		if name == "broken" {
			return nil, Filter{}, errors.New("broken")
		}
		return &profiles.Profile{Version: 1, Name: name, Source: user[name].Path}, filter, nil
	}}
	user := profiles.Files{"mine": {Path: "/p/mine.yaml", Data: []byte("version: 1\n")}}
	dir := t.TempDir()
	for i := 0; i < 2; i++ {
		p, f, err := Cached(dir, user, "mine", r)
		if err != nil || p.Name != "mine" || p.Source != "/p/mine.yaml" || !f.Valid() {
			t.Fatalf("use %d: %+v %v %v", i, p, f.Valid(), err)
		}
	}
	if calls != 1 {
		t.Errorf("resolved %d times in two uses; want once", calls)
	}
	for i := 0; i < 2; i++ {
		if _, _, err := Cached(dir, user, "broken", r); err == nil {
			t.Errorf("a failing resolve gave no error")
		}
	}
	if calls != 3 {
		t.Errorf("a failure was cached (%d resolves)", calls)
	}
	entries, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(entries) != 1 {
		t.Errorf("cache holds %v; want one entry", entries)
	}
	readOnly := filepath.Join(t.TempDir(), "file")
	os.WriteFile(readOnly, nil, 0o644)
	if _, _, err := Cached(filepath.Join(readOnly, "cache"), user, "mine", r); err != nil {
		t.Errorf("an unwritable cache: %v", err)
	}
}

// TestCachedTrustsOnlyItsOwnEntries: an entry is used only from a
// directory private to the caller and only when it is the caller's own
// file that nobody else may write; anything else (planted by whoever could
// write there: a sandbox handed the directory) is resolved anew.
func TestCachedTrustsOnlyItsOwnEntries(t *testing.T) {
	filter := Filter{Allowlist: make([]byte, 8)}
	calls := 0
	r := Resolver{Identity: "test", Resolve: func(user profiles.Files, name string) (*profiles.Profile, Filter, error) {
		calls++
		return &profiles.Profile{Version: 1, Name: name, Description: "resolved"}, filter, nil
	}}
	user := profiles.Files{"mine": {Path: "/p/mine.yaml", Data: []byte("version: 1\n")}}
	dir := filepath.Join(t.TempDir(), "cache")
	key, _ := Key(user, "mine", "test")
	entry := filepath.Join(dir, "profile-"+key+".json")
	forged, _ := json.Marshal(Resolved{Profile: &profiles.Profile{Version: 1, Name: "mine", Description: "forged"}, Filter: filter})
	plant := func(mode os.FileMode, uid int) {
		os.Remove(entry)
		if err := os.WriteFile(entry, forged, mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(entry, mode)
		if uid >= 0 {
			os.Chown(entry, uid, uid)
		}
	}
	use := func(what string) {
		t.Helper()
		p, _, err := Cached(dir, user, "mine", r)
		if err != nil || p.Description != "resolved" {
			t.Errorf("%s: %+v, %v; want resolved anew", what, p, err)
		}
	}
	use("first use")
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the cache directory: %v %v; want made 0700", st, err)
	}
	plant(0o666, -1)
	use("an entry others may write")
	if os.Geteuid() == 0 {
		plant(0o644, 4242)
		use("an entry of another user")
	}
	plant(0o644, -1)
	os.Chmod(dir, 0o777)
	use("an entry in a directory others may write")
	if calls != 4-boolInt(os.Geteuid() != 0) {
		t.Errorf("resolved %d times", calls)
	}
	os.Chmod(dir, 0o700)
	plant(0o644, -1)
	if p, _, _ := Cached(dir, user, "mine", r); p.Description != "forged" {
		t.Errorf("the caller's own entry was not used: %+v", p)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
