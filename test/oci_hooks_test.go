package test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The createContainer and startContainer hooks (docs/oci.md §4), which the
// container's init runs: the first in the container's namespaces before it
// pivots into the root, the second in the root, as the container's process,
// once started and before the process runs.

// writeHook writes an executable shell script and returns its path.
func writeHook(t *testing.T, path, script string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// namespaceLinks reads the namespace links of process pid ("self" too)
// that a container has of its own.
func namespaceLinks(t *testing.T, pid string) string {
	t.Helper()
	var links []string
	for _, ns := range []string{"mnt", "pid", "net", "uts", "ipc", "cgroup"} {
		l, err := os.Readlink(filepath.Join("/proc", pid, "ns", ns))
		if err != nil {
			t.Fatal(err)
		}
		links = append(links, l)
	}
	return strings.Join(links, " ")
}

// TestOCICreateContainerHooksRunInTheContainerBeforeItsPivot: the hooks
// run during create, after prestart and createRuntime, in the container's
// namespaces (every one of them the container's process has), in the
// root's directory of the tree before the pivot, with the container's
// mounts made (a tmpfs only the container has, at the root's /tmp, takes
// the hook's marker, which the process finds), the state on stdin, and no
// descriptor but stdin, stdout and stderr.
func TestOCICreateContainerHooksRunInTheContainerBeforeItsPivot(t *testing.T) {
	checkNoLeaks(t)
	forEachMode(t, func(t *testing.T, m mode) {
		if m.rootless {
			t.Skip("rootless jail oci needs a bundle with a user namespace: TestOCIContainerInAUserNamespace runs one")
		}
		spec := ociDefaultSpec([]string{"sh", "-c", "cat /tmp/marker; exec sleep 1000"})
		root, bundle := ociOwnBundle(t, m, spec, nil, nil)
		rootfs := filepath.Join(bundle, "rootfs")
		order := filepath.Join(bundle, "order")
		record := func(name string) specs.Hook {
			return specs.Hook{Path: writeHook(t, filepath.Join(bundle, name+".sh"), "echo "+name+" >> "+order+"\n")}
		}
		cc := writeHook(t, filepath.Join(bundle, "create-container.sh"), `
cat > "$1/state.json"
echo createContainer >> "$1/order"
for ns in mnt pid net uts ipc cgroup; do readlink /proc/self/ns/$ns; done | tr '\n' ' ' > "$1/ns"
pwd > "$1/cwd"
ls /proc/self/fd > "$1/fds"
echo "made before the pivot" > "$1/rootfs/tmp/marker"
`)
		spec.Hooks = &specs.Hooks{
			Prestart:        []specs.Hook{record("prestart")},
			CreateRuntime:   []specs.Hook{record("createRuntime")},
			CreateContainer: []specs.Hook{{Path: cc, Args: []string{"create-container.sh", bundle}, Env: []string{"PATH=/bin:/usr/bin"}}},
		}
		writeOCISpec(t, bundle, spec)
		t.Cleanup(func() { jail(t, m, "oci", "--root", root, "delete", "--force", "box") })
		pid := ociCreate(t, m, root, bundle)

		if b, _ := os.ReadFile(order); string(b) != "prestart\ncreateRuntime\ncreateContainer\n" {
			t.Errorf("hooks ran in the order %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(bundle, "ns")); strings.TrimSpace(string(b)) != namespaceLinks(t, pid) {
			t.Errorf("the hook's namespaces %q, the container's %q", b, namespaceLinks(t, pid))
		}
		if b, _ := os.ReadFile(filepath.Join(bundle, "cwd")); strings.TrimSpace(string(b)) != rootfs {
			t.Errorf("the hook ran in %q, not the root's directory %s", b, rootfs)
		}
		// ls's own descriptor of the directory is 3.
		if b, _ := os.ReadFile(filepath.Join(bundle, "fds")); strings.Fields(string(b))[3] != "3" || len(strings.Fields(string(b))) != 4 {
			t.Errorf("the hook had the descriptors %q, want 0 1 2 (and ls's own 3)", b)
		}
		var st specs.State
		if b, err := os.ReadFile(filepath.Join(bundle, "state.json")); err != nil || json.Unmarshal(b, &st) != nil {
			t.Fatalf("the hook's stdin: %q %v", b, err)
		}
		if st.ID != "box" || strconv.Itoa(st.Pid) != pid || st.Status != specs.StateCreated || st.Bundle != bundle {
			t.Errorf("the hook's state %+v; want box, pid %s, created, %s", st, pid, bundle)
		}
		if _, err := os.Stat(filepath.Join(rootfs, "tmp", "marker")); !os.IsNotExist(err) {
			t.Errorf("the marker reached the host's %s/tmp (%v): the hook was not in the container's mounts", rootfs, err)
		}

		oci, out := ociWithOutput(t, m, root, bundle)
		if oci("start", "box") != 0 {
			b, _ := os.ReadFile(out)
			t.Fatalf("start: %s", b)
		}
		expectMarkerRead(t, out, "made before the pivot\n")
	})
}

// TestOCIStartContainerHooksRunInTheRootAsTheProcess: the hook's path is
// resolved in the container's root (the script exists only there), and it
// runs once start is called, before the process (which reads its marker),
// as the process: the bundle's user, capabilities and working directory,
// with the state on stdin and no other descriptor.
func TestOCIStartContainerHooksRunInTheRootAsTheProcess(t *testing.T) {
	checkNoLeaks(t)
	forEachMode(t, func(t *testing.T, m mode) {
		if m.rootless {
			t.Skip("rootless jail oci needs a bundle with a user namespace: TestOCIContainerInAUserNamespace runs one")
		}
		spec := ociDefaultSpec([]string{"sh", "-c", "cat /tmp/marker; exec sleep 1000"})
		spec.Process.User = specs.User{UID: 1000, GID: 1000}
		spec.Process.Cwd = "/tmp"
		spec.Hooks = &specs.Hooks{StartContainer: []specs.Hook{{Path: "/only-in-the-root.sh", Env: []string{"PATH=/bin"}}}}
		root, bundle := ociOwnBundle(t, m, spec, []string{"tr", "readlink"}, func(rootfs string) {
			writeHook(t, filepath.Join(rootfs, "only-in-the-root.sh"), `
cat > /shared/state.json
echo "$(id -u) $(pwd) $(grep CapEff /proc/self/status | tr -d '\t') $(ls /proc/self/fd | tr '\n' ' ')" > /shared/hook
echo "made by the hook" > /tmp/marker
`)
		})
		shared := filepath.Join(bundle, "shared")
		if err := os.Mkdir(shared, 0o777); err != nil || os.Chmod(shared, 0o777) != nil {
			t.Fatal(err)
		}
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: "/shared", Type: "bind", Source: shared, Options: []string{"rbind", "rw"}})
		writeOCISpec(t, bundle, spec)
		t.Cleanup(func() { jail(t, m, "oci", "--root", root, "delete", "--force", "box") })
		pid := ociCreate(t, m, root, bundle)
		if _, err := os.Stat(filepath.Join(shared, "hook")); !os.IsNotExist(err) {
			t.Fatalf("the hook ran before start (%v)", err)
		}
		oci, out := ociWithOutput(t, m, root, bundle)
		if oci("start", "box") != 0 {
			b, _ := os.ReadFile(out)
			t.Fatalf("start: %s", b)
		}
		// start returns once the hooks have run.
		b, err := os.ReadFile(filepath.Join(shared, "hook"))
		// uid 1000, the working directory, the bundle's three
		// capabilities (none effective for a user that is not root, as
		// the process), ls's own descriptor 3.
		if want := "1000 /tmp CapEff:0000000000000000 0 1 2 3 \n"; err != nil || string(b) != want {
			t.Errorf("the hook ran as %q (%v), want %q", b, err, want)
		}
		var st specs.State
		if b, err := os.ReadFile(filepath.Join(shared, "state.json")); err != nil || json.Unmarshal(b, &st) != nil {
			t.Fatalf("the hook's stdin: %q %v", b, err)
		}
		if st.ID != "box" || strconv.Itoa(st.Pid) != pid || st.Status != specs.StateCreated {
			t.Errorf("the hook's state %+v; want box, pid %s, created", st, pid)
		}
		expectMarkerRead(t, out, "made by the hook\n")
	})
}

// TestOCIContainerHookFailuresFailCreateOrStart: a createContainer hook
// that fails or outlives its timeout fails create, a startContainer one
// fails start, each with one line naming the hook (its output quoted),
// and the container is stopped; delete leaves nothing, not even what a
// hook left running (a process in the container's cgroup outside its pid
// namespace, here with none).
func TestOCIContainerHookFailuresFailCreateOrStart(t *testing.T) {
	checkNoLeaks(t)
	cases := []struct {
		name      string
		hooks     specs.Hooks
		noPidNS   bool
		createErr string
		startErr  string
	}{
		{name: "createContainer fails", hooks: specs.Hooks{CreateContainer: []specs.Hook{
			{Path: "/bin/true"}, {Path: "/bin/sh", Args: []string{"sh", "-c", "echo no GPU here; echo second line >&2; exit 3"}}}},
			createErr: "jail: oci create: createContainer hook #1 (/bin/sh): exit status 3: no GPU here second line\n"},
		// Bytes past ASCII that break a line (NEL, U+2028), turn text
		// around (U+202E) or are no UTF-8 at all do not reach create's
		// error.
		{name: "createContainer prints what breaks a line", hooks: specs.Hooks{CreateContainer: []specs.Hook{
			{Path: "/bin/sh", Args: []string{"sh", "-c", `printf 'a\302\205b\342\200\250c\342\200\256d\377e'; exit 3`}}}},
			createErr: "jail: oci create: createContainer hook #0 (/bin/sh): exit status 3: a b c d e\n"},
		{name: "createContainer times out", hooks: specs.Hooks{CreateContainer: []specs.Hook{
			{Path: "/bin/sh", Args: []string{"sh", "-c", "sleep 1000"}, Timeout: intPtr(1)}}},
			createErr: "jail: oci create: createContainer hook #0 (/bin/sh): timed out after 1s\n"},
		{name: "createContainer is missing", hooks: specs.Hooks{CreateContainer: []specs.Hook{{Path: "/nonexistent/hook"}}},
			createErr: "jail: oci create: createContainer hook #0 (/nonexistent/hook): exit status 127: exec: no such file or directory\n"},
		// The process left holds the hook's output: create does not wait
		// for its end.
		{name: "createContainer leaves a process", noPidNS: true, hooks: specs.Hooks{CreateContainer: []specs.Hook{
			{Path: "/bin/sh", Args: []string{"sh", "-c", "sleep 1000 & exit 0"}}}}},
		// What a failing hook left is ended with the container: create
		// removes its cgroup.
		{name: "createContainer fails leaving a process", noPidNS: true, hooks: specs.Hooks{CreateContainer: []specs.Hook{
			{Path: "/bin/sh", Args: []string{"sh", "-c", "sleep 1000 & exec sleep 1000"}, Timeout: intPtr(1)}}},
			createErr: "jail: oci create: createContainer hook #0 (/bin/sh): timed out after 1s\n"},
		{name: "createContainer floods its output", hooks: specs.Hooks{CreateContainer: []specs.Hook{
			{Path: "/bin/sh", Args: []string{"sh", "-c", "yes flood | head -c 10000000; exit 2"}}}},
			createErr: "jail: oci create: createContainer hook #0 (/bin/sh): exit status 2: flood flood flood"},
		// Writers that keep the pipe full (more than the init reads in
		// a turn) do not hold it past the timeout.
		{name: "createContainer floods its output from many processes", hooks: specs.Hooks{CreateContainer: []specs.Hook{
			{Path: "/bin/sh", Args: []string{"sh", "-c", "for i in 1 2 3 4 5 6 7 8; do cat /dev/zero & done; sleep 1000"}, Timeout: intPtr(2)}}},
			createErr: "jail: oci create: createContainer hook #0 (/bin/sh): timed out after 2s\n"},
		// A timeout the spec allows, past the init's 32 bits: 68 years
		// (the role failed to read its description, and create with an
		// unclear error).
		{name: "createContainer's timeout is past 2^31 seconds", hooks: specs.Hooks{CreateContainer: []specs.Hook{
			{Path: "/bin/true", Timeout: intPtr(1 << 40)}}}},
		{name: "createContainer's arguments are too long", hooks: specs.Hooks{CreateContainer: []specs.Hook{
			{Path: "/bin/true", Args: hugeArgs}}},
			createErr: "jail: oci create: createContainer hook #0 (/bin/true): exit status 127: exec: argument list too long\n"},
		{name: "startContainer fails", hooks: specs.Hooks{StartContainer: []specs.Hook{
			{Path: "/bin/sh", Args: []string{"sh", "-c", "echo refused; exit 4"}}}},
			startErr: "jail: oci start: startContainer hook #0 (/bin/sh): exit status 4: refused\n"},
		{name: "startContainer times out", noPidNS: true, hooks: specs.Hooks{StartContainer: []specs.Hook{
			{Path: "/bin/sh", Args: []string{"sh", "-c", "sleep 1000 & sleep 1000"}, Timeout: intPtr(1)}}},
			startErr: "jail: oci start: startContainer hook #0 (/bin/sh): timed out after 1s\n"},
		{name: "startContainer is a link out of the root", hooks: specs.Hooks{StartContainer: []specs.Hook{{Path: "/escape"}}},
			startErr: "jail: oci start: startContainer hook #0 (/escape): exit status 127: exec: no such file or directory\n"},
		// A hook of the image reaches none of the init's descriptors (the
		// exec FIFO's among them, through which it would forge start's
		// outcome): the init is not dumpable.
		{name: "startContainer writes to the init's descriptors", hooks: specs.Hooks{StartContainer: []specs.Hook{
			{Path: "/bin/sh", Args: []string{"sh", "-c", `for n in 0 1 2 3 4 5 6 7 8 9; do (echo '!forged' > /proc/1/fd/$n) 2>/dev/null && exit 8; done; exit 0`}}}}},
		// The init running it is still jail's helper: a hook of the image
		// cannot reach its program (it is not dumpable).
		{name: "startContainer is the init's program", hooks: specs.Hooks{StartContainer: []specs.Hook{{Path: "/proc/1/exe"}}},
			startErr: "jail: oci start: startContainer hook #0 (/proc/1/exe): exit status 127: exec: permission denied\n"},
	}
	forEachMode(t, func(t *testing.T, m mode) {
		if m.rootless {
			t.Skip("rootless jail oci needs a bundle with a user namespace: TestOCIContainerInAUserNamespace runs one")
		}
		for _, c := range cases {
			t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
				spec := ociDefaultSpec([]string{"sleep", "1000"})
				spec.Process.NoNewPrivileges = false
				if c.noPidNS {
					spec.Linux.Namespaces = spec.Linux.Namespaces[1:]
				}
				spec.Hooks = &c.hooks
				root, bundle := ociOwnBundle(t, m, spec, nil, func(rootfs string) {
					// A link in the image to a host program: in the
					// container's root it leads nowhere.
					if err := os.Symlink("/../../../../../../usr/bin/id", filepath.Join(rootfs, "escape")); err != nil {
						t.Fatal(err)
					}
				})
				t.Cleanup(func() { jail(t, m, "oci", "--root", root, "delete", "--force", "box") })
				r := ociToFiles(t, m, bundle, "--root", root, "create", "--bundle", bundle, "box")
				if c.createErr != "" {
					if r.code != 1 || !strings.HasPrefix(r.stderr, c.createErr) || strings.Count(r.stderr, "\n") != 1 || len(r.stderr) > 1024 {
						t.Errorf("create: status %d, stderr %q; want 1, %q", r.code, r.stderr, c.createErr)
					}
					expectOneLineFailure(t, jail(t, m, "oci", "--root", root, "state", "box"), "does not exist")
					return
				}
				if r.code != 0 {
					t.Fatalf("create: %d %s", r.code, r.stderr)
				}
				r = ociToFiles(t, m, bundle, "--root", root, "start", "box")
				if c.startErr != "" {
					if r.code != 1 || r.stderr != c.startErr {
						t.Errorf("start: status %d, stderr %q; want 1, %q", r.code, r.stderr, c.startErr)
					}
					waitFor(t, 10*time.Second, "the container stopped", func() bool {
						return strings.Contains(mustRun(t, m, "oci", "--root", root, "state", "box"), `"stopped"`)
					})
				} else if r.code != 0 {
					t.Errorf("start: %d %s", r.code, r.stderr)
				}
				if r := jail(t, m, "oci", "--root", root, "delete", "--force", "box"); r.code != 0 {
					t.Errorf("delete: %d %s", r.code, r.stderr)
				}
			})
		}
	})
}

func intPtr(i int) *int { return &i }

// hugeArgs are 3 MiB of arguments: within a bundle's 4 MiB, past what
// execve takes.
var hugeArgs = func() []string {
	args := []string{"true"}
	for i := 0; i < 24; i++ {
		args = append(args, strings.Repeat("a", 128<<10-1))
	}
	return args
}()

// ociToFiles runs jail oci with args, its stdout and stderr to files in
// dir (not pipes: a container created keeps create's, and a reader of a
// pipe would wait for it), and returns them and its status.
func ociToFiles(t *testing.T, m mode, dir string, args ...string) result {
	t.Helper()
	stdout, err := os.CreateTemp(dir, "stdout-")
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.CreateTemp(dir, "stderr-")
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd := command(m, append([]string{"oci"}, args...)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	var r result
	if err := cmd.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		r.code = ee.ExitCode()
	}
	o, _ := os.ReadFile(stdout.Name())
	e, _ := os.ReadFile(stderr.Name())
	r.stdout, r.stderr = string(o), string(e)
	return r
}

// TestContainerdRunsContainerHooks: a bundle with createContainer and
// startContainer hooks, as CDI's injected hooks reach jail oci through
// containerd's shim (here given whole to ctr run --config): the first, a
// host program, marks the container's /tmp before the pivot, the second,
// the container's own shell, once started; the process sees both, and
// nothing is left.
func TestContainerdRunsContainerHooks(t *testing.T) {
	checkNoLeaks(t)
	c := startContainerd(t, nil)
	rootfs, err := makeBusyboxRootfs(filepath.Join(c.dir, "hooked-rootfs"))
	if err != nil {
		t.Fatal(err)
	}
	spec := ociDefaultSpec([]string{"sh", "-c", "cat /tmp/created /tmp/started"})
	spec.Root.Path = rootfs
	spec.Hooks = &specs.Hooks{
		CreateContainer: []specs.Hook{{
			Path: writeHook(t, filepath.Join(c.dir, "create-container.sh"), `echo "created by $(cat | grep -o '"id":"[^"]*"')" > "$1/tmp/created"`+"\n"),
			Args: []string{"create-container.sh", rootfs}, Timeout: intPtr(10),
		}},
		StartContainer: []specs.Hook{{Path: "/bin/sh", Args: []string{"sh", "-c", "echo started in $(hostname) > /tmp/started"}, Timeout: intPtr(10)}},
	}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(c.dir, "hooked.json")
	if err := os.WriteFile(config, data, 0o644); err != nil {
		t.Fatal(err)
	}
	run := append([]string{"run"}, c.runtimeFlags()...)
	r := c.ctr(append(run, "--rm", "--config", config, "hooked")...)
	if want := "created by \"id\":\"hooked\"\nstarted in oci\n"; r.code != 0 || r.stdout != want {
		t.Errorf("ctr run: exit %d, stdout %q, stderr %q; want 0 and %q", r.code, r.stdout, r.stderr, want)
	}
	if left := strings.TrimSpace(c.ctr("containers", "list", "--quiet").stdout); left != "" {
		t.Errorf("containers left: %s", left)
	}
	if states := c.states(containerdNamespace); len(states) != 0 {
		t.Errorf("jail oci states left: %v", states)
	}
}

// TestOCIStartEndedDuringAStartContainerHook: a start ended while a
// startContainer hook runs (as the shim ends it at its timeout) leaves the
// container created, not started: the hook's end does not run the process
// (the init dies of SIGPIPE writing to the FIFO nobody reads), the
// container is stopped, and delete leaves nothing.
func TestOCIStartEndedDuringAStartContainerHook(t *testing.T) {
	checkNoLeaks(t)
	forEachMode(t, func(t *testing.T, m mode) {
		if m.rootless {
			t.Skip("rootless jail oci needs a bundle with a user namespace: TestOCIContainerInAUserNamespace runs one")
		}
		spec := ociDefaultSpec([]string{"sh", "-c", "echo ran > /shared/ran; exec sleep 1000"})
		spec.Hooks = &specs.Hooks{StartContainer: []specs.Hook{{Path: "/bin/sh", Args: []string{"sh", "-c",
			"echo > /shared/hook; while [ ! -e /shared/go ]; do sleep 1; done"}}}}
		root, bundle := ociOwnBundle(t, m, spec, nil, nil)
		shared := filepath.Join(bundle, "shared")
		if err := os.Mkdir(shared, 0o777); err != nil || os.Chmod(shared, 0o777) != nil {
			t.Fatal(err)
		}
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: "/shared", Type: "bind", Source: shared, Options: []string{"rbind", "rw"}})
		writeOCISpec(t, bundle, spec)
		t.Cleanup(func() { jail(t, m, "oci", "--root", root, "delete", "--force", "box") })
		ociCreate(t, m, root, bundle)

		start := command(m, "oci", "--root", root, "start", "box")
		if err := start.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the hook", func() bool {
			_, err := os.Stat(filepath.Join(shared, "hook"))
			return err == nil
		})
		_ = start.Process.Kill()
		_ = start.Wait()
		if st := mustRun(t, m, "oci", "--root", root, "state", "box"); !strings.Contains(st, `"created"`) {
			t.Errorf("state once start was ended: %s", st)
		}
		if err := os.WriteFile(filepath.Join(shared, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the container stopped", func() bool {
			return strings.Contains(mustRun(t, m, "oci", "--root", root, "state", "box"), `"stopped"`)
		})
		if _, err := os.Stat(filepath.Join(shared, "ran")); !os.IsNotExist(err) {
			t.Errorf("the process ran though no start waited for it (%v)", err)
		}
		if r := jail(t, m, "oci", "--root", root, "delete", "box"); r.code != 0 {
			t.Errorf("delete: %d %s", r.code, r.stderr)
		}
	})
}

// TestOCICreateEndedDuringACreateContainerHook: a create SIGKILLed while a
// hook runs (a createContainer hook, in the container's init; a prestart
// hook, in create itself) leaves nothing once the shim's cleanup, delete
// --force, has run: the hook ends with create, and delete removes the
// cgroup create had made, with the init it holds, though no state was
// written.
func TestOCICreateEndedDuringACreateContainerHook(t *testing.T) {
	checkNoLeaks(t)
	forEachMode(t, func(t *testing.T, m mode) {
		if m.rootless {
			t.Skip("rootless jail oci needs a bundle with a user namespace: TestOCIContainerInAUserNamespace runs one")
		}
		for _, kind := range []string{"createContainer", "prestart"} {
			t.Run(kind, func(t *testing.T) {
				spec := ociDefaultSpec([]string{"sleep", "1000"})
				root, bundle := ociOwnBundle(t, m, spec, nil, nil)
				marker := filepath.Join(bundle, "hook")
				hook := specs.Hook{Path: "/bin/sh", Args: []string{"sh", "-c", "echo > " + marker + "; exec sleep 1234567"}}
				spec.Hooks = &specs.Hooks{CreateContainer: []specs.Hook{hook}}
				if kind == "prestart" {
					spec.Hooks = &specs.Hooks{Prestart: []specs.Hook{hook}}
				}
				spec.Linux.CgroupsPath = "/jail-oci/create-ended-during-hook"
				writeOCISpec(t, bundle, spec)
				t.Cleanup(func() { jail(t, m, "oci", "--root", root, "delete", "--force", "box") })
				out, err := os.Create(filepath.Join(bundle, "out"))
				if err != nil {
					t.Fatal(err)
				}
				defer out.Close()
				create := command(m, "oci", "--root", root, "create", "--bundle", bundle, "box")
				create.Stdout, create.Stderr = out, out
				if err := create.Start(); err != nil {
					t.Fatal(err)
				}
				waitFor(t, 10*time.Second, "the hook", func() bool {
					_, err := os.Stat(marker)
					return err == nil
				})
				_ = create.Process.Kill()
				_ = create.Wait()
				waitFor(t, 10*time.Second, "the hook's end", func() bool { return !processRuns("sleep\x001234567\x00") })
				if r := jail(t, m, "oci", "--root", root, "delete", "--force", "box"); r.code != 0 {
					t.Errorf("delete --force: %d %s", r.code, r.stderr)
				}
				expectOneLineFailure(t, jail(t, m, "oci", "--root", root, "state", "box"), "does not exist")
				left, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", spec.Linux.CgroupsPath))
				if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", spec.Linux.CgroupsPath)); err == nil {
					left = append(left, filepath.Join("/sys/fs/cgroup", spec.Linux.CgroupsPath))
				}
				if len(left) > 0 {
					t.Errorf("cgroups left: %v", left)
				}
			})
		}
	})
}

// expectMarkerRead waits for the container's process's output in out and
// checks it is want, the marker it read from /tmp/marker.
func expectMarkerRead(t *testing.T, out, want string) {
	t.Helper()
	waitFor(t, 10*time.Second, "the process's output", func() bool {
		b, _ := os.ReadFile(out)
		return len(b) > 0
	})
	if b, _ := os.ReadFile(out); string(b) != want {
		t.Errorf("the process read %q from /tmp/marker", b)
	}
}

// processRuns says whether a process of that command line (its arguments
// each ended by a NUL) runs.
func processRuns(cmdline string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && string(b) == cmdline {
			return true
		}
	}
	return false
}
