package oci

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/jail-sandbox/jail/cgroups/cgroupfile"
)

// testCgroupPath is a cgroup path of this test's own, below a parent it
// makes (and removes) at the top of each hierarchy.
func testCgroupPath(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make cgroups")
	}
	return "/jail-oci-test-" + strconv.Itoa(os.Getpid()) + "/" + strings.ReplaceAll(t.Name(), "/", "-")
}

func readKnob(t *testing.T, dir, file string) string {
	t.Helper()
	b, err := cgroupfile.Read(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestCgroupLifecycle(t *testing.T) {
	path := testCgroupPath(t)
	r := &specs.LinuxResources{
		Memory: &specs.LinuxMemory{Limit: i64(64 << 20), Reservation: i64(32 << 20)},
		CPU:    &specs.LinuxCPU{Shares: u64(512), Quota: i64(50000), Period: u64(100000), Cpus: "0"},
		Pids:   &specs.LinuxPids{Limit: i64(100)},
	}
	cg, err := NewCgroup(path, r)
	if err != nil {
		t.Fatal(err)
	}
	removed := false
	defer func() {
		if !removed {
			cg.Remove()
		}
	}()
	if _, err := NewCgroup(path, nil); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("a second cgroup at the same path: %v", err)
	}
	if cg.V2 {
		dir := cg.Paths[0]
		for file, want := range map[string]string{"memory.max": "67108864", "memory.low": "33554432", "cpu.max": "50000 100000", "pids.max": "100", "cpuset.cpus": "0"} {
			if got := readKnob(t, dir, file); got != want {
				t.Errorf("%s: %q; want %q", file, got, want)
			}
		}
	} else {
		for _, k := range []struct{ h, file, want string }{
			{"memory", "memory.limit_in_bytes", "67108864"}, {"memory", "memory.soft_limit_in_bytes", "33554432"},
			{"cpu", "cpu.shares", "512"}, {"cpu", "cpu.cfs_quota_us", "50000"}, {"cpu", "cpu.cfs_period_us", "100000"},
			{"pids", "pids.max", "100"}, {"cpuset", "cpuset.cpus", "0"},
		} {
			if got := readKnob(t, cg.dir(k.h), k.file); got != k.want {
				t.Errorf("%s: %q; want %q", k.file, got, k.want)
			}
		}
	}
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	if err := cg.Enter(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	pids, err := cg.Pids()
	if err != nil || len(pids) != 1 || pids[0] != cmd.Process.Pid || !cg.Contains(cmd.Process.Pid) || cg.Contains(os.Getpid()) {
		t.Fatalf("pids %v %v", pids, err)
	}
	if err := cg.Freeze(true); err != nil {
		t.Fatal(err)
	}
	if !cg.Frozen() {
		t.Error("not frozen")
	}
	if err := cg.Freeze(false); err != nil || cg.Frozen() {
		t.Fatalf("thaw: %v", err)
	}
	if err := cg.Update(&specs.LinuxResources{Pids: &specs.LinuxPids{Limit: i64(-1)}}); err != nil {
		t.Fatal(err)
	}
	if got := readKnob(t, cg.dir("pids"), "pids.max"); got != "max" {
		t.Errorf("updated pids.max %q", got)
	}
	if err := cg.Update(&specs.LinuxResources{Unified: map[string]string{"a": "b"}}); err == nil {
		t.Error("update with unsupported resources accepted")
	}
	if err := killCgroup(cg, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// Paused then removed: removing thaws and kills.
	if err := cg.Freeze(true); err != nil {
		t.Fatal(err)
	}
	if err := cg.Remove(); err != nil {
		t.Fatal(err)
	}
	removed = true
	for _, d := range append(cg.Paths, cg.Made...) {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s left: %v", d, err)
		}
	}
}

func TestCgroupDeviceRulesV1(t *testing.T) {
	path := testCgroupPath(t)
	r := &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{
		{Allow: false, Access: "rwm"},
		{Allow: true, Type: "c", Major: i64(1), Minor: i64(3), Access: "rwm"},
		{Allow: true, Type: "c", Major: i64(136), Access: "rwm"},
	}}
	cg, err := NewCgroup(path, r)
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Remove()
	if cg.V2 {
		t.Skip("cgroup v2: a device program (TestDeviceRulesDecideRealAccesses)")
	}
	got := readKnob(t, cg.dir("devices"), "devices.list")
	if got != "c 1:3 rwm\nc 136:* rwm" {
		t.Errorf("devices.list %q", got)
	}
}

func TestDeviceRuleLines(t *testing.T) {
	cases := []struct {
		rule specs.LinuxDeviceCgroup
		want string
	}{
		{specs.LinuxDeviceCgroup{Access: "rwm"}, "a"},
		{specs.LinuxDeviceCgroup{Type: "a"}, "a"},
		{specs.LinuxDeviceCgroup{Type: "a", Major: i64(-1), Minor: i64(-1), Access: "rwm"}, "a"},
		{specs.LinuxDeviceCgroup{Type: "c", Major: i64(1), Minor: i64(3), Access: "rw"}, "c 1:3 rw"},
		{specs.LinuxDeviceCgroup{Type: "b", Major: i64(8), Access: "r"}, "b 8:* r"},
		{specs.LinuxDeviceCgroup{Type: "c", Major: i64(-1), Minor: i64(-1), Access: "m"}, "c *:* m"},
		// The kernel reads any line that starts with "a" as every device
		// and access: "allow read of all" must not be written so.
		{specs.LinuxDeviceCgroup{Type: "a", Access: "r"}, "c *:* r|b *:* r"},
		{specs.LinuxDeviceCgroup{Major: i64(1), Access: "rwm"}, "c 1:* rwm|b 1:* rwm"},
	}
	for _, c := range cases {
		if got := strings.Join(deviceRuleLines(c.rule), "|"); got != c.want {
			t.Errorf("%+v: %q; want %q", c.rule, got, c.want)
		}
	}
	for shares, want := range map[uint64]uint64{2: 1, 1024: 39, 262144: 10000, 1: 1, 1 << 30: 10000} {
		if got := sharesToWeight(shares); got != want {
			t.Errorf("shares %d: weight %d; want %d", shares, got, want)
		}
	}
}

// TestCgroupMemorySettingsOfV1: kernelTCP, swappiness, disableOOMKiller
// and useHierarchy land in their v1 files; on v2, which has no such
// files, the first three are refused rather than dropped.
func TestCgroupMemorySettingsOfV1(t *testing.T) {
	r := &specs.LinuxResources{Memory: &specs.LinuxMemory{
		KernelTCP: i64(8 << 20), Swappiness: u64(10), DisableOOMKiller: boolp(true), UseHierarchy: boolp(true),
	}}
	cg, err := NewCgroup(testCgroupPath(t), r)
	if err != nil {
		if strings.Contains(err.Error(), "cgroup v2 has no such setting") {
			return
		}
		t.Fatal(err)
	}
	defer cg.Remove()
	if cg.V2 {
		t.Fatal("v2 took v1's memory settings")
	}
	dir := cg.dir("memory")
	for file, want := range map[string]string{
		"memory.kmem.tcp.limit_in_bytes": "8388608", "memory.swappiness": "10", "memory.use_hierarchy": "1",
	} {
		if got := readKnob(t, dir, file); got != want {
			t.Errorf("%s: %q; want %q", file, got, want)
		}
	}
	if got := readKnob(t, dir, "memory.oom_control"); !strings.Contains(got, "oom_kill_disable 1") {
		t.Errorf("memory.oom_control: %q", got)
	}
}

// TestCgroupBlockIOAndUnified: a weight and a throttle of a real block
// device land in the host's files (v1 blkio, v2 io), leaf weights are
// refused where the kernel has none, and unified files are written on v2
// and refused on v1.
func TestCgroupBlockIOAndUnified(t *testing.T) {
	devs, _ := os.ReadDir("/sys/dev/block")
	if len(devs) == 0 {
		t.Skip("no block device")
	}
	var major, minor int64
	if _, err := fmt.Sscanf(devs[0].Name(), "%d:%d", &major, &minor); err != nil {
		t.Fatal(err)
	}
	throttle := specs.LinuxThrottleDevice{Rate: 1 << 20}
	throttle.Major, throttle.Minor = major, minor
	r := &specs.LinuxResources{BlockIO: &specs.LinuxBlockIO{Weight: u16(500), ThrottleReadBpsDevice: []specs.LinuxThrottleDevice{throttle}}}
	cg, err := NewCgroup(testCgroupPath(t), r)
	if err != nil {
		if strings.Contains(err.Error(), "not have") || strings.Contains(err.Error(), "has not mounted") {
			t.Skipf("this host: %v", err)
		}
		t.Fatal(err)
	}
	defer cg.Remove()
	dev := fmt.Sprintf("%d:%d", major, minor)
	if cg.V2 {
		dir := cg.Paths[0]
		if got := readKnob(t, dir, "io.max"); !strings.Contains(got, dev+" rbps=1048576") {
			t.Errorf("io.max: %q", got)
		}
		if err := cg.Update(&specs.LinuxResources{Unified: map[string]string{"memory.high": "67108864"}}); err != nil {
			t.Fatal(err)
		}
		if got := readKnob(t, dir, "memory.high"); got != "67108864" {
			t.Errorf("memory.high: %q", got)
		}
	} else {
		dir := cg.dir("blkio")
		weight := firstPresent(dir, "blkio.weight", "blkio.bfq.weight")
		if got := readKnob(t, dir, weight); !strings.Contains(got, "500") {
			t.Errorf("%s: %q", weight, got)
		}
		if got := readKnob(t, dir, "blkio.throttle.read_bps_device"); got != dev+" 1048576" {
			t.Errorf("blkio.throttle.read_bps_device: %q", got)
		}
		if err := cg.Update(&specs.LinuxResources{Unified: map[string]string{"memory.high": "67108864"}}); err == nil || !strings.Contains(err.Error(), "v1") {
			t.Errorf("unified on v1: %v", err)
		}
	}
	leaf := &specs.LinuxResources{BlockIO: &specs.LinuxBlockIO{LeafWeight: u16(300)}}
	if firstPresent(cg.Paths[0], "blkio.leaf_weight") == "" {
		if err := cg.Update(leaf); err == nil || !strings.Contains(err.Error(), "leaf weight") {
			t.Errorf("leaf weight where the kernel has none: %v", err)
		}
	}
}

// TestCgroupNetwork: net_cls's class id and net_prio's priorities land in
// their v1 files where the host mounts them, and are refused, never
// dropped, where it does not (v2 has neither).
func TestCgroupNetwork(t *testing.T) {
	classID := uint32(0x100001)
	r := &specs.LinuxResources{Network: &specs.LinuxNetwork{ClassID: &classID, Priorities: []specs.LinuxInterfacePriority{{Name: "lo", Priority: 5}}}}
	cg, err := NewCgroup(testCgroupPath(t), r)
	if err != nil {
		if !strings.Contains(err.Error(), "has not mounted") && !strings.Contains(err.Error(), "v2 has no net_cls") {
			t.Errorf("refused with %v", err)
		}
		return
	}
	defer cg.Remove()
	if got := readKnob(t, cg.dir("net_cls"), "net_cls.classid"); got != "1048577" {
		t.Errorf("net_cls.classid %q", got)
	}
	if got := readKnob(t, cg.dir("net_prio"), "net_prio.ifpriomap"); !strings.Contains(got, "lo 5") {
		t.Errorf("net_prio.ifpriomap %q", got)
	}
}
