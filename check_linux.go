package jail

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/cgroups"
	"github.com/jail-sandbox/jail/internal/probe"
	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/namespaces"
	"github.com/jail-sandbox/jail/seccomp"
)

// Feature is one isolation feature as this host gives it to this user.
type Feature struct {
	Name      string
	Available bool
	// Detail says how the feature is available, or why not.
	Detail string
	// Required features must be available for Run to work.
	Required bool
}

// Check tries each isolation feature for the current user. It changes
// nothing on the host: every probe runs in namespaces that vanish with it.
func Check() []Feature {
	if err := startedWithoutInit(); err != nil {
		return []Feature{{Name: "init", Detail: err.Error(), Required: true}}
	}
	id, err := namespaces.ForCaller(nil, 0, 0)
	if err != nil {
		return []Feature{{Name: "identity", Detail: err.Error(), Required: true}}
	}
	var out []Feature
	userns := probeFeature(id, unix.CLONE_NEWUSER, "namespace")
	userns.Name, userns.Required = "user namespaces", true
	if userns.Available {
		userns.Detail = "sandbox root maps to host uid " + fmt.Sprint(id.UIDMap[0].HostID)
		if !id.Rootless {
			userns.Detail += fmt.Sprintf("-%d (an unprivileged range)", id.UIDMap[0].HostID+id.UIDMap[0].Size-1)
		} else {
			userns.Detail += " (you)"
			if sub := namespaces.SubIDsDetail(); sub != "" {
				userns.Detail += "; " + sub
			}
		}
	}
	out = append(out, userns)
	for _, ns := range []struct {
		name string
		flag uintptr
	}{
		{"mount namespace", unix.CLONE_NEWNS}, {"pid namespace", unix.CLONE_NEWPID},
		{"network namespace", unix.CLONE_NEWNET}, {"ipc namespace", unix.CLONE_NEWIPC},
		{"uts namespace", unix.CLONE_NEWUTS}, {"cgroup namespace", unix.CLONE_NEWCGROUP},
	} {
		f := probeFeature(id, unix.CLONE_NEWUSER|ns.flag, "namespace")
		f.Name, f.Required = ns.name, true
		out = append(out, f)
	}
	ovl := probeFeature(id, unix.CLONE_NEWUSER|unix.CLONE_NEWNS, "overlay")
	ovl.Name = "overlayfs in a user namespace"
	if !ovl.Available {
		ovl.Detail += " (--rootfs and --image need it)"
	}
	out = append(out, ovl)
	out = append(out, checkCgroups(), checkSeccomp(), checkIDMap(id), checkLandlock())
	return out
}

// CanRun reports whether every required feature is available.
func CanRun(features []Feature) bool {
	for _, f := range features {
		if f.Required && !f.Available {
			return false
		}
	}
	return true
}

func probeFeature(id namespaces.Identity, flags uintptr, what string) Feature {
	attr := id.SysProcAttr()
	attr.Cloneflags = flags
	var stderr bytes.Buffer
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: []string{probe.Arg, what}, Env: []string{}, SysProcAttr: attr, Stderr: &stderr}
	if err := cmd.Run(); err != nil {
		why := strings.TrimSpace(stderr.String())
		if why == "" {
			why = err.Error()
			if pe, ok := err.(*os.PathError); ok {
				why = pe.Err.Error()
			}
		}
		return Feature{Detail: "not available: " + why}
	}
	return Feature{Available: true, Detail: "available"}
}

func checkCgroups() Feature {
	f := Feature{Name: "cgroups"}
	layout := "v1"
	var st unix.Statfs_t
	if unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		layout = "v2"
	} else if unix.Statfs("/sys/fs/cgroup/unified", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		layout = "v1 (hybrid: the v2 hierarchy holds no controllers)"
	}
	l, err := cgroups.Detect()
	if l.Version == cgroups.None {
		f.Detail = fmt.Sprintf("not available: %s: %v; without a cgroup, %s", layout, err, FallbackLimits(true, false))
		return f
	}
	f.Available = true
	f.Detail = fmt.Sprintf("available: %s; memory (swap included), cpu and pids limits, OOM and usage reporting", layout)
	if l.Above != "" && os.Geteuid() != 0 {
		f.Detail += " in your delegated cgroup " + l.Above
	}
	return f
}

func checkSeccomp() Feature {
	f := Feature{Name: "seccomp"}
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		f.Detail = "not available: " + err.Error()
		return f
	}
	f.Available = true
	f.Detail = "available (built-in profiles compiled at build time; user profiles resolved and compiled with libseccomp by the tools program and cached in " + seccomp.CacheDir(nil) + ")"
	if programs.Version(programs.Tools) == "" {
		f.Detail = "available (built-in profiles only: this build has no tools program to compile user profiles)"
	}
	return f
}

func checkIDMap(id namespaces.Identity) Feature {
	f := Feature{Name: "id-mapped mounts"}
	if id.Rootless {
		f.Available = true
		f.Detail = "not needed: rootless, files you share already belong to you"
		return f
	}
	dir, err := os.MkdirTemp("", "jail-check-")
	if err != nil {
		f.Detail = "not available: " + err.Error()
		return f
	}
	defer os.Remove(dir)
	ns, err := namespaces.MappingUserns(
		[]syscall.SysProcIDMap{{ContainerID: 0, HostID: namespaces.HostRangeStart, Size: 1}},
		[]syscall.SysProcIDMap{{ContainerID: 0, HostID: namespaces.HostRangeStart, Size: 1}})
	if err != nil {
		f.Detail = "not available: " + err.Error()
		return f
	}
	defer ns.Close()
	tree, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		f.Detail = "not available: open_tree: " + err.Error()
		return f
	}
	defer unix.Close(tree)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		f.Detail = "not available on " + os.TempDir() + ": " + err.Error() +
			" (a writable --workspace or --mount there runs the sandbox user as the directory's owner instead)"
		return f
	}
	f.Available = true
	f.Detail = "available (on " + os.TempDir() + ")"
	return f
}

func checkLandlock() Feature {
	f := Feature{Name: "landlock"}
	const createRulesetVersion = 1
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, createRulesetVersion)
	if errno != 0 {
		f.Detail = "not available: " + errno.Error()
		return f
	}
	f.Available = true
	f.Detail = fmt.Sprintf("available (ABI %d; jail does not use it yet)", abi)
	return f
}
