package spawn

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestStartAndWait: the child gets /dev/null for missing stdio and the
// extra files from descriptor 3; Wait says how it ended as os/exec would.
func TestStartAndWait(t *testing.T) {
	cases := []struct {
		name, script, wantErr string
	}{
		{"exit 0", "exit 0", ""},
		{"exit 3", "exit 3", "exit status 3"},
		{"killed", "kill -KILL $$", "signal: killed"},
		{"stdin is /dev/null", `[ "$(readlink /proc/self/fd/0)" = /dev/null ]`, ""},
		{"descriptor 3 is the extra file", `echo hello >&3`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			pid, err := Start("/bin/sh", []string{"sh", "-c", c.script}, []string{}, []*os.File{nil, os.Stderr, os.Stderr, w}, &syscall.SysProcAttr{})
			w.Close()
			if err != nil {
				t.Fatal(err)
			}
			usage, err := Wait(pid)
			if (err == nil) != (c.wantErr == "") || (err != nil && err.Error() != c.wantErr) {
				t.Errorf("Wait: %v; want %q", err, c.wantErr)
			}
			if usage == nil {
				t.Errorf("no resource usage")
			}
			out := make([]byte, 16)
			n, _ := r.Read(out)
			if strings.Contains(c.script, ">&3") && string(out[:n]) != "hello\n" {
				t.Errorf("descriptor 3 got %q", out[:n])
			}
		})
	}
	if _, err := Start("/nonexistent", []string{"x"}, nil, []*os.File{nil, nil, nil}, &syscall.SysProcAttr{}); err == nil || !strings.Contains(err.Error(), "/nonexistent") {
		t.Errorf("a missing program: %v", err)
	}
}

// TestSignal: a signal sent through the pidfd ends the child, and a closed
// pidfd is os.ErrProcessDone.
func TestSignal(t *testing.T) {
	pidfd := -1
	pid, err := Start("/bin/sleep", []string{"sleep", "60"}, nil, []*os.File{nil, nil, nil}, &syscall.SysProcAttr{PidFD: &pidfd})
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	if err := Signal(f, syscall.SIGTERM); err != nil {
		t.Errorf("Signal: %v", err)
	}
	if _, err := Wait(pid); err == nil || err.Error() != "signal: terminated" {
		t.Errorf("Wait after SIGTERM: %v", err)
	}
	f.Close()
	if err := Signal(f, syscall.SIGTERM); err != os.ErrProcessDone {
		t.Errorf("Signal through a closed pidfd: %v; want os.ErrProcessDone", err)
	}
}
