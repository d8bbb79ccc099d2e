package jail

import (
	"os"
	"path/filepath"
	"testing"
)

// Issue 22, items 7 and 18 (review): the mount policy protects the caller's
// credential stores and jail's own directories by path, in the form $HOME
// gives and in the canonical form, but a missing directory's canonical form
// was its path as written: with $HOME reached through a symlink (/home ->
// var/home on ostree systems), the home's real path, or its ~/.config before
// jail made ~/.config/jail, was accepted as a writable mount source.
func TestMountPolicyResolvesSymlinkedHomes(t *testing.T) {
	top := t.TempDir()
	real := filepath.Join(top, "var", "home")
	home := filepath.Join(real, "u")
	for _, d := range []string{filepath.Join(home, ".ssh"), filepath.Join(home, ".config")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(top, "home")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", filepath.Join(link, "u"))
	for _, env := range []string{"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR", "JAIL_IMAGE_STORE"} {
		t.Setenv(env, "")
	}
	callerHome, _ := os.UserHomeDir()
	dirs := jailStateDirs(ImageStore().Root, nil)
	for _, source := range []string{
		home,                           // holds ~/.ssh
		filepath.Join(home, ".config"), // holds ~/.config/jail, once made
		filepath.Join(link, "u", ".config"),
	} {
		src, err := openHostSource(source, callerHome, dirs)
		if err == nil {
			src.close()
			t.Errorf("HOME=%s: %s was accepted as a mount source", callerHome, source)
		}
	}
}
