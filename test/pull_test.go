package test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/jail-sandbox/jail/api"
	"github.com/jail-sandbox/jail/client"
)

// Images pulled on first use (issue 26): `jail run --image`, `jail create`
// and the API pull an image the store lacks (--pull missing, the default),
// every time (always) or never. The registry is Debian's docker-registry,
// started by each test on loopback with storage of its own.

// registryBin is Debian's docker-registry (make test-deps installs it).
const registryBin = "/usr/bin/docker-registry"

// localRegistry is a docker-registry serving on 127.0.0.1.
type localRegistry struct {
	host string // 127.0.0.1:PORT
}

// startRegistry starts a registry on a free loopback port, with its
// configuration and storage in a directory of the test's, and stops it
// when the test ends.
func startRegistry(t *testing.T) *localRegistry {
	t.Helper()
	if _, err := os.Stat(registryBin); err != nil {
		t.Fatalf("%s is needed (Debian's docker-registry; make test-deps): %v", registryBin, err)
	}
	dir := sharedTempDir(t, nil)
	config := "version: 0.1\n" +
		"log:\n  level: info\n  accesslog:\n    disabled: true\n" +
		"storage:\n  filesystem:\n    rootdirectory: " + filepath.Join(dir, "storage") + "\n" +
		"  maintenance:\n    uploadpurging:\n      enabled: false\n" +
		"http:\n  addr: 127.0.0.1:0\n  secret: jail-test-registry\n"
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(registryBin, "serve", filepath.Join(dir, "config.yml"))
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + dir, "HOME=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	// It logs its address ("listening on 127.0.0.1:PORT") once it listens.
	addr := make(chan string, 1)
	go func() {
		defer close(done)
		defer cmd.Wait()
		sc := bufio.NewScanner(logs)
		sent := false
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), `msg="listening on `); ok && !sent {
				addr <- strings.SplitN(rest, `"`, 2)[0]
				sent = true
			}
		}
		if !sent {
			close(addr)
		}
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatal("docker-registry ended without listening")
		}
		return &localRegistry{host: a}
	case <-time.After(30 * time.Second):
		t.Fatal("docker-registry did not listen within 30 s (a hang guard)")
	}
	return nil
}

// push stores an image under repo:tag that prints what when run.
func (r *localRegistry) push(t *testing.T, repoTag, what string) string {
	t.Helper()
	ref := r.host + "/" + repoTag
	parsed, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img := image(t, []string{"/bin/echo", what}, nil, layerOf(t, busyboxEntries(t)))
	if err := remote.Write(parsed, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref
}

// storedImages lists the names in the store withStore's jail uses.
func storedImages(t *testing.T, jailS func(...string) result) string {
	t.Helper()
	r := jailS("image", "ls")
	if r.code != 0 {
		t.Fatalf("image ls: %d %s", r.code, r.stderr)
	}
	return r.stdout
}

// withoutNotices is stderr without jail's notices (a rootless run on
// cgroup v1 has one about its limits).
func withoutNotices(stderr string) string {
	var kept []string
	for _, l := range strings.SplitAfter(stderr, "\n") {
		if !strings.HasPrefix(l, "jail: notice: ") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "")
}

// oneJailLine checks that stderr is one "jail: " line holding want.
func oneJailLine(t *testing.T, what string, r result, want string) {
	t.Helper()
	if r.code != 125 || !strings.HasPrefix(r.stderr, "jail: ") || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("%s: exit %d, stderr %q; want 125 and one jail: line with %q", what, r.code, r.stderr, want)
	}
}

// TestRunPullsAsPullSays: --pull never leaves a missing image missing (125,
// saying how to pull it); missing (the default) pulls it once, with no
// progress on a stderr that is no terminal, and runs it; a newer image
// under the same tag is taken by always only.
func TestRunPullsAsPullSays(t *testing.T) {
	reg := startRegistry(t)
	forEachMode(t, func(t *testing.T, m mode) {
		repo := "pull/app-" + m.name + ":1"
		ref := reg.push(t, repo, "first")
		jailS := withStore(t, m)
		oneJailLine(t, "--pull never", jailS("run", "--pull", "never", "--image", ref), "image "+ref+": not in the store (jail image import or pull)")
		if ls := storedImages(t, jailS); ls != "" {
			t.Errorf("--pull never stored %q", ls)
		}
		if r := jailS("run", "--image", ref); r.code != 0 || r.stdout != "first\n" || withoutNotices(r.stderr) != "" {
			t.Errorf("first run, pulling: exit %d, %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if r := jailS("run", "--json", "--image", ref); r.code != 0 || !strings.HasPrefix(r.stdout, `{"stdout":"first\n"`) || withoutNotices(r.stderr) != "" {
			t.Errorf("--json: exit %d, %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if ls := storedImages(t, jailS); strings.Count(ls, "\n") != 1 || !strings.HasPrefix(ls, ref+" ") {
			t.Errorf("store after the pull: %q", ls)
		}
		reg.push(t, repo, "second")
		for _, pull := range []string{"missing", "never"} {
			if r := jailS("run", "--pull", pull, "--image", ref); r.stdout != "first\n" {
				t.Errorf("--pull %s of a stored image: %q %q; want the stored one", pull, r.stdout, r.stderr)
			}
		}
		if r := jailS("run", "--pull", "always", "--image", ref); r.stdout != "second\n" {
			t.Errorf("--pull always: %q %q; want the registry's newer image", r.stdout, r.stderr)
		}
		if r := jailS("run", "--pull", "never", "--image", ref); r.stdout != "second\n" {
			t.Errorf("after --pull always: %q %q", r.stdout, r.stderr)
		}
	})
}

// TestRunRefusesWhatCannotBePulled: an unknown image, a registry that does
// not answer, and (before any connection) what is no reference or no pull
// policy: each a one-line 125 naming the reference, storing nothing.
func TestRunRefusesWhatCannotBePulled(t *testing.T) {
	reg := startRegistry(t)
	// A loopback port that counts the connections made to it, and answers
	// none: a registry that is not there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var connections atomic.Int32
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			connections.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	silent := ln.Addr().String()
	forEachMode(t, func(t *testing.T, m mode) {
		jailS := withStore(t, m)
		for _, c := range []struct {
			what, ref string
			args      []string
			want      string
		}{
			{"an image the registry lacks", reg.host + "/pull/absent:1", nil, "image " + reg.host + "/pull/absent:1: cannot pull it: "},
			{"a registry that answers nothing", silent + "/pull/app:1", nil, "image " + silent + "/pull/app:1: cannot pull it: "},
			{"pull always from it", silent + "/pull/app:1", []string{"--pull", "always"}, "image " + silent + "/pull/app:1: cannot pull it: "},
		} {
			r := jailS(append(append([]string{"run"}, c.args...), "--image", c.ref, "--", "true")...)
			oneJailLine(t, c.what, r, c.want)
		}
		if connections.Load() == 0 {
			t.Errorf("the silent registry was never asked")
		}
		before := connections.Load()
		for _, c := range []struct {
			what string
			args []string
			want string
		}{
			{"no reference (upper case)", []string{"--image", silent + "/Pull/App:1"}, "image " + silent + "/Pull/App:1: not an image reference"},
			{"a URL", []string{"--image", "http://" + silent + "/pull/app:1"}, "image http://" + silent + "/pull/app:1: not an image reference"},
			{"an unknown pull policy", []string{"--pull", "sometimes", "--image", silent + "/pull/app:1"}, `--pull: "sometimes": must be never, missing or always`},
		} {
			r := jailS(append(append([]string{"run"}, c.args...), "--", "true")...)
			oneJailLine(t, c.what, r, c.want)
		}
		if n := connections.Load(); n != before {
			t.Errorf("refused references made %d connections", n-before)
		}
		if ls := storedImages(t, jailS); ls != "" {
			t.Errorf("failed pulls stored %q", ls)
		}
	})
}

// TestConcurrentRunsPullOneImage: runs that find the same image missing at
// once each pull it, and all run it; the store's lock keeps one record.
func TestConcurrentRunsPullOneImage(t *testing.T) {
	reg := startRegistry(t)
	ref := reg.push(t, "pull/shared:1", "shared")
	forEachMode(t, func(t *testing.T, m mode) {
		jailS := withStore(t, m)
		const runs = 4
		results := make([]result, runs)
		var wg sync.WaitGroup
		for i := range runs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = jailS("run", "--image", ref)
			}()
		}
		wg.Wait()
		for i, r := range results {
			if r.code != 0 || r.stdout != "shared\n" {
				t.Errorf("run %d: exit %d, %q, stderr %q", i, r.code, r.stdout, r.stderr)
			}
		}
		if ls := storedImages(t, jailS); strings.Count(ls, "\n") != 1 {
			t.Errorf("store after concurrent pulls: %q", ls)
		}
		if r := jailS("image", "prune"); r.code != 0 || r.stdout != "removed 0 unused layers\n" {
			t.Errorf("prune after concurrent pulls: %q %q", r.stdout, r.stderr)
		}
	})
}

// TestPullProgressOnATerminal: a pull shows its progress on stderr when it
// is a terminal, and the command's output is the command's alone.
func TestPullProgressOnATerminal(t *testing.T) {
	reg := startRegistry(t)
	ref := reg.push(t, "pull/progress:1", "progress")
	forEachMode(t, func(t *testing.T, m mode) {
		master, slave := openTerminal(t)
		screen := watch(master)
		cmd := storeCommand(m, storeDir(t, m), "run", "--image", ref)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, slave
		if err := cmd.Run(); err != nil || out.String() != "progress\n" {
			t.Fatalf("run: %v, stdout %q", err, out.String())
		}
		screen.waitFor(t, "MiB  done in ")
	})
}

// TestCreatePullsAndStartDoesNot: jail create pulls the image it lacks
// (not with --pull never), in the creating process; the sandbox keeps the
// image it was made from: a newer one under the same tag is not pulled by
// a stop and start, and only a create with --pull always takes it.
func TestCreatePullsAndStartDoesNot(t *testing.T) {
	reg := startRegistry(t)
	forEachMode(t, func(t *testing.T, m mode) {
		repo := "pull/box-" + m.name + ":1"
		ref := reg.push(t, repo, "box")
		h := newSandboxHost(t, m)
		store := storeDir(t, m)
		run := func(args ...string) result {
			cmd := h.cmd(args...)
			cmd.Env = append(cmd.Env, "JAIL_IMAGE_STORE="+store)
			return runCmd(t, cmd)
		}
		oneJailLine(t, "create --pull never", run("create", "--pull", "never", "--image", ref, "never"), "not in the store")
		if r := run("create", "--image", ref, "box"); r.code != 0 || r.stdout != "box\n" {
			t.Fatalf("create: exit %d, %q, %q", r.code, r.stdout, r.stderr)
		}
		if r := run("exec", "box", "--", "ls", "/etc"); r.code != 0 || strings.Contains(r.stdout, "os-release") {
			t.Errorf("exec: the image's root has no os-release: %q %q", r.stdout, r.stderr)
		}
		stored := run("image", "ls").stdout
		if strings.Count(stored, "\n") != 1 {
			t.Fatalf("create stored %q", stored)
		}
		reg.push(t, repo, "newer")
		for _, c := range []string{"stop", "start"} {
			if r := run(c, "box"); r.code != 0 {
				t.Fatalf("%s: %q", c, r.stderr)
			}
		}
		if r := run("exec", "box", "--", "echo", "in"); r.stdout != "in\n" {
			t.Errorf("exec after start: %q %q", r.stdout, r.stderr)
		}
		if now := run("image", "ls").stdout; now != stored {
			t.Errorf("stop and start changed the store: %q, was %q", now, stored)
		}
		if r := run("create", "--pull", "always", "--image", ref, "fresh"); r.code != 0 {
			t.Fatalf("create --pull always: %q", r.stderr)
		}
		if now := run("image", "ls").stdout; now == stored {
			t.Errorf("create --pull always took no newer image: %q", now)
		}
	})
}

// TestServePullsAsPullSays: the API's "pull" on /v1/run and
// /v1/sandboxes: never is a 400 saying the image is missing; the default
// pulls it, in the server (which runs the tools program jail handed it).
func TestServePullsAsPullSays(t *testing.T) {
	reg := startRegistry(t)
	ref := reg.push(t, "pull/served:1", "served")
	forEachMode(t, func(t *testing.T, m mode) {
		store := storeDir(t, m)
		state := sharedTempDir(t, ownerOf(m))
		s := startServeWith(t, m, []string{"JAIL_IMAGE_STORE=" + store, "JAIL_STATE_DIR=" + state})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard
		defer cancel()
		var e *client.Error
		_, err := s.client.Run(ctx, api.RunRequest{Image: ref, Pull: api.PullNever})
		if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, "not in the store") {
			t.Errorf("pull never: %v; want a 400", err)
		}
		_, err = s.client.Run(ctx, api.RunRequest{Image: ref, Pull: "sometimes"})
		if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, "pull: ") {
			t.Errorf("an unknown pull: %v; want a 400", err)
		}
		if res, err := s.client.Run(ctx, api.RunRequest{Image: ref}); err != nil || res.Stdout != "served\n" {
			t.Errorf("run, pulling: %v %+v", err, res)
		}
		_, err = s.client.Run(ctx, api.RunRequest{Image: reg.host + "/pull/absent:1"})
		if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, "cannot pull it") || strings.Contains(e.Message, "\n") {
			t.Errorf("an image the registry lacks: %v; want a one-line 400", err)
		}
		other := reg.push(t, "pull/created:1", "created")
		if _, _, err := s.client.CreateSandbox(ctx, api.CreateRequest{Name: "made", RunOptions: api.RunOptions{Image: other}}); err != nil {
			t.Fatalf("create, pulling: %v", err)
		}
		if res, err := s.client.Exec(ctx, "made", api.ExecRequest{Cmd: "echo", Args: []string{"made"}}); err != nil || res.Stdout != "made\n" {
			t.Errorf("exec: %v %+v", err, res)
		}
		if err := s.client.RemoveSandbox(ctx, "made", true); err != nil {
			t.Errorf("rm: %v", err)
		}
		s.stop(t)
	})
}
