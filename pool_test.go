package jail_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jail-sandbox/jail"
)

// readyPool returns a pool of size sandboxes of the default spec, closed
// when the test ends, once it has had time to build them.
func readyPool(t *testing.T, size int) *jail.Pool {
	t.Helper()
	pool, err := jail.NewPool(jail.Spec{}, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Close() })
	waitReady(t, pool)
	return pool
}

// waitReady gives the pool time to build its first sandboxes, so that the
// runs below are handed ready ones.
func waitReady(t *testing.T, pool *jail.Pool) {
	t.Helper()
	time.Sleep(300 * time.Millisecond)
	if err := pool.Err(); err != nil {
		t.Fatalf("pool cannot build: %v", err)
	}
}

// TestPoolRunsEachCommandInAFreshSandbox: pooled runs behave as Run does,
// and no two runs share a sandbox: what one writes, the next never sees.
func TestPoolRunsEachCommandInAFreshSandbox(t *testing.T) {
	pool := readyPool(t, 2)
	for i := 0; i < 4; i++ {
		res, err := pool.Run(context.Background(), jail.Spec{
			Command: []string{"sh", "-c", "test ! -e /tmp/mark && touch /tmp/mark && echo $V $(pwd) && cat"},
			Env:     []string{"V=run"}, Workdir: "/etc",
			Stdin: strings.NewReader("from stdin\n"), Capture: true,
		})
		if err != nil || res.ExitCode != 0 || res.Stdout != "run /etc\nfrom stdin\n" {
			t.Fatalf("run %d: %v %+v", i, err, res)
		}
	}
}

// TestPoolKeepsRunSemantics: exit statuses, timeouts and missing commands
// are reported as Run reports them.
func TestPoolKeepsRunSemantics(t *testing.T) {
	pool := readyPool(t, 1)
	ctx := context.Background()
	if res, err := pool.Run(ctx, jail.Spec{Command: []string{"sh", "-c", "exit 7"}}); err != nil || res.ExitCode != 7 {
		t.Errorf("exit 7: %v %+v", err, res)
	}
	waitReady(t, pool)
	res, err := pool.Run(ctx, jail.Spec{Command: []string{"sleep", "100"}, Timeout: 200 * time.Millisecond})
	if err != nil || !res.TimedOut || res.ExitCode != jail.ExitTimeout {
		t.Errorf("timeout: %v %+v", err, res)
	}
	waitReady(t, pool)
	var ex *jail.ExecError
	if _, err := pool.Run(ctx, jail.Spec{Command: []string{"no-such-command-jail"}}); !errors.As(err, &ex) || ex.Code != jail.ExitNotFound {
		t.Errorf("missing command: %v", err)
	}
	// Another sandbox than the template's is built cold, with its own
	// settings.
	res, err = pool.Run(ctx, jail.Spec{Command: []string{"hostname"}, Hostname: "other", Capture: true})
	if err != nil || res.Stdout != "other\n" {
		t.Errorf("other host name: %v %+v", err, res)
	}
	var setup *jail.SetupError
	if _, err := pool.Run(ctx, jail.Spec{Command: []string{"true"}, Profile: "no-such"}); !errors.As(err, &setup) {
		t.Errorf("unknown profile: %v", err)
	}
}

// TestPoolCloseLeavesNothing: closing a pool ends its ready sandboxes and
// removes their cgroups, and those it kept for reuse.
func TestPoolCloseLeavesNothing(t *testing.T) {
	before := map[string]bool{}
	for _, c := range jailCgroups(t) {
		before[c] = true
	}
	fresh := func() (list []string) {
		for _, c := range jailCgroups(t) {
			if !before[c] {
				list = append(list, c)
			}
		}
		return list
	}
	pool, err := jail.NewPool(jail.Spec{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, pool)
	if os.Geteuid() == 0 && len(fresh()) < 2 {
		t.Errorf("no cgroups for the ready sandboxes: %v", fresh())
	}
	// Runs leave their cgroups to the pool for reuse (on v1): Close
	// removes those too.
	for i := 0; i < 3; i++ {
		if _, err := pool.Run(context.Background(), jail.Spec{Command: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	pool.Close()
	deadline := time.Now().Add(2 * time.Second)
	for len(fresh()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if left := fresh(); len(left) > 0 {
		t.Errorf("cgroups left after Close: %v", left)
	}
}

// TestPoolLeavesNoDescriptors: a closed Pool keeps no descriptor of its
// sandboxes, its forker or its janitor in the program that embeds it.
func TestPoolLeavesNoDescriptors(t *testing.T) {
	use := func() {
		pool := readyPool(t, 2)
		for i := 0; i < 5; i++ {
			if _, err := pool.Run(context.Background(), jail.Spec{Command: []string{"true"}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := pool.Close(); err != nil {
			t.Fatal(err)
		}
	}
	use() // the runtime's own descriptors are open from here on
	before := openDescriptors(t)
	use()
	waitForDescriptors(t, before)
}

// jailCgroups lists the sandbox cgroups of this process under jail's
// parent in the v1 memory hierarchy or in cgroup v2.
func jailCgroups(t *testing.T) []string {
	t.Helper()
	var found []string
	for _, parent := range []string{"/sys/fs/cgroup/memory/jail", "/sys/fs/cgroup/jail"} {
		m, _ := filepath.Glob(filepath.Join(parent, strconv.Itoa(os.Getpid())+"-*"))
		found = append(found, m...)
	}
	return found
}

// TestPoolSandboxesHaveTheirOwnIDs: an init the pool's forker starts before
// its ids are mapped gets them mapped as any other: the command runs as
// sandbox root, which is the unprivileged range when jail runs as root, and
// the caller otherwise.
func TestPoolSandboxesHaveTheirOwnIDs(t *testing.T) {
	pool := readyPool(t, 1)
	res, err := pool.Run(context.Background(), jail.Spec{
		Command: []string{"sh", "-c", "id -u; id -g; cat /proc/self/uid_map"},
		Capture: true,
	})
	f := strings.Fields(res.Stdout)
	if err != nil || res.ExitCode != 0 || len(f) < 5 || f[0] != "0" || f[1] != "0" || f[2] != "0" {
		t.Fatalf("run: %v %+v", err, res)
	}
	want := strconv.Itoa(os.Geteuid())
	if os.Geteuid() == 0 {
		want = "2000000000"
	}
	if f[3] != want {
		t.Errorf("sandbox root is host uid %s; want %s", f[3], want)
	}
}
