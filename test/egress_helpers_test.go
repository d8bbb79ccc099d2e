package test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jail-sandbox/jail/test/internal/netns"
)

// egressNet is a network namespace a test makes for the egress gateway's
// tests: jail runs in it (so the gateway's dials stay in it), the test's
// servers listen on its loopback, and its own /etc/hosts names them (the
// gateway resolves on the host side). Nothing of it reaches the machine's
// network.
type egressNet struct {
	t     *testing.T
	name  string
	ns    *os.File // the namespace, for setns
	hosts string   // the hosts file bound over /etc/hosts for jail
	dir   string   // holds the audit log, readable by the rootless user
}

var egressNets atomic.Int64

// newEgressNet makes the namespace, with its loopback up, and a hosts file
// giving each name in names its address (all in 127.0.0.0/8).
func newEgressNet(t *testing.T, m mode, names map[string]string) *egressNet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the egress tests make network namespaces: run as root")
	}
	for _, tool := range []string{"nsenter", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (util-linux)", tool)
		}
	}
	name := fmt.Sprintf("jailtest-%d", egressNets.Add(1))
	ns, err := netns.New()
	if err != nil {
		t.Fatalf("network namespace: %v", err)
	}
	t.Cleanup(func() { ns.Close() })
	owner := (*account)(nil)
	if m.rootless {
		owner = rootless
	}
	dir := sharedTempDir(t, owner)
	if owner != nil {
		if err := os.Chown(dir, owner.uid, owner.gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var hosts strings.Builder
	hosts.WriteString("127.0.0.1 localhost\n")
	for n, addr := range names {
		fmt.Fprintf(&hosts, "%s %s\n", addr, n)
	}
	hostsFile := filepath.Join(workDir, name+".hosts")
	if err := os.WriteFile(hostsFile, []byte(hosts.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(hostsFile) })
	return &egressNet{t: t, name: name, ns: ns, hosts: hostsFile, dir: dir}
}

// listen opens a listener inside the namespace; the test serves it from
// anywhere.
func (n *egressNet) listen(network, addr string) net.Listener {
	n.t.Helper()
	l, err := netns.Listen(n.ns, network, addr)
	if err != nil {
		n.t.Fatalf("listen %s %s in %s: %v", network, addr, n.name, err)
	}
	n.t.Cleanup(func() { l.Close() })
	return l
}

// auditLog is the audit log jail writes in the namespace's tests.
func (n *egressNet) auditLog() string { return filepath.Join(n.dir, "audit.log") }

// command is command(m, args...) run inside the namespace, with its
// hosts file as /etc/hosts and its audit log.
func (n *egressNet) command(m mode, args ...string) *exec.Cmd {
	inner := command(m, args...)
	// nsenter enters the namespace (by the test's own descriptor of it),
	// unshare -m makes a private mount namespace for the hosts file.
	script := `mount --bind "$1" /etc/hosts && shift && exec "$@"`
	netns := fmt.Sprintf("--net=/proc/%d/fd/%d", os.Getpid(), n.ns.Fd())
	full := append([]string{netns, "unshare", "-m", "sh", "-c", script, "sh", n.hosts, inner.Path}, inner.Args[1:]...)
	cmd := exec.Command("nsenter", full...)
	cmd.Env = append(inner.Env, "JAIL_AUDIT_LOG="+n.auditLog())
	return cmd
}

// jail runs jail with args in the namespace and waits for it.
func (n *egressNet) jail(m mode, args ...string) result {
	n.t.Helper()
	return runCmd(n.t, n.command(m, args...))
}

// netRecord is one line of the audit log, the fields the tests read.
type netRecord struct {
	Event   string `json:"event"`
	Sandbox string `json:"sandbox"`
	Via     string `json:"via"`
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Address string `json:"address"`
	Method  string `json:"method"`
	Path    string `json:"path"`
	QType   string `json:"qtype"`
	RCode   string `json:"rcode"`
	Verdict string `json:"verdict"`
	Rule    string `json:"rule"`
	Why     string `json:"why"`
	PID     int    `json:"pid"`
	Exec    int    `json:"exec"`
	Up      int64  `json:"bytes_up"`
	Down    int64  `json:"bytes_down"`
}

// records reads the audit log's net and dns lines.
func (n *egressNet) records() []netRecord { return n.readRecords(false) }

// readRecords reads the audit log's net and dns lines, and its exec lines
// when all.
func (n *egressNet) readRecords(all bool) []netRecord {
	n.t.Helper()
	f, err := os.Open(n.auditLog())
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		n.t.Fatal(err)
	}
	defer f.Close()
	var out []netRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r netRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			n.t.Fatalf("audit log: %v: %q", err, sc.Text())
		}
		if r.Event == "net" || r.Event == "dns" || (all && r.Event == "exec") {
			out = append(out, r)
		}
	}
	return out
}
