package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/jail-sandbox/jail/internal/oci/devicerules"
	"github.com/jail-sandbox/jail/internal/oci/devices"
	"github.com/jail-sandbox/jail/seccomp"
	"github.com/jail-sandbox/jail/seccomp/compile"
)

// maxOCISeccomp bounds the policy read: a bundle's config.json is at most
// 4 MiB (package oci).
const maxOCISeccomp = 4 << 20

// maxOCIDevices bounds the device rules read: at most
// devicerules.MaxRules, each well under 256 bytes of JSON as package oci
// writes them.
const maxOCIDevices = 256 * devicerules.MaxRules

// ociCgroupFD is the descriptor `oci devices` gets the cgroup on.
const ociCgroupFD = 3

func ociCommand(args []string) int {
	if len(args) == 1 && args[0] == "seccomp" {
		return ociSeccompCommand(os.Stdin, os.Stdout)
	}
	if len(args) == 1 && args[0] == "devices" {
		if err := ociDevicesCommand(os.Stdin, ociCgroupFD); err != nil {
			return fail("%v", err)
		}
		return 0
	}
	return fail("tools: oci: unknown request %q", args)
}

// ociSeccompCommand reads a bundle's linux.seccomp (JSON) and writes its
// compiled filter (filter.Filter), or a seccomp.ResolveError with status 1.
func ociSeccompCommand(in io.Reader, out io.Writer) int {
	var s specs.LinuxSeccomp
	if err := json.NewDecoder(io.LimitReader(in, maxOCISeccomp)).Decode(&s); err != nil {
		return answer(out, seccomp.ResolveError{Message: "read request: " + err.Error()}, 1)
	}
	f, err := compile.CompileOCI(&s)
	if err != nil {
		return answer(out, seccomp.ResolveError{Message: err.Error()}, 1)
	}
	return answer(out, f, 0)
}

// ociDevicesCommand reads device rules (a JSON list of
// specs.LinuxDeviceCgroup, as package oci compacted them) and makes them
// the device rules of the cgroup v2 directory open at cgroupFD, which its
// caller opened and handed over (programs.RunToolsWithFiles): the program
// for them attached, the former ones detached (devices.Set). No path is
// opened here. Without a descriptor handed over, 3 may still be open: the
// Go runtime (1.25 on) keeps the cgroup CPU limit files it reads at start
// open, which devices.Set refuses as no directory.
func ociDevicesCommand(in io.Reader, cgroupFD int) error {
	if _, err := unix.FcntlInt(uintptr(cgroupFD), unix.F_GETFD, 0); err != nil {
		return fmt.Errorf("oci devices: no cgroup descriptor %d: %w", cgroupFD, err)
	}
	var rules []specs.LinuxDeviceCgroup
	if err := json.NewDecoder(io.LimitReader(in, maxOCIDevices)).Decode(&rules); err != nil {
		return fmt.Errorf("oci devices: read the rules: %w", err)
	}
	if err := devices.Set(cgroupFD, rules); err != nil {
		return fmt.Errorf("oci devices: %w", err)
	}
	return nil
}
