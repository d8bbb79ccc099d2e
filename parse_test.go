package jail

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1048576", 1 << 20, true}, {"512M", 512 << 20, true}, {"2G", 2 << 30, true},
		{"64k", 64 << 10, true}, {"1.5G", 3 << 29, true}, {"256MiB", 256 << 20, true},
		{"", 0, false}, {"M", 0, false}, {"-1M", 0, false}, {"lots", 0, false}, {"1T", 0, false},
	}
	for _, c := range cases {
		got, err := ParseSize(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseSize(%q) = %d, %v; want %d ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestParseMount(t *testing.T) {
	cases := []struct {
		in   string
		want Mount
		ok   bool
	}{
		{"/a:/b", Mount{"/a", "/b", false}, true},
		{"/a:/b:ro", Mount{"/a", "/b", false}, true},
		{"/a:/b:rw", Mount{"/a", "/b", true}, true},
		{"/a", Mount{}, false}, {"/a:/b:x", Mount{}, false}, {":/b", Mount{}, false}, {"/a:/b:rw:x", Mount{}, false},
	}
	for _, c := range cases {
		got, err := ParseMount(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseMount(%q) = %+v, %v", c.in, got, err)
		}
	}
}

func TestParseUser(t *testing.T) {
	cases := []struct {
		in       string
		uid, gid uint32
		ok       bool
	}{
		{"", 0, 0, true}, {"1000", 1000, 1000, true}, {"1000:50", 1000, 50, true},
		{"bob", 0, 0, false}, {"1000:staff", 0, 0, false}, {"-1", 0, 0, false},
	}
	for _, c := range cases {
		uid, gid, err := parseUser(c.in)
		if (err == nil) != c.ok || (c.ok && (uid != c.uid || gid != c.gid)) {
			t.Errorf("parseUser(%q) = %d:%d, %v", c.in, uid, gid, err)
		}
	}
}

func TestBuildEnv(t *testing.T) {
	env, err := buildEnv(&Spec{Env: []string{"PATH=/x", "A=1", "A=2"}}, "/root", []string{"LANG=C", "IMG=1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(env, " "); got != "PATH=/x HOME=/root LANG=C IMG=1 A=2" {
		t.Errorf("env %q", got)
	}
	for _, bad := range []string{"NOVALUE", "1A=x", "A B=x", strings.Repeat("K", 300) + "=v", "K=" + strings.Repeat("v", 200<<10), "K=a\x00b"} {
		if _, err := buildEnv(&Spec{Env: []string{bad}}, "/root", nil); err == nil {
			t.Errorf("buildEnv accepted %.40q", bad)
		}
	}
}
