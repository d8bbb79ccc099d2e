package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail"
)

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// runFlags are the RUN OPTIONS as typed.
type runFlags struct {
	image, pull, rootfs, profile, memory, pids, net, netLimit, workspace string
	user, workdir, hostname, outputLimit                                 string
	cpus                                                                 float64
	timeout                                                              time.Duration
	mounts, env, secrets                                                 listFlag
	readOnly, tty, json                                                  bool
}

func (f *runFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.image, "image", "", "root filesystem from an image in the local store")
	fs.StringVar(&f.pull, "pull", jail.PullMissing, "when to pull the image: never, missing or always")
	fs.StringVar(&f.rootfs, "rootfs", "", "directory used as the read-only lower layer of /")
	fs.StringVar(&f.profile, "profile", "", "named policy")
	fs.StringVar(&f.memory, "memory", "", "memory limit, e.g. 256M (default 512M)")
	fs.Float64Var(&f.cpus, "cpus", 0, "CPU quota in cores (default 1)")
	fs.StringVar(&f.pids, "pids", "", "most processes and threads at once (default 256)")
	fs.DurationVar(&f.timeout, "timeout", 0, "wall-clock limit, e.g. 30s")
	fs.StringVar(&f.net, "net", "none", "network: none (loopback only), or allow=RULE[,RULE...] (jail's egress gateway to those hosts; docs/egress.md)")
	fs.StringVar(&f.netLimit, "net-limit", "", "the egress gateway's limits: conns=N,bytes=SIZE,rate=SIZE (per second)")
	fs.StringVar(&f.workspace, "workspace", "", "host directory bound read-write at /workspace")
	fs.Var(&f.mounts, "mount", "SRC:DST[:ro|:rw] extra bind mount (repeatable)")
	fs.Var(&f.env, "env", "K=V to set, or K to copy from the caller (repeatable)")
	fs.Var(&f.secrets, "secret", "NAME of a secret (jail secret add) to inject as the variable NAME (repeatable)")
	fs.StringVar(&f.user, "user", "", "UID[:GID] inside the sandbox (default 0)")
	fs.StringVar(&f.workdir, "workdir", "", "working directory inside the sandbox")
	fs.StringVar(&f.hostname, "hostname", "", "host name inside the sandbox")
	fs.BoolVar(&f.readOnly, "read-only", false, "no writable root layer (/tmp, /var/tmp, /run, /dev/shm and /workspace stay writable)")
	fs.BoolVar(&f.tty, "tty", false, "run on a pseudo-terminal")
	fs.BoolVar(&f.tty, "t", false, "shorthand for --tty")
	fs.BoolVar(&f.json, "json", false, "capture output and print one JSON result object")
	fs.StringVar(&f.outputLimit, "output-limit", "", "with --json, most bytes kept per stream (default 1M, at most 64M)")
}

// spec turns the flags into a jail.Spec.
func (f *runFlags) spec(command []string) (jail.Spec, error) {
	spec := jail.Spec{
		Command: command, Image: f.image, Pull: f.pull, Rootfs: f.rootfs, Profile: f.profile,
		CPUs: f.cpus, Timeout: f.timeout, Workspace: f.workspace,
		Secrets: f.secrets, User: f.user, Workdir: f.workdir, Hostname: f.hostname,
		ReadOnly: f.readOnly, TTY: f.tty, Capture: f.json,
	}
	if f.net != "none" {
		spec.Net = f.net
	}
	if f.image != "" && isTerminal(os.Stderr) {
		// A pull's progress: on a terminal only, never in --json's
		// output or a script's.
		spec.PullProgress = os.Stderr
	}
	var err error
	if spec.NetLimits, err = jail.ParseNetLimits(f.netLimit); err != nil {
		return spec, fmt.Errorf("--net-limit: %v", err)
	}
	if f.memory != "" {
		if spec.Memory, err = jail.ParseSize(f.memory); err != nil {
			return spec, fmt.Errorf("--memory: %v", err)
		}
	}
	if f.outputLimit != "" {
		if spec.OutputLimit, err = jail.ParseSize(f.outputLimit); err != nil {
			return spec, fmt.Errorf("--output-limit: %v", err)
		}
	}
	if f.pids != "" {
		if _, err := fmt.Sscanf(f.pids, "%d", &spec.Pids); err != nil || fmt.Sprint(spec.Pids) != f.pids {
			return spec, fmt.Errorf("--pids: %q is not a number", f.pids)
		}
	}
	if f.cpus < 0 {
		return spec, fmt.Errorf("--cpus: must be positive")
	}
	for _, m := range f.mounts {
		mount, err := jail.ParseMount(m)
		if err != nil {
			return spec, fmt.Errorf("--mount %v", err)
		}
		spec.Mounts = append(spec.Mounts, mount)
	}
	for _, e := range f.env {
		if strings.Contains(e, "=") {
			spec.Env = append(spec.Env, e)
		} else if v, ok := os.LookupEnv(e); ok {
			spec.Env = append(spec.Env, e+"="+v)
		}
	}
	return spec, nil
}

func runCommand(args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f runFlags
	f.register(fs)
	if code, done := parseFlags(fs, args, "jail run [RUN OPTIONS] [--] COMMAND [ARG...]"); done {
		return code
	}
	spec, err := f.spec(fs.Args())
	if err != nil {
		return fail("%v", err)
	}

	// Registering takes a round trip to the runtime's signal thread per
	// signal, 0.3 ms in all here: it happens beside the sandbox's start (a
	// signal in that moment still ends jail, and the sandbox with it).
	// Nor are they unregistered: jail exits right after the run, and that
	// would cost as much again.
	signals := make(chan os.Signal, 8)
	go signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	spec.Signals = signals
	spec.Stdin = os.Stdin
	spec.Notices = noticeWriter{}
	spec.NetDenials = denialWriter(spec.Capture)
	if !spec.Capture {
		spec.Stdout, spec.Stderr = os.Stdout, os.Stderr
	}
	if spec.TTY {
		restore := attachTerminal(&spec)
		defer restore()
	}

	res, err := jail.Run(context.Background(), spec)
	return finish(res, err, spec.Timeout, spec.Capture)
}

// finish reports how a command of run or exec ended and returns the status
// jail exits with: jail's own failure as one line (125), the command's
// failure to start (126, 127), a timeout or an OOM kill as a line, and the
// result object with --json.
func finish(res jail.Result, err error, timeout time.Duration, capture bool) int {
	var ee *jail.ExecError
	if err != nil && !errors.As(err, &ee) {
		return fail("%v", err)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "jail: %v\n", err) // one line: ExecError's text is
	}
	if res.TimedOut {
		if timeout > 0 {
			fmt.Fprintf(os.Stderr, "jail: killed: timeout after %s\n", timeout)
		} else {
			fmt.Fprintln(os.Stderr, "jail: killed: timeout")
		}
	}
	if res.OOMKilled {
		fmt.Fprintln(os.Stderr, "jail: killed: out of memory")
	}
	if capture {
		out, _ := json.Marshal(res)
		fmt.Println(string(out))
	}
	return res.ExitCode
}

// denialWriter is where the egress gateway's denials go: "jail: net:
// denied ..." lines on stderr when it is a terminal or the output is JSON
// (--json), where they cannot be taken for the command's own; nowhere
// otherwise (the audit log has them).
func denialWriter(json bool) io.Writer {
	if !isTerminal(os.Stderr) && !json {
		return nil
	}
	return jailLineWriter{}
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// jailLineWriter prints what it is given after "jail: ".
type jailLineWriter struct{}

func (jailLineWriter) Write(p []byte) (int, error) {
	fmt.Fprintf(os.Stderr, "jail: %s", p)
	return len(p), nil
}

// noticeWriter prints jail's notices as "jail: notice: ..." lines.
type noticeWriter struct{}

func (noticeWriter) Write(p []byte) (int, error) {
	fmt.Fprintf(os.Stderr, "jail: notice: %s", p)
	return len(p), nil
}

// attachTerminal puts the caller's terminal (if stdin is one) in raw mode so
// every key, ^C included, reaches the sandbox's terminal, and follows its
// size. It returns the function that restores the terminal.
func attachTerminal(spec *jail.Spec) func() {
	fd := int(os.Stdin.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return func() {}
	}
	if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
		spec.WindowSize = &jail.WindowSize{Rows: ws.Row, Cols: ws.Col}
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	_ = unix.IoctlSetTermios(fd, unix.TCSETS, &raw)

	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	resize := make(chan jail.WindowSize, 1)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-winch:
				if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
					select {
					case resize <- jail.WindowSize{Rows: ws.Row, Cols: ws.Col}:
					default:
					}
				}
			case <-done:
				return
			}
		}
	}()
	spec.Resize = resize
	return func() {
		close(done)
		signal.Stop(winch)
		_ = unix.IoctlSetTermios(fd, unix.TCSETS, old)
	}
}
