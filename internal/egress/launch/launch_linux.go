// Package launch starts a sandbox's egress gateway (the gateway program,
// internal/programs/gateway) and talks to it for jail, over the protocol
// of package protocol.
//
// Invariants:
//   - The gateway runs as the caller, outside the sandbox, and holds
//     nothing of the caller's but its socket to jail (descriptor 3) and,
//     once Start is called, the sandbox's listeners.
//   - A gateway that is not Detached ends when its socket hangs up: when
//     Close is called, or whenever jail ends, however it ends. A Detached
//     one ends when the init whose pidfd Start gave it does.
//   - The package links nothing heavy (it is part of the jail command).
package launch

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/egress/protocol"
	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/internal/spawn"
)

// Gateway is a running gateway program.
type Gateway struct {
	sock   *os.File
	pid    int
	pidfd  *os.File // signals it, never another process that took its pid
	config protocol.Config

	helloOnce sync.Once
	hello     protocol.Hello
	helloErr  error

	events   sync.WaitGroup
	waitOnce sync.Once
	waitErr  error
}

// Start starts the gateway program for cfg. Its stderr goes to stderr
// (nil: nowhere), for what it cannot say otherwise (a crash). It is
// started by spawn.Start, which keeps the program's descriptor
// (/proc/self/fd/N) clear of the child's descriptor setup, and gives it
// exactly gatewayEnv (os/exec gives a nil environment the caller's whole).
func Start(cfg protocol.Config, stderr *os.File) (*Gateway, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("egress gateway: socket pair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "gateway"), os.NewFile(uintptr(fds[1]), "gateway")
	defer theirs.Close()
	p, err := programs.Open(programs.Gateway)
	if err != nil {
		ours.Close()
		return nil, fmt.Errorf("egress gateway: %w", err)
	}
	defer p.Close()
	path, err := p.PathFor(1)
	if err != nil {
		ours.Close()
		return nil, fmt.Errorf("egress gateway: %w", err)
	}
	env := gatewayEnv()
	if env == nil {
		env = []string{}
	}
	pidfd := -1
	// A session of its own: a terminal's signals (^C) are for the
	// command, which jail forwards, not for the gateway.
	pid, err := spawn.Start(path, []string{"jail:gateway"}, env, []*os.File{nil, nil, stderr, theirs},
		&syscall.SysProcAttr{Setsid: true, PidFD: &pidfd})
	if err != nil {
		ours.Close()
		return nil, fmt.Errorf("egress gateway: %w", err)
	}
	g := &Gateway{sock: ours, pid: pid, config: cfg}
	if pidfd >= 0 {
		g.pidfd = os.NewFile(uintptr(pidfd), "gateway-pidfd")
	}
	if err := protocol.Send(int(ours.Fd()), cfg); err != nil {
		g.kill()
		return nil, fmt.Errorf("egress gateway: send its configuration: %w", err)
	}
	return g, nil
}

// gatewayEnv is the gateway's environment: what its resolver and its
// trust in servers' certificates read (RES_OPTIONS and LOCALDOMAIN for
// Go's resolver; SSL_CERT_FILE and SSL_CERT_DIR for its roots), nothing
// else of jail's; no proxy is ever used for it.
func gatewayEnv() []string {
	var env []string
	for _, k := range []string{"SSL_CERT_FILE", "SSL_CERT_DIR", "RES_OPTIONS", "LOCALDOMAIN", "GODEBUG"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Hello waits for the gateway's answer to its configuration: an error
// when it refused it (the Hello's Error, a "jail: ..." line, in a
// *RefusedError) or could not answer.
func (g *Gateway) Hello() (protocol.Hello, error) {
	g.helloOnce.Do(func() {
		files, err := protocol.Recv(int(g.sock.Fd()), &g.hello, protocol.MaxMessage, 0)
		for _, f := range files {
			f.Close()
		}
		switch {
		case err != nil:
			g.helloErr = fmt.Errorf("egress gateway: %w", g.why(err))
		case g.hello.Error != "":
			g.helloErr = &RefusedError{Reason: g.hello.Error}
		}
	})
	return g.hello, g.helloErr
}

// why is err, or how the gateway ended when that says more.
func (g *Gateway) why(err error) error {
	if errors.Is(err, protocol.ErrClosed) {
		if werr := g.wait(5 * time.Second); werr != nil {
			return fmt.Errorf("ended: %v", werr)
		}
		return errors.New("ended without answering")
	}
	return err
}

// RefusedError is the gateway's refusal of its configuration: the rules,
// or a secret's binding. Reason is one line, without "jail: ".
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

// Start hands the gateway the sandbox's listeners (protocol.Listeners'
// order) and the init's pidfd (which a Detached gateway must have: it
// ends with the init; nil otherwise when there is none); it then serves.
// With Config.Events, denied is called with each denial until Close (from
// one goroutine).
func (g *Gateway) Start(listeners []*os.File, initPidfd *os.File, denied func(protocol.Event)) error {
	if _, err := g.Hello(); err != nil {
		return err
	}
	if len(listeners) != len(protocol.Listeners) {
		return fmt.Errorf("egress gateway: %d listeners, want %d", len(listeners), len(protocol.Listeners))
	}
	if g.config.Detached && initPidfd == nil {
		return errors.New("egress gateway: a detached gateway needs the init's pidfd")
	}
	files := listeners
	if initPidfd != nil {
		files = append(append([]*os.File(nil), listeners...), initPidfd)
	}
	if err := protocol.Send(int(g.sock.Fd()), protocol.Start{Listeners: len(listeners), Pidfd: initPidfd != nil}, files...); err != nil {
		return fmt.Errorf("egress gateway: hand over the listeners: %w", err)
	}
	if g.config.Events && denied != nil {
		g.events.Add(1)
		go func() {
			defer g.events.Done()
			for {
				var e protocol.Event
				files, err := protocol.Recv(int(g.sock.Fd()), &e, 64<<10, 0)
				for _, f := range files {
					f.Close()
				}
				if err != nil {
					return
				}
				denied(e)
			}
		}()
	}
	return nil
}

// Close hangs up on the gateway. A gateway that is not Detached then
// ends on its own, and is reaped in the background (killed if it has not
// ended within a few seconds): the caller need not wait for its exit. A
// Detached one goes on, and Close only lets it go.
func (g *Gateway) Close() error {
	if g.config.Detached {
		g.sock.Close()
		if g.pidfd != nil {
			return g.pidfd.Close()
		}
		return nil
	}
	// Shutdown wakes the event reader before the descriptor goes.
	_ = unix.Shutdown(int(g.sock.Fd()), unix.SHUT_RDWR)
	g.events.Wait()
	g.sock.Close()
	go func() { _ = g.wait(5 * time.Second) }()
	return nil
}

// killNow sends the gateway SIGKILL: through its pidfd, or by its pid
// where the kernel gave none (the child, not reaped yet, keeps it).
func (g *Gateway) killNow() {
	if g.pidfd == nil {
		_ = syscall.Kill(g.pid, syscall.SIGKILL)
		return
	}
	_ = spawn.Signal(g.pidfd, syscall.SIGKILL)
}

// kill ends a gateway that never started serving.
func (g *Gateway) kill() {
	g.killNow()
	g.sock.Close()
	_ = g.wait(0)
}

// wait reaps the gateway, killing it if it has not ended within limit
// (0: at once).
func (g *Gateway) wait(limit time.Duration) error {
	g.waitOnce.Do(func() {
		defer g.pidfd.Close()
		done := make(chan error, 1)
		go func() {
			_, err := spawn.Wait(g.pid)
			done <- err
		}()
		if limit > 0 {
			t := time.NewTimer(limit)
			defer t.Stop()
			select {
			case g.waitErr = <-done:
				return
			case <-t.C:
			}
		}
		g.killNow()
		g.waitErr = <-done
	})
	return g.waitErr
}
