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
			// made of the bind: resolv.conf, the hosts file (where the
			// image has one), then the bundle, last.
			r := run("run", "--image", ref, "--net", "allow=bound.test", "--secret", "TOKEN@bound.test", "--",
				"/bin/sh", "-c", "cat /run/egress/$(ls /run/egress | sort | tail -n 1)")
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

// takeGatewaySockets tries, from inside a sandbox, to bind every address
// the gateway listens on (plain, SO_REUSEADDR, SO_REUSEPORT, both, with
// IP_FREEBIND; IPv6 dual-stack over the wildcard ones), and looks for a
// sandbox process holding one of the gateway's sockets. It prints one
// line per success, then "checked".
const takeGatewaySockets = `import socket, errno, os
IP_FREEBIND = 15
RA = (socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
RP = (socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
FB = (socket.IPPROTO_IP, IP_FREEBIND, 1)
S, D = socket.SOCK_STREAM, socket.SOCK_DGRAM
def bind(fam, typ, addr, opts):
    s = socket.socket(fam, typ)
    try:
        for o in opts: s.setsockopt(*o)
        s.bind(addr)
        if typ == S: s.listen(1)
        return "bound"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
    finally:
        s.close()
targets = [(S, "127.0.0.1", 3128), (S, "0.0.0.0", 3128), (S, "127.0.0.1", 1080), (S, "0.0.0.0", 1080),
    (D, "127.0.0.53", 53), (D, "0.0.0.0", 53), (S, "127.0.0.53", 53), (S, "0.0.0.0", 80), (S, "127.100.0.1", 80),
    (S, "127.0.0.1", 443), (S, "0.0.0.0", 443)]
for typ, host, port in targets:
    for opts in ([], [RA], [RP], [RA, RP], [FB, RA, RP]):
        r = bind(socket.AF_INET, typ, (host, port), opts)
        if r not in ("EADDRINUSE", "EACCES"):
            print("took", host, port, typ, len(opts), r)
    if host == "0.0.0.0":
        s = socket.socket(socket.AF_INET6, typ)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        try:
            s.bind(("::", port))
            print("took [::]", port, "dual-stack")
        except OSError:
            pass
        s.close()
inodes = set()
for table in ("tcp", "udp"):
    for line in open("/proc/net/" + table).read().splitlines()[1:]:
        f = line.split()
        if int(f[1].split(":")[1], 16) in (3128, 1080, 53, 80, 443):
            inodes.add("socket:[%s]" % f[9])
if len(inodes) != 6:
    print("gateway sockets in the tables:", len(inodes))
for pid in os.listdir("/proc"):
    if not pid.isdigit(): continue
    try:
        fds = os.listdir("/proc/%s/fd" % pid)
    except OSError:
        continue
    for fd in fds:
        try:
            if os.readlink("/proc/%s/fd/%s" % (pid, fd)) in inodes:
                print("process", pid, "holds a gateway socket")
        except OSError:
            pass
print("checked")
`

// TestEgressSandboxCannotTakeTheGatewaysSockets: a sandbox cannot bind
// the proxies', the resolver's or the captured ports' addresses, however
// it sets its socket (the init sets no SO_REUSEPORT and the ports below
// 1024 need a capability the sandbox lacks), and no process of it holds
// a copy of the listeners the init handed to the gateway.
func TestEgressSandboxCannotTakeTheGatewaysSockets(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("needs python3")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		dir := sharedTempDir(t, ownedBy(m))
		cmd := command(m, "run", "--net", "allow=example.test", "--", "python3", "-c", takeGatewaySockets)
		cmd.Env = append(cmd.Env, "JAIL_AUDIT_LOG="+filepath.Join(dir, "audit.log"))
		r := runCmd(t, cmd)
		if r.code != 0 || r.stdout != "checked\n" {
			t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}
