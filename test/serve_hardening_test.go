package test

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/jail-sandbox/jail/api"
	"github.com/jail-sandbox/jail/client"
)

// TestServeHostileImageHoldsUpNothing: a run of an image whose /etc/passwd
// is a FIFO, which resolving its User reads, holds up neither the health
// check, nor other runs, nor the server's stop on SIGTERM: the server holds
// no lock across the making of a pool (SECURITY-LESSONS row 29). Where the
// image's reading never blocks (it refuses a FIFO), the run is refused at
// once and the rest holds all the same.
func TestServeHostileImageHoldsUpNothing(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		store := filepath.Join(sharedTempDir(t, ownerOf(m)), "store")
		dir := sharedTempDir(t, ownerOf(m))
		var entries []entry
		for _, e := range busyboxEntries(t) {
			if e.name == "etc/passwd" {
				e = entry{name: "etc/passwd", typ: tar.TypeFifo, mode: 0o644}
			}
			entries = append(entries, e)
		}
		img := image(t, []string{"/bin/true"}, []string{"PATH=/bin"}, layerOf(t, entries))
		cfg, _ := img.ConfigFile()
		cfg.Config.User = "app"
		img, err := mutate.ConfigFile(img, cfg)
		if err != nil {
			t.Fatal(err)
		}
		writeLayout(t, filepath.Join(dir, "fifo"), "localhost/fifo-passwd:1", img)
		importCmd := storeCommand(m, store, "image", "import", filepath.Join(dir, "fifo"))
		if r := runCmd(t, importCmd); r.code != 0 {
			t.Fatalf("import: exit %d: %s", r.code, r.stderr)
		}

		s := startServeWith(t, m, []string{"JAIL_IMAGE_STORE=" + store}, "--pool", "1")
		hostile := make(chan error, 1)
		go func() {
			_, err := s.client.Run(context.Background(), api.RunRequest{Image: "localhost/fifo-passwd:1", Cmd: "true", TimeoutS: 2})
			hostile <- err
		}()
		// The server blocks reading the FIFO once a writer comes, which
		// the test keeps open (and closes at the end): from then on the
		// run is stuck in the image's reading for as long as the test
		// wants.
		var writer *os.File
		defer func() {
			if writer != nil {
				writer.Close()
			}
		}()
		stuck := false
	wait:
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			select {
			case err := <-hostile:
				t.Logf("the hostile image's run ended at once: %v", err)
				break wait
			default:
			}
			if w, ok := fifoWriter(store); ok {
				writer, stuck = w, true
				t.Log("the hostile image's run reads the FIFO, and waits")
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the hostile run neither ended nor read the FIFO in 30 s (a hang guard)")
			}
		}

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
		defer cancel()
		if _, err := s.client.Health(ctx); err != nil {
			t.Errorf("health while a run reads a FIFO (stuck %v): %v", stuck, err)
		}
		res, err := s.client.Run(ctx, api.RunRequest{Cmd: "echo", Args: []string{"other"}})
		if err != nil || res.ExitCode != 0 || res.Stdout != "other\n" {
			t.Errorf("another run while a run reads a FIFO (stuck %v): %v %+v", stuck, err, res)
		}
		s.stop(t)
	})
}

// fifoWriter opens the FIFO of the store's layers for writing, which
// succeeds only once someone has it open for reading.
func fifoWriter(store string) (*os.File, bool) {
	var found *os.File
	_ = filepath.WalkDir(store, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeNamedPipe == 0 || found != nil {
			return nil
		}
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			found = f
		}
		return nil
	})
	return found, found != nil
}

// TestServeStopsAfterRunsThatFailedToBoot: runs whose cgroup the kernel
// refuses to make leave nothing waiting in the server, which answers the
// next run and stops on SIGTERM. A pids limit past the kernel's is refused
// up front (400) when the request asks for it; a profile's is not checked
// before the cgroup is made, and fails there.
func TestServeStopsAfterRunsThatFailedToBoot(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		config := sharedTempDir(t, ownerOf(m))
		profiles := filepath.Join(config, "jail", "profiles")
		if err := os.MkdirAll(profiles, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(profiles, "huge.yaml"), []byte("version: 1\nextends: default\nlimits:\n  pids: 9223372036854775807\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{filepath.Join(config, "jail"), profiles, filepath.Join(profiles, "huge.yaml")} {
			if o := ownerOf(m); o != nil {
				os.Chown(p, o.uid, o.gid)
			}
		}
		for _, pool := range []string{"0", "2"} {
			s := startServeWith(t, m, []string{"XDG_CONFIG_HOME=" + config}, "--pool", pool)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard
			for i := 0; i < 3; i++ {
				_, err := s.client.Run(ctx, api.RunRequest{Cmd: "true", Pids: 9223372036854775807})
				var e *client.Error
				if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, "--pids") {
					t.Errorf("--pool %s: pids past the kernel's limit: %v, want a 400", pool, err)
				}
				_, err = s.client.Run(ctx, api.RunRequest{Cmd: "true", Profile: "huge"})
				if err == nil {
					t.Errorf("--pool %s: a run with the profile's pids limit past the kernel's ran", pool)
				}
			}
			if res, err := s.client.Run(ctx, api.RunRequest{Cmd: "true"}); err != nil || res.ExitCode != 0 {
				t.Errorf("--pool %s: a run after the failures: %v %+v", pool, err, res)
			}
			cancel()
			s.stop(t)
		}
	})
}

// TestServeRefusesASocketDirectoryOthersCanChange: jail serve binds only
// in a directory that no one but its user can change, all the way up
// (SECURITY-LESSONS row 36): others could move its socket away and bind
// their own, then read the requests and forge the results. It refuses, in
// one line, exit 125, leaving no socket behind; it makes a missing
// directory itself, 0700.
func TestServeRefusesASocketDirectoryOthersCanChange(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		owner := ownerOf(m)
		uid, gid := os.Geteuid(), os.Getegid()
		if owner != nil {
			uid, gid = owner.uid, owner.gid
		}
		base := sharedTempDir(t, owner)
		mkdir := func(path string, mode os.FileMode, uid, gid int) string {
			t.Helper()
			if err := os.Mkdir(path, mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(path, uid, gid); err != nil {
				t.Fatal(err)
			}
			return path
		}
		// Another user than the server's, and not root (whose
		// directories above the socket's are trusted).
		const otherUID, otherGID = 65534, 65534
		link := func(target, path string) string {
			t.Helper()
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
			os.Lchown(path, uid, gid)
			return path
		}
		own := mkdir(filepath.Join(base, "own"), 0o700, uid, gid)
		for _, c := range []struct {
			name, dir, why string
		}{
			{"world-writable and sticky (1777)", mkdir(filepath.Join(base, "sticky"), os.ModeSticky|0o777, uid, gid), "writable by others"},
			{"world-writable (0777)", mkdir(filepath.Join(base, "open"), 0o777, uid, gid), "writable by others"},
			{"writable by its group (0770)", mkdir(filepath.Join(base, "group"), 0o770, uid, gid), "writable by others"},
			{"another user's", mkdir(filepath.Join(base, "other"), 0o755, otherUID, otherGID), "belongs to uid"},
			{"below a world-writable one", mkdir(filepath.Join(mkdir(filepath.Join(base, "open-above"), 0o777, uid, gid), "d"), 0o700, uid, gid), "writable by others"},
			{"below another user's", mkdir(filepath.Join(mkdir(filepath.Join(base, "other-above"), 0o755, otherUID, otherGID), "d"), 0o700, uid, gid), "belongs to uid"},
			{"a symbolic link to the user's own", link(own, filepath.Join(base, "link")), "symbolic link"},
			{"below a symbolic link", filepath.Join(link(base, filepath.Join(base, "link-above")), "own"), "symbolic link"},
		} {
			socket := filepath.Join(c.dir, "jail.sock")
			r := jail(t, m, "serve", "--socket", socket, "--pool", "0")
			if r.code != 125 || !strings.HasPrefix(r.stderr, "jail: serve: socket directory: ") || !strings.Contains(r.stderr, c.why) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%s: exit %d, stderr %q; want a one-line refusal: %s", c.name, r.code, r.stderr, c.why)
			}
			if _, err := os.Lstat(socket); err == nil {
				t.Errorf("%s: a socket was left at %s", c.name, socket)
			}
		}

		// Missing: made, 0700, the server's own.
		missing := filepath.Join(base, "new", "dir")
		s := startServeAt(t, m, filepath.Join(missing, "jail.sock"), nil, "--pool", "0")
		for _, d := range []string{filepath.Join(base, "new"), missing} {
			st, err := os.Stat(d)
			if err != nil {
				t.Fatal(err)
			}
			if sys := st.Sys().(*syscall.Stat_t); st.Mode().Perm() != 0o700 || int(sys.Uid) != uid {
				t.Errorf("%s made with mode %v, owner %d; want 0700, %d", d, st.Mode().Perm(), sys.Uid, uid)
			}
		}
		if _, err := s.client.Health(context.Background()); err != nil {
			t.Errorf("server in the directory it made: %v", err)
		}
		s.stop(t)
		if _, err := os.Lstat(filepath.Join(missing, "jail.sock")); err == nil {
			t.Errorf("the socket outlived its server")
		}
	})
}

// TestClientTalksOnlyToATrustedServer: the client sends a request (its
// environment, its stdin) only to a socket in a directory no one else can
// change, that belongs to a user it trusts (its own, root, and whom
// client.ServerUser names), and on which a server of that user answers
// (SECURITY-LESSONS row 36, the client's side).
func TestClientTalksOnlyToATrustedServer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to be two users")
	}
	checkNoLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard
	defer cancel()

	// A server of root's own, in a directory others may write.
	base := sharedTempDir(t, nil)
	for _, c := range []struct {
		name  string
		mode  os.FileMode
		trust bool
	}{{"0755", 0o755, true}, {"0700", 0o700, true}, {"1777", os.ModeSticky | 0o777, false}, {"0775", 0o775, false}} {
		dir := filepath.Join(base, c.name)
		os.Mkdir(dir, c.mode)
		os.Chmod(dir, c.mode)
		socket := filepath.Join(dir, "s.sock")
		stop := healthServer(t, socket)
		_, err := client.New(socket).Health(ctx)
		if c.trust && err != nil {
			t.Errorf("mode %s: %v", c.name, err)
		}
		if !c.trust && (err == nil || !strings.Contains(err.Error(), "writable by others")) {
			t.Errorf("mode %s: %v; want a refusal", c.name, err)
		}
		stop()
	}

	// The rootless user's server: trusted only when named.
	s := startServe(t, asRootless, "--pool", "0")
	if _, err := client.New(s.socket).Health(ctx); err == nil || !strings.Contains(err.Error(), "belongs to uid") {
		t.Errorf("another user's server: %v; want a refusal", err)
	}
	if _, err := client.New(s.socket, client.ServerUser(rootless.uid)).Health(ctx); err != nil {
		t.Errorf("a server of a user named trusted: %v", err)
	}
	// Its socket moved into root's directory and made root's: the
	// server is still the other user's, as the kernel says.
	planted := filepath.Join(sharedTempDir(t, nil), "jail.sock")
	if err := os.Rename(s.socket, planted); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(planted, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(planted).Health(ctx); err == nil || !strings.Contains(err.Error(), "the server runs as uid "+strconv.Itoa(rootless.uid)) {
		t.Errorf("another user's server behind root's socket: %v; want a refusal", err)
	}
	// A symbolic link to a trusted directory is not followed.
	link := filepath.Join(sharedTempDir(t, nil), "link")
	os.Symlink(filepath.Dir(planted), link)
	if _, err := client.New(filepath.Join(link, "jail.sock")).Health(ctx); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("socket through a symbolic link: %v; want a refusal", err)
	}
	s.stop(t)
}

// healthServer answers /v1/health on a socket at path, in this process,
// until the returned stop.
func healthServer(t *testing.T, path string) (stop func()) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(api.Health{Status: "ok"})
	})}
	go hs.Serve(l)
	return func() { hs.Close() }
}

// TestOutputKeptIsBounded: what a run keeps of its output is held in the
// memory of jail (jail serve's, for a request), outside the sandbox's
// limit: more than 64M per stream is refused, by the CLI (125) and the API
// (400); 64M is accepted.
func TestOutputKeptIsBounded(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		for _, limit := range []string{"64G", "65M", "67108865"} {
			r := jail(t, m, "run", "--json", "--output-limit", limit, "--", "true")
			if r.code != 125 || !strings.HasPrefix(r.stderr, "jail: --output-limit: ") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("--output-limit %s: exit %d, stderr %q; want a one-line refusal", limit, r.code, r.stderr)
			}
		}
		if r := jail(t, m, "run", "--json", "--output-limit", "64M", "--", "echo", "kept"); r.code != 0 || !strings.Contains(r.stdout, `"stdout":"kept\n"`) {
			t.Errorf("--output-limit 64M: exit %d, %q %q", r.code, r.stdout, r.stderr)
		}
		if r := jail(t, m, "run", "--pids", "9223372036854775807", "--", "true"); r.code != 125 || !strings.HasPrefix(r.stderr, "jail: --pids: ") {
			t.Errorf("--pids past the kernel's limit: exit %d, stderr %q", r.code, r.stderr)
		}

		s := startServe(t, m, "--pool", "1")
		ctx := context.Background()
		for _, limit := range []api.Size{"64G", "65M"} {
			_, err := s.client.Run(ctx, api.RunRequest{Cmd: "true", OutputLimit: limit})
			var e *client.Error
			if !errors.As(err, &e) || e.Status != 400 || !strings.HasPrefix(e.Message, "jail: output_limit: ") {
				t.Errorf("output_limit %s: %v; want a 400", limit, err)
			}
		}
		if res, err := s.client.Run(ctx, api.RunRequest{Cmd: "echo", Args: []string{"kept"}, OutputLimit: "64M"}); err != nil || res.Stdout != "kept\n" {
			t.Errorf("output_limit 64M: %v %+v", err, res)
		}
		// What is kept comes back whole, control bytes and all.
		res, err := s.client.Run(ctx, api.RunRequest{Cmd: "head", Args: []string{"-c", "3000000", "/dev/zero"}, OutputLimit: "2M"})
		if err != nil || len(res.Stdout) != 2<<20 || strings.Trim(res.Stdout, "\x00") != "" || !res.Truncated {
			t.Errorf("output_limit 2M of NUL bytes: %v, %d bytes kept, truncated %v", err, len(res.Stdout), res.Truncated)
		}
	})
}
