package test

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEgressRealClients: git clone over HTTPS from a local git server,
// pip download from a local package index, Node's fetch (which ignores
// proxy variables: the captured port serves it) and curl, all through the
// gateway, with the sandbox given only the test authority's certificate.
func TestEgressRealClients(t *testing.T) {
	for _, tool := range []string{"git", "pip3", "node", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Skip("needs git-http-backend")
	}
	forEachMode(t, func(t *testing.T, m mode) {
		n := newEgressNet(t, m, map[string]string{"git.test": "127.0.0.2", "pypi.test": "127.0.0.3", "api.test": "127.0.0.4"})
		caDir := sharedTempDir(t, nil)
		ca := newTestAuthority(t, caDir)

		// A bare repository with one commit, served by git's own CGI.
		repos := sharedTempDir(t, nil)
		work := filepath.Join(repos, "work")
		gitRun := func(dir string, args ...string) {
			cmd := exec.Command("git", args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "HOME="+repos)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v: %s", args, err, out)
			}
		}
		gitRun(repos, "init", "-q", "-b", "main", work)
		if err := os.WriteFile(filepath.Join(work, "hello.txt"), []byte("hello through the gateway\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		gitRun(work, "add", ".")
		gitRun(work, "commit", "-q", "-m", "one")
		gitRun(repos, "clone", "-q", "--bare", work, filepath.Join(repos, "repo.git"))
		gitServer := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + repos, "GIT_HTTP_EXPORT_ALL=1"}}
		n.serveSite(ca, "git.test", "127.0.0.2", map[string]http.Handler{"/repo.git/": gitServer})

		// A package index with one wheel (PEP 503).
		wheel := tinyWheel(t)
		sum := sha256.Sum256(wheel)
		index := http.NewServeMux()
		index.HandleFunc("/simple/tinypkg/", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="/files/tinypkg-1.0-py3-none-any.whl#sha256=%s">tinypkg-1.0-py3-none-any.whl</a></body></html>`, hex.EncodeToString(sum[:]))
		})
		index.HandleFunc("/files/tinypkg-1.0-py3-none-any.whl", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(wheel) })
		n.serveSite(ca, "pypi.test", "127.0.0.3", map[string]http.Handler{"/simple/": index, "/files/": index})
		n.serveSite(ca, "api.test", "127.0.0.4", nil)

		const ca1 = "/opt/ca/test-ca.pem"
		cases := []egressCase{
			{"git clone", "git -c http.sslCAInfo=" + ca1 + " clone -q https://git.test/repo.git /tmp/r && cat /tmp/r/hello.txt", "hello through the gateway"},
			{"pip download", "pip3 download -q --no-cache-dir --no-deps --cert " + ca1 + " --index-url https://pypi.test/simple/ -d /tmp/dl tinypkg && ls /tmp/dl", "tinypkg-1.0-py3-none-any.whl"},
			{"node fetch", `NODE_EXTRA_CA_CERTS=` + ca1 + ` node -e 'fetch("https://api.test/node").then(r => r.text()).then(t => console.log(t))'`, "api.test /node"},
			{"curl", "curl -sS --cacert " + ca1 + " https://api.test/curl", "api.test /curl"},
		}
		n.runCases(m, []string{"SSL_CERT_FILE=" + ca.pemFile},
			[]string{"--net", "allow=git.test,pypi.test,api.test,127.0.0.2,127.0.0.3,127.0.0.4", "--mount", caDir + ":/opt/ca:ro"}, cases)
	})
}

// tinyWheel is a minimal wheel of a package named tinypkg.
func tinyWheel(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	files := map[string]string{
		"tinypkg/__init__.py":                 "VALUE = 42\n",
		"tinypkg-1.0.dist-info/METADATA":      "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
		"tinypkg-1.0.dist-info/WHEEL":         "Wheel-Version: 1.0\nGenerator: jail-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
		"tinypkg-1.0.dist-info/top_level.txt": "tinypkg\n",
	}
	var record strings.Builder
	for name, body := range files {
		w, err := z.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(body))
		fmt.Fprintf(&record, "%s,,\n", name)
	}
	record.WriteString("tinypkg-1.0.dist-info/RECORD,,\n")
	w, _ := z.Create("tinypkg-1.0.dist-info/RECORD")
	_, _ = w.Write([]byte(record.String()))
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestEgressSecretReachesOnlyItsHost: a secret bound to a host reaches that
// host (as a bearer token, a header and basic credentials), while the
// sandbox holds only a placeholder: not in any process's environment, not
// in a file, not in a process's memory after the requests. The placeholder
// sent to another allowed host is refused and never arrives, and the
// sandbox trusts the gateway's authority through its own trust store.
func TestEgressSecretReachesOnlyItsHost(t *testing.T) {
	for _, tool := range []string{"curl", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	const value = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
	forEachMode(t, func(t *testing.T, m mode) {
		n := newEgressNet(t, m, map[string]string{"api.test": "127.0.0.2", "other.test": "127.0.0.3"})
		caDir := sharedTempDir(t, nil)
		ca := newTestAuthority(t, caDir)
		api := n.serveSite(ca, "api.test", "127.0.0.2", nil)
		other := n.serveSite(ca, "other.test", "127.0.0.3", nil)

		cfg := sharedTempDir(t, ownedBy(m))
		if err := os.Chmod(cfg, 0o700); err != nil {
			t.Fatal(err)
		}
		add := n.command(m, "secret", "add", "GH_TOKEN", "--from-env", "TOKEN_SOURCE")
		add.Env = append(add.Env, "XDG_CONFIG_HOME="+cfg, "TOKEN_SOURCE="+value)
		if r := runCmd(t, add); r.code != 0 {
			t.Fatalf("secret add: exit %d\n%s", r.code, r.stderr)
		}
		memoryScan := `python3 -c '
import os, re
v = (os.environ["SCAN_FOR_A"] + os.environ["SCAN_FOR_B"]).encode()
found = 0
for pid in [p for p in os.listdir("/proc") if p.isdigit() and p != str(os.getpid())]:
    try:
        maps = open("/proc/%s/maps" % pid).read().splitlines()
        mem = open("/proc/%s/mem" % pid, "rb", 0)
    except OSError:
        continue
    for line in maps:
        addr, perms = line.split()[:2]
        if "r" not in perms:
            continue
        lo, hi = (int(x, 16) for x in addr.split("-"))
        try:
            mem.seek(lo)
            if v in mem.read(hi - lo):
                found += 1
        except (OSError, ValueError, OverflowError):
            pass
print("found", found)
'`
		cases := []egressCase{
			{"placeholder", fmt.Sprintf(`case "$GH_TOKEN" in ghp_*) [ ${#GH_TOKEN} -eq %d ] && [ "$GH_TOKEN" != "$SCAN_FOR_A$SCAN_FOR_B" ] && echo shaped;; *) echo "$GH_TOKEN";; esac`, len(value)), "shaped"},
			{"bearer", `curl -sS -H "Authorization: Bearer $GH_TOKEN" https://api.test/bearer`, "api.test /bearer"},
			{"header", `curl -sS -H "X-Token: $GH_TOKEN" https://api.test/header`, "api.test /header"},
			{"basic", `curl -sS -u "user:$GH_TOKEN" https://api.test/basic`, "api.test /basic"},
			{"captured", `curl -sS --noproxy '*' -H "Authorization: Bearer $GH_TOKEN" https://api.test/captured`, "api.test /captured"},
			{"to another host in the clear", `curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $GH_TOKEN" http://other.test/leak`, "403"},
			{"to another host over TLS", `curl -sS --cacert /opt/ca/test-ca.pem -H "X-Token: $GH_TOKEN" https://other.test/tls`, "other.test /tls"},
			{"not in environ", `grep -l -a -F "$SCAN_FOR_A$SCAN_FOR_B" /proc/[0-9]*/environ 2>/dev/null | wc -l`, "0"},
			{"not in files", `grep -r -l -a -F "$SCAN_FOR_A$SCAN_FOR_B" /etc /run /tmp /root 2>/dev/null | wc -l`, "0"},
			{"not in memory", memoryScan, "found 0"},
		}
		// The value is given to the sandbox in two halves (SCAN_FOR_A and
		// _B), so that the checks can look for it while no variable holds
		// it whole.
		script := []string{"SSL_CERT_FILE=" + ca.pemFile, "XDG_CONFIG_HOME=" + cfg, "TOKEN_SOURCE=" + value}
		out := n.runCases(m, script,
			[]string{"--net", "allow=api.test,other.test,127.0.0.2,127.0.0.3", "--secret", "GH_TOKEN@api.test",
				"--env", "SCAN_FOR_A=" + value[:20], "--env", "SCAN_FOR_B=" + value[20:],
				"--mount", caDir + ":/opt/ca:ro"},
			cases)
		_ = out
		var bearer, header, basic bool
		for _, r := range api.requests() {
			switch r.Path {
			case "/bearer", "/captured":
				bearer = r.Authorization == "Bearer "+value
			case "/header":
				header = r.Token == value
			case "/basic":
				basic = strings.HasPrefix(r.Authorization, "Basic ") && r.Authorization != "Basic "
			}
		}
		if !bearer || !header || !basic {
			t.Errorf("api.test did not get the value: %+v", api.requests())
		}
		// In the clear the gateway sees the placeholder and refuses it;
		// inside TLS it passes through to a host no secret is bound to
		// (docs/egress.md): the placeholder, never the value.
		for _, r := range other.requests() {
			if r.Path != "/tls" || r.Token == value || r.Token == "" {
				t.Errorf("other.test got %+v", r)
			}
		}
		for _, r := range api.requests() {
			if r.Path == "/basic" && !strings.Contains(r.Authorization, "Basic ") {
				t.Errorf("basic: %q", r.Authorization)
			}
		}
		data, _ := os.ReadFile(n.auditLog())
		if strings.Contains(string(data), value) {
			t.Errorf("the audit log holds the value")
		}
	})
}

// TestEgressPersistentSandboxWithASecretAndLimits: a sandbox made with
// --net allow=, a secret bound to a host and a byte limit keeps its
// placeholder for every exec (the value reaches the host each time), and
// its gateway ends a download that passes the limit.
func TestEgressPersistentSandboxWithASecretAndLimits(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	const value = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"
	forEachMode(t, func(t *testing.T, m mode) {
		n := newEgressNet(t, m, map[string]string{"api.test": "127.0.0.2"})
		caDir := sharedTempDir(t, nil)
		ca := newTestAuthority(t, caDir)
		big := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write(bytes.Repeat([]byte("x"), 1<<20))
		})
		api := n.serveSite(ca, "api.test", "127.0.0.2", map[string]http.Handler{"/big": big})
		cfg := sharedTempDir(t, ownedBy(m))
		if err := os.Chmod(cfg, 0o700); err != nil {
			t.Fatal(err)
		}
		state := sharedTempDir(t, ownedBy(m))
		with := func(args ...string) result {
			cmd := n.command(m, args...)
			cmd.Env = append(cmd.Env, "JAIL_STATE_DIR="+state, "XDG_CONFIG_HOME="+cfg, "TOKEN_SOURCE="+value, "SSL_CERT_FILE="+ca.pemFile)
			return runCmd(t, cmd)
		}
		if r := with("secret", "add", "OPENAI_API_KEY", "--from-env", "TOKEN_SOURCE"); r.code != 0 {
			t.Fatalf("secret add: %s", r.stderr)
		}
		if r := with("create", "--net", "allow=api.test,127.0.0.2", "--net-limit", "bytes=256K", "--secret", "OPENAI_API_KEY@api.test", "key1"); r.code != 0 {
			t.Fatalf("create: exit %d\n%s", r.code, r.stderr)
		}
		defer with("rm", "-f", "key1")
		var placeholders []string
		for i := 0; i < 2; i++ {
			r := with("exec", "key1", "--", "sh", "-c", `echo "$OPENAI_API_KEY"; curl -sS -H "Authorization: Bearer $OPENAI_API_KEY" https://api.test/v`+fmt.Sprint(i))
			if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("api.test /v%d", i)) || strings.Contains(r.stdout, value) {
				t.Fatalf("exec %d: exit %d\n%s%s", i, r.code, r.stdout, r.stderr)
			}
			placeholders = append(placeholders, lines(r.stdout)[0])
		}
		if placeholders[0] != placeholders[1] || !strings.HasPrefix(placeholders[0], "sk-proj-") || len(placeholders[0]) != len(value) {
			t.Errorf("placeholders %q: want one, shaped like the value", placeholders)
		}
		got := 0
		for _, r := range api.requests() {
			if r.Authorization == "Bearer "+value {
				got++
			}
		}
		if got != 2 {
			t.Errorf("api.test got the value %d times: %+v", got, api.requests())
		}
		// 1 MiB through a gateway limited to 256 KiB in all.
		r := with("exec", "key1", "--", "sh", "-c", "curl -sS -o /dev/null https://api.test/big; echo exit=$?")
		if strings.Contains(r.stdout, "exit=0") {
			t.Errorf("a download past the byte limit ended well: %s%s", r.stdout, r.stderr)
		}
		found := false
		for _, rec := range n.records() {
			if rec.Sandbox == "key1" && strings.Contains(rec.Why, "limit") {
				found = true
			}
		}
		if !found {
			t.Errorf("no audit line says the limit ended a connection: %+v", n.records())
		}
	})
}
