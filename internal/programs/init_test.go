package programs

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/internal/control"
	"github.com/jail-sandbox/jail/seccomp/filter"
)

// description returns the frame (length and body) of a config message as
// the supervisor sends it, with every kind of field set.
func description(t *testing.T) []byte {
	t.Helper()
	supervisor, initEnd, err := control.Pair()
	if err != nil {
		t.Fatal(err)
	}
	defer supervisor.Close()
	defer initEnd.Close()
	cfg := &config.Init{
		Rootfs: config.Rootfs{Lowers: []config.Layer{{Path: "/a", Dev: 1, Ino: 2}, {Path: "/b", Dev: 300, Ino: 1 << 40}},
			ReadOnly: true, Home: "/root"},
		Mounts: []config.Mount{{Source: "/src", SourceDev: 5, SourceIno: 6, SourceUID: -1, SourceGID: 1000,
			SourceIsDir: true, Destination: "/workspace", Writable: true, FD: -1}},
		Hostname: "jail",
		Process: config.Process{Args: []string{"sh", "-c", "true"}, Env: []string{"PATH=/bin"}, Cwd: "/",
			UID: 1000, GID: 1000, SwitchUser: true, Rows: 24, Cols: 80},
		Limits:      config.Limits{TmpSize: 1 << 20, RunSize: 1 << 16, ShmSize: -1, RlimitNproc: 256},
		Masks:       []string{"/etc/x"},
		ReadOnly:    []string{"/proc/y"},
		Seccomp:     filter.Filter{Allowlist: make([]byte, 16), Denials: make([]byte, 8)},
		EnterCgroup: false,
	}
	if err := supervisor.Send(control.Message{Kind: control.KindConfig, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, 4)
	if _, err := io.ReadFull(initEnd, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.LittleEndian.Uint32(hdr))
	if _, err := io.ReadFull(initEnd, body); err != nil {
		t.Fatal(err)
	}
	return append(hdr, body...)
}

// frame puts a length in front of body.
func frame(size uint32, body []byte) []byte {
	return append(binary.LittleEndian.AppendUint32(nil, size), body...)
}

// TestInitRefusesMalformedDescriptions: the init decodes its description
// strictly: a body cut short anywhere, one frame cut short,
// another version, a byte too many, an oversized length, a forker's spawn
// and random bytes all end it with status 1, silently, before it changes
// anything. It runs in namespaces of its own, in case one did not.
func TestInitRefusesMalformedDescriptions(t *testing.T) {
	p, err := Open(Helper)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	valid := description(t)
	body := valid[4:]
	cases := map[string][]byte{
		"another version":    frame(uint32(len(body)), append([]byte{2}, body[1:]...)),
		"a byte too many":    frame(uint32(len(body)+1), append(append([]byte{}, body...), 0)),
		"an oversized frame": frame(64<<20+1, body),
		"nothing":            nil,
		"a frame cut short":  valid[:len(valid)-1],
		"a header cut short": valid[:3],
	}
	for n := 0; n < len(body); n++ {
		cases["a body cut at "+strconv.Itoa(n)] = frame(uint32(n), body[:n])
	}
	// A spawn where the last byte (none) says there is none.
	cases["a forker's spawn"] = frame(uint32(len(body)), append(append([]byte{}, body[:len(body)-1]...), 1))
	random := rand.New(rand.NewSource(1))
	for i := 0; i < 64; i++ {
		junk := make([]byte, random.Intn(len(body)))
		random.Read(junk)
		if len(junk) > 0 {
			junk[0] = 1 // past the version check
		}
		cases["random bytes "+strconv.Itoa(i)] = frame(uint32(len(junk)), junk)
	}

	// The harness itself: the whole description is decoded and answered,
	// with the failure to open its made-up first layer.
	if code, answer := startInit(t, p.Path, valid); code != 1 || !bytes.Contains(answer, []byte("open root layer /a")) {
		t.Fatalf("the valid description: exit %d, answer %q; want a setup error about /a", code, answer)
	}
	for name, message := range cases {
		code, answer := startInit(t, p.Path, message)
		if code != 1 || len(answer) != 0 {
			t.Errorf("%s: exit %d, answer %q; want exit 1 and no answer", name, code, answer)
		}
	}
}

// startInit runs the init program in namespaces of its own with message
// on its control socket, and returns its exit status and what it sent.
func startInit(t *testing.T, path string, message []byte) (int, []byte) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "theirs")
	defer ours.Close()
	cmd := exec.Command(path)
	cmd.Args[0] = InitArg
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
			syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	if err := cmd.Start(); err != nil {
		theirs.Close()
		t.Skipf("cannot start the init in namespaces of its own here: %v", err)
	}
	theirs.Close()
	if _, err := ours.Write(message); err != nil {
		t.Fatal(err)
	}
	// Only the message: the init reads no further than its frame says.
	if err := syscall.Shutdown(fds[0], syscall.SHUT_WR); err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(ours)
	err = cmd.Wait()
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		t.Fatalf("the init was killed by %v: %v", st.Signal(), err)
	}
	return cmd.ProcessState.ExitCode(), answer
}
