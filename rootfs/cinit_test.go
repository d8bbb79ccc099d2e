package rootfs

import (
	"testing"

	"github.com/jail-sandbox/jail/internal/layout"
)

// TestGoInitHasLayoutsDevices: the Go init binds the devices and makes the
// links of package layout, which the C init's are generated from. (The
// path lists are layout's own variables.)
func TestGoInitHasLayoutsDevices(t *testing.T) {
	if len(hostDevices) != len(layout.HostDevices) {
		t.Fatalf("%d devices; layout has %d", len(hostDevices), len(layout.HostDevices))
	}
	for i, d := range layout.HostDevices {
		if got := hostDevices[i]; got.name != d.Name || got.major != d.Major || got.minor != d.Minor {
			t.Errorf("device %d: %+v; layout has %+v", i, got, d)
		}
	}
	if len(devSymlinks) != len(layout.DevSymlinks) {
		t.Fatalf("%d links; layout has %d", len(devSymlinks), len(layout.DevSymlinks))
	}
	for _, l := range layout.DevSymlinks {
		if devSymlinks[l.Name] != l.Target {
			t.Errorf("link %s: %q; layout has %q", l.Name, devSymlinks[l.Name], l.Target)
		}
	}
}
