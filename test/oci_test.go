package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/runtime-spec/specs-go/features"
)

// The OCI runtime's command line (jail oci, docs/oci.md) where it needs
// no container role: what containerd's shim meets on unknown containers,
// bad flags and refused bundles. Every failure is one line and status 1,
// as with runc, and changes nothing.

// ociRoot is a state root for mode m that does not exist yet, under a
// directory of m's user.
func ociRoot(t *testing.T, m mode) string {
	var owner *account
	if m.rootless {
		owner = rootless
	}
	return filepath.Join(sharedTempDir(t, owner), "state")
}

// expectOneLineFailure checks a failed jail oci: status 1, nothing on
// stdout, one line on stderr that contains want.
func expectOneLineFailure(t *testing.T, r result, want string) {
	t.Helper()
	if r.code != 1 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "jail: oci") || !strings.Contains(r.stderr, want) {
		t.Errorf("status %d, stdout %q, stderr %q; want status 1 and one line with %q", r.code, r.stdout, r.stderr, want)
	}
}

func TestOCIVersionAndFeatures(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		out := mustRun(t, m, "oci", "--version")
		if !strings.HasPrefix(out, "jail oci version ") || !strings.Contains(out, "\nspec: "+specs.Version+"\n") {
			t.Errorf("--version: %q", out)
		}
		var f features.Features
		if err := json.Unmarshal([]byte(mustRun(t, m, "oci", "features")), &f); err != nil {
			t.Fatalf("features: %v", err)
		}
		if f.OCIVersionMax != specs.Version || f.Linux == nil || f.Linux.Seccomp == nil || !*f.Linux.Seccomp.Enabled {
			t.Errorf("features: %+v", f)
		}
	})
	// Installed as jail-runc, for the shim's BinaryName.
	dir := sharedTempDir(t, nil)
	runtime := filepath.Join(dir, "jail-runc")
	if err := os.Symlink(jailBin, runtime); err != nil {
		t.Fatal(err)
	}
	r := runCmd(t, programAs(asRootless, runtime, "-v"))
	if r.code != 0 || !strings.HasPrefix(r.stdout, "jail-runc version ") {
		t.Errorf("jail-runc -v: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

func TestOCIUnknownContainers(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		root := ociRoot(t, m)
		for _, args := range [][]string{
			{"state", "nothere"},
			{"start", "nothere"},
			{"kill", "nothere", "KILL"},
			{"kill", "--all", "nothere", "9"},
			{"delete", "nothere"},
			{"pause", "nothere"},
			{"resume", "nothere"},
			{"ps", "--format", "json", "nothere"},
		} {
			r := jail(t, m, append([]string{"oci", "--root", root}, args...)...)
			expectOneLineFailure(t, r, "jail: oci "+args[0]+": container does not exist")
		}
		if r := jail(t, m, "oci", "--root", root, "delete", "--force", "nothere"); r.code != 0 {
			t.Errorf("delete --force of nothing: %d %s", r.code, r.stderr)
		}
		if r := jail(t, m, "oci", "--root", root, "list", "--format", "json"); r.code != 0 || r.stdout != "[]\n" {
			t.Errorf("list: %d %q %s", r.code, r.stdout, r.stderr)
		}
		if _, err := os.Stat(root); !os.IsNotExist(err) {
			t.Errorf("commands on unknown containers made the root: %v", err)
		}
	})
}

func TestOCIBadCommandLines(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		root := ociRoot(t, m)
		cases := []struct {
			args []string
			want string
		}{
			{[]string{"--bogus", "state", "x"}, "jail: oci: flag provided but not defined: -bogus"},
			{[]string{"--root", root, "--log-format", "yaml", "state", "x"}, `unknown log-format "yaml"`},
			{[]string{"--root", root, "create", "--bogus", "x"}, "jail: oci create: flag provided but not defined: -bogus"},
			{[]string{"--root", root, "create"}, `"create" requires exactly 1 argument(s)`},
			{[]string{"--root", root, "kill", "x", "SIGNOPE"}, `unknown signal "SIGNOPE"`},
			{[]string{"--root", root, "state", "../x"}, `invalid id format: "../x"`},
			{[]string{"--root", root, "frob", "x"}, `no such command "frob"`},
			{[]string{"--root", root, "exec", "--process", "/p.json", "--detach", "x"}, "jail: oci exec: not implemented yet"},
		}
		for _, c := range cases {
			expectOneLineFailure(t, jail(t, m, append([]string{"oci"}, c.args...)...), c.want)
		}
		if _, err := os.Stat(root); !os.IsNotExist(err) {
			t.Errorf("bad command lines made the root: %v", err)
		}
	})
}

// TestOCICreateRefusesBundlesJailCannotRealise: each is refused at create
// with one line (in the JSON log too, where the shim reads it), and
// nothing is made: no state, no cgroup.
func TestOCICreateRefusesBundlesJailCannotRealise(t *testing.T) {
	cases := []struct {
		name   string
		change func(*specs.Spec)
		want   string
	}{
		{"relative mount destination", func(s *specs.Spec) {
			s.Mounts = []specs.Mount{{Destination: "proc", Type: "proc", Source: "proc"}}
		}, `mounts[0].destination "proc" is not an absolute path`},
		{"unknown namespace", func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: "spaceship"})
		}, `linux.namespaces: unknown type "spaceship"`},
		{"maps without a user namespace", func(s *specs.Spec) {
			s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 1000, Size: 1}}
		}, "linux.uidMappings and gidMappings need a user namespace"},
		{"hostname without uts", func(s *specs.Spec) {
			s.Hostname = "box"
			s.Linux.Namespaces = []specs.LinuxNamespace{{Type: "mount"}}
		}, "unable to set hostname without a private UTS namespace"},
		{"apparmor", func(s *specs.Spec) { s.Process.ApparmorProfile = "docker-default" }, "process.apparmorProfile is not supported"},
		{"intelRdt", func(s *specs.Spec) { s.Linux.IntelRdt = &specs.LinuxIntelRdt{ClosID: "x"} }, "linux.intelRdt is not supported"},
		{"seccomp notify", func(s *specs.Spec) {
			s.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, ListenerPath: "/run/agent.sock"}
		}, "linux.seccomp: notifications (SCMP_ACT_NOTIFY, listenerPath) are not supported"},
		{"joined mount namespace", func(s *specs.Spec) {
			s.Linux.Namespaces = []specs.LinuxNamespace{{Type: "mount", Path: "/proc/1/ns/mnt"}}
		}, "linux.namespaces: joining a mount namespace by path is not supported"},
		{"host sysctl", func(s *specs.Spec) { s.Linux.Sysctl = map[string]string{"kernel.panic": "0"} }, `linux.sysctl: "kernel.panic" is not in a separate kernel namespace`},
		{"createContainer hook", func(s *specs.Spec) {
			s.Hooks = &specs.Hooks{CreateContainer: []specs.Hook{{Path: "/bin/true"}}}
		}, "hooks.createContainer"},
		{"terminal without a console socket", func(s *specs.Spec) { s.Process.Terminal = true }, "process.terminal needs --console-socket"},
	}
	forEachMode(t, func(t *testing.T, m mode) {
		var owner *account
		if m.rootless {
			owner = rootless
		}
		dir := sharedTempDir(t, owner)
		root := filepath.Join(dir, "state")
		for i, c := range cases {
			spec := &specs.Spec{
				Version: specs.Version,
				Root:    &specs.Root{Path: "rootfs"},
				Process: &specs.Process{Args: []string{"/bin/sh"}, Cwd: "/"},
				Linux:   &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: "mount"}, {Type: "pid"}, {Type: "uts"}, {Type: "ipc"}}},
			}
			c.change(spec)
			bundle := filepath.Join(dir, "bundle"+string(rune('a'+i)))
			if err := os.MkdirAll(filepath.Join(bundle, "rootfs"), 0o755); err != nil {
				t.Fatal(err)
			}
			data, _ := json.Marshal(spec)
			if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			log := filepath.Join(dir, "log"+string(rune('a'+i))+".json")
			r := jail(t, m, "oci", "--root", root, "--log", log, "--log-format", "json", "create", "--bundle", bundle, "--pid-file", filepath.Join(dir, "pid"), "box")
			expectOneLineFailure(t, r, "jail: oci create: "+c.want)
			b, err := os.ReadFile(log)
			var entry struct{ Level, Msg string }
			if err != nil || json.Unmarshal(b, &entry) != nil || entry.Level != "error" || entry.Msg+"\n" != r.stderr {
				t.Errorf("%s: log %q (%v)", c.name, b, err)
			}
			if _, err := os.Stat(root); !os.IsNotExist(err) {
				t.Errorf("%s: the root was made", c.name)
			}
			if _, err := os.Stat(filepath.Join(dir, "pid")); !os.IsNotExist(err) {
				t.Errorf("%s: a pid file was written", c.name)
			}
		}
		for _, h := range []string{"memory", "pids", "unified"} {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", h, "jail-oci", "box")); !os.IsNotExist(err) {
				t.Errorf("a cgroup was made in %s", h)
			}
		}
	})
}
