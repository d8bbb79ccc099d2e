package rootfs

import (
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// cInit is the C init, which builds the same root as this package and
// keeps its own copy of the lists above.
const cInit = "../internal/programs/init/init.c"

// cList returns the strings of the C array name, in order.
func cList(t *testing.T, source, name string) []string {
	t.Helper()
	start := regexp.MustCompile(`(?m)^static const [^=]*\b` + name + `\[\][^=]*= \{`).FindStringIndex(source)
	if start == nil {
		t.Fatalf("%s: no array %s", cInit, name)
	}
	body := source[start[1]:]
	body = body[:strings.Index(body, "};")]
	var out []string
	for _, m := range regexp.MustCompile(`"([^"]*)"|\b(\d+)\b`).FindAllStringSubmatch(body, -1) {
		if m[1] != "" || m[2] == "" {
			out = append(out, m[1])
		} else {
			out = append(out, m[2])
		}
	}
	return out
}

// TestCInitHasTheSameLists: the C init masks, makes read-only, replaces and
// binds what this package does; a path added here and not there would
// leave the host uncovered in every sandbox the C init builds.
func TestCInitHasTheSameLists(t *testing.T) {
	b, err := os.ReadFile(cInit)
	if err != nil {
		t.Fatal(err)
	}
	source := string(b)
	var replaced []string
	for name := range hostTopLevelReplaced {
		replaced = append(replaced, name)
	}
	sort.Strings(replaced)
	var devices []string
	for _, d := range hostDevices {
		devices = append(devices, d.name, strconv.Itoa(int(d.major)), strconv.Itoa(int(d.minor)))
	}
	var symlinks []string
	for name, target := range devSymlinks {
		symlinks = append(symlinks, name+" "+target)
	}
	sort.Strings(symlinks)
	pairs := func(list []string) []string {
		var out []string
		for i := 0; i+1 < len(list); i += 2 {
			out = append(out, list[i]+" "+list[i+1])
		}
		sort.Strings(out)
		return out
	}
	sorted := func(list []string) []string {
		list = append([]string{}, list...)
		sort.Strings(list)
		return list
	}
	for _, c := range []struct {
		name string
		c    []string
		go_  []string
	}{
		{"host_masked", cList(t, source, "host_masked"), hostMasked},
		{"host_masked_globs", cList(t, source, "host_masked_globs"), hostMaskedGlobs},
		{"kernel_masked", cList(t, source, "kernel_masked"), kernelMasked},
		{"proc_read_only", cList(t, source, "proc_read_only"), procReadOnly},
		{"host_top_level_replaced", sorted(cList(t, source, "host_top_level_replaced")), replaced},
		{"host_devices", cList(t, source, "host_devices"), devices},
		{"dev_symlinks", pairs(cList(t, source, "dev_symlinks")), symlinks},
	} {
		if strings.Join(c.c, "\n") != strings.Join(c.go_, "\n") {
			t.Errorf("%s differs:\nC:  %q\nGo: %q", c.name, c.c, c.go_)
		}
	}
}
