package images

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestValidDiffID(t *testing.T) {
	good := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	for id, want := range map[string]bool{
		good:                                true,
		strings.ToUpper(good):               false,
		good[:len(good)-1]:                  false,
		good + "0":                          false,
		"sha256:../../x":                    false,
		"sha512:" + good[7:]:                false,
		good[7:]:                            false,
		"sha256:" + good[7:62] + "../../..": false,
	} {
		if ValidDiffID(id) != want {
			t.Errorf("ValidDiffID(%q) = %v", id, !want)
		}
	}
}

// testStore makes a store holding one image of one layer, whose files are
// laid by lay.
func testStore(t *testing.T, lay func(layer string)) (Store, Image) {
	t.Helper()
	s := Store{Root: filepath.Join(t.TempDir(), "store")}
	o, err := s.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	id := "sha256:" + strings.Repeat("ab", 32)
	layer := filepath.Join(s.Root, "layers", id[7:])
	if err := os.MkdirAll(filepath.Join(layer, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	lay(layer)
	img := Image{Name: "localhost/x:1", Layers: []string{id}}
	if err := o.Update(func(all map[string]Image) error { all[img.Name] = img; return nil }); err != nil {
		t.Fatal(err)
	}
	return s, img
}

// TestResolveUserReadsOnlyBoundedRegularFiles: the image's /etc/passwd is
// read only when it is a regular file of at most MaxImageFileSize bytes; a
// FIFO does not block, a link resolves inside the layer.
func TestResolveUserReadsOnlyBoundedRegularFiles(t *testing.T) {
	host := filepath.Join(t.TempDir(), "host-passwd")
	os.WriteFile(host, []byte("someone:x:4242:4242::/:/bin/sh\n"), 0o644)
	for _, c := range []struct {
		what string
		lay  func(layer string)
		want string // the ids, or a part of the error
	}{
		{"a regular file", func(l string) {
			os.WriteFile(filepath.Join(l, "etc/passwd"), []byte("root:x:0:0::/:/bin/sh\nsomeone:x:1234:99::/:/bin/sh\n"), 0o644)
		}, "1234:99"},
		{"a FIFO", func(l string) { syscall.Mkfifo(filepath.Join(l, "etc/passwd"), 0o644) }, "not a regular file"},
		{"a big file", func(l string) {
			os.WriteFile(filepath.Join(l, "etc/passwd"), nil, 0o644)
			os.Truncate(filepath.Join(l, "etc/passwd"), MaxImageFileSize+1)
		}, "more than the 4194304 jail reads"},
		{"a link to a host file", func(l string) { os.Symlink(host, filepath.Join(l, "etc/passwd")) }, "the image has no /etc/passwd"},
		{"a link climbing out", func(l string) { os.Symlink("../../../../../../../../.."+host, filepath.Join(l, "etc/passwd")) }, "the image has no /etc/passwd"},
		{"a link inside", func(l string) {
			os.WriteFile(filepath.Join(l, "etc/passwd.real"), []byte("someone:x:7:8::/:/bin/sh\n"), 0o644)
			os.Symlink("/etc/passwd.real", filepath.Join(l, "etc/passwd"))
		}, "7:8"},
		{"a whiteout", func(l string) { syscall.Mknod(filepath.Join(l, "etc/passwd"), syscall.S_IFCHR|0o600, 0) }, "the image has no /etc/passwd"},
	} {
		t.Run(c.what, func(t *testing.T) {
			s, img := testStore(t, c.lay)
			o, err := s.Open()
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			ids, err := o.ResolveUser(img, "someone")
			if !strings.Contains(ids+errString(err), c.want) {
				t.Errorf("ResolveUser: %q, %v; want %q", ids, err, c.want)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestOpenRefusesLinksAndOthersStores: the store, or its layers/, reached
// through a link, or writable by others, is refused; and an images.json
// naming a layer that is not a digest.
func TestOpenRefusesLinksAndOthersStores(t *testing.T) {
	for _, c := range []struct {
		what   string
		tamper func(s Store) Store
		want   string
	}{
		{"the store is a link", func(s Store) Store {
			link := s.Root + "-link"
			os.Symlink(s.Root, link)
			return Store{Root: link}
		}, "a symbolic link"},
		{"layers is a link", func(s Store) Store {
			os.Rename(filepath.Join(s.Root, "layers"), filepath.Join(s.Root, "elsewhere"))
			os.Symlink("elsewhere", filepath.Join(s.Root, "layers"))
			return s
		}, "layers: a symbolic link"},
		{"group-writable", func(s Store) Store { os.Chmod(s.Root, 0o770); return s }, "writable by others"},
		{"a layer id climbs out", func(s Store) Store {
			data, _ := json.Marshal(map[string]Image{"localhost/x:1": {Name: "localhost/x:1", Layers: []string{"sha256:../../x"}}})
			os.WriteFile(filepath.Join(s.Root, "images.json"), data, 0o600)
			return s
		}, "not a sha256 digest"},
	} {
		t.Run(c.what, func(t *testing.T) {
			s, _ := testStore(t, func(string) {})
			s = c.tamper(s)
			o, err := s.Open()
			if err == nil {
				_, err = o.Lookup("localhost/x:1")
				o.Close()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v; want %q", err, c.want)
			}
		})
	}
}

// TestConcurrentPreparesOfANewStore: jails that make the same new store at
// once all open it; one that finds layers/ made by another between its
// look and its listing takes it for the store it is (CI once refused it as
// "not an image store").
func TestConcurrentPreparesOfANewStore(t *testing.T) {
	base := t.TempDir()
	for round := range 200 {
		s := Store{Root: filepath.Join(base, strconv.Itoa(round))}
		const jails = 6
		errs := make(chan error, jails)
		for range jails {
			go func() {
				o, err := s.Prepare()
				if err == nil {
					o.Close()
				}
				errs <- err
			}()
		}
		// Every one has ended before the test may: none then makes
		// directories in a temp dir being removed.
		var failed error
		for range jails {
			if err := <-errs; err != nil {
				failed = err
			}
		}
		if failed != nil {
			t.Fatalf("round %d: %v", round, failed)
		}
	}
}
