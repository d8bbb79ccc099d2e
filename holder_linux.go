//go:build linux

package jail

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/egress/launch"
	"github.com/jail-sandbox/jail/internal/egress/protocol"
	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/internal/sandboxdir"
	"github.com/jail-sandbox/jail/internal/supervisor"
)

// The holder of a persistent sandbox (docs/persistent.md) is this program
// re-executed by Manager.Create, detached in a session of its own, as
//
//	jail:holder NAME
//
// with the sandbox's state directory on descriptor 3, the directory that
// holds it on 4, and the write end of a pipe on 5 on which it reports the
// outcome to Create: one JSON holderReport, then end of file. It builds
// the sandbox described by the directory's spec.json with the same code as
// jail run, writes what later clients need (process.json, cgroup.json),
// binds the sandbox's ctl.sock, and then replaces itself by the C helper
// program as the sandbox's monitor, which inherits the init as its child,
// the control socket and the rest by descriptor. So no Go process stays
// per sandbox (2.5 MiB each), and the monitor is a new program image with
// none of this one's memory.
const holderArg = "jail:holder"

// Files of a sandbox's state directory written by its holder.
const (
	// processFile is the sandbox's own process description (environment,
	// working directory, ids), which each exec starts from.
	processFile = "process.json"
	// cgroupFile lists the sandbox's cgroup directories, for its counters.
	cgroupFile = "cgroup.json"
	// socketFile is where the monitor listens.
	socketFile = "ctl.sock"
)

// holderReport is what the holder tells Create: nothing (ready), or the
// error that jail run would have given.
type holderReport struct {
	Step    string `json:"step,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Refused bool   `json:"refused,omitempty"`
	Code    int    `json:"code,omitempty"` // an ExecError's
}

func (r holderReport) err() error {
	switch {
	case r.Reason == "":
		return nil
	case r.Code != 0:
		return &ExecError{Code: r.Code, Reason: r.Reason}
	default:
		return &SetupError{Step: r.Step, Err: errors.New(r.Reason), Refused: r.Refused}
	}
}

func reportOf(err error) holderReport {
	var se *SetupError
	var ee *ExecError
	switch {
	case errors.As(err, &ee):
		return holderReport{Reason: ee.Reason, Code: ee.Code}
	case errors.As(err, &se):
		return holderReport{Step: se.Step, Reason: se.Err.Error(), Refused: se.Refused}
	default:
		return holderReport{Step: "create", Reason: err.Error()}
	}
}

// holderMain is the holder process; it never returns.
func holderMain() {
	report := os.NewFile(5, "holder-report")
	held, err := hold(report)
	// Only a failure gets here: the monitor replaced this program.
	b, _ := json.Marshal(reportOf(err))
	if _, werr := report.Write(append(b, '\n')); werr != nil && held {
		// Its creator is gone (killed in the middle of jail create):
		// no one will remove what it made, so it does.
		_ = sandboxdir.RemoveHeld(os.NewFile(4, "sandboxes-dir"), os.NewFile(3, "sandbox-dir"), os.Args[1])
	}
	os.Exit(ExitSetup)
}

// hold builds the sandbox and becomes its monitor; it returns only on
// failure, saying whether it had taken the sandbox's lock (and so made
// the directory its own to remove).
func hold(report *os.File) (held bool, err error) {
	if len(os.Args) != 2 || sandboxdir.ValidName(os.Args[1]) != nil {
		return false, errors.New("the holder is started by jail only")
	}
	name := os.Args[1]
	// Whatever else the creator let this process inherit (os/exec closes
	// only close-on-exec descriptors) would go on to the init, the janitor
	// and the monitor, and stay open for the sandbox's whole life: a pipe
	// its creator's caller waits on, say. Only what the monitor is given
	// below, by number, passes the exec.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return false, fmt.Errorf("the holder's descriptors: %w", err)
	}
	dir, parent := os.NewFile(3, "sandbox-dir"), os.NewFile(4, "sandboxes-dir")
	boundSecrets := os.NewFile(6, "bound-secrets")
	for _, f := range []*os.File{dir, parent, report, boundSecrets} {
		if _, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0); err != nil {
			return false, errors.New("the holder is started by jail only")
		}
		syscall.CloseOnExec(int(f.Fd()))
	}
	sb := sandboxdir.Adopt(name, dir)
	lock, err := sb.Hold()
	if err != nil {
		return false, err
	}
	return true, boot(report, sb, name, lock, dir, parent, boundSecrets)
}

// boot builds the sandbox whose lock the holder holds and execs its
// monitor; it returns only on failure.
func boot(report *os.File, sb *sandboxdir.Sandbox, name string, lock, dir, parent, boundSecrets *os.File) error {
	var stored storedSpec
	data, err := sb.ReadFile(sandboxdir.SpecFile)
	if err == nil {
		err = json.Unmarshal(data, &stored)
	}
	if err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	spec := stored.spec()
	// A persistent sandbox runs no command of its own; resolve wants
	// one, and the image's would be taken otherwise.
	spec.Command = []string{"true"}
	p, err := prepare(&spec)
	if err != nil {
		return err
	}
	// Its egress gateway (--net allow=, or the profile's network) starts
	// beside it, and outlives this process as the monitor's child; it
	// ends with the init.
	var gw *launch.Gateway
	if rules, ok := egressRules(spec.Net); ok {
		bound, err := readBound(boundSecrets)
		if err == nil {
			gw, err = startGateway(&spec, rules, name, true, bound)
		}
		if err != nil {
			p.Close()
			return err
		}
		defer gw.Close()
	}
	boundSecrets.Close()
	if gw != nil {
		// The authority and the placeholders go into what the init
		// builds and what every exec's process gets (process.json).
		hello, err := gw.Hello()
		if err != nil {
			p.Close()
			return gatewayError(err)
		}
		applyHello(&p.Config, hello)
	}
	// What the spec resolves to now, for a later create --reuse.
	if print, err := fingerprint(&spec); err != nil {
		p.Close()
		return &SetupError{Step: "create", Err: err}
	} else if err := sb.WriteFile(fingerprintFile, []byte(print)); err != nil {
		p.Close()
		return err
	}
	p.Config.TTL, p.Config.IdleTimeout = int64(stored.TTL), int64(stored.IdleTimeout)
	process := p.Config.Process
	process.Args = nil
	if b, err := json.Marshal(process); err != nil {
		p.Close()
		return err
	} else if err := sb.WriteFile(processFile, b); err != nil {
		p.Close()
		return err
	}
	// The thread that starts the init is the one that executes the
	// monitor: nothing of the init may depend on a thread that ends.
	runtime.LockOSThread()
	ps, err := supervisor.BootPersistent(&supervisor.Job{}, p, &supervisor.Timings{})
	if err != nil {
		return err
	}
	fail := func(err error) error {
		ps.Close()
		return err
	}
	h, err := ps.Handover()
	if err != nil {
		return fail(&SetupError{Step: "create", Err: err})
	}
	if gw != nil {
		// Before the monitor runs, no client reaches the init: the
		// gateway has its sockets before any command can use them.
		listeners := ps.TakeListeners()
		err := gw.Start(listeners, h.InitPidfd, nil)
		for _, f := range listeners {
			f.Close()
		}
		if err != nil {
			return fail(gatewayError(err))
		}
	}
	if b, err := json.Marshal(h.CgroupPaths); err != nil {
		return fail(err)
	} else if err := sb.WriteFile(cgroupFile, b); err != nil {
		return fail(err)
	}
	listener, err := listenIn(dir)
	if err != nil {
		return fail(&SetupError{Step: "create", Err: err})
	}
	janitorEnd := h.Janitor
	if janitorEnd == nil {
		if janitorEnd, err = os.Open(os.DevNull); err != nil {
			return fail(err)
		}
	}
	src := programs.NewSource(p.Users)
	helper, err := src.Open(programs.Helper)
	if err != nil {
		return fail(&SetupError{Step: "create", Err: err})
	}
	monitorFiles := []*os.File{h.Control, h.InitPidfd, listener, lock, dir, parent, janitorEnd}
	path := helper.Path
	args := []string{"jail:monitor", name}
	for _, f := range monitorFiles {
		fd := int(f.Fd())
		args = append(args, strconv.Itoa(fd))
	}
	// Ready: Create returns once this is read. The report pipe closes
	// with the exec (close-on-exec).
	// A creator gone meanwhile (its report pipe broken) made nothing: the
	// sandbox is torn down, and its directory removed (holderMain).
	if _, err := report.Write([]byte("{}\n")); err != nil {
		return fail(err)
	}
	for _, f := range monitorFiles {
		if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFD, 0); err != nil {
			return fail(err)
		}
	}
	err = syscall.Exec(path, args, []string{})
	return fail(&SetupError{Step: "create", Err: fmt.Errorf("start the monitor: %w", err)})
}

// listenIn binds and listens on ctl.sock in dir, reached through the
// descriptor.
func listenIn(dir *os.File) (*os.File, error) {
	sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	_ = unix.Unlinkat(int(dir.Fd()), socketFile, 0)
	addr := &unix.SockaddrUnix{Name: fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), socketFile)}
	// Bound with no one else's access: the directory is 0700 as well.
	old := unix.Umask(0o177)
	err = unix.Bind(sock, addr)
	unix.Umask(old)
	if err == nil {
		err = unix.Listen(sock, 128)
	}
	if err != nil {
		unix.Close(sock)
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return os.NewFile(uintptr(sock), socketFile), nil
}

// readBound reads the secrets bound to hosts that the creator sends (a
// JSON list, then end of file), for the gateway.
func readBound(r *os.File) ([]protocol.Secret, error) {
	data, err := io.ReadAll(io.LimitReader(r, protocol.MaxMessage))
	if err != nil {
		return nil, fmt.Errorf("bound secrets: %w", err)
	}
	var bound []protocol.Secret
	if len(data) > 0 {
		if err := json.Unmarshal(data, &bound); err != nil {
			return nil, fmt.Errorf("bound secrets: %w", err)
		}
	}
	return bound, nil
}
