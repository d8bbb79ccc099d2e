package test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jail-sandbox/jail/api"
	"github.com/jail-sandbox/jail/internal/programs"
)

// TestEgressRefusesBadNetSpecs: a --net value or rule the gateway would
// refuse is one jail: line naming it, exit 125, and nothing runs.
func TestEgressRefusesBadNetSpecs(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		n := newEgressNet(t, m, nil)
		for _, c := range []struct {
			net, says string
		}{
			{"bogus", `jail: --net: "bogus": want none or allow=RULE[,RULE...]`},
			{"allow=*.com", `jail: --net allow=: rule "*.com": a wildcard over the public suffix "com"`},
			{"allow=*", `rule "*": * alone would match every host`},
			{"allow=https://example.com", "a URL"},
			{"allow=example.com/x", "a path"},
			{"allow=example.com\nx", "line break"},
		} {
			r := n.jail(m, "run", "--net", c.net, "--", "sh", "-c", "echo ran")
			if r.code != 125 || r.stdout != "" || !strings.Contains(r.stderr, c.says) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("--net %q: exit %d\nstdout: %q\nstderr: %q\nwant 125 and a line with %q", c.net, r.code, r.stdout, r.stderr, c.says)
			}
		}
		if recs := n.records(); len(recs) != 0 {
			t.Errorf("refused runs left audit lines: %+v", recs)
		}
	})
}

// TestEgressDNSAnswersOnlyAllowedNames: the sandbox's resolv.conf points at
// the gateway's resolver, which gives allowed names loopback addresses of
// its own range and NXDOMAIN to the rest, and every query is in the audit
// log with its verdict and rule.
func TestEgressDNSAnswersOnlyAllowedNames(t *testing.T) {
	if _, err := exec.LookPath("dig"); err != nil {
		t.Skip("needs dig (bind9-dnsutils)")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		n := newEgressNet(t, m, nil)
		r := n.jail(m, "run", "--net", "allow=allowed.test,**.wild.test", "--", "sh", "-c",
			"cat /etc/resolv.conf; dig +short allowed.test; dig +short a.b.wild.test; dig +short allowed.test; dig denied.test | grep -o 'status: [A-Z]*'; dig +short AAAA allowed.test | wc -l")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) < 5 || !strings.Contains(r.stdout, "nameserver 127.0.0.53") {
			t.Fatalf("output:\n%s", r.stdout)
		}
		tail := lines[len(lines)-5:]
		first, second, again := tail[0], tail[1], tail[2]
		if !strings.HasPrefix(first, "127.100.") || !strings.HasPrefix(second, "127.100.") || first == second || again != first {
			t.Errorf("answers %q %q %q: want two distinct 127.100.x.y, the first again for the same name", first, second, again)
		}
		if tail[3] != "status: NXDOMAIN" || tail[4] != "0" {
			t.Errorf("denied name: %q, AAAA answers %q: want NXDOMAIN and none", tail[3], tail[4])
		}
		var allowed, denied bool
		for _, rec := range n.records() {
			switch {
			case rec.Event == "dns" && rec.Host == "allowed.test" && rec.QType == "A" && rec.Verdict == "allowed" && rec.Rule == "allowed.test" && rec.Address == first && rec.PID > 0:
				allowed = true
			case rec.Event == "dns" && rec.Host == "denied.test" && rec.Verdict == "denied" && rec.RCode == "NXDOMAIN" && rec.Why == "no rule":
				denied = true
			}
		}
		if !allowed || !denied {
			t.Errorf("audit log lacks the allowed or the denied query: %+v", n.records())
		}
	})
}

// TestEgressDenialsOnStderrWithJSON: with --json the command's stderr gets
// one "jail: net: denied" line per denied destination.
func TestEgressDenialsOnStderrWithJSON(t *testing.T) {
	if _, err := exec.LookPath("dig"); err != nil {
		t.Skip("needs dig (bind9-dnsutils)")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		n := newEgressNet(t, m, nil)
		r := n.jail(m, "run", "--json", "--net", "allow=allowed.test", "--", "sh", "-c", "dig +short denied.test; dig +short denied.test; dig +short allowed.test")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if strings.Count(r.stderr, "jail: net: denied denied.test (no rule)\n") != 1 || strings.Contains(r.stderr, "allowed.test") {
			t.Errorf("stderr: %q: want one denial line for denied.test", r.stderr)
		}
		// What the sandbox names reaches the user's terminal escaped: a
		// CONNECT to a "host" holding a terminal escape.
		esc := `python3 -c '
import socket
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(b"CONNECT \x1b]0;owned\x07x.test:443 HTTP/1.1\r\nHost: x.test:443\r\n\r\n")
s.recv(4096)
'`
		r = n.jail(m, "run", "--json", "--net", "allow=allowed.test", "--", "sh", "-c", esc+"; dig +short bad.test")
		if strings.ContainsAny(r.stderr, "\x1b\x07") || !strings.Contains(r.stderr, "jail: net: denied bad.test") {
			t.Errorf("stderr %q: want the denials, no control byte", r.stderr)
		}
		// Without --json and with stderr not a terminal, the command's
		// stderr is its own.
		r = n.jail(m, "run", "--net", "allow=allowed.test", "--", "sh", "-c", "dig +short denied.test")
		if r.code != 0 || strings.Contains(r.stderr, "jail: net:") {
			t.Errorf("without --json: exit %d, stderr %q", r.code, r.stderr)
		}
	})
}

// TestEgressPersistentSandboxKeepsItsGateway: a sandbox made with --net
// allow= answers its execs' queries long after jail create exited, and
// its gateway goes with it.
func TestEgressPersistentSandboxKeepsItsGateway(t *testing.T) {
	if _, err := exec.LookPath("dig"); err != nil {
		t.Skip("needs dig (bind9-dnsutils)")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		n := newEgressNet(t, m, nil)
		state := sharedTempDir(t, ownerOf(m))
		with := func(args ...string) result {
			cmd := n.command(m, args...)
			cmd.Env = append(cmd.Env, "JAIL_STATE_DIR="+state)
			return runCmd(t, cmd)
		}
		if r := with("create", "--net", "allow=allowed.test", "--label", "team=a", "egress1"); r.code != 0 {
			t.Fatalf("create: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		defer with("rm", "-f", "egress1")
		for i := 0; i < 2; i++ {
			r := with("exec", "egress1", "--", "sh", "-c", "dig +short allowed.test; dig denied.test | grep -o 'status: [A-Z]*'")
			if r.code != 0 || !strings.HasPrefix(r.stdout, "127.100.") || !strings.Contains(r.stdout, "status: NXDOMAIN") {
				t.Fatalf("exec %d: exit %d\n%s%s", i, r.code, r.stdout, r.stderr)
			}
		}
		// Each query names the exec it came from: the exec line's "exec"
		// (its command's host pid) is the session of the query's process.
		execs := map[int]bool{}
		for _, rec := range n.readRecords(true) {
			if rec.Event == "exec" && rec.Sandbox == "egress1" && rec.Exec > 0 {
				execs[rec.Exec] = true
			}
		}
		found := 0
		for _, rec := range n.records() {
			if rec.Event == "dns" && rec.Sandbox == "egress1" && rec.Host == "denied.test" && rec.Verdict == "denied" && execs[rec.Exec] {
				found++
			}
		}
		if found == 0 || len(execs) != 2 {
			t.Errorf("the denied queries do not name their execs (%d execs: %v): %+v", len(execs), execs, n.readRecords(true))
		}
		// The command's own denials, with --json, once it has ended.
		r := with("exec", "--json", "egress1", "--", "sh", "-c", "dig +short denied.test; dig +short denied.test; dig +short allowed.test")
		if r.code != 0 || strings.Count(r.stderr, "jail: net: denied denied.test (no rule)\n") != 1 || strings.Contains(r.stderr, "allowed.test") {
			t.Errorf("exec --json: exit %d, stderr %q: want one denial line for denied.test", r.code, r.stderr)
		}
		if r := with("create", "--net", "allow=*.com", "egress2"); r.code != 125 || !strings.Contains(r.stderr, `rule "*.com"`) {
			t.Errorf("create with a bad rule: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if r := with("rm", "-f", "egress1"); r.code != 0 {
			t.Fatalf("rm: exit %d\n%s", r.code, r.stderr)
		}
	})
}

// TestEgressGatewayGoesWithAKilledJail: jail SIGKILLed while its command
// runs leaves no gateway behind (checkNoLeaks sees every jail: process).
func TestEgressGatewayGoesWithAKilledJail(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		n := newEgressNet(t, m, nil)
		// The query starts the gateway however the rules start it (at
		// once, or on first use when a gateway accepted them before).
		cmd := n.command(m, "run", "--net", "allow=allowed.test", "--", "sh", "-c", "dig +short allowed.test >/dev/null; echo up; sleep 60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 3)
		if _, err := out.Read(buf); err != nil || string(buf) != "up\n" {
			t.Fatalf("read %q: %v", buf, err)
		}
		if !gatewayRunning() {
			t.Errorf("no jail:gateway process while the command runs")
		}
		// The whole group: ip, sh, setpriv and jail are one chain.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		deadline := time.Now().Add(5 * time.Second)
		for gatewayRunning() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// gatewayRunning says whether any jail:gateway process runs.
func gatewayRunning() bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.HasPrefix(string(b), "jail:gateway") {
			return true
		}
	}
	return false
}

// TestEgressThroughTheAPI: jail serve runs commands and makes sandboxes
// with the gateway (`net` and `net_limit` of the API), refuses bad rules
// with a 400, and its sandboxes' queries are audited as the CLI's are.
func TestEgressThroughTheAPI(t *testing.T) {
	if _, err := exec.LookPath("dig"); err != nil {
		t.Skip("needs dig (bind9-dnsutils)")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		n := newEgressNet(t, m, nil)
		socket := filepath.Join(sharedTempDir(t, ownerOf(m)), "jail.sock")
		state := sharedTempDir(t, ownerOf(m))
		cmd := n.command(m, "serve", "--socket", socket)
		cmd.Env = append(cmd.Env, "JAIL_STATE_DIR="+state)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c := clientOf(m, socket)
		t.Cleanup(func() {
			c.Close()
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		})
		ctx := context.Background()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := c.Health(ctx); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("jail serve does not answer")
			}
			time.Sleep(20 * time.Millisecond)
		}
		res, err := c.Run(ctx, api.RunRequest{Cmd: "sh", Args: []string{"-c", "dig +short allowed.test; dig denied.test | grep -o 'status: [A-Z]*'"},
			Net: "allow=allowed.test", NetLimit: "conns=8"})
		if err != nil || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "127.100.") || !strings.Contains(res.Stdout, "NXDOMAIN") {
			t.Fatalf("run: %v %+v", err, res)
		}
		status, body := rawRequest(t, socket, "POST", "/v1/run", `{"cmd":"true","net":"allow=*.com"}`)
		if status != 400 || !strings.Contains(body, `rule \"*.com\"`) {
			t.Errorf("bad rules: %d %s", status, body)
		}
		status, body = rawRequest(t, socket, "POST", "/v1/sandboxes", `{"name":"api1","net":"allow=allowed.test"}`)
		if status != 201 {
			t.Fatalf("create: %d %s", status, body)
		}
		defer rawRequest(t, socket, "DELETE", "/v1/sandboxes/api1?force=1", "")
		status, body = rawRequest(t, socket, "POST", "/v1/sandboxes/api1/exec", `{"cmd":"dig","args":["+short","allowed.test"]}`)
		if status != 200 || !strings.Contains(body, "127.100.") {
			t.Errorf("exec: %d %s", status, body)
		}
		found := false
		for _, rec := range n.records() {
			if rec.Sandbox == "api1" && rec.Host == "allowed.test" && rec.Verdict == "allowed" {
				found = true
			}
		}
		if !found {
			t.Errorf("no audit line of the API's sandbox: %+v", n.records())
		}
		if status, body := rawRequest(t, socket, "DELETE", "/v1/sandboxes/api1?force=1", ""); status != 200 && status != 204 {
			t.Errorf("rm: %d %s", status, body)
		}
	})
}

// TestEgressRemembersAcceptedRules: a rule list a gateway accepted once
// is remembered, and a later sandbox with it starts no gateway until it
// uses the network (a run that uses none pays for none); its first query
// then starts one and is answered. A remembered entry the gateway would
// refuse (planted by the user's own processes) ends the sandbox when the
// gateway starts, with the reason.
func TestEgressRemembersAcceptedRules(t *testing.T) {
	if _, err := exec.LookPath("dig"); err != nil {
		t.Skip("needs dig (bind9-dnsutils)")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		n := newEgressNet(t, m, nil)
		name := fmt.Sprintf("lazy-%d-%s.test", time.Now().UnixNano(), m.name)
		rules := "allow=" + name
		if r := n.jail(m, "run", "--net", rules, "--", "dig", "+short", name); r.code != 0 || !strings.HasPrefix(r.stdout, "127.100.") {
			t.Fatalf("first run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		cmd := n.command(m, "run", "--net", rules, "--", "sh", "-c", "echo up; read line; dig +short "+name)
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 3)
		if _, err := io.ReadFull(stdout, buf); err != nil || string(buf) != "up\n" {
			t.Fatalf("read %q: %v", buf, err)
		}
		if gatewayOf(name) {
			t.Errorf("a gateway runs for a sandbox that has not used the network (its rules were accepted before)")
		}
		fmt.Fprintln(stdin, "go")
		rest, _ := io.ReadAll(stdout)
		if err := cmd.Wait(); err != nil || !strings.HasPrefix(string(rest), "127.100.") {
			t.Errorf("the query that starts the gateway: %v, %q", err, rest)
		}

		// An entry for rules the gateway refuses.
		bad := "allow=*.com"
		dir := filepath.Join(homeOf(m), ".cache", "jail", "egress")
		if !m.rootless {
			dir = "/var/cache/jail/egress"
		}
		entry := filepath.Join(dir, knownEntry(strings.TrimPrefix(bad, "allow="), programs.Version(programs.Gateway)))
		writeOwned(t, entry, strings.TrimPrefix(bad, "allow="), 0o600, ownedBy(m))
		t.Cleanup(func() { os.Remove(entry) })
		r := n.jail(m, "run", "--net", bad, "--", "sh", "-c", "dig +short x.com; echo after")
		if r.code == 0 || strings.Contains(r.stdout, "after") || !strings.Contains(r.stderr, `rule "*.com"`) || !strings.Contains(r.stderr, "the sandbox was ended") {
			t.Errorf("a planted entry: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	})
}

// knownEntry is package known's file name for rules accepted by the
// gateway of version.
func knownEntry(rules, version string) string {
	sum := sha256.Sum256([]byte(version + "\x00" + rules))
	return "rules-" + hex.EncodeToString(sum[:16])
}

// homeOf is the home of the account mode m runs as.
func homeOf(m mode) string {
	if m.rootless {
		return rootless.home
	}
	home, _ := os.UserHomeDir()
	return home
}

// gatewayOf says whether a gateway runs whose jail's arguments name name.
func gatewayOf(name string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.HasPrefix(string(b), "jail:gateway") {
			continue
		}
		status, _ := os.ReadFile("/proc/" + e.Name() + "/status")
		for _, l := range strings.Split(string(status), "\n") {
			if ppid, ok := strings.CutPrefix(l, "PPid:"); ok {
				parent, _ := os.ReadFile("/proc/" + strings.TrimSpace(ppid) + "/cmdline")
				if strings.Contains(string(parent), name) {
					return true
				}
			}
		}
	}
	return false
}

// TestExecWaitsForASandboxBeingMade: an exec into a sandbox that is listed
// but still being made (its holder has not bound its control socket yet)
// waits for it, rather than calling it dead; so does ls (the Python SDK's
// one-shot runs met this through the API).
func TestExecWaitsForASandboxBeingMade(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		n := newEgressNet(t, m, nil)
		state := sharedTempDir(t, ownerOf(m))
		with := func(args ...string) *exec.Cmd {
			cmd := n.command(m, args...)
			cmd.Env = append(cmd.Env, "JAIL_STATE_DIR="+state)
			return cmd
		}
		for i := 0; i < 3; i++ {
			name := fmt.Sprintf("early%d", i)
			create := with("create", "--net", "allow=early.test", name)
			if err := create.Start(); err != nil {
				t.Fatal(err)
			}
			// As soon as its directory is there.
			deadline := time.Now().Add(30 * time.Second)
			for {
				if _, err := os.Stat(filepath.Join(state, "sandboxes", name)); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the sandbox's directory never appeared")
				}
				time.Sleep(time.Millisecond)
			}
			r := runCmd(t, with("exec", name, "--", "echo", "made"))
			if err := create.Wait(); err != nil {
				t.Fatalf("create: %v", err)
			}
			if r.code != 0 || r.stdout != "made\n" {
				t.Errorf("exec while being made: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if r := runCmd(t, with("rm", "-f", name)); r.code != 0 {
				t.Errorf("rm: %s", r.stderr)
			}
		}
	})
}
