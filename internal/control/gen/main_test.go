package main

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// TestGeneratedFilesAreCurrent: the committed Go and C ends of the protocol
// are what the types describe now; a field added to a type and not
// regenerated fails here. Run go generate ./internal/control when it does.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := generate("..")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		got, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, files[p]) {
			t.Errorf("%s is stale: run go generate ./internal/control", p)
		}
	}
}

// TestSnakeCase: the C names of Go fields.
func TestSnakeCase(t *testing.T) {
	for goName, want := range map[string]string{
		"SourceIsDir": "source_is_dir", "UIDMap": "uid_map", "TTY": "tty", "FD": "fd",
		"ContainerID": "container_id", "RlimitNproc": "rlimit_nproc", "Kind": "kind",
	} {
		if got := snake(goName); got != want {
			t.Errorf("snake(%q) = %q; want %q", goName, got, want)
		}
	}
}

// TestTagsAreChecked: a tag the generator cannot honour stops it.
func TestTagsAreChecked(t *testing.T) {
	for _, c := range []struct {
		t   *typ
		tag string
	}{
		{&typ{kind: kUint, goName: "uint16", bits: 16, umax: 65535}, "max=65536"},
		{&typ{kind: kUint, goName: "uint16", bits: 16, umax: 65535}, "min=1"},
		{&typ{kind: kInt, goName: "int", bits: 32, min: -1 << 31, max: 1<<31 - 1}, "max=1099511627776"},
		{&typ{kind: kString, goName: "string"}, "max=3"},
		{&typ{kind: kBool, goName: "bool"}, "color=red"},
	} {
		f := field{goName: "F", cName: "f", t: c.t}
		if err := applyTag(&f, c.tag); err == nil {
			t.Errorf("tag %q on a %s accepted", c.tag, c.t.goName)
		}
	}
}
