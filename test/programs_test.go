package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jail-sandbox/jail/api"
	"github.com/jail-sandbox/jail/client"
)

// copiesUserName is the account TestPlantedProgramsNeverRun plants scripts
// in the program copies of: its own, so that no other test (nor another
// jail build run by the suite's usual rootless user) meets them.
const copiesUserName = "jail-test-copies"

// copiesAccount returns that account, created if missing, with no copies
// of jail's programs yet.
func copiesAccount(t *testing.T) *account {
	t.Helper()
	u, err := user.Lookup(copiesUserName)
	if err != nil {
		out, err := exec.Command("useradd", "--system", "--create-home", "--shell", "/usr/sbin/nologin", copiesUserName).CombinedOutput()
		if err != nil {
			t.Fatalf("useradd %s: %v: %s", copiesUserName, err, out)
		}
		if u, err = user.Lookup(copiesUserName); err != nil {
			t.Fatal(err)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	a := &account{uid: uid, gid: gid, home: u.HomeDir}
	cache := filepath.Join(a.home, ".cache", "jail")
	if err := os.RemoveAll(cache); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(cache) })
	return a
}

// commandAs runs jail with args as account a, with $HOME its home and the
// extra environment given.
func commandAs(a *account, env []string, args ...string) *exec.Cmd {
	full := append([]string{"--reuid", strconv.Itoa(a.uid), "--regid", strconv.Itoa(a.gid), "--clear-groups", "--"}, args...)
	cmd := exec.Command("setpriv", full...)
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + jailTmp, "HOME=" + a.home}, env...)
	return cmd
}

// plantScript replaces every program copy in the directory $2 with a
// script that creates the file $1, padded to the copy's size and made
// read-only again: a copy that only its owner, mode and size vouched for
// would pass for jail's. Half are rewritten in place, half replaced by a
// rename.
const plantScript = `set -e
n=0
for f in "$2"/.[a-z]*-*; do
	[ -f "$f" ] || continue
	size=$(stat -c %s "$f")
	printf '#!/bin/sh\ntouch %s\n' "$1" >/tmp/payload.$$
	head -c $((size - $(stat -c %s /tmp/payload.$$))) /dev/zero | tr '\000' '#' >>/tmp/payload.$$
	if [ $((n % 2)) = 0 ]; then
		chmod u+w "$f"; cat /tmp/payload.$$ >"$f"; chmod 555 "$f"
	else
		cp /tmp/payload.$$ "$2/.planted"; chmod 555 "$2/.planted"; mv -f "$2/.planted" "$f"
	fi
	n=$((n + 1))
done
rm -f /tmp/payload.$$
echo "planted $n"
`

// TestPlantedProgramsNeverRun: a rootless sandbox started under another
// environment (another $XDG_RUNTIME_DIR and $XDG_CACHE_HOME: a cron job, a
// CI step) is handed jail's directory of program copies read-write and
// replaces every copy with a script; then, in the usual environment, `jail
// run`, `jail profile show` and `jail serve` (and a sandbox it starts
// through its forker) work, and no script ever runs on the host (row 33).
// jail refuses the directory as a mount source whatever the environment;
// the scripts are then planted from the host side, as anything that once
// reached the directory could have.
func TestPlantedProgramsNeverRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run jail as an account of its own")
	}
	checkNoLeaks(t)
	a := copiesAccount(t)
	cache := filepath.Join(a.home, ".cache", "jail")
	scratch := sharedTempDir(t, a)
	marker := filepath.Join(scratch, "marker")
	socket := filepath.Join(scratch, "jail.sock")

	// Every program copied: the helper (the init, and the janitor where a
	// rootless sandbox has a cgroup), the tools and the server.
	run := func(env []string, args ...string) result {
		t.Helper()
		return runCmd(t, commandAs(a, env, append([]string{jailBin}, args...)...))
	}
	serve := func() (ok bool, why string) {
		cmd := commandAs(a, nil, jailBin, "serve", "--socket", socket)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}()
		// (The server is another user's, whom the client trusts only when
		// told.)
		c := client.New(socket, client.ServerUser(a.uid))
		defer c.Close()
		// The first serve writes and checks every program's copy: under
		// software emulation (the v2 VM) that takes a while.
		wait := 20 * time.Second
		if os.Getenv("JAIL_TEST_EMULATED") != "" {
			wait = 3 * time.Minute
		}
		for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := c.Health(ctx)
			cancel()
			if err != nil {
				continue
			}
			ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
			res, err := c.Run(ctx, api.RunRequest{Cmd: "sh", Args: []string{"-c", "echo served"}})
			cancel()
			if err != nil || res.ExitCode != 0 || res.Stdout != "served\n" {
				return false, fmt.Sprintf("run: %v %+v", err, res)
			}
			return true, ""
		}
		return false, "no answer: " + stderr.String()
	}
	if r := run(nil, "run", "--", "true"); r.code != 0 {
		t.Fatalf("jail run: %d %s", r.code, r.stderr)
	}
	if r := run(nil, "profile", "show", "default"); r.code != 0 {
		t.Fatalf("jail profile show: %d %s", r.code, r.stderr)
	}
	if ok, why := serve(); !ok {
		t.Fatalf("jail serve: %s", why)
	}
	copies, _ := filepath.Glob(filepath.Join(cache, ".*-*"))
	for _, program := range []string{"helper", "tools", "server"} {
		if m, _ := filepath.Glob(filepath.Join(cache, "."+program+"-*")); len(m) == 0 {
			t.Errorf("no copy of the %s program in %s: %v", program, cache, copies)
		}
	}

	// The sandbox under another environment.
	other := []string{"XDG_RUNTIME_DIR=" + filepath.Join(scratch, "run"), "XDG_CACHE_HOME=" + filepath.Join(scratch, "cache")}
	r := run(other, "run", "--mount", cache+":/x:rw", "--", "sh", "-c", plantScript, "sh", marker, "/x")
	switch {
	case r.code == 125 && strings.Contains(r.stderr, "refused"):
		// Kept from the sandbox: planted from the host side instead.
		t.Logf("the sandbox was refused the directory: %s", strings.TrimSpace(r.stderr))
		plant := commandAs(a, nil, "sh", "-c", plantScript, "sh", marker, cache)
		if out, err := plant.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "planted ") || string(out) == "planted 0\n" {
			t.Fatalf("planting from the host side: %v %s", err, out)
		}
	case r.code != 0 || !strings.HasPrefix(r.stdout, "planted ") || r.stdout == "planted 0\n":
		t.Fatalf("the sandbox could not plant: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}

	if r := run(nil, "run", "--", "echo", "ok"); r.code != 0 || r.stdout != "ok\n" {
		t.Errorf("jail run after the planting: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := run(nil, "profile", "show", "default"); r.code != 0 || !strings.HasPrefix(r.stdout, "# profile default") {
		t.Errorf("jail profile show after the planting: exit %d, %.200q %q", r.code, r.stdout, r.stderr)
	}
	if ok, why := serve(); !ok {
		t.Errorf("jail serve after the planting: %s", why)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("a planted script ran on the host")
	}
}
