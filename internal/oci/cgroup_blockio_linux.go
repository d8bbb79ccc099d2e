package oci

// linux.resources.blockIO and linux.resources.unified: block I/O weights
// and throttles where the host has their files, and cgroup v2 files by
// name. What the host lacks (v1's leaf weights, gone with CFQ; a weight
// file when no I/O scheduler offers one) is refused at create, never
// dropped.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// validateBlockIO checks blockIO's numbers (the files are checked when
// written).
func validateBlockIO(b *specs.LinuxBlockIO) error {
	if b == nil {
		return nil
	}
	weight := func(what string, w *uint16) error {
		if w != nil && (*w < 10 || *w > 1000) {
			return fmt.Errorf("oci: linux.resources.blockIO.%s %d is not within 10..1000", what, *w)
		}
		return nil
	}
	if err := weight("weight", b.Weight); err != nil {
		return err
	}
	if err := weight("leafWeight", b.LeafWeight); err != nil {
		return err
	}
	for i, d := range b.WeightDevice {
		if err := weight(fmt.Sprintf("weightDevice[%d].weight", i), d.Weight); err != nil {
			return err
		}
		if err := weight(fmt.Sprintf("weightDevice[%d].leafWeight", i), d.LeafWeight); err != nil {
			return err
		}
		if d.Major < 0 || d.Minor < 0 {
			return fmt.Errorf("oci: linux.resources.blockIO.weightDevice[%d]: a device's major and minor are not negative", i)
		}
	}
	for name, list := range throttles(b) {
		for i, d := range list {
			if d.Major < 0 || d.Minor < 0 {
				return fmt.Errorf("oci: linux.resources.blockIO.%s[%d]: a device's major and minor are not negative", name, i)
			}
		}
	}
	return nil
}

func throttles(b *specs.LinuxBlockIO) map[string][]specs.LinuxThrottleDevice {
	return map[string][]specs.LinuxThrottleDevice{
		"throttleReadBpsDevice": b.ThrottleReadBpsDevice, "throttleWriteBpsDevice": b.ThrottleWriteBpsDevice,
		"throttleReadIOPSDevice": b.ThrottleReadIOPSDevice, "throttleWriteIOPSDevice": b.ThrottleWriteIOPSDevice,
	}
}

// firstPresent is the first of files that dir has, or "".
func firstPresent(dir string, files ...string) string {
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return f
		}
	}
	return ""
}

// blockIOWritesV1 are b's blkio files: weights in blkio.weight (CFQ) or
// blkio.bfq.weight (BFQ), as runc, and the throttles.
func blockIOWritesV1(dir string, b *specs.LinuxBlockIO) ([]cgroupWrite, error) {
	var out []cgroupWrite
	if b.LeafWeight != nil || hasLeafWeight(b) {
		if firstPresent(dir, "blkio.leaf_weight") == "" {
			return nil, errors.New("linux.resources.blockIO: leaf weights need blkio.leaf_weight (CFQ), which this kernel does not have")
		}
	}
	if b.Weight != nil || len(b.WeightDevice) > 0 {
		file := firstPresent(dir, "blkio.weight", "blkio.bfq.weight")
		if file == "" {
			return nil, errors.New("linux.resources.blockIO: weights need blkio.weight or blkio.bfq.weight, which this host's cgroup does not have")
		}
		if b.Weight != nil {
			out = append(out, cgroupWrite{dir, file, strconv.Itoa(int(*b.Weight))})
		}
		for _, d := range b.WeightDevice {
			if d.Weight != nil {
				out = append(out, cgroupWrite{dir, file + "_device", fmt.Sprintf("%d:%d %d", d.Major, d.Minor, *d.Weight)})
			}
		}
	}
	if b.LeafWeight != nil {
		out = append(out, cgroupWrite{dir, "blkio.leaf_weight", strconv.Itoa(int(*b.LeafWeight))})
	}
	for _, d := range b.WeightDevice {
		if d.LeafWeight != nil {
			out = append(out, cgroupWrite{dir, "blkio.leaf_weight_device", fmt.Sprintf("%d:%d %d", d.Major, d.Minor, *d.LeafWeight)})
		}
	}
	for _, t := range []struct {
		file string
		list []specs.LinuxThrottleDevice
	}{
		{"blkio.throttle.read_bps_device", b.ThrottleReadBpsDevice}, {"blkio.throttle.write_bps_device", b.ThrottleWriteBpsDevice},
		{"blkio.throttle.read_iops_device", b.ThrottleReadIOPSDevice}, {"blkio.throttle.write_iops_device", b.ThrottleWriteIOPSDevice},
	} {
		for _, d := range t.list {
			out = append(out, cgroupWrite{dir, t.file, fmt.Sprintf("%d:%d %d", d.Major, d.Minor, d.Rate)})
		}
	}
	return out, nil
}

func hasLeafWeight(b *specs.LinuxBlockIO) bool {
	for _, d := range b.WeightDevice {
		if d.LeafWeight != nil {
			return true
		}
	}
	return false
}

// blockIOWritesV2 are b's io files: weights in io.bfq.weight when BFQ
// offers it, else io.weight (converted from 10..1000 to 1..10000 as runc
// converts), and the throttles in io.max. v2 has no leaf weights.
func blockIOWritesV2(dir string, b *specs.LinuxBlockIO) ([]cgroupWrite, error) {
	if b.LeafWeight != nil || hasLeafWeight(b) {
		return nil, errors.New("linux.resources.blockIO: cgroup v2 has no leaf weights")
	}
	var out []cgroupWrite
	if b.Weight != nil || len(b.WeightDevice) > 0 {
		file := firstPresent(dir, "io.bfq.weight", "io.weight")
		if file == "" {
			return nil, errors.New("linux.resources.blockIO: weights need io.bfq.weight or io.weight, which this host's cgroup does not have")
		}
		value := func(w uint16) string {
			if file == "io.weight" {
				return strconv.FormatUint(1+(uint64(w)-10)*9999/990, 10)
			}
			return strconv.Itoa(int(w))
		}
		if b.Weight != nil {
			out = append(out, cgroupWrite{dir, file, value(*b.Weight)})
		}
		for _, d := range b.WeightDevice {
			if d.Weight != nil {
				out = append(out, cgroupWrite{dir, file, fmt.Sprintf("%d:%d %s", d.Major, d.Minor, value(*d.Weight))})
			}
		}
	}
	for _, t := range []struct {
		key  string
		list []specs.LinuxThrottleDevice
	}{
		{"rbps", b.ThrottleReadBpsDevice}, {"wbps", b.ThrottleWriteBpsDevice},
		{"riops", b.ThrottleReadIOPSDevice}, {"wiops", b.ThrottleWriteIOPSDevice},
	} {
		for _, d := range t.list {
			rate := strconv.FormatUint(d.Rate, 10)
			if d.Rate == 0 {
				rate = "max"
			}
			out = append(out, cgroupWrite{dir, "io.max", fmt.Sprintf("%d:%d %s=%s", d.Major, d.Minor, t.key, rate)})
		}
	}
	return out, nil
}

// validateUnified allows v2 interface files of a controller by name: one
// path element of the form CONTROLLER.KNOB, never the cgroup core's own
// files (cgroup.procs would move host processes in, cgroup.kill end them).
func validateUnified(u map[string]string) error {
	for key, value := range u {
		controller, knob, ok := strings.Cut(key, ".")
		// The controller's name is also written, as "+NAME", into the
		// parents' cgroup.subtree_control (enableV2Controllers): a name
		// with a space or a newline in it ("memory -cpu") would take a
		// controller away from every sibling cgroup there.
		if !ok || !controllerName(controller) || !knobName(knob) {
			return fmt.Errorf("oci: linux.resources.unified: %q is not a controller's file", key)
		}
		if controller == "cgroup" {
			return fmt.Errorf("oci: linux.resources.unified: %q is the cgroup core's, not a limit", key)
		}
		// A partition takes its cpus from every cgroup beside it, the
		// host's services included when the container's cgroup is at the
		// top: not a limit of the container's.
		if key == "cpuset.cpus.partition" || key == "cpuset.cpus.exclusive" {
			return fmt.Errorf("oci: linux.resources.unified: %q takes cpus from the cgroups beside the container's: refused", key)
		}
		if strings.ContainsRune(value, '\x00') || len(value) > 4096 {
			return fmt.Errorf("oci: linux.resources.unified: the value of %q is not a control file's", key)
		}
	}
	return nil
}

// controllerName reports whether s can be a cgroup controller's name
// (the kernel's are lower-case letters, digits and underscores).
func controllerName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// knobName reports whether s can be what follows a controller's name and
// its dot in an interface file's name ("max", "swap.max", "2MB.max",
// "cpus.partition"): letters, digits, underscores, dots and dashes, no
// empty part.
func knobName(s string) bool {
	for _, part := range strings.Split(s, ".") {
		if part == "" {
			return false
		}
		for _, r := range part {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
				return false
			}
		}
	}
	return true
}

// unifiedControllers are the controllers u's files belong to.
func unifiedControllers(u map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for key := range u {
		c, _, _ := strings.Cut(key, ".")
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// unifiedWrites are u's files (v2 only), each of which must exist: a
// controller not enabled, or a file the kernel does not have, is refused.
func unifiedWrites(dir string, u map[string]string) ([]cgroupWrite, error) {
	var out []cgroupWrite
	for key, value := range u {
		if _, err := os.Lstat(filepath.Join(dir, key)); err != nil {
			return nil, fmt.Errorf("linux.resources.unified: %s: this cgroup has no such file", key)
		}
		out = append(out, cgroupWrite{dir, key, value})
	}
	return out, nil
}
