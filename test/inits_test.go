package test

import (
	"context"
	"strconv"
	"syscall"
	"testing"

	"github.com/jail-sandbox/jail/api"
)

// TestInitIsTheCProgram: a sandbox's init is the C helper program, a
// single thread with no language runtime, for a cold start and for a pool's
// ready sandbox (started by the forker, the jail binary re-executed) alike.
func TestInitIsTheCProgram(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		_, initPid := startSleeperAndInit(t, m, "7.125")
		if threads := statusOf(t, initPid, "Threads"); threads != "1" {
			t.Errorf("a cold start's init has %s threads; want the C init's 1", threads)
		}

		s := startServe(t, m, "--pool", "1")
		s.waitReady(t, 1)
		done := make(chan error, 1)
		go func() {
			_, err := s.client.Run(context.Background(), api.RunRequest{Cmd: "sleep", Args: []string{"7.375"}, TimeoutS: 30})
			done <- err
		}()
		sleeper := findProcess(t, "sleep\x007.375\x00")
		ppid, err := strconv.Atoi(statusOf(t, sleeper, "PPid"))
		if err != nil {
			t.Fatal(err)
		}
		if name, threads := statusOf(t, ppid, "Name"), statusOf(t, ppid, "Threads"); name != "jail-init" || threads != "1" {
			t.Errorf("a pool's sandbox runs under %q with %s threads; want jail-init, the C init's 1 thread", name, threads)
		}
		if err := syscall.Kill(sleeper, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
