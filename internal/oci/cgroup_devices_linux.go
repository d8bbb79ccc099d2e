package oci

// Device rules on cgroup v2: the kernel has no devices.allow there, only a
// BPF_PROG_TYPE_CGROUP_DEVICE program attached to the cgroup (package
// internal/oci/devices says how and why it is attached as it is; package
// devicerules what the rules mean). That package links
// github.com/cilium/ebpf, whose package initialisation and size every
// start of the jail binary would pay (0.13-0.17 ms per `jail run`, and
// 1.8 MB), so it runs in jail's tools program: `jail-tools oci devices`
// gets the rules on stdin and the cgroup directory, opened here once, as
// its descriptor 3, and never opens a path itself. One process start
// (about 3.5 ms) per create, and per update with device rules, on v2
// only.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/oci/devicerules"
	"github.com/jail-sandbox/jail/internal/programs"
)

// deviceAllows are the allow rules runc appends to a bundle's for the
// devices the container is given: the runtime spec's defaults, the
// bundle's linux.devices, and its terminals (/dev/ptmx, /dev/pts/*).
func deviceAllows(devices []specs.LinuxDevice) []specs.LinuxDeviceCgroup {
	var out []specs.LinuxDeviceCgroup
	allow := func(typ string, major, minor int64) {
		out = append(out, specs.LinuxDeviceCgroup{Allow: true, Type: typ, Major: &major, Minor: &minor, Access: "rwm"})
	}
	for _, d := range defaultDevices() {
		allow(d.Type, d.Major, d.Minor)
	}
	for _, d := range devices {
		switch d.Type {
		case "c", "u": // u: unbuffered, a character device to the kernel
			allow("c", d.Major, d.Minor)
		case "b":
			allow("b", d.Major, d.Minor)
		}
	}
	allow("c", 5, 2) // /dev/ptmx
	pts := int64(136)
	out = append(out, specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &pts, Access: "rwm"}) // /dev/pts/*
	return out
}

// setDeviceProgram makes rules the device rules of the v2 cgroup at dir,
// in the tools program (devices.Set): their program attached, then every
// other device program attached to dir itself (the one create or a
// former update attached) detached. The rules are checked here first, so
// that what is refused starts nothing.
func setDeviceProgram(dir string, rules []specs.LinuxDeviceCgroup) error {
	if err := devicerules.Check(rules); err != nil {
		return err
	}
	in, err := json.Marshal(rules)
	if err != nil {
		return err
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	cgroup := os.NewFile(uintptr(fd), dir)
	defer cgroup.Close()
	var stderr bytes.Buffer
	code, err := programs.RunToolsWithFiles([]string{"oci", "devices"}, []*os.File{cgroup}, bytes.NewReader(in), nil, &stderr)
	if err != nil {
		return fmt.Errorf("the device program of %s: %w", dir, err)
	}
	if code != 0 {
		return fmt.Errorf("the device program of %s: %w", dir, toolsError("oci devices", code, stderr.Bytes()))
	}
	return nil
}

// toolsError is the error the tools program's command reported on
// stderr with status code: its one line, without the "jail: COMMAND: "
// that the tools program puts before it.
func toolsError(command string, code int, stderr []byte) error {
	line, _, _ := strings.Cut(strings.TrimSpace(string(stderr)), "\n")
	line = strings.TrimPrefix(line, "jail: ")
	line = strings.TrimPrefix(line, command+": ")
	if line == "" {
		return fmt.Errorf("tools program: %s: status %d", command, code)
	}
	return errors.New(line)
}
