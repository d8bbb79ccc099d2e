package oci

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// CLI is `jail oci` (and `jail-runc`): runc's command line, as
// containerd's runc shim and ctr call it. Every failure is one line on
// stderr (and in --log) and status 1, as with runc.
type CLI struct {
	// Name is the program's name in usage and --version ("jail-runc").
	Name    string
	Version string
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	// ResolveProfile finds the jail profiles bundles ask for by
	// annotation (ProfileAnnotation); nil: none can be applied.
	ResolveProfile ProfileResolver
}

// maxResources bounds update's --resources input.
const maxResources = 1 << 20

const cliUsage = `usage: %s [GLOBAL OPTIONS] COMMAND [OPTIONS] [ID]

jail as an OCI runtime, with runc's command line (docs/oci.md).

Global options:
  --root DIR              container states (default /run/jail-oci as root,
                          $XDG_RUNTIME_DIR/jail-oci otherwise)
  --log FILE              errors (and --debug lines) appended here too
  --log-format text|json  the log's format (default text)
  --systemd-cgroup        linux.cgroupsPath is slice:prefix:name
  --rootless true|false|auto
  --debug
  --version, -v

Commands:
  create --bundle DIR [--pid-file F] [--console-socket S] [--preserve-fds N] [--no-pivot] [--no-new-keyring] ID
  start ID
  state ID
  kill [--all] ID [SIGNAL]
  delete [--force] ID
  list [--format table|json] [--quiet]
  ps [--format table|json] ID [PS ARGS...]
  pause ID | resume ID
  update --resources FILE|- ID
  exec [--preserve-fds N] [--process FILE | ID COMMAND...]  run a process in a container
  features
`

// rootlessFlag is --rootless: true, false or auto, given as --rootless
// alone (true) or --rootless=VALUE.
type rootlessFlag struct{ value string }

func (f *rootlessFlag) String() string   { return f.value }
func (f *rootlessFlag) IsBoolFlag() bool { return true }
func (f *rootlessFlag) Set(v string) error {
	switch v {
	case "true", "false", "auto":
		f.value = v
		return nil
	}
	return fmt.Errorf("%q is not true, false or auto", v)
}

// listFlag gathers a flag given several times (exec's --env).
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// Main runs the command line args (without the program's name) and
// returns the exit status.
func (cli *CLI) Main(args []string) int {
	log := &Logger{Stderr: cli.Stderr}
	global := newFlagSet(cli.Name)
	root := global.String("root", "", "")
	logPath := global.String("log", "", "")
	logFormat := global.String("log-format", "text", "")
	systemd := global.Bool("systemd-cgroup", false, "")
	debug := global.Bool("debug", false, "")
	global.String("criu", "", "") // runc's; checkpoints are not supported
	rootless := &rootlessFlag{value: "auto"}
	global.Var(rootless, "rootless", "")
	version := global.Bool("version", false, "")
	global.BoolVar(version, "v", false, "")
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(cli.Stdout, cliUsage, cli.Name)
			return 0
		}
		log.Error(err)
		return 1
	}
	if *version {
		fmt.Fprintf(cli.Stdout, "%s version %s\nspec: %s\ngo: %s\n", cli.Name, cli.Version, specs.Version, runtime.Version())
		return 0
	}
	rest := global.Args()
	if len(rest) == 0 {
		fmt.Fprintf(cli.Stderr, cliUsage, cli.Name)
		return 1
	}
	log.Command = rest[0]
	switch *logFormat {
	case "text":
	case "json":
		log.JSON = true
	default:
		log.Error(fmt.Errorf("unknown log-format %q (text or json)", *logFormat))
		return 1
	}
	if *logPath != "" {
		fd, err := unix.Open(*logPath, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
		if err != nil {
			log.Error(fmt.Errorf("log %s: %w", *logPath, err))
			return 1
		}
		f := os.NewFile(uintptr(fd), *logPath)
		defer f.Close()
		log.File = f
	}
	log.Debug = *debug
	rt := &Runtime{Root: *root, SystemdCgroup: *systemd, Rootless: rootless.value, Log: log, ResolveProfile: cli.ResolveProfile}
	if err := cli.run(rt, rest[0], rest[1:]); err != nil {
		var code exitCode
		if errors.As(err, &code) {
			return int(code) // the exec'd process's own status
		}
		log.Error(err)
		return 1
	}
	return 0
}

// exitCode is an exec'd process's non-zero exit status, which `jail oci
// exec` exits with, as runc does; not an error of its own.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// exactlyOne returns the one argument command takes (an ID), or runc's
// error.
func exactlyOne(command string, fs *flag.FlagSet) (string, error) {
	if fs.NArg() != 1 {
		return "", fmt.Errorf("%q requires exactly 1 argument(s)", command)
	}
	return fs.Arg(0), nil
}

func (cli *CLI) run(rt *Runtime, command string, args []string) error {
	fs := newFlagSet(command)
	switch command {
	case "create":
		var o CreateOptions
		fs.StringVar(&o.Bundle, "bundle", "", "")
		fs.StringVar(&o.Bundle, "b", "", "")
		fs.StringVar(&o.PidFile, "pid-file", "", "")
		fs.StringVar(&o.ConsoleSocket, "console-socket", "", "")
		fs.BoolVar(&o.NoPivot, "no-pivot", false, "")
		fs.BoolVar(&o.NoNewKeyring, "no-new-keyring", false, "")
		fs.IntVar(&o.PreserveFDs, "preserve-fds", 0, "")
		if err := fs.Parse(args); err != nil {
			return err
		}
		id, err := exactlyOne(command, fs)
		if err != nil {
			return err
		}
		o.ID = id
		return rt.Create(o)
	case "start", "state", "pause", "resume":
		if err := fs.Parse(args); err != nil {
			return err
		}
		id, err := exactlyOne(command, fs)
		if err != nil {
			return err
		}
		switch command {
		case "start":
			return rt.Start(id)
		case "pause", "resume":
			return rt.Pause(id, command == "pause")
		}
		s, err := rt.StateOf(id)
		if err != nil {
			return err
		}
		return cli.printJSON(s, true)
	case "kill":
		all := fs.Bool("all", false, "")
		fs.BoolVar(all, "a", false, "")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() < 1 || fs.NArg() > 2 {
			return errors.New(`"kill" requires a minimum of 1 and a maximum of 2 arguments`)
		}
		sig := syscall.SIGTERM
		if fs.NArg() == 2 {
			var err error
			if sig, err = ParseSignal(fs.Arg(1)); err != nil {
				return err
			}
		}
		return rt.Kill(fs.Arg(0), sig, *all)
	case "delete":
		force := fs.Bool("force", false, "")
		fs.BoolVar(force, "f", false, "")
		if err := fs.Parse(args); err != nil {
			return err
		}
		id, err := exactlyOne(command, fs)
		if err != nil {
			return err
		}
		return rt.Delete(id, *force)
	case "ps":
		format := fs.String("format", "table", "")
		fs.StringVar(format, "f", "table", "")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() < 1 {
			return errors.New(`"ps" requires a minimum of 1 argument(s)`)
		}
		if *format != "table" && *format != "json" {
			return fmt.Errorf("invalid format option %q", *format)
		}
		pids, err := rt.Pids(fs.Arg(0))
		if err != nil {
			return err
		}
		if *format == "json" {
			return cli.printJSON(pids, false)
		}
		return PsTable(pids, fs.Args()[1:], cli.Stdout)
	case "list":
		format := fs.String("format", "table", "")
		fs.StringVar(format, "f", "table", "")
		quiet := fs.Bool("quiet", false, "")
		fs.BoolVar(quiet, "q", false, "")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() != 0 {
			return errors.New(`"list" takes no arguments`)
		}
		return cli.list(rt, *format, *quiet)
	case "update":
		resources := fs.String("resources", "", "")
		fs.StringVar(resources, "r", "", "")
		if err := fs.Parse(args); err != nil {
			return err
		}
		id, err := exactlyOne(command, fs)
		if err != nil {
			return err
		}
		if *resources == "" {
			return errors.New("update: only --resources FILE|- is supported")
		}
		data, err := cli.readInput(*resources)
		if err != nil {
			return err
		}
		return rt.Update(id, data)
	case "exec":
		return cli.exec(rt, fs, args)
	case "features":
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() != 0 {
			return errors.New(`"features" takes no arguments`)
		}
		return cli.printJSON(Features(cli.Version), true)
	}
	return fmt.Errorf("no such command %q", command)
}

// exec is runc's exec: --process FILE, or the command after the ID with
// the container's process as the defaults.
func (cli *CLI) exec(rt *Runtime, fs *flag.FlagSet, args []string) error {
	var env, caps, gids listFlag
	var o ExecOptions
	str := func(p *string, names ...string) {
		for _, n := range names {
			fs.StringVar(p, n, "", "")
		}
	}
	boolean := func(p *bool, names ...string) {
		for _, n := range names {
			fs.BoolVar(p, n, false, "")
		}
	}
	str(&o.ConsoleSocket, "console-socket")
	str(&o.Cwd, "cwd")
	str(&o.User, "user", "u")
	str(&o.ProcessFile, "process", "p")
	str(&o.PidFile, "pid-file")
	var label, apparmor, cgroup string
	str(&label, "process-label")
	str(&apparmor, "apparmor")
	str(&cgroup, "cgroup")
	boolean(&o.TTY, "tty", "t")
	boolean(&o.Detach, "detach", "d")
	boolean(&o.NoNewPrivs, "no-new-privs")
	var ignorePaused bool
	boolean(&ignorePaused, "ignore-paused")
	fs.Var(&env, "env", "")
	fs.Var(&env, "e", "")
	fs.Var(&caps, "cap", "")
	fs.Var(&caps, "c", "")
	fs.Var(&gids, "additional-gids", "")
	fs.Var(&gids, "g", "")
	preserve := fs.Int("preserve-fds", 0, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() < 1 {
		return errors.New(`"exec" requires a minimum of 1 argument(s)`)
	}
	switch {
	case cgroup != "":
		return errors.New("--cgroup is not supported: an exec joins the container's own cgroup")
	case len(gids) > 0:
		return errors.New("--additional-gids is not supported yet: give them in --process")
	}
	o.ID, o.Args, o.Env, o.Caps = fs.Arg(0), fs.Args()[1:], env, caps
	o.AppArmor, o.SELinuxLabel = apparmor, label
	o.PreserveFDs = *preserve
	if err := ValidID(o.ID); err != nil {
		return err
	}
	code, err := rt.Exec(o)
	if err != nil {
		return err
	}
	if code != 0 {
		return exitCode(code)
	}
	return nil
}

func (cli *CLI) list(rt *Runtime, format string, quiet bool) error {
	states, err := rt.List()
	if err != nil {
		return err
	}
	switch {
	case quiet:
		for _, s := range states {
			fmt.Fprintln(cli.Stdout, s.ID)
		}
		return nil
	case format == "json":
		if states == nil {
			states = []StateOutput{}
		}
		return cli.printJSON(states, false)
	case format != "table":
		return fmt.Errorf("invalid format option %q", format)
	}
	fmt.Fprintf(cli.Stdout, "%-12s %-8s %-10s %-40s %-30s %s\n", "ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER")
	for _, s := range states {
		fmt.Fprintf(cli.Stdout, "%-12s %-8d %-10s %-40s %-30s %s\n", s.ID, s.Pid, s.Status, s.Bundle, s.Created.Format("2006-01-02T15:04:05.999999999Z"), s.Owner)
	}
	return nil
}

// readInput reads a file, or stdin for "-", up to maxResources bytes.
func (cli *CLI) readInput(path string) ([]byte, error) {
	var r io.Reader = cli.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxResources+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxResources {
		return nil, fmt.Errorf("resources: larger than %d bytes", maxResources)
	}
	return data, nil
}

func (cli *CLI) printJSON(v any, indent bool) error {
	var b []byte
	var err error
	if indent {
		b, err = json.MarshalIndent(v, "", "  ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = cli.Stdout.Write(append(b, '\n'))
	return err
}
