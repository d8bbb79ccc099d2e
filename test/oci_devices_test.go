package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestOCIDeviceRulesAreEnforced: a container of runc's default
// configuration (deny every device, then allow its own) given CAP_MKNOD
// may make and open the nodes of its own devices and no other (a v1
// devices cgroup, or on v2 the eBPF program jail attaches); an update
// that allows one more device allows it, and one with containerd's rules
// again (deny all, no exception) takes it back but leaves the
// container's own devices; with cgroupsPath in systemd's form as in
// cgroupfs's; and delete leaves no cgroup.
func TestOCIDeviceRulesAreEnforced(t *testing.T) {
	m := asRoot
	if os.Geteuid() != 0 {
		t.Skip("jail oci with a cgroup needs root")
	}
	for _, c := range []struct {
		name, cgroupsPath string
		flags             []string
		dir               string // the container's cgroup below each hierarchy
	}{
		{"cgroupfs", "/jail-oci-test/devices", nil, "jail-oci-test/devices"},
		{"systemd", "jailtest-oci.slice:jail:devices", []string{"--systemd-cgroup"}, "jailtest.slice/jailtest-oci.slice/jail-devices.scope"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := ociRoot(t, m)
			bundle := ociBundle(t)
			spec := ociDefaultSpec([]string{"sleep", "1000"})
			caps := append(spec.Process.Capabilities.Bounding, "CAP_MKNOD")
			spec.Process.Capabilities = &specs.LinuxCapabilities{Bounding: caps, Effective: caps, Permitted: caps}
			spec.Linux.CgroupsPath = c.cgroupsPath
			data, err := json.Marshal(spec)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := os.Create(filepath.Join(bundle, "out"))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			oci := func(args ...string) result {
				return jail(t, m, append(append([]string{"oci", "--root", root}, c.flags...), args...)...)
			}
			t.Cleanup(func() { oci("delete", "--force", "box") })
			create := command(m, append(append([]string{"oci", "--root", root}, c.flags...), "create", "--bundle", bundle, "box")...)
			create.Stdout, create.Stderr = out, out
			if err := create.Run(); err != nil {
				b, _ := os.ReadFile(out.Name())
				t.Fatalf("create: %v: %s", err, b)
			}
			if r := oci("start", "box"); r.code != 0 {
				t.Fatalf("start: %d %s", r.code, r.stderr)
			}
			// Each line: what it tried, then ok or no.
			try := func(want string, script string) {
				t.Helper()
				r := oci("exec", "box", "sh", "-c", script)
				if r.code != 0 || r.stdout != want {
					t.Errorf("exec %q: exit %d, stdout %q, stderr %q; want %q", script, r.code, r.stdout, r.stderr, want)
				}
			}
			const probe = `try() { if "$@" 2>/dev/null; then echo "$* ok"; else echo "$* no"; fi; rm -f /tmp/n; }
try mknod /tmp/n c 1 3
try mknod /tmp/n c 1 1
try mknod /tmp/n b 7 0
try sh -c 'echo x >/dev/null'
try head -c1 /dev/zero
`
			own := "mknod /tmp/n c 1 3 ok\n"
			common := "sh -c echo x >/dev/null ok\nhead -c1 /dev/zero ok\n"
			// head prints the zero byte it read before its "ok".
			common = strings.Replace(common, "head -c1 /dev/zero ok", "\x00head -c1 /dev/zero ok", 1)
			try(own+"mknod /tmp/n c 1 1 no\nmknod /tmp/n b 7 0 no\n"+common, probe)

			update := func(rules string) {
				t.Helper()
				file := filepath.Join(bundle, "update.json")
				if err := os.WriteFile(file, []byte(`{"devices":`+rules+`}`), 0o644); err != nil {
					t.Fatal(err)
				}
				if r := oci("update", "--resources", file, "box"); r.code != 0 {
					t.Fatalf("update %s: %d %s", rules, r.code, r.stderr)
				}
			}
			update(`[{"allow":true,"type":"c","major":1,"minor":1,"access":"m"}]`)
			try(own+"mknod /tmp/n c 1 1 ok\nmknod /tmp/n b 7 0 no\n"+common, probe)
			update(`[{"allow":false,"access":"rwm"}]`)
			try(own+"mknod /tmp/n c 1 1 no\nmknod /tmp/n b 7 0 no\n"+common, probe)

			if r := oci("delete", "--force", "box"); r.code != 0 {
				t.Fatalf("delete: %d %s", r.code, r.stderr)
			}
			left, _ := filepath.Glob("/sys/fs/cgroup/*/" + c.dir)
			if more, _ := filepath.Glob("/sys/fs/cgroup/" + c.dir); len(more) > 0 {
				left = append(left, more...)
			}
			top := strings.Split(c.dir, "/")[0]
			for _, p := range []string{"/sys/fs/cgroup/*/" + top, "/sys/fs/cgroup/" + top} {
				more, _ := filepath.Glob(p)
				left = append(left, more...)
			}
			if len(left) > 0 {
				t.Errorf("cgroups left after delete: %v", left)
			}
		})
	}
}
