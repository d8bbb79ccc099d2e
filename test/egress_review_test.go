package test

import (
	"archive/tar"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// egressSecretCmd is jail with args in mode m against the image store at
// store, with a secret TOKEN defined in cfg (its value from $SECRET_SRC)
// and the audit log in dir.
func egressSecretCmd(m mode, store, cfg, dir string, args ...string) *exec.Cmd {
	cmd := storeCommand(m, store, args...)
	cmd.Env = append(cmd.Env, "XDG_CONFIG_HOME="+cfg, "SECRET_SRC="+secretValue, "JAIL_AUDIT_LOG="+filepath.Join(dir, "audit.log"))
	cmd.Dir = dir
	return cmd
}

// TestEgressTrustBundleCopiesNoKernelFile: an image whose trust bundle
// (/etc/ssl/certs/ca-certificates.crt) is a symlink into /proc or /sys
// gets only the gateway's authority in the bundle the init writes. The
// init copies the root's bundle before it pivots and before it masks
// anything, as sandbox root (host root in root mode): following such a
// link it read the host's mount table (/proc/self/mountinfo, before the
// pivot), its own environment, or files the sandbox's masks hide
// (/proc/timer_list, /proc/keys, /sys/firmware), into a file the
// sandbox reads.
func TestEgressTrustBundleCopiesNoKernelFile(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		owner := ownedBy(m)
		store := storeDir(t, m)
		dir := sharedTempDir(t, owner)
		cfg := filepath.Join(dir, "config")
		run := func(args ...string) result {
			t.Helper()
			return runCmd(t, egressSecretCmd(m, store, cfg, dir, args...))
		}
		if r := run("secret", "add", "TOKEN", "--from-env", "SECRET_SRC"); r.code != 0 {
			t.Fatalf("secret add: %d %s", r.code, r.stderr)
		}
		targets := []string{"/proc/self/mountinfo", "/proc/self/environ", "/proc/1/mountinfo", "/proc/timer_list", "/proc/keys", "/sys/kernel/uevent_seqnum"}
		for i, target := range targets {
			entries := append(busyboxEntries(t),
				entry{name: "etc/ssl/", typ: tar.TypeDir}, entry{name: "etc/ssl/certs/", typ: tar.TypeDir},
				entry{name: "etc/ssl/certs/ca-certificates.crt", typ: tar.TypeSymlink, link: target})
			ref := fmt.Sprintf("localhost/bundle%d:1", i)
			layout := filepath.Join(dir, fmt.Sprintf("bundle%d", i))
			writeLayout(t, layout, ref, image(t, nil, nil, layerOf(t, entries)))
			if r := run("image", "import", layout); r.code != 0 {
				t.Fatalf("import: %s", r.stderr)
			}
			// What the init wrote is under /run/egress whatever the link
			// made of the bind: resolv.conf, then the bundle.
			r := run("run", "--image", ref, "--net", "allow=bound.test", "--secret", "TOKEN@bound.test", "--",
				"/bin/sh", "-c", "cat /run/egress/file-1")
			if r.code != 0 {
				t.Errorf("%s: exit %d: %s", target, r.code, r.stderr)
				continue
			}
			if !strings.HasPrefix(r.stdout, "-----BEGIN CERTIFICATE-----") || strings.Count(r.stdout, "-----BEGIN") != 1 {
				t.Errorf("bundle linked to %s: the sandbox's bundle holds more than the gateway's authority:\n%.1500s", target, r.stdout)
			}
		}
	})
}
