package forker

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain makes this test binary the forker when started as one.
func TestMain(m *testing.M) {
	if os.Args[0] == Arg {
		Main()
	}
	os.Exit(m.Run())
}

func startForker(t *testing.T) *Forker {
	t.Helper()
	f, err := Start("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func spawnSh(t *testing.T, f *Forker, script string, files ...*os.File) *Child {
	t.Helper()
	sp, err := SpawnOf("/bin/sh", []string{"sh", "-c", script}, nil, &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL})
	if err != nil {
		t.Fatal(err)
	}
	sp.Stdout = len(files) > 0
	c, err := f.Spawn(sp, files)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestChildrenEndAsTheyDo: exit codes, signals and output reach the
// supervisor as they would from a child of its own.
func TestChildrenEndAsTheyDo(t *testing.T) {
	f := startForker(t)
	defer f.Close()

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := spawnSh(t, f, "echo hello; exit 3", w)
	w.Close()
	out := make([]byte, 64)
	n, _ := r.Read(out)
	if got := string(out[:n]); got != "hello\n" {
		t.Errorf("output %q", got)
	}
	if code, sig, err := c.Wait(); code != 3 || sig != 0 || err != nil {
		t.Errorf("exit: code %d signal %d err %v, want 3", code, sig, err)
	}

	c = spawnSh(t, f, "sleep 30")
	if err := c.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, sig, err := c.Wait(); sig != int(syscall.SIGTERM) || err != nil {
		t.Errorf("signalled: signal %d err %v", sig, err)
	}
	if err := c.Signal(syscall.SIGKILL); err != os.ErrProcessDone {
		t.Errorf("signal after the end: %v", err)
	}
}

// TestChildrenDieWithTheForker: closing the forker (as a supervisor killed
// outright does) ends what it started.
func TestChildrenDieWithTheForker(t *testing.T) {
	f := startForker(t)
	c := spawnSh(t, f, "sleep 30")
	pid := c.Pid
	done := make(chan error, 1)
	go func() { done <- f.Close() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs")
	}
	if _, _, err := c.Wait(); err == nil {
		t.Error("Wait after the forker ended: no error")
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("child %d outlived the forker", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSpawnOfRefusesWhatItCannotCarry: an attribute the forker would drop
// is an error, not a silently weaker child.
func TestSpawnOfRefusesWhatItCannotCarry(t *testing.T) {
	for name, attr := range map[string]*syscall.SysProcAttr{
		"chroot":  {Chroot: "/tmp"},
		"groups":  {Credential: &syscall.Credential{Groups: []uint32{5}}},
		"ptrace":  {Ptrace: true},
		"cgroup":  {UseCgroupFD: true, CgroupFD: 3},
		"setpgid": {Setpgid: true},
	} {
		if _, err := SpawnOf("/bin/true", nil, nil, attr); err == nil || !strings.Contains(err.Error(), "forker") {
			t.Errorf("%s: %v", name, err)
		}
	}
	full := &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 1000, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 1000, Size: 1}},
		Credential:  &syscall.Credential{Uid: 0, Gid: 0},
		AmbientCaps: []uintptr{21},
		Setsid:      true, Pdeathsig: syscall.SIGKILL,
	}
	sp, err := SpawnOf("/bin/true", []string{"true"}, nil, full)
	if err != nil {
		t.Fatal(err)
	}
	back := attrOf(&sp)
	if back.Cloneflags != full.Cloneflags || back.UidMappings[0] != full.UidMappings[0] || back.GidMappings[0] != full.GidMappings[0] ||
		back.Credential.Uid != 0 || back.Credential.Gid != 0 || back.AmbientCaps[0] != 21 || !back.Setsid || back.Pdeathsig != syscall.SIGKILL {
		t.Errorf("round trip: %+v", back)
	}
}
