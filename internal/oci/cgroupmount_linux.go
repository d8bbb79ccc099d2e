package oci

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/config"
)

// expandCgroupMount expands a mount of type "cgroup" (every containerd spec has
// one at /sys/fs/cgroup) into what the host's layout needs, as runc does:
// on a unified host, one cgroup2 mount; on a v1 or hybrid one, a tmpfs with
// one cgroup mount per v1 hierarchy the host has, named as the host names
// it, then the tmpfs made read-only when the mount asked for it. In a new
// cgroup namespace each hierarchy shows the container's cgroup as its
// root; in the host's, the host's tree, read-only unless asked otherwise.
//
// In a user namespace (the container's mount namespace is then its), the
// kernel mounts a v1 hierarchy, as it does cgroup2, only in a cgroup
// namespace made there (owned by it): without one the host's /sys/fs/cgroup
// is bound instead (recursively, with the mount's read-only and other flags
// on every mount of it), as runc falls back to. The container then sees the
// host's tree, which its user may read on the host, and may write only what
// is delegated to it. With one it gets its namespace's mounts as above: a
// bind would show the whole host's tree to a container that asked to see
// its own cgroup only.
func expandCgroupMount(b *Bundle, m config.ContainerMount, userns, newCgroupNS bool) ([]config.ContainerMount, error) {
	_, v2, err := cgroupMounts()
	if err != nil {
		return nil, fmt.Errorf("the host's cgroups: %w", err)
	}
	if userns && !newCgroupNS {
		bind, err := translateMount(b, specs.Mount{Destination: m.Destination, Type: "bind", Source: cgroupRoot, Options: []string{"rbind"}})
		if err != nil {
			return nil, err
		}
		bind.Flags |= m.Flags & (unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
		return []config.ContainerMount{bind}, nil
	}
	if v2 {
		m.Type, m.Source, m.Data = "cgroup2", "cgroup", ""
		return []config.ContainerMount{m}, nil
	}
	hierarchies, err := hostV1Hierarchies()
	if err != nil {
		return nil, err
	}
	tmpfs := config.ContainerMount{
		Destination: m.Destination, Type: "tmpfs", Source: "tmpfs",
		Flags: m.Flags &^ unix.MS_RDONLY, Data: "mode=755",
	}
	out := []config.ContainerMount{tmpfs}
	for _, h := range hierarchies {
		out = append(out, config.ContainerMount{
			Destination: filepath.Join(m.Destination, h.name), Type: "cgroup", Source: "cgroup",
			Flags: m.Flags, Data: h.options,
		})
	}
	if m.Flags&unix.MS_RDONLY != 0 {
		tmpfs.Flags |= unix.MS_REMOUNT | unix.MS_RDONLY
		tmpfs.Data = ""
		out = append(out, tmpfs)
	}
	return out, nil
}

// hierarchy is one v1 cgroup hierarchy of the host: the name of its mount
// point under /sys/fs/cgroup and its controllers ("cpu,cpuacct",
// "name=systemd").
type hierarchy struct{ name, options string }

// hostV1Hierarchies reads the host's v1 hierarchies under /sys/fs/cgroup from
// this process's mountinfo.
func hostV1Hierarchies() ([]hierarchy, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("the host's cgroups: %w", err)
	}
	defer f.Close()
	var out []hierarchy
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT POINT OPTS [TAGS...] - TYPE SOURCE SUPER
		fields := strings.Fields(sc.Text())
		dash := -1
		for i, f := range fields {
			if f == "-" {
				dash = i
				break
			}
		}
		if dash < 5 || dash+3 >= len(fields) || fields[dash+1] != "cgroup" {
			continue
		}
		point := fields[4]
		if filepath.Dir(point) != cgroupRoot || seen[point] {
			continue
		}
		seen[point] = true
		var controllers []string
		for _, o := range strings.Split(fields[dash+3], ",") {
			switch {
			case o == "rw" || o == "ro" || strings.HasPrefix(o, "release_agent=") || o == "clone_children" ||
				o == "noprefix" || o == "xattr" || o == "cpuset_v2_mode" || o == "favordynmods":
			default:
				controllers = append(controllers, o)
			}
		}
		if len(controllers) > 0 {
			out = append(out, hierarchy{name: filepath.Base(point), options: strings.Join(controllers, ",")})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("the host's cgroups: %w", err)
	}
	return out, nil
}
