package programs_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/control"
	"github.com/jail-sandbox/jail/internal/programs"
)

// busyboxRoot lays out a root of Debian's static busybox in dir.
func busyboxRoot(t *testing.T, dir string) {
	t.Helper()
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox-static is needed")
	}
	for _, d := range []string{"bin", "proc", "dev", "sys", "tmp", "etc", "data"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sh", "cat", "id", "hostname", "ls", "grep", "echo", "touch", "stat", "sleep", "mount"} {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", name)); err != nil {
			t.Fatal(err)
		}
	}
}

// runRole starts the helper as role (argv[0]) with c in a message of kind,
// files attached (numbered from 4 in c), and answers its reports as jail oci does until the
// process it made reports created: it returns that process's pid (a child
// of this one by then: the test is a subreaper) and the file its output
// goes to.
func runRole(t *testing.T, role, kind string, c *config.Container, files ...*os.File) (int, *os.File) {
	t.Helper()
	conn, initEnd, err := control.Pair()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	helper, err := programs.Open(programs.Helper)
	if err != nil {
		t.Fatal(err)
	}
	defer helper.Close()
	path, err := helper.PathFor(1)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	cmd := &exec.Cmd{Path: path, Args: []string{role}, ExtraFiles: []*os.File{initEnd}, Stdout: out, Stderr: out}
	// What the role forks is reparented here when the role ends.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	initEnd.Close()
	// Attached: the description's FD N is the (N-4)th file.
	if err := conn.Send(control.Message{Kind: kind, Container: c}, files...); err != nil {
		t.Fatal(err)
	}
	pid := 0
	for created := false; !created; {
		msg, files, err := conn.Recv()
		if err != nil {
			cmd.Wait()
			b, _ := os.ReadFile(out.Name())
			t.Fatalf("%s ended without a report: %v\n%s", role, err, b)
		}
		for _, f := range files {
			f.Close()
		}
		switch msg.Kind {
		case control.KindUserns:
			// The bundle's maps, as jail oci create writes them.
			for file, data := range map[string]string{"uid_map": "0 100000 65536", "gid_map": "0 100000 65536"} {
				if err := os.WriteFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), file), []byte(data), 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := conn.Send(control.Message{Kind: control.KindMapped}); err != nil {
				t.Fatal(err)
			}
		case control.KindChild:
			pid = msg.Pid
		case control.KindCreated:
			created = true
		case control.KindError:
			cmd.Wait()
			t.Fatalf("jail: %s: %s", msg.Step, msg.Reason)
		default:
			t.Fatalf("unexpected report %q", msg.Kind)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v", role, err)
	}
	return pid, out
}

// waitExit waits for the child pid and returns its output so far and exit
// status.
func waitExit(t *testing.T, pid int, out *os.File) (string, int) {
	t.Helper()
	var ws syscall.WaitStatus
	done := make(chan error, 1)
	go func() {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("wait for %d: %v", pid, err)
		}
	case <-time.After(30 * time.Second):
		syscall.Kill(pid, syscall.SIGKILL)
		<-done
		t.Fatalf("process %d did not end within 30 s (a hang, not a timing check)", pid)
	}
	b, _ := os.ReadFile(out.Name())
	if ws.Signaled() {
		return string(b), 128 + int(ws.Signal())
	}
	return string(b), ws.ExitStatus()
}

// containerStart makes and starts c as jail oci create and start do, and
// returns the container's pid and its output's file.
func containerStart(t *testing.T, c config.Container) (int, *os.File) {
	t.Helper()
	state := t.TempDir()
	fifoPath := filepath.Join(state, "exec.fifo")
	if err := unix.Mkfifo(fifoPath, 0o600); err != nil {
		t.Fatal(err)
	}
	// The container's root opens it: its owner, as runc makes it.
	if c.New&unix.CLONE_NEWUSER != 0 {
		if err := os.Chown(fifoPath, 100000, 100000); err != nil {
			t.Fatal(err)
		}
	}
	fifo, err := os.OpenFile(fifoPath, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fifo.Close()
	c.ExecFifoFD = 4
	pid, out := runRole(t, "jail:container", control.KindContainer, &c, fifo)
	// Started: the FIFO's other end, read until the init writes or has
	// failed.
	r, err := os.OpenFile(fifoPath, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got, _ := unix.Read(int(r.Fd()), make([]byte, 1)); got == 1 {
			return pid, out
		}
		var info unix.Siginfo
		if unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil) == nil && info.Signo != 0 {
			return pid, out // ended before start: its status tells
		}
	}
	t.Fatal("the container did not start within 30 s (a hang, not a timing check)")
	return 0, nil
}

// containerRun runs c to its end and returns its output and exit status.
func containerRun(t *testing.T, c config.Container) (string, int) {
	t.Helper()
	pid, out := containerStart(t, c)
	return waitExit(t, pid, out)
}

// enterRun runs p in the running container pid as jail oci exec does and
// returns its output and exit status.
func enterRun(t *testing.T, pid int, p config.ContainerProcess) (string, int) {
	t.Helper()
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	pf := os.NewFile(uintptr(pidfd), "pidfd")
	defer pf.Close()
	var ns int64
	for name, flag := range map[string]int64{"user": unix.CLONE_NEWUSER, "mnt": unix.CLONE_NEWNS, "pid": unix.CLONE_NEWPID,
		"uts": unix.CLONE_NEWUTS, "ipc": unix.CLONE_NEWIPC, "net": unix.CLONE_NEWNET, "cgroup": unix.CLONE_NEWCGROUP} {
		mine, _ := os.Readlink("/proc/self/ns/" + name)
		theirs, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, name))
		if mine != theirs {
			ns |= flag
		}
	}
	c := config.Container{Join: []config.JoinedNamespace{{Type: ns, FD: 4}}, Process: p, ExecFifoFD: -1}
	epid, out := runRole(t, "jail:enter", control.KindEnter, &c, pf)
	return waitExit(t, epid, out)
}

// withBusyboxRoot is c on a fresh busybox root of its own, in new mount,
// pid, uts and ipc namespaces.
func withBusyboxRoot(t *testing.T, c config.Container) config.Container {
	t.Helper()
	root := t.TempDir()
	busyboxRoot(t, root)
	if err := os.Chmod(filepath.Dir(root), 0o755); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(root, &st); err != nil {
		t.Fatal(err)
	}
	c.New |= unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC
	c.Rootfs, c.RootfsDev, c.RootfsIno = root, st.Dev, st.Ino
	return c
}

// TestContainerRoleRunsABundle: the container role makes the namespaces
// asked for (a user namespace too, mapped by its supervisor), the root with
// its mounts, devices, masked and read-only paths, sets the host name,
// waits for the exec FIFO and becomes the process with the ids and
// capabilities given: pid 1 of its pid namespace, its exit status the
// container's.
func TestContainerRoleRunsABundle(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("as root")
	}
	for _, userns := range []bool{false, true} {
		t.Run(fmt.Sprintf("userns=%v", userns), func(t *testing.T) {
			c := withBusyboxRoot(t, config.Container{
				Mounts: []config.ContainerMount{
					{Destination: "/proc", Type: "proc", Source: "proc", Flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
					{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Flags: unix.MS_NOSUID, Data: "mode=755,size=65536k"},
					{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Flags: unix.MS_NOSUID | unix.MS_NOEXEC, Data: "newinstance,ptmxmode=0666,mode=0620"},
				},
				Devices:       []config.Device{{Path: "/dev/null", Type: "c", Major: 1, Minor: 3, Mode: 0o666}},
				SetHostname:   true,
				Hostname:      "oci-test",
				MaskedPaths:   []string{"/proc/kcore"},
				ReadonlyPaths: []string{"/proc/sys"},
				Process: config.ContainerProcess{
					Args: []string{"sh", "-c", `echo pid $$; id -u; id -g; hostname; grep CapBnd /proc/self/status; ` +
						`cat /proc/kcore | wc -c; touch /data/x 2>/dev/null || echo data ro; echo 1 > /proc/sys/kernel/ostype 2>/dev/null || echo sys ro; exit 7`},
					Env: []string{"PATH=/bin"}, Cwd: "/", UID: 1000, GID: 1000,
					Bounding:        1 << unix.CAP_CHOWN,
					NoNewPrivileges: true,
				},
			})
			var etc unix.Stat_t
			if err := unix.Stat(c.Rootfs+"/etc", &etc); err != nil {
				t.Fatal(err)
			}
			c.Mounts = append(c.Mounts, config.ContainerMount{Destination: "/data", Source: c.Rootfs + "/etc", Flags: unix.MS_BIND | unix.MS_REC | unix.MS_RDONLY,
				SourceDev: etc.Dev, SourceIno: etc.Ino})
			if userns {
				c.New |= unix.CLONE_NEWUSER
			} else {
				c.Mounts = append(c.Mounts, config.ContainerMount{Destination: "/sys", Type: "sysfs", Source: "sysfs", Flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_RDONLY})
			}
			out, code := containerRun(t, c)
			if code != 7 {
				t.Errorf("exit %d, want 7\n%s", code, out)
			}
			for _, want := range []string{"pid 1\n", "1000\n1000\noci-test\n", "CapBnd:\t0000000000000001\n", "data ro\n", "sys ro\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("no %q in:\n%s", want, out)
				}
			}
			if bytes.Contains([]byte(out), []byte("jail:")) {
				t.Errorf("an error: %s", out)
			}
		})
	}
}

// TestEnterRoleJoinsAContainer: the enter role runs a process in a running
// container: in its pid, mount and uts namespaces (and its user namespace
// when it has one), with the ids and capabilities asked for, its exit
// status its own; the container runs on.
func TestEnterRoleJoinsAContainer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("as root")
	}
	for _, userns := range []bool{false, true} {
		t.Run(fmt.Sprintf("userns=%v", userns), func(t *testing.T) {
			c := withBusyboxRoot(t, config.Container{
				Mounts: []config.ContainerMount{
					{Destination: "/proc", Type: "proc", Source: "proc", Flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
					{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs"},
				},
				SetHostname: true, Hostname: "entered",
				Process: config.ContainerProcess{
					Args: []string{"sh", "-c", "echo made > /tmp/mark; exec sleep 1000"}, Env: []string{"PATH=/bin"}, Cwd: "/",
					// All this test has: a capability its root lacks
					// (where it runs in a container) cannot be given.
					Bounding: ownCaps(t), Permitted: ownCaps(t), Effective: ownCaps(t),
				},
			})
			if userns {
				c.New |= unix.CLONE_NEWUSER
			}
			pid, out := containerStart(t, c)
			defer func() {
				unix.Kill(pid, unix.SIGKILL)
				waitExit(t, pid, out)
			}()
			got, code := enterRun(t, pid, config.ContainerProcess{
				Args: []string{"sh", "-c", "echo pid $$; hostname; cat /tmp/mark; ls /proc | grep -c '^1$'; id -u; exit 3"},
				Env:  []string{"PATH=/bin"}, Cwd: "/tmp", UID: 1000, GID: 1000, NoNewPrivileges: true,
			})
			if code != 3 {
				t.Errorf("exit %d, want 3\n%s", code, got)
			}
			for _, want := range []string{"entered\nmade\n1\n1000\n"} {
				if !strings.Contains(got, want) {
					t.Errorf("no %q in:\n%s", want, got)
				}
			}
			if strings.Contains(got, "pid 1\n") {
				t.Errorf("the exec'd process is the container's pid 1:\n%s", got)
			}
			if unix.Kill(pid, 0) != nil {
				t.Error("the container ended with the exec")
			}
		})
	}
}

// ownCaps is this process's permitted capability set.
func ownCaps(t *testing.T) uint64 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapPrm:\t"); ok {
			caps, err := strconv.ParseUint(v, 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return caps
		}
	}
	t.Fatal("no CapPrm in /proc/self/status")
	return 0
}

// TestContainerRoleOfRootIsNotDumpableWhileMapped: the container role of a
// jail oci create run by root stays not dumpable while its new user
// namespace waits for its maps (only an unprivileged create needs it
// dumpable, to write them through /proc/PID): root's processes that lack
// CAP_SYS_PTRACE, such as a container's sharing the host's pid namespace,
// own the new namespace (root made it) and so could otherwise take the
// role's descriptors (its control socket to create, the files the bundle
// attached) or trace it, and what it forks, out of their confinement.
// geteuid in the new namespace, unmapped, is the overflow id, not 0: what
// decides is the id the role had before it.
func TestContainerRoleOfRootIsNotDumpableWhileMapped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("as root")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("needs setpriv (util-linux)")
	}
	conn, roleEnd, err := control.Pair()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	helper, err := programs.Open(programs.Helper)
	if err != nil {
		t.Fatal(err)
	}
	defer helper.Close()
	path, err := helper.PathFor(1)
	if err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: path, Args: []string{"jail:container"}, ExtraFiles: []*os.File{roleEnd}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	roleEnd.Close()
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	c := config.Container{New: unix.CLONE_NEWUSER, ExecFifoFD: -1}
	if err := conn.Send(control.Message{Kind: control.KindContainer, Container: &c}); err != nil {
		t.Fatal(err)
	}
	msg, files, err := conn.Recv()
	for _, f := range files {
		f.Close()
	}
	if err != nil || msg.Kind != control.KindUserns {
		t.Fatalf("the role's first report: %q, %v", msg.Kind, err)
	}
	// The role waits for "mapped" now. Its control socket, fd 3, is
	// there for root with every capability (the check sees the role)...
	socket := fmt.Sprintf("/proc/%d/fd/3", cmd.Process.Pid)
	if out, err := exec.Command("readlink", socket).CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "socket:") {
		t.Fatalf("root with its capabilities cannot read the role's %s: %v: %s", socket, err, out)
	}
	// ...and not for root without any.
	out, err := exec.Command(setpriv, "--bounding-set", "-all", "--inh-caps", "-all", "--ambient-caps", "-all", "--", "readlink", socket).CombinedOutput()
	if err == nil {
		t.Errorf("root without capabilities read the role's control socket while it waited for its maps (the role is dumpable): %s", out)
	}
}
