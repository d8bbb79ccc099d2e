package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// lifecycleSpec is a bundle for the stand-in role, in a cgroup of the
// test's own, joining this process's network namespace (to see the file
// passed), with hooks that save the state they are given.
func lifecycleSpec(t *testing.T, args string, hookDir string) *specs.Spec {
	s := baseSpec()
	s.Process.Args = []string{args}
	s.Linux.CgroupsPath = testCgroupPath(t)
	s.Linux.Namespaces = []specs.LinuxNamespace{{Type: "mount"}, {Type: "pid"}, {Type: "network", Path: "/proc/self/ns/net"}}
	s.Linux.Resources = &specs.LinuxResources{Pids: &specs.LinuxPids{Limit: i64(50)}}
	s.Annotations = map[string]string{"io.example/a": "b"}
	if hookDir != "" {
		hook := func(name string) []specs.Hook {
			return []specs.Hook{{Path: "/bin/sh", Args: []string{"sh", "-c", "cat > " + filepath.Join(hookDir, name)}, Timeout: intp(10)}}
		}
		s.Hooks = &specs.Hooks{Prestart: hook("prestart"), CreateRuntime: hook("createRuntime"), Poststart: hook("poststart"), Poststop: hook("poststop")}
	}
	return s
}

func hookState(t *testing.T, path string) specs.State {
	t.Helper()
	var s specs.State
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("hook did not run: %v", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("hook state %q: %v", b, err)
	}
	return s
}

func statusOf(t *testing.T, rt *Runtime, id string) specs.ContainerState {
	t.Helper()
	s, err := rt.StateOf(id)
	if err != nil {
		t.Fatal(err)
	}
	return s.Status
}

func TestLifecycleThroughAStandInRole(t *testing.T) {
	root, hooks := t.TempDir(), t.TempDir()
	spec := lifecycleSpec(t, "sleep", hooks)
	bundle := writeBundle(t, spec)
	rt := fakeRuntime(t, root)
	pidFile := filepath.Join(t.TempDir(), "init.pid")
	if err := rt.Create(CreateOptions{ID: "box", Bundle: bundle, PidFile: pidFile}); err != nil {
		t.Fatal(err)
	}
	pid := readPidFile(t, pidFile)
	defer func() {
		if pidAlive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			reap(t, pid)
		}
		rt.Delete("box", true)
	}()
	s, err := rt.StateOf("box")
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != specs.StateCreated || s.Pid != pid || s.Bundle != bundle && !strings.HasSuffix(bundle, s.Bundle) || s.Annotations["io.example/a"] != "b" || s.Version != specs.Version {
		t.Errorf("state %+v", s)
	}
	for _, h := range []string{"prestart", "createRuntime"} {
		if hs := hookState(t, filepath.Join(hooks, h)); hs.Status != specs.StateCreated || hs.Pid != pid || hs.ID != "box" {
			t.Errorf("%s hook got %+v", h, hs)
		}
	}
	if pids, err := rt.Pids("box"); err != nil || len(pids) != 1 || pids[0] != pid {
		t.Errorf("pids %v %v (the container's process is not in its cgroup)", pids, err)
	}
	if err := rt.Pause("box", true); err == nil || err.Error() != "container not running" {
		t.Errorf("pause of a created container: %v", err)
	}
	if err := rt.Start("box"); err != nil {
		t.Fatal(err)
	}
	if st := statusOf(t, rt, "box"); st != specs.StateRunning {
		t.Errorf("after start: %s", st)
	}
	if hs := hookState(t, filepath.Join(hooks, "poststart")); hs.Status != specs.StateRunning || hs.Pid != pid {
		t.Errorf("poststart hook got %+v", hs)
	}
	if err := rt.Start("box"); err == nil || err.Error() != "cannot start an already running container" {
		t.Errorf("second start: %v", err)
	}
	if err := rt.Pause("box", true); err != nil {
		t.Fatal(err)
	}
	if st := statusOf(t, rt, "box"); st != StatePaused {
		t.Errorf("after pause: %s", st)
	}
	if err := rt.Pause("box", false); err != nil {
		t.Fatal(err)
	}
	if err := rt.Delete("box", false); err == nil || err.Error() != "cannot delete container box that is not stopped: running" {
		t.Errorf("delete of a running container: %v", err)
	}
	if err := rt.Kill("box", syscall.SIGTERM, false); err != nil {
		t.Fatal(err)
	}
	reap(t, pid) // as the shim does
	if st := statusOf(t, rt, "box"); st != specs.StateStopped {
		t.Errorf("after kill: %s", st)
	}
	if err := rt.Kill("box", syscall.SIGTERM, false); err == nil || err.Error() != "container not running" {
		t.Errorf("kill of a stopped container: %v", err)
	}
	cg := readCgroupOf(t, root, "box")
	if err := rt.Delete("box", false); err != nil {
		t.Fatal(err)
	}
	if hs := hookState(t, filepath.Join(hooks, "poststop")); hs.Status != specs.StateStopped {
		t.Errorf("poststop hook got %+v", hs)
	}
	if _, err := os.Stat(filepath.Join(root, "box")); !os.IsNotExist(err) {
		t.Errorf("state directory left: %v", err)
	}
	for _, d := range append(cg.Paths, cg.Made...) {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left", d)
		}
	}
	if _, err := rt.StateOf("box"); !errors.Is(err, ErrNotExist) {
		t.Errorf("state after delete: %v", err)
	}
}

func readCgroupOf(t *testing.T, root, id string) *Cgroup {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, id, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil || st.Cgroup == nil {
		t.Fatalf("state %s: %v", b, err)
	}
	return st.Cgroup
}

// TestDeleteKillsWhatIsLeft: delete of a created container kills it (as
// runc), delete --force of a running one too, and kill --all reaches
// every process of the cgroup.
func TestDeleteKillsWhatIsLeft(t *testing.T) {
	root := t.TempDir()
	rt := fakeRuntime(t, root)
	for _, c := range []struct {
		id      string
		start   bool
		force   bool
		killAll bool
	}{
		{"created", false, false, false},
		{"running", true, true, false},
		{"killall", true, false, true},
	} {
		t.Run(c.id, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			if err := rt.Create(CreateOptions{ID: c.id, Bundle: writeBundle(t, lifecycleSpec(t, "sleep", "")), PidFile: pidFile}); err != nil {
				t.Fatal(err)
			}
			pid := readPidFile(t, pidFile)
			cg := readCgroupOf(t, root, c.id)
			if c.start {
				if err := rt.Start(c.id); err != nil {
					t.Fatal(err)
				}
			}
			if c.killAll {
				if err := rt.Kill(c.id, syscall.SIGKILL, true); err != nil {
					t.Fatal(err)
				}
				reap(t, pid)
				if err := rt.Kill(c.id, syscall.SIGKILL, true); err != nil {
					t.Errorf("kill --all of a stopped container: %v", err)
				}
			}
			if err := rt.Delete(c.id, c.force); err != nil {
				t.Fatal(err)
			}
			reap(t, pid)
			if pidAlive(pid) {
				t.Error("the container's process lives on")
			}
			for _, d := range cg.Paths {
				if _, err := os.Stat(d); !os.IsNotExist(err) {
					t.Errorf("cgroup %s left", d)
				}
			}
		})
	}
}

// TestCreateFailuresLeaveNothing: the role's error is create's, one line,
// and nothing of the container is left: no process, cgroup or state.
func TestCreateFailuresLeaveNothing(t *testing.T) {
	root := t.TempDir()
	rt := fakeRuntime(t, root)
	for _, c := range []struct{ args, want string }{
		{"fail-in-role", "fake role: asked to"},
		{"fail-in-init", "fake role: init asked to"},
	} {
		t.Run(c.args, func(t *testing.T) {
			spec := lifecycleSpec(t, c.args, "")
			path, _ := CgroupPath(spec.Linux.CgroupsPath, "box", false)
			err := rt.Create(CreateOptions{ID: "box", Bundle: writeBundle(t, spec)})
			if err == nil || err.Error() != c.want {
				t.Fatalf("%v; want %q", err, c.want)
			}
			if entries, _ := os.ReadDir(root); len(entries) != 0 {
				t.Errorf("%d entries left in the root", len(entries))
			}
			roots, _, _ := cgroupMounts()
			for _, r := range roots {
				if _, err := os.Stat(filepath.Join(r, path)); !os.IsNotExist(err) {
					t.Errorf("cgroup left in %s", r)
				}
			}
		})
	}
}

// TestStartOfAContainerWhoseProcessDied: start says so rather than wait
// on the FIFO for ever.
func TestStartOfAContainerWhoseProcessDied(t *testing.T) {
	root := t.TempDir()
	rt := fakeRuntime(t, root)
	pidFile := filepath.Join(t.TempDir(), "pid")
	if err := rt.Create(CreateOptions{ID: "box", Bundle: writeBundle(t, lifecycleSpec(t, "sleep", "")), PidFile: pidFile}); err != nil {
		t.Fatal(err)
	}
	defer rt.Delete("box", true)
	pid := readPidFile(t, pidFile)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	reap(t, pid)
	if err := rt.Start("box"); err == nil || err.Error() != "cannot start a container that has stopped" {
		t.Errorf("start: %v", err)
	}
}

// TestCreateWritesTheUserNamespaceMaps: create answers the role's userns
// report with the bundle's maps written, then mapped.
func TestCreateWritesTheUserNamespaceMaps(t *testing.T) {
	root := t.TempDir()
	rt := fakeRuntime(t, root)
	spec := lifecycleSpec(t, "sleep", "")
	spec.Linux.Namespaces = append(spec.Linux.Namespaces, specs.LinuxNamespace{Type: "user"})
	spec.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}}
	spec.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}}
	pidFile := filepath.Join(t.TempDir(), "pid")
	if err := rt.Create(CreateOptions{ID: "box", Bundle: writeBundle(t, spec), PidFile: pidFile}); err != nil {
		t.Fatal(err)
	}
	pid := readPidFile(t, pidFile)
	if err := rt.Delete("box", false); err != nil {
		t.Fatal(err)
	}
	reap(t, pid)
}

// TestCreateSendsTheTerminalToTheConsoleSocket: with process.terminal the
// master the container's process reports created with reaches
// --console-socket, as runc sends it.
func TestCreateSendsTheTerminalToTheConsoleSocket(t *testing.T) {
	root := t.TempDir()
	rt := fakeRuntime(t, root)
	sock := filepath.Join(t.TempDir(), "console.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan error, 1)
	go func() {
		conn, err := l.AcceptUnix()
		if err != nil {
			got <- err
			return
		}
		defer conn.Close()
		buf, oob := make([]byte, 256), make([]byte, unix.CmsgSpace(4))
		_, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
		if err != nil {
			got <- err
			return
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 {
			got <- fmt.Errorf("control messages: %v", err)
			return
		}
		fds, err := unix.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) != 1 {
			got <- fmt.Errorf("rights: %v", err)
			return
		}
		defer unix.Close(fds[0])
		_, err = unix.IoctlGetInt(fds[0], unix.TIOCGPTN)
		got <- err
	}()
	spec := lifecycleSpec(t, "sleep", "")
	spec.Process.Terminal = true
	pidFile := filepath.Join(t.TempDir(), "pid")
	if err := rt.Create(CreateOptions{ID: "box", Bundle: writeBundle(t, spec), PidFile: pidFile, ConsoleSocket: sock}); err != nil {
		t.Fatal(err)
	}
	pid := readPidFile(t, pidFile)
	if err := <-got; err != nil {
		t.Errorf("console socket: not a terminal master: %v", err)
	}
	if err := rt.Delete("box", false); err != nil {
		t.Fatal(err)
	}
	reap(t, pid)
}
