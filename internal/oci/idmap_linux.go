package oci

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// writeIDMaps writes the container's uid and gid maps for the user
// namespace of process pid (the role, which made it and waits). As root
// they are written directly. Otherwise a map of the caller's own ids alone
// is written directly too (with setgroups denied, as the kernel asks),
// and anything more through newuidmap and newgidmap, which check the
// caller's subordinate ids.
func writeIDMaps(pid int, l *specs.Linux) error {
	proc, err := unix.Open("/proc/"+strconv.Itoa(pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("id maps: %w", err)
	}
	defer unix.Close(proc)
	uid, gid := os.Geteuid(), os.Getegid()
	switch {
	case uid == 0:
	case ownOnly(l.UIDMappings, uid) && ownOnly(l.GIDMappings, gid):
		if err := writeProcFile(proc, "setgroups", "deny"); err != nil {
			return fmt.Errorf("id maps: %w", err)
		}
	default:
		if err := runIDMapper("newuidmap", pid, l.UIDMappings); err != nil {
			return err
		}
		return runIDMapper("newgidmap", pid, l.GIDMappings)
	}
	if err := writeProcFile(proc, "uid_map", formatIDMap(l.UIDMappings)); err != nil {
		return fmt.Errorf("id maps: uid_map: %w", err)
	}
	if err := writeProcFile(proc, "gid_map", formatIDMap(l.GIDMappings)); err != nil {
		return fmt.Errorf("id maps: gid_map: %w", err)
	}
	return nil
}

func ownOnly(maps []specs.LinuxIDMapping, id int) bool {
	return len(maps) == 1 && maps[0].Size == 1 && int(maps[0].HostID) == id
}

func formatIDMap(maps []specs.LinuxIDMapping) string {
	var b strings.Builder
	for _, m := range maps {
		fmt.Fprintf(&b, "%d %d %d\n", m.ContainerID, m.HostID, m.Size)
	}
	return b.String()
}

// writeProcFile writes data to name in /proc/PID (proc) in one write, as
// the kernel takes the id maps.
func writeProcFile(proc int, name, data string) error {
	fd, err := unix.Openat(proc, name, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	n, err := unix.Write(fd, []byte(data))
	if err == nil && n != len(data) {
		err = errors.New("short write")
	}
	return err
}

func runIDMapper(tool string, pid int, maps []specs.LinuxIDMapping) error {
	path, err := exec.LookPath(tool)
	if err != nil {
		return fmt.Errorf("id maps: mapping more than your own id needs %s (uidmap): %w", tool, err)
	}
	args := []string{strconv.Itoa(pid)}
	for _, m := range maps {
		args = append(args, strconv.FormatUint(uint64(m.ContainerID), 10), strconv.FormatUint(uint64(m.HostID), 10), strconv.FormatUint(uint64(m.Size), 10))
	}
	cmd := exec.Command(path, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("id maps: %s: %v: %s", tool, err, strings.TrimSpace(out.String()))
	}
	return nil
}
