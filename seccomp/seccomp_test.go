package seccomp

import (
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
