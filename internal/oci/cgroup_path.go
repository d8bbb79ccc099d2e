package oci

import (
	"fmt"
	"path"
	"strings"
)

// CgroupPath returns the container's cgroup path below each hierarchy's
// root from linux.cgroupsPath: in cgroupfs's form an absolute path ("" is
// /jail-oci/ID, and a relative path is below /jail-oci: the spec leaves
// where to the runtime, and jail never goes below the cgroup it runs in,
// which may be the machine's own); with --systemd-cgroup, systemd's "slice:prefix:name",
// mapped to the path systemd would give that unit (jail makes the
// directories itself; it calls no systemd).
func CgroupPath(cgroupsPath, id string, systemd bool) (string, error) {
	if hasNUL(cgroupsPath) {
		return "", fmt.Errorf("oci: linux.cgroupsPath %q holds a NUL byte", cgroupsPath)
	}
	var p string
	switch {
	case systemd:
		var err error
		if p, err = systemdPath(cgroupsPath, id); err != nil {
			return "", err
		}
	case cgroupsPath == "":
		p = "/jail-oci/" + id
	case strings.HasPrefix(cgroupsPath, "/"):
		p = cgroupsPath
	case strings.Count(cgroupsPath, ":") == 2:
		return "", fmt.Errorf("oci: linux.cgroupsPath %q is in systemd's form: pass --systemd-cgroup", cgroupsPath)
	default:
		if strings.HasPrefix(path.Clean(cgroupsPath), "..") {
			return "", fmt.Errorf("oci: linux.cgroupsPath %q leaves the runtime's cgroup", cgroupsPath)
		}
		p = "/jail-oci/" + cgroupsPath
	}
	p = path.Clean(p)
	if p == "/" {
		return "", fmt.Errorf("oci: linux.cgroupsPath %q is the root cgroup", cgroupsPath)
	}
	return p, nil
}

// systemdPath maps "slice:prefix:name" to a path: the slice expanded as
// systemd nests slices (a-b.slice in a.slice), then prefix-name.scope (or
// name itself when it is a slice).
func systemdPath(s, id string) (string, error) {
	if s == "" {
		s = "system.slice:jail-oci:" + id
	}
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return "", fmt.Errorf("oci: linux.cgroupsPath %q is not slice:prefix:name (--systemd-cgroup)", s)
	}
	slice, prefix, name := parts[0], parts[1], parts[2]
	if slice == "" {
		slice = "system.slice"
	}
	dir, err := expandSlice(slice)
	if err != nil {
		return "", fmt.Errorf("oci: linux.cgroupsPath %q: %v", s, err)
	}
	if name == "" || strings.Contains(name, "/") || strings.Contains(prefix, "/") {
		return "", fmt.Errorf("oci: linux.cgroupsPath %q: bad unit name", s)
	}
	unit := name
	if !strings.HasSuffix(name, ".slice") {
		if prefix != "" {
			unit = prefix + "-" + name
		}
		unit += ".scope"
	}
	if unit == "." || unit == ".." {
		return "", fmt.Errorf("oci: linux.cgroupsPath %q: bad unit name", s)
	}
	return dir + "/" + unit, nil
}

// expandSlice turns a-b-c.slice into /a.slice/a-b.slice/a-b-c.slice
// (-.slice is the root).
func expandSlice(slice string) (string, error) {
	base, ok := strings.CutSuffix(slice, ".slice")
	if !ok || strings.Contains(base, "/") {
		return "", fmt.Errorf("%q is not a slice", slice)
	}
	if base == "-" {
		return "", nil
	}
	if base == "" || strings.HasPrefix(base, "-") || strings.HasSuffix(base, "-") || strings.Contains(base, "--") {
		return "", fmt.Errorf("%q is not a slice", slice)
	}
	var out, prefix string
	for _, part := range strings.Split(base, "-") {
		prefix += part
		out += "/" + prefix + ".slice"
		prefix += "-"
	}
	return out, nil
}
