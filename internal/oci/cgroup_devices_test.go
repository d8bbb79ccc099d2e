package oci

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/oci/devicerules"
	"github.com/jail-sandbox/jail/internal/programs"
)

// deviceProbeArg starts this test binary as a process that tries device
// accesses (deviceProbe) from the cgroup a test put it in.
const deviceProbeArg = "jail-oci-test-device-probe"

func rule(allow bool, typ string, major, minor int64, access string) specs.LinuxDeviceCgroup {
	r := specs.LinuxDeviceCgroup{Allow: allow, Type: typ, Access: access}
	if major != -2 {
		r.Major = &major
	}
	if minor != -2 {
		r.Minor = &minor
	}
	return r
}

// none (-2) leaves a major or minor out of a rule.
const none = -2

// TestDeviceProgramRefusesBadRules: jail oci refuses rules the program
// could not test, and too many, before it starts anything.
func TestDeviceProgramRefusesBadRules(t *testing.T) {
	for _, r := range []specs.LinuxDeviceCgroup{
		rule(true, "u", 1, 3, "rwm"), rule(true, "c", 1, 3, "rwx"), rule(true, "c", -3, 3, "r"),
		rule(true, "c", 1<<32, 3, "r"), rule(true, "c", 1, 1<<40, "r"),
	} {
		if err := validateResources(&specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{r}}); err == nil {
			t.Errorf("validate: %+v accepted", r)
		}
		if err := setDeviceProgram("/nonexistent", []specs.LinuxDeviceCgroup{r}); err == nil || !strings.HasPrefix(err.Error(), "device rule 0: ") {
			t.Errorf("set: %+v: %v", r, err)
		}
	}
	huge := make([]specs.LinuxDeviceCgroup, devicerules.MaxRules+1)
	for i := range huge {
		huge[i] = rule(true, "c", 1, int64(i), "r")
	}
	if err := validateResources(&specs.LinuxResources{Devices: huge}); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("%d rules: %v", len(huge), err)
	}
	if err := setDeviceProgram("/nonexistent", huge); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("%d rules: %v", len(huge), err)
	}
}

// TestDeviceProgramInToolsActsOnTheHandedDescriptor: the tools program
// sets the program on the descriptor it is handed, and nothing else: one
// of a directory that is no v2 cgroup is refused (so this runs on v1
// too: the refusal names the directory handed over), as are no
// descriptor and rules that are no JSON list; each refusal comes back as
// one line.
func TestDeviceProgramInToolsActsOnTheHandedDescriptor(t *testing.T) {
	rules := []specs.LinuxDeviceCgroup{rule(false, "a", none, none, "rwm"), rule(true, "c", 1, 3, "rwm")}
	dir := t.TempDir()
	err := setDeviceProgram(dir, rules)
	if errors.Is(err, programs.ErrNotBuilt) {
		t.Skip("no tools program in this build (go generate ./internal/programs)")
	}
	want := "the device program of " + dir + ": the cgroup's descriptor is not of a cgroup v2 directory"
	if err == nil || err.Error() != want {
		t.Errorf("a directory that is no cgroup: %v; want %q", err, want)
	}
	if err := setDeviceProgram(filepath.Join(dir, "missing"), rules); err == nil || !strings.HasPrefix(err.Error(), "open ") {
		t.Errorf("a missing directory: %v", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range []struct {
		name  string
		files []*os.File
		in    string
		want  string
	}{
		// Descriptor 3 is then closed, or one the Go runtime opened (its
		// cgroup's CPU limit), which is no directory.
		{"no descriptor", nil, "[]", "jail: oci devices: no cgroup descriptor 3: bad file descriptor|jail: oci devices: the cgroup's descriptor is not of a directory"},
		{"not a list", []*os.File{d}, `{"allow": true}`, "jail: oci devices: read the rules: json: cannot unmarshal object into Go value of type []specs.LinuxDeviceCgroup"},
		{"a bad rule", []*os.File{d}, `[{"allow": true, "type": "x"}]`, `jail: oci devices: device rule 0: unknown type "x"`},
		{"too long", []*os.File{d}, "[" + strings.Repeat(" ", 1<<20) + "]", "jail: oci devices: read the rules: unexpected EOF"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, stderr strings.Builder
			code, err := programs.RunToolsWithFiles([]string{"oci", "devices"}, c.files, strings.NewReader(c.in), &out, &stderr)
			if err != nil || code != 125 || !slices.Contains(strings.Split(c.want, "|"), strings.TrimSuffix(stderr.String(), "\n")) ||
				strings.Count(stderr.String(), "\n") != 1 || out.Len() != 0 {
				t.Errorf("status %d (%v), stderr %q, stdout %q; want 125, %q", code, err, stderr.String(), out.String(), c.want)
			}
		})
	}
}

// deviceAccess is one access deviceProbe tries: "r", "w", "rw" to open
// path, or "mknod" to make a node of path's type ("c 1 3") in a
// directory.
type deviceAccess struct{ op, dev string }

var (
	devNull = deviceAccess{"", "/dev/null"}
	devZero = deviceAccess{"", "/dev/zero"}
	devFull = deviceAccess{"", "/dev/full"}
)

func (a deviceAccess) as(op string) deviceAccess { a.op = op; return a }

func mknod(typ string, major, minor int) deviceAccess {
	return deviceAccess{"mknod", fmt.Sprintf("%s:%d:%d", typ, major, minor)}
}

func (a deviceAccess) String() string { return a.op + ":" + a.dev }

// TestDeviceRulesDecideRealAccesses: the rules, made a cgroup's (a
// program on v2, devices.allow and deny on v1), decide what a process of
// that cgroup may open and mknod, as the last rule that matches each
// access says.
func TestDeviceRulesDecideRealAccesses(t *testing.T) {
	path := testCgroupPath(t)
	denyAll := rule(false, "a", none, none, "rwm")
	type want struct {
		access deviceAccess
		ok     bool
	}
	cases := []struct {
		name  string
		rules []specs.LinuxDeviceCgroup
		wants []want
		// v2Only: v1's kernel reads the rules otherwise (a deny in a
		// deny-all list removes only the same exception).
		v2Only bool
	}{
		{"deny all but /dev/null", []specs.LinuxDeviceCgroup{denyAll, rule(true, "c", 1, 3, "rwm")}, []want{
			{devNull.as("r"), true}, {devNull.as("rw"), true}, {devZero.as("r"), false}, {devZero.as("w"), false},
			{mknod("c", 1, 3), true}, {mknod("c", 1, 5), false}, {mknod("b", 7, 0), false},
		}, false},
		{"read only", []specs.LinuxDeviceCgroup{denyAll, rule(true, "c", 1, 5, "r")}, []want{
			{devZero.as("r"), true}, {devZero.as("w"), false}, {devZero.as("rw"), false}, {mknod("c", 1, 5), false},
		}, false},
		{"a wildcard minor", []specs.LinuxDeviceCgroup{denyAll, rule(true, "c", 1, -1, "rw")}, []want{
			{devNull.as("rw"), true}, {devZero.as("rw"), true}, {devFull.as("w"), true}, {mknod("c", 1, 3), false}, {mknod("b", 1, 3), false},
		}, false},
		{"a wildcard major and minor of one type", []specs.LinuxDeviceCgroup{denyAll, rule(true, "c", none, none, "m")}, []want{
			{mknod("c", 1, 3), true}, {mknod("c", 99, 99), true}, {mknod("b", 7, 0), false}, {devNull.as("r"), false},
		}, false},
		{"type a for one major: both types", []specs.LinuxDeviceCgroup{denyAll, rule(true, "a", 1, none, "rwm")}, []want{
			{devNull.as("rw"), true}, {mknod("c", 1, 3), true}, {mknod("b", 1, 0), true}, {mknod("b", 7, 0), false},
		}, false},
		{"no rules for every device: allowed but what is denied", []specs.LinuxDeviceCgroup{rule(false, "c", 1, 5, "w")}, []want{
			{devZero.as("r"), true}, {devZero.as("w"), false}, {devNull.as("rw"), true}, {mknod("b", 7, 0), true},
		}, false},
		{"the last rule that matches wins", []specs.LinuxDeviceCgroup{denyAll, rule(true, "c", 1, -1, "rwm"), rule(false, "c", 1, 5, "rwm")}, []want{
			{devNull.as("r"), true}, {devZero.as("r"), false}, {mknod("c", 1, 5), false}, {mknod("c", 1, 7), true},
		}, true},
		{"a later allow wins over a deny", []specs.LinuxDeviceCgroup{denyAll, rule(false, "c", 1, 5, "rwm"), rule(true, "c", 1, 5, "r")}, []want{
			{devZero.as("r"), true}, {devZero.as("w"), false},
		}, false},
		{"each access by its own last rule", []specs.LinuxDeviceCgroup{denyAll, rule(true, "c", 1, 5, "rw"), rule(false, "c", 1, 5, "w")}, []want{
			{devZero.as("r"), true}, {devZero.as("w"), false}, {devZero.as("rw"), false},
		}, true},
		{"a deny all after allows", []specs.LinuxDeviceCgroup{rule(true, "c", 1, 3, "rwm"), denyAll}, []want{
			{devNull.as("r"), false}, {mknod("c", 1, 3), false},
		}, false},
		// Looks like a deny-all, is not: read of every device.
		{"allow all but read", []specs.LinuxDeviceCgroup{rule(false, "a", none, none, "r")}, []want{
			{devNull.as("r"), false}, {devNull.as("w"), true}, {mknod("c", 1, 3), true},
		}, true},
		// Looks like an allow-all, is not (v1 read "a ..." as all).
		{"deny all, allow read of all", []specs.LinuxDeviceCgroup{denyAll, rule(true, "a", -1, -1, "r")}, []want{
			{devNull.as("r"), true}, {devNull.as("w"), false}, {mknod("c", 1, 3), false}, {mknod("b", 7, 0), false},
		}, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cg, err := NewCgroup(path+"-"+strconv.Itoa(i), &specs.LinuxResources{Devices: c.rules})
			if err != nil {
				t.Fatal(err)
			}
			defer cg.Remove()
			if c.v2Only && !cg.V2 {
				t.Skip("cgroup v1 reads these rules as its kernel does")
			}
			var accesses []deviceAccess
			for _, w := range c.wants {
				accesses = append(accesses, w.access)
			}
			got := probeDevices(t, cg, nil, accesses)
			for j, w := range c.wants {
				if (got[j] == "ok") != w.ok {
					t.Errorf("%s: %s; want allowed %v", w.access, got[j], w.ok)
				}
			}
		})
	}
}

// probeDevices runs deviceProbe in cg (with attr's settings) and returns
// what each access gave: "ok" or the error.
func probeDevices(t *testing.T, cg *Cgroup, attr *syscall.SysProcAttr, accesses []deviceAccess, extra ...string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{deviceProbeArg, t.TempDir()}
	for _, a := range accesses {
		args = append(args, a.String())
	}
	cmd := exec.Command(exe, append(args, extra...)...)
	cmd.SysProcAttr = attr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The probe waits for a line: until it is in cg.
	if err := cg.Enter(cmd.Process.Pid); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	stdin.Write([]byte("go\n"))
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("probe: %v: %s", err, out.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(accesses)+len(extra) {
		t.Fatalf("probe said %q for %v %v", out.String(), accesses, extra)
	}
	return lines
}

// deviceProbe (os.Args: the probe argument, a directory for nodes, then
// accesses) waits for a line on stdin, then prints, for each access, "ok"
// or its error. "caps" drops every capability runc's default bundle
// does not give; "bpf" tries to get around the cgroup's device program:
// query it, take it, detach it, attach one that allows everything.
func deviceProbe() int {
	if len(os.Args) < 3 {
		return 2
	}
	// Capabilities are a thread's: every access from this one.
	runtime.LockOSThread()
	bufio.NewReader(os.Stdin).ReadString('\n')
	dir := os.Args[2]
	for i, a := range os.Args[3:] {
		op, arg, _ := strings.Cut(a, ":")
		var err error
		switch op {
		case "r", "w", "rw":
			flags := map[string]int{"r": unix.O_RDONLY, "w": unix.O_WRONLY, "rw": unix.O_RDWR}[op]
			var fd int
			if fd, err = unix.Open(arg, flags|unix.O_CLOEXEC, 0); err == nil {
				unix.Close(fd)
			}
		case "mknod":
			parts := strings.Split(arg, ":")
			major, _ := strconv.Atoi(parts[1])
			minor, _ := strconv.Atoi(parts[2])
			mode := uint32(unix.S_IFCHR)
			if parts[0] == "b" {
				mode = unix.S_IFBLK
			}
			node := filepath.Join(dir, strconv.Itoa(i))
			if err = unix.Mknod(node, mode|0o600, int(unix.Mkdev(uint32(major), uint32(minor)))); err == nil {
				os.Remove(node)
			}
		case "caps":
			err = dropToDefaultCapabilities()
		case "bpf":
			err = escapeDeviceProgram()
		default:
			err = fmt.Errorf("unknown access %q", a)
		}
		if err != nil {
			fmt.Println(err)
		} else {
			fmt.Println("ok")
		}
	}
	return 0
}

// dropToDefaultCapabilities keeps runc's default bundle's capabilities
// (among them CAP_MKNOD, none of CAP_SYS_ADMIN, CAP_BPF, CAP_NET_ADMIN).
func dropToDefaultCapabilities() error {
	keep := []uintptr{unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FSETID, unix.CAP_FOWNER, unix.CAP_MKNOD,
		unix.CAP_NET_RAW, unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETFCAP, unix.CAP_SETPCAP,
		unix.CAP_NET_BIND_SERVICE, unix.CAP_SYS_CHROOT, unix.CAP_KILL, unix.CAP_AUDIT_WRITE}
	var mask uint32
	for _, c := range keep {
		mask |= 1 << c
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{{Effective: mask, Permitted: mask}, {}}
	return unix.Capset(&hdr, &data[0])
}

// escapeDeviceProgram is what a container's process could try on its own
// cgroup: every step must fail; it reports the first that does not.
func escapeDeviceProgram() error {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return err
	}
	dir := filepath.Join(cgroupRoot, strings.TrimSpace(strings.TrimPrefix(string(self), "0::")))
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var failures []string
	if q, err := link.QueryPrograms(link.QueryOptions{Target: fd, Attach: ebpf.AttachCGroupDevice}); err == nil {
		failures = append(failures, "query")
		for _, p := range q.Programs {
			if prog, err := ebpf.NewProgramFromID(p.ID); err == nil {
				failures = append(failures, "take")
				if link.RawDetachProgram(link.RawDetachProgramOptions{Target: fd, Program: prog, Attach: ebpf.AttachCGroupDevice}) == nil {
					failures = append(failures, "detach")
				}
			}
		}
	}
	allowAll, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.CGroupDevice, Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()}})
	if err == nil {
		failures = append(failures, "load")
		for _, flags := range []uint32{0, unix.BPF_F_ALLOW_OVERRIDE, unix.BPF_F_ALLOW_MULTI} {
			if link.RawAttachProgram(link.RawAttachProgramOptions{Target: fd, Program: allowAll, Attach: ebpf.AttachCGroupDevice, Flags: flags}) == nil {
				failures = append(failures, fmt.Sprintf("attach with flags %#x", flags))
			}
		}
		allowAll.Close()
	}
	if len(failures) > 0 {
		return errors.New("could " + strings.Join(failures, ", "))
	}
	return nil
}

// TestAContainerCannotGetAroundItsDeviceProgram: a process of the
// container's cgroup, as root with runc's default capabilities, or with
// every capability in a user namespace of its own, can neither query,
// take, detach nor replace the cgroup's device program, and stays denied;
// nor does a cgroup made below the container's (as a container whose
// cgroup mount is writable could) escape it.
func TestAContainerCannotGetAroundItsDeviceProgram(t *testing.T) {
	path := testCgroupPath(t)
	cg, err := NewCgroup(path, &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{rule(false, "a", none, none, "rwm"), rule(true, "c", 1, 3, "rwm")}})
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Remove()
	if !cg.V2 {
		t.Skip("cgroup v1: no device program")
	}
	accesses := []deviceAccess{devNull.as("rw"), devZero.as("r")}
	for _, c := range []struct {
		name string
		attr *syscall.SysProcAttr
		pre  string
	}{
		{"root with the default capabilities", nil, "caps"},
		{"root of a user namespace", &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var extra []string
			if c.pre != "" {
				extra = append(extra, c.pre)
			}
			extra = append(extra, "bpf")
			got := probeDevices(t, cg, c.attr, nil, extra...)
			for _, g := range got {
				if g != "ok" {
					t.Errorf("%s", g)
				}
			}
			// Still denied after.
			got = probeDevices(t, cg, nil, accesses)
			if got[0] != "ok" || got[1] == "ok" {
				t.Errorf("after the attempts: /dev/null %s, /dev/zero %s", got[0], got[1])
			}
		})
	}
	t.Run("a cgroup below", func(t *testing.T) {
		below := filepath.Join(cg.Paths[0], "below")
		if err := os.Mkdir(below, 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(below)
		sub := &Cgroup{V2: true, Paths: []string{below}}
		got := probeDevices(t, sub, nil, accesses)
		if got[0] != "ok" || got[1] == "ok" {
			t.Errorf("below: /dev/null %s, /dev/zero %s", got[0], got[1])
		}
	})
}

// TestUpdateReplacesTheDeviceProgram: an update's device rules replace
// the program (one attached after, not two), and delete's removal of the
// cgroup frees it.
func TestUpdateReplacesTheDeviceProgram(t *testing.T) {
	path := testCgroupPath(t)
	cg, err := NewCgroup(path, &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{rule(false, "a", none, none, "rwm"), rule(true, "c", 1, 3, "rwm")}})
	if err != nil {
		t.Fatal(err)
	}
	removed := false
	defer func() {
		if !removed {
			cg.Remove()
		}
	}()
	if !cg.V2 {
		t.Skip("cgroup v1: no device program")
	}
	attached := func() []ebpf.ProgramID {
		fd, err := unix.Open(cg.Paths[0], unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		q, err := link.QueryPrograms(link.QueryOptions{Target: fd, Attach: ebpf.AttachCGroupDevice})
		if err != nil {
			t.Fatal(err)
		}
		var ids []ebpf.ProgramID
		for _, p := range q.Programs {
			ids = append(ids, p.ID)
		}
		return ids
	}
	before := attached()
	if len(before) != 1 {
		t.Fatalf("programs attached after create: %v", before)
	}
	if got := probeDevices(t, cg, nil, []deviceAccess{devZero.as("r")}); got[0] == "ok" {
		t.Errorf("/dev/zero allowed before the update")
	}
	if err := cg.Update(&specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{rule(true, "c", 1, 5, "r")}}); err != nil {
		t.Fatal(err)
	}
	after := attached()
	if len(after) != 1 || after[0] == before[0] {
		t.Errorf("programs attached after the update: %v (before %v)", after, before)
	}
	if got := probeDevices(t, cg, nil, []deviceAccess{devZero.as("r"), devNull.as("r")}); got[0] != "ok" || got[1] != "ok" {
		t.Errorf("after the update: /dev/zero %s, /dev/null %s", got[0], got[1])
	}
	if err := cg.Remove(); err != nil {
		t.Fatal(err)
	}
	removed = true
	// The program is freed with the cgroup (asynchronously: the cgroup's
	// release runs from a work queue).
	for i := 0; ; i++ {
		p, err := ebpf.NewProgramFromID(after[0])
		if errors.Is(err, unix.ENOENT) {
			break
		}
		if err == nil {
			p.Close()
		}
		if i == 1000 {
			t.Fatalf("program %d still loaded after the cgroup's removal: %v", after[0], err)
		}
		waitBriefly()
	}
}

func waitBriefly() { time.Sleep(10 * time.Millisecond) }
