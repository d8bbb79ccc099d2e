package namespaces

import (
	"reflect"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestMapUserOnto(t *testing.T) {
	cases := []struct {
		user uint32
		want []syscall.SysProcIDMap
	}{
		{0, []syscall.SysProcIDMap{{ContainerID: 0, HostID: 1000, Size: 1}, {ContainerID: 1, HostID: HostRangeStart + 1, Size: HostRangeSize - 1}}},
		{1000, []syscall.SysProcIDMap{{ContainerID: 0, HostID: HostRangeStart, Size: 1000}, {ContainerID: 1000, HostID: 1000, Size: 1}, {ContainerID: 1001, HostID: HostRangeStart + 1001, Size: HostRangeSize - 1001}}},
		{HostRangeSize - 1, []syscall.SysProcIDMap{{ContainerID: 0, HostID: HostRangeStart, Size: HostRangeSize - 1}, {ContainerID: HostRangeSize - 1, HostID: 1000, Size: 1}}},
	}
	for _, c := range cases {
		id := Identity{
			UIDMap: []syscall.SysProcIDMap{{ContainerID: 0, HostID: HostRangeStart, Size: HostRangeSize}},
			GIDMap: []syscall.SysProcIDMap{{ContainerID: 0, HostID: HostRangeStart, Size: HostRangeSize}},
			User:   c.user, Group: c.user,
		}
		if err := id.MapUserOnto(1000, 1000); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(id.UIDMap, c.want) || !reflect.DeepEqual(id.GIDMap, c.want) {
			t.Errorf("user %d: maps %v / %v, want %v", c.user, id.UIDMap, id.GIDMap, c.want)
		}
		if h, ok := id.HostUID(c.user); !ok || h != 1000 {
			t.Errorf("user %d maps to %d", c.user, h)
		}
	}
	id := Identity{UIDMap: []syscall.SysProcIDMap{{Size: 1}}, GIDMap: []syscall.SysProcIDMap{{Size: 1}}}
	if err := id.MapUserOnto(0, 0); err == nil {
		t.Errorf("mapped the sandbox user onto host root")
	}
}

// TestUnmappedStart: the attributes that start an init before its ids are
// mapped share the parent's memory, carry no maps or ids for the child to
// set, and keep the capabilities the init would have as ambient ones.
func TestUnmappedStart(t *testing.T) {
	last, err := LastCap()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		id   Identity
		caps int
	}{
		{"root", Identity{UIDMap: []syscall.SysProcIDMap{{ContainerID: 0, HostID: HostRangeStart, Size: HostRangeSize}}}, int(last) + 1},
		{"rootless as root inside", Identity{Rootless: true}, int(last) + 1},
		{"rootless as a user inside", Identity{Rootless: true, InitUID: 1000}, len(initCaps)},
	} {
		attr, err := tc.id.UnmappedSysProcAttr()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if attr.Cloneflags&(CloneFlags|unix.CLONE_VM|unix.CLONE_VFORK) != CloneFlags|unix.CLONE_VM|unix.CLONE_VFORK {
			t.Errorf("%s: clone flags %#x", tc.name, attr.Cloneflags)
		}
		if attr.UidMappings != nil || attr.GidMappings != nil || attr.Credential != nil {
			t.Errorf("%s: the child would wait for maps or set ids: %+v", tc.name, attr)
		}
		if len(attr.AmbientCaps) != tc.caps || attr.Pdeathsig != syscall.SIGKILL {
			t.Errorf("%s: %d ambient capabilities (want %d), parent-death signal %v", tc.name, len(attr.AmbientCaps), tc.caps, attr.Pdeathsig)
		}
		if tc.id.TakesRoot() == tc.id.Rootless {
			t.Errorf("%s: takes root: %v", tc.name, tc.id.TakesRoot())
		}
	}
}

func TestMapText(t *testing.T) {
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: HostRangeStart, Size: 1000}, {ContainerID: 1000, HostID: 1000, Size: 1}}
	if got, want := string(mapText(m)), "0 2000000000 1000\n1000 1000 1\n"; got != want {
		t.Errorf("mapText = %q; want %q", got, want)
	}
}

// TestParseSubIDMap: a process started in a user namespace for the image
// store takes its maps for the caller's subordinate ids only when they are
// exactly sandbox root onto one id and 1..N onto a range.
func TestParseSubIDMap(t *testing.T) {
	for _, c := range []struct {
		text        string
		start, size int
		ok          bool
	}{
		{"         0       1000          1\n         1     100000      65535\n", 100000, 65535, true},
		{"0 1000 1\n1 100000 1000\n", 100000, 1000, true},
		{"0 1000 1\n", 0, 0, false},                             // only the caller
		{"0 0 4294967295\n", 0, 0, false},                       // the initial namespace
		{"0 1000 1\n1 100000 65536\n", 0, 0, false},             // more than a sandbox has
		{"0 1000 2\n2 100000 100\n", 0, 0, false},               // not root onto one id
		{"1 100000 100\n0 1000 1\n", 0, 0, false},               // out of order
		{"0 1000 1\n1 100000 100\n200 300000 1\n", 0, 0, false}, // a third range
		{"0 1000 1\n1 -5 100\n", 0, 0, false},                   // garbage
		{"0 1000 1\n1 100000 0\n", 0, 0, false},                 // an empty range
		{"0 1000 1\n1 100000 100 7\n", 0, 0, false},             // a field too many
		{"", 0, 0, false},
	} {
		start, size, ok := parseSubIDMap(c.text)
		if ok != c.ok || start != c.start || size != c.size {
			t.Errorf("%q: %d, %d, %v; want %d, %d, %v", c.text, start, size, ok, c.start, c.size, c.ok)
		}
	}
}
