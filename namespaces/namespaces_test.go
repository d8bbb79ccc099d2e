package namespaces

import (
	"reflect"
	"syscall"
	"testing"
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
