package test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// ociWithFiles runs jail oci in mode m with state root root, extra as its
// descriptors 3, 4, ..., and returns what it did. Its output goes to
// files, not pipes: a container it creates keeps create's stdout and
// stderr, and a pipe's reader would wait for the container to end.
func ociWithFiles(t *testing.T, m mode, root string, extra []*os.File, args ...string) result {
	t.Helper()
	cmd := command(m, append([]string{"oci", "--root", root}, args...)...)
	cmd.ExtraFiles = extra
	dir := t.TempDir()
	stdout, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	r := result{}
	if err := cmd.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		r.code = ee.ExitCode()
	}
	out, _ := os.ReadFile(stdout.Name())
	errOut, _ := os.ReadFile(stderr.Name())
	r.stdout, r.stderr = string(out), string(errOut)
	return r
}

// readPipe returns a pipe's read end and a channel that gets all that was
// written to its write end once every copy of it is closed.
func readPipe(t *testing.T) (w *os.File, got <-chan string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan string, 1)
	go func() {
		defer r.Close()
		b, _ := io.ReadAll(r)
		ch <- string(b)
	}()
	return w, ch
}

func received(t *testing.T, got <-chan string, what string) string {
	t.Helper()
	select {
	case s := <-got:
		return s
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: its pipe was not closed", what)
		return ""
	}
}

// TestOCIPreserveFDs: create --preserve-fds N gives the container's
// process the N descriptors after stdio that jail oci was given, at the
// same numbers (systemd's socket activation, as podman and runc pass it),
// and exec --preserve-fds does so for an exec'd process; they get no other
// descriptor, a startContainer hook gets none of them, and a count that
// names a descriptor jail was not given (none, or one of jail's own) or is
// out of bounds is refused with one line, leaving nothing behind.
func TestOCIPreserveFDs(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		if m.rootless {
			t.Skip("rootless jail oci needs a bundle with a user namespace: TestOCIContainerInAUserNamespace runs one")
		}
		spec := ociDefaultSpec([]string{"sh", "-c", "echo to-3 >&3; cat <&4 >&3; exec 3>&- 4<&-; exec sleep 1000"})
		// Its exec FIFO, kept open while the hook runs, is at a number
		// the preserved descriptors take.
		spec.Hooks = &specs.Hooks{StartContainer: []specs.Hook{{Path: "/bin/sh", Args: []string{"sh", "-c", "ls /proc/self/fd >/tmp/hook-fds"}}},
			// Run by the init holding the descriptors as received, in the
			// root's directory before the pivot: the container's /tmp is
			// tmp.
			CreateContainer: []specs.Hook{{Path: "/bin/sh", Args: []string{"sh", "-c", "ls /proc/self/fd >tmp/create-hook-fds"}, Env: []string{"PATH=/bin:/usr/bin"}}}}
		root, bundle := ociOwnBundle(t, m, spec, nil, nil)
		four := filepath.Join(bundle, "four")
		if err := os.WriteFile(four, []byte("content of 4\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		fourFile, err := os.Open(four)
		if err != nil {
			t.Fatal(err)
		}
		defer fourFile.Close()
		t.Cleanup(func() { jail(t, m, "oci", "--root", root, "delete", "--force", "box") })

		w, got := readPipe(t)
		r := ociWithFiles(t, m, root, []*os.File{w, fourFile}, "create", "--bundle", bundle, "--preserve-fds", "2", "box")
		w.Close()
		if r.code != 0 {
			t.Fatalf("create --preserve-fds 2: %d %q", r.code, r.stderr)
		}
		if r := jail(t, m, "oci", "--root", root, "start", "box"); r.code != 0 {
			t.Fatalf("start: %d %q", r.code, r.stderr)
		}
		if s := received(t, got, "the container's fd 3"); s != "to-3\ncontent of 4\n" {
			t.Errorf("the container's process wrote %q to its fd 3", s)
		}
		for _, hook := range []string{"hook-fds", "create-hook-fds"} {
			if r := jail(t, m, "oci", "--root", root, "exec", "box", "cat", "/tmp/"+hook); r.code != 0 || r.stdout != "0\n1\n2\n3\n" {
				// ls's own directory is 3: nothing of the caller's.
				t.Errorf("the hook's descriptors (%s): %d %q %q", hook, r.code, r.stdout, r.stderr)
			}
		}

		w, got = readPipe(t)
		// sh runs its last command in its own process: $$ is ls, whose
		// own directory is the last descriptor listed.
		r = ociWithFiles(t, m, root, []*os.File{w}, "exec", "--preserve-fds", "1", "box", "sh", "-c", "echo exec-to-3 >&3; ls /proc/$$/fd")
		w.Close()
		if r.code != 0 || r.stdout != "0\n1\n2\n3\n4\n" {
			t.Errorf("exec --preserve-fds 1: %d, descriptors %q, %q", r.code, r.stdout, r.stderr)
		}
		if s := received(t, got, "the exec'd fd 3"); s != "exec-to-3\n" {
			t.Errorf("the exec'd process wrote %q to its fd 3", s)
		}
		// Moved before the process's rlimits: copying 2 above 3 and 4
		// fails with RLIMIT_NOFILE 6.
		proc := filepath.Join(bundle, "process.json")
		data, _ := json.Marshal(specs.Process{Args: []string{"ls", "/proc/self/fd"}, Cwd: "/", Env: []string{"PATH=/bin"},
			Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 6, Hard: 1024}}})
		if err := os.WriteFile(proc, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r = ociWithFiles(t, m, root, []*os.File{fourFile, fourFile}, "exec", "--preserve-fds", "2", "--process", proc, "box")
		if r.code != 0 || r.stdout != "0\n1\n2\n3\n4\n5\n" {
			t.Errorf("exec --preserve-fds 2 with RLIMIT_NOFILE 6: %d, descriptors %q, %q", r.code, r.stdout, r.stderr)
		}
		// Without the flag, nothing of the caller's.
		w, _ = readPipe(t)
		r = ociWithFiles(t, m, root, []*os.File{w}, "exec", "box", "sh", "-c", "ls /proc/$$/fd")
		w.Close()
		if r.code != 0 || r.stdout != "0\n1\n2\n3\n" {
			t.Errorf("exec without --preserve-fds: %d, descriptors %q, %q", r.code, r.stdout, r.stderr)
		}
		// Given more than it counts, the process gets what it counts.
		w, _ = readPipe(t)
		r = ociWithFiles(t, m, root, []*os.File{fourFile, w, fourFile}, "exec", "--preserve-fds", "1", "box", "sh", "-c", "ls /proc/$$/fd")
		w.Close()
		if r.code != 0 || r.stdout != "0\n1\n2\n3\n4\n" {
			t.Errorf("exec --preserve-fds 1 given 3: %d, descriptors %q, %q", r.code, r.stdout, r.stderr)
		}

		logFile := filepath.Join(bundle, "log")
		for _, c := range []struct {
			global []string
			args   []string
			files  int
			want   string
		}{
			{nil, []string{"--preserve-fds", "1"}, 0, "--preserve-fds 1: descriptor 3 "},
			{nil, []string{"--preserve-fds", "3"}, 2, "--preserve-fds 3: descriptor 5 "},
			{nil, []string{"--preserve-fds", "-1"}, 0, "must be from 0 to 32"},
			{nil, []string{"--preserve-fds", "33"}, 0, "must be from 0 to 32"},
			{nil, []string{"--preserve-fds", "1000000000000"}, 0, "-preserve-fds"},
			{nil, []string{"--preserve-fds", "x"}, 0, "-preserve-fds"},
			// Nothing passed: the log jail opened (or a file of Go's
			// runtime) is on 3, and is not handed on.
			{[]string{"--log", logFile}, []string{"--preserve-fds", "1"}, 0, "--preserve-fds 1: descriptor 3 was not given to jail (it is jail's own)"},
		} {
			extra := make([]*os.File, c.files)
			for i := range extra {
				extra[i] = fourFile
			}
			create := append(append(append(append([]string(nil), c.global...), "create", "--bundle", bundle), c.args...), "other")
			expectOneLineFailure(t, ociWithFiles(t, m, root, extra, create...), c.want)
			exec := append(append(append(append([]string(nil), c.global...), "exec"), c.args...), "box", "true")
			expectOneLineFailure(t, ociWithFiles(t, m, root, extra, exec...), c.want)
		}
		if b, _ := os.ReadFile(logFile); strings.Count(string(b), "it is jail's own") != 2 {
			t.Errorf("the log says %q", b)
		}
		if r := jail(t, m, "oci", "--root", root, "list", "-q"); r.stdout != "box\n" {
			t.Errorf("after refused creates, the containers are %q", r.stdout)
		}
	})
}

// TestOCIPreserveFDsBeforeTheBundlesFilterOnATerminal: the preserved
// descriptors are moved into place before the bundle's seccomp filter is
// loaded (after the ids change or before, as no_new_privs says), so a
// filter that denies every call that moves descriptors does not keep the
// process from getting them; with a terminal, the process has it on 0, 1
// and 2, the caller's descriptor on 3, and nothing else.
func TestOCIPreserveFDsBeforeTheBundlesFilterOnATerminal(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		if m.rootless {
			t.Skip("rootless jail oci needs a bundle with a user namespace: TestOCIContainerInAUserNamespace runs one")
		}
		for _, noNewPrivs := range []bool{true, false} {
			t.Run(fmt.Sprintf("no_new_privs=%v", noNewPrivs), func(t *testing.T) {
				spec := ociDefaultSpec([]string{"ls", "-l", "/proc/self/fd/"})
				spec.Process.Terminal = true
				spec.Process.NoNewPrivileges = noNewPrivs
				eperm := uint(unix.EPERM)
				spec.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{
					{Names: []string{"dup", "dup2", "dup3", "fcntl"}, Action: specs.ActErrno, ErrnoRet: &eperm}}}
				root, bundle := ociOwnBundle(t, m, spec, nil, nil)
				t.Cleanup(func() { jail(t, m, "oci", "--root", root, "delete", "--force", "box") })
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				var st unix.Stat_t
				if err := unix.Fstat(int(w.Fd()), &st); err != nil {
					t.Fatal(err)
				}
				sock, masters := consoleSocket(t)
				res := ociWithFiles(t, m, root, []*os.File{w}, "create", "--bundle", bundle, "--console-socket", sock, "--preserve-fds", "1", "box")
				w.Close()
				if res.code != 0 {
					t.Fatalf("create: %d %q", res.code, res.stderr)
				}
				master, ok := <-masters
				if !ok || master == nil {
					t.Fatal("no terminal on the console socket")
				}
				defer master.Close()
				scr := watch(master)
				if res := jail(t, m, "oci", "--root", root, "start", "box"); res.code != 0 {
					t.Fatalf("start: %d %q", res.code, res.stderr)
				}
				links := map[string]string{}
				for _, line := range strings.Split(scr.untilClosed(t), "\n") {
					fields := strings.Fields(line)
					if n := len(fields); n >= 3 && fields[n-2] == "->" {
						links[fields[n-3]] = fields[n-1]
					}
				}
				// ls's own directory, 4, is closed by the time it reads
				// the links.
				pipe := fmt.Sprintf("pipe:[%d]", st.Ino)
				if len(links) != 4 || links["3"] != pipe {
					t.Errorf("the process's descriptors are %v; want the terminal on 0, 1 and 2, %s on 3", links, pipe)
				}
				for _, fd := range []string{"0", "1", "2"} {
					if !strings.HasPrefix(links[fd], "/dev/pts/") {
						t.Errorf("descriptor %s is %q, not the terminal", fd, links[fd])
					}
				}
			})
		}
	})
}

// untilClosed returns all that came on the terminal once its last slave
// descriptor is closed.
func (s *screen) untilClosed(t *testing.T) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case b, ok := <-s.data:
			if !ok {
				return s.buf.String()
			}
			s.buf.Write(b)
		case <-deadline:
			t.Fatalf("the terminal was not closed; screen:\n%s", s.buf.String())
		}
	}
}

// TestOCIPreserveFDsLeaveTheHooksTheirDescriptors: a created container's
// init moves the preserved descriptors into place and leaves no other copy
// of them, so that with the process's RLIMIT_NOFILE (set before its
// startContainer hooks run) the hooks have the descriptors they need:
// with 2 preserved and RLIMIT_NOFILE 10, the init holds 0 to 4 and the
// exec FIFO, and a hook's state, output pipe and pidfd take the four
// numbers below 10 left (the copies it kept took two of them). At the
// bound, 32, the process gets 3 to 34.
func TestOCIPreserveFDsLeaveTheHooksTheirDescriptors(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		if m.rootless {
			t.Skip("rootless jail oci needs a bundle with a user namespace: TestOCIContainerInAUserNamespace runs one")
		}
		for _, c := range []struct {
			preserved int
			nofile    uint64
		}{{2, 10}, {32, 1024}} {
			t.Run(fmt.Sprintf("%d preserved, RLIMIT_NOFILE %d", c.preserved, c.nofile), func(t *testing.T) {
				spec := ociDefaultSpec([]string{"ls", "/proc/self/fd"})
				spec.Process.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: c.nofile, Hard: c.nofile}}
				spec.Hooks = &specs.Hooks{StartContainer: []specs.Hook{{Path: "/bin/sh", Args: []string{"sh", "-c", "true"}}}}
				root, bundle := ociOwnBundle(t, m, spec, nil, nil)
				t.Cleanup(func() { jail(t, m, "oci", "--root", root, "delete", "--force", "box") })
				null, err := os.Open(os.DevNull)
				if err != nil {
					t.Fatal(err)
				}
				defer null.Close()
				extra := make([]*os.File, c.preserved)
				for i := range extra {
					extra[i] = null
				}
				out, err := os.Create(filepath.Join(bundle, "out"))
				if err != nil {
					t.Fatal(err)
				}
				defer out.Close()
				cmd := command(m, "oci", "--root", root, "create", "--bundle", bundle, "--preserve-fds", strconv.Itoa(c.preserved), "box")
				cmd.ExtraFiles, cmd.Stdout, cmd.Stderr = extra, out, out
				if err := cmd.Run(); err != nil {
					b, _ := os.ReadFile(out.Name())
					t.Fatalf("create: %v: %s", err, b)
				}
				if res := jail(t, m, "oci", "--root", root, "start", "box"); res.code != 0 {
					t.Fatalf("start: %d %q", res.code, res.stderr)
				}
				var want []string
				for fd := 0; fd <= 3+c.preserved; fd++ { // the last, ls's directory
					want = append(want, strconv.Itoa(fd))
				}
				sort.Strings(want) // as ls lists them
				waitFor(t, 10*time.Second, "the process's output", func() bool {
					b, _ := os.ReadFile(out.Name())
					return strings.Count(string(b), "\n") >= len(want)
				})
				if b, _ := os.ReadFile(out.Name()); string(b) != strings.Join(want, "\n")+"\n" {
					t.Errorf("the process's descriptors: %q, want %q", b, want)
				}
			})
		}
	})
}

// TestOCIPreserveFDsRefusesWhatCannotBePassed: a descriptor the kernel
// will not pass in a message (an io_uring) is refused by create and exec
// in one line that names it, before anything is made.
func TestOCIPreserveFDsRefusesWhatCannotBePassed(t *testing.T) {
	var params [120]byte // struct io_uring_params
	ring, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
	if errno != 0 {
		t.Skipf("io_uring_setup: %v", errno)
	}
	ringFile := os.NewFile(ring, "io_uring")
	defer ringFile.Close()
	forEachMode(t, func(t *testing.T, m mode) {
		if m.rootless {
			t.Skip("rootless jail oci needs a bundle with a user namespace: TestOCIContainerInAUserNamespace runs one")
		}
		root, bundle := ociOwnBundle(t, m, ociDefaultSpec([]string{"sleep", "1000"}), nil, nil)
		t.Cleanup(func() { jail(t, m, "oci", "--root", root, "delete", "--force", "box") })
		ociCreate(t, m, root, bundle)
		null, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer null.Close()
		const want = "--preserve-fds 2: descriptor 4 cannot be passed on"
		expectOneLineFailure(t, ociWithFiles(t, m, root, []*os.File{null, ringFile}, "create", "--bundle", bundle, "--preserve-fds", "2", "other"), want)
		expectOneLineFailure(t, ociWithFiles(t, m, root, []*os.File{null, ringFile}, "exec", "--preserve-fds", "2", "box", "true"), want)
		if r := jail(t, m, "oci", "--root", root, "list", "-q"); r.stdout != "box\n" {
			t.Errorf("after the refused create, the containers are %q", r.stdout)
		}
	})
}

// TestOCIPreserveFDsUnderTheCallersLowRlimit: the init moves the 32
// descriptors it received, one above the other, down onto 3 to 34 without
// copies above them, so a caller whose RLIMIT_NOFILE (which the role and
// the init inherit) lets the role receive them lets the init place them:
// with 48, it needed 69 to copy them all above 34 first.
func TestOCIPreserveFDsUnderTheCallersLowRlimit(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		if m.rootless {
			t.Skip("rootless jail oci needs a bundle with a user namespace: TestOCIContainerInAUserNamespace runs one")
		}
		root, bundle := ociOwnBundle(t, m, ociDefaultSpec([]string{"ls", "/proc/self/fd"}), nil, nil)
		t.Cleanup(func() { jail(t, m, "oci", "--root", root, "delete", "--force", "box") })
		null, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer null.Close()
		extra := make([]*os.File, 32)
		for i := range extra {
			extra[i] = null
		}
		out, err := os.Create(filepath.Join(bundle, "out"))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		cmd := programAs(m, "prlimit", "--nofile=48:4096", jailBin, "oci", "--root", root, "create", "--bundle", bundle, "--preserve-fds", "32", "box")
		cmd.ExtraFiles, cmd.Stdout, cmd.Stderr = extra, out, out
		if err := cmd.Run(); err != nil {
			b, _ := os.ReadFile(out.Name())
			t.Fatalf("create: %v: %s", err, b)
		}
		if r := jail(t, m, "oci", "--root", root, "start", "box"); r.code != 0 {
			t.Fatalf("start: %d %q", r.code, r.stderr)
		}
		var want []string
		for fd := 0; fd <= 35; fd++ { // 35: ls's directory
			want = append(want, strconv.Itoa(fd))
		}
		sort.Strings(want)
		waitFor(t, 10*time.Second, "the process's end", func() bool {
			r := jail(t, m, "oci", "--root", root, "state", "box")
			return strings.Contains(r.stdout, `"stopped"`)
		})
		if b, _ := os.ReadFile(out.Name()); string(b) != strings.Join(want, "\n")+"\n" {
			t.Errorf("the process's descriptors: %q, want %q", b, want)
		}
	})
}
