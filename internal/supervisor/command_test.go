package supervisor

import (
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCommandHandleKeepsEarlySignals: a signal asked for before the
// command's pidfd arrives is held, then delivered when it does; after close,
// signals are dropped and the pidfd is let go.
func TestCommandHandleKeepsEarlySignals(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}

	var c commandHandle
	if err := c.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the command was signalled before its pidfd arrived: %v", err)
	}
	c.started(os.NewFile(uintptr(fd), "pidfd"))
	err = cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("the command ended with %v; want the SIGTERM kept for it", err)
	}

	c.close()
	if c.pidfd != nil || c.signal(syscall.SIGTERM) != nil || len(c.pending) != 0 {
		t.Errorf("after close: pidfd %v, pending %v", c.pidfd, c.pending)
	}
}
