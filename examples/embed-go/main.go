// Command embed-go shows jail embedded in a Go program, as an agent server
// or a CI runner written in Go would use it: a persistent sandbox made with
// jail.Manager, several commands run in it (what one writes, the next
// reads), a command that outruns its time limit, the sandbox's use so far
// and its log, then its removal; and a one-shot jail.Run beside it.
//
// Build and run it as root or as any user (go build needs jail's embedded
// programs generated first: make build does it):
//
//	make build && go build -o bin/embed-go ./examples/embed-go && bin/embed-go
//
// The sandboxes are this user's, in jail's state directory
// ($XDG_RUNTIME_DIR/jail, /run/jail for root, or $JAIL_STATE_DIR): `jail ls`
// shows the one made here while it runs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jail-sandbox/jail"
)

func main() {
	image := flag.String("image", "", "the sandboxes' image (default: the host's own tree, read-only)")
	name := flag.String("name", fmt.Sprintf("embed-go-%d", os.Getpid()), "the persistent sandbox's name")
	flag.Parse()
	// Ctrl-C ends the commands; the deferred removal still runs.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *image, *name); err != nil {
		fmt.Fprintln(os.Stderr, "embed-go:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, image, name string) (err error) {
	m, err := jail.NewManager(jail.ManagerOptions{})
	if err != nil {
		return err
	}
	defer m.Close()

	// Create returns once the sandbox is ready; it lives on after this
	// program (until removed), so it is removed on the way out whatever
	// happens.
	sb, err := m.Create(ctx, jail.Spec{
		Name:   name,
		Image:  image,
		Memory: 256 << 20,
		CPUs:   1,
		Labels: map[string]string{"made-by": "embed-go"},
	})
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	removed := false
	defer func() {
		if removed {
			return
		}
		if rmErr := m.Remove(name, true); rmErr != nil && err == nil {
			err = fmt.Errorf("remove %s: %w", name, rmErr)
		}
	}()
	fmt.Printf("created %s\n", sb.Name())

	// A command's own failure (exit 1, a timeout) is a Result; err is
	// jail's failure to run it.
	exec := func(timeout time.Duration, command ...string) (jail.Result, error) {
		return sb.Exec(ctx, jail.Process{Command: command, Capture: true, Timeout: timeout})
	}
	if _, err := exec(0, "sh", "-c", "echo 'made by the first command' > /tmp/note"); err != nil {
		return err
	}
	res, err := exec(0, "cat", "/tmp/note")
	if err != nil {
		return err
	}
	fmt.Printf("second command read: %s", res.Stdout)

	res, err = exec(0, "sh", "-c", "id -u; hostname; echo oops >&2; exit 3")
	if err != nil {
		return err
	}
	fmt.Printf("exit %d, stdout %q, stderr %q\n", res.ExitCode, res.Stdout, res.Stderr)

	res, err = exec(300*time.Millisecond, "sleep", "60")
	if err != nil {
		return err
	}
	fmt.Printf("sleep 60 with a 300ms limit: exit %d, timed out %v\n", res.ExitCode, res.TimedOut)

	info, err := sb.Info()
	if err != nil {
		return err
	}
	fmt.Printf("state %s, labels %v, cpu so far %d ms\n", info.State, info.Labels, info.CPUMs)
	logs, err := sb.Logs(2)
	if err != nil {
		return err
	}
	fmt.Printf("last log lines: %q\n", strings.TrimSpace(string(logs)))

	// A one-shot run: a sandbox made for one command and gone after it.
	one, err := jail.Run(ctx, jail.Spec{Image: image, Command: []string{"echo", "one-shot"}, Capture: true})
	if err != nil {
		return err
	}
	fmt.Printf("one-shot run: %s", one.Stdout)

	// Removed, the sandbox and all it held are gone: Get finds nothing.
	if err := m.Remove(name, true); err != nil {
		return err
	}
	removed = true
	if _, err := m.Get(name); !errors.Is(err, jail.ErrNotFound) {
		return fmt.Errorf("after removal, Get says %v", err)
	}
	fmt.Printf("removed %s\n", name)
	return nil
}
