package main

import (
	"net/netip"
	"testing"
)

// TestProcAddr: /proc/net/tcp's addresses, the IPv4 address a host-order
// number in hex, read as the kernel writes them.
func TestProcAddr(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"0100007F:0035", "127.0.0.1:53", true},
		{"3500007F:0035", "127.0.0.53:53", true},
		{"00000000:1F90", "0.0.0.0:8080", true},
		{"0100007F", "", false},
		{"0100007G:0035", "", false},
		{"0100007F:10000", "", false},
		{"00000000000000000000000001000000:0035", "", false}, // IPv6: not read
	} {
		got, ok := procAddr(c.in)
		if ok != c.ok || (ok && got != netip.MustParseAddrPort(c.want)) {
			t.Errorf("procAddr(%q) = %v, %v; want %s, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestNoFinderFindsNothing: without the init's pidfd there is nothing to
// look through, and nothing waits.
func TestNoFinderFindsNothing(t *testing.T) {
	var f *pidFinder
	f.start("tcp", netip.MustParseAddrPort("127.0.0.1:1"), netip.AddrPort{})
	if pid, _ := f.pid(netip.MustParseAddrPort("127.0.0.1:1")); pid != 0 || f.find("udp", netip.MustParseAddrPort("127.0.0.1:1"), netip.AddrPort{}) != 0 {
		t.Error("a nil finder found a process")
	}
}
