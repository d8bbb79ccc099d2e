package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jail-sandbox/jail"
)

// The persistent-sandbox commands: create, start, exec, shell, ls, logs,
// stop, kill, rm. Each is a jail.Manager call on the user's state
// directory; no daemon is involved.

func openManager() (*jail.Manager, int) {
	m, err := jail.NewManager(jail.ManagerOptions{})
	if err != nil {
		return nil, fail("%v", err)
	}
	return m, 0
}

// labelFlag collects --label K=V.
type labelFlag map[string]string

func (l labelFlag) String() string { return "" }
func (l labelFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q: must be K=V", v)
	}
	l[k] = val
	return nil
}

func createCommand(args []string) int {
	fs := flag.NewFlagSet("create", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f runFlags
	f.register(fs)
	labels := labelFlag{}
	fs.Var(labels, "label", "K=V label (repeatable)")
	reuse := fs.Bool("reuse", false, "return an existing sandbox of that name made from the same options")
	ttl := fs.Duration("ttl", 0, "remove the sandbox this long after its creation")
	idle := fs.Duration("idle-timeout", 0, "remove the sandbox after this long with no command running")
	if code, done := parseFlags(fs, args, "jail create [RUN OPTIONS] [--label K=V]... [--reuse] [--ttl DUR] [--idle-timeout DUR] NAME"); done {
		return code
	}
	if fs.NArg() != 1 {
		return fail("create: give exactly one NAME (after the options)")
	}
	spec, err := f.spec(nil)
	if err != nil {
		return fail("%v", err)
	}
	if f.json || f.outputLimit != "" {
		return fail("create: --json and --output-limit are options of exec")
	}
	spec.Name, spec.Labels, spec.Reuse, spec.TTL, spec.IdleTimeout = fs.Arg(0), labels, *reuse, *ttl, *idle
	m, code := openManager()
	if m == nil {
		return code
	}
	defer m.Close()
	sb, err := m.Create(context.Background(), spec)
	if err != nil {
		return fail("%v", err)
	}
	fmt.Println(sb.Name())
	return 0
}

// execFlags are the EXEC OPTIONS.
type execFlags struct {
	user, workdir, outputLimit string
	timeout                    time.Duration
	env, secrets               listFlag
	tty, json                  bool
}

func (f *execFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.timeout, "timeout", 0, "wall-clock limit of the command, e.g. 30s")
	fs.Var(&f.env, "env", "K=V to set, or K to copy from the caller (repeatable)")
	fs.Var(&f.secrets, "secret", "NAME of a secret to inject as the variable NAME (repeatable)")
	fs.StringVar(&f.user, "user", "", "UID[:GID] inside the sandbox")
	fs.StringVar(&f.workdir, "workdir", "", "working directory inside the sandbox")
	fs.BoolVar(&f.tty, "tty", false, "run on a pseudo-terminal")
	fs.BoolVar(&f.tty, "t", false, "shorthand for --tty")
	fs.BoolVar(&f.json, "json", false, "capture output and print one JSON result object")
	fs.StringVar(&f.outputLimit, "output-limit", "", "with --json, most bytes kept per stream (default 1M)")
}

func (f *execFlags) process(command []string) (jail.Process, error) {
	p := jail.Process{
		Command: command, Secrets: f.secrets, Workdir: f.workdir, User: f.user,
		Timeout: f.timeout, TTY: f.tty, Capture: f.json,
		NetDenials: denialWriter(f.json),
	}
	if f.outputLimit != "" {
		var err error
		if p.OutputLimit, err = jail.ParseSize(f.outputLimit); err != nil {
			return p, fmt.Errorf("--output-limit: %v", err)
		}
	}
	for _, e := range f.env {
		if strings.Contains(e, "=") {
			p.Env = append(p.Env, e)
		} else if v, ok := os.LookupEnv(e); ok {
			p.Env = append(p.Env, e+"="+v)
		}
	}
	return p, nil
}

func execCommand(args []string, shell bool) int {
	name := "exec"
	usage := "jail exec [--timeout DUR] [--env K=V] [--secret NAME] [--workdir DIR] [--user UID[:GID]] [-t] [--json] [--output-limit SIZE] NAME -- COMMAND [ARG...]"
	if shell {
		name = "shell"
		usage = "jail shell [EXEC OPTIONS] NAME SCRIPT"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f execFlags
	f.register(fs)
	if code, done := parseFlags(fs, args, usage); done {
		return code
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return fail("%s: no sandbox NAME given", name)
	}
	sandbox, rest := rest[0], rest[1:]
	var command []string
	if shell {
		if len(rest) != 1 {
			return fail("shell: give NAME and one SCRIPT")
		}
		command = []string{"/bin/sh", "-c", rest[0]}
	} else {
		if len(rest) > 0 && rest[0] == "--" {
			rest = rest[1:]
		}
		if len(rest) == 0 {
			return fail("exec: no command given (jail exec NAME -- COMMAND [ARG...])")
		}
		command = rest
	}
	p, err := f.process(command)
	if err != nil {
		return fail("%v", err)
	}
	m, code := openManager()
	if m == nil {
		return code
	}
	defer m.Close()
	sb, err := m.Get(sandbox)
	if err != nil {
		return fail("%v", err)
	}
	signals := make(chan os.Signal, 8)
	go signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	p.Signals = signals
	p.Stdin = os.Stdin
	if !p.Capture {
		p.Stdout, p.Stderr = os.Stdout, os.Stderr
	}
	if p.TTY {
		spec := jail.Spec{}
		restore := attachTerminal(&spec)
		defer restore()
		p.WindowSize, p.Resize = spec.WindowSize, spec.Resize
	}
	res, err := sb.Exec(context.Background(), p)
	return finish(res, err, p.Timeout, p.Capture)
}

// oneSandbox parses a command that takes flags and one NAME.
func oneSandbox(fs *flag.FlagSet, args []string, usage string) (string, int, bool) {
	fs.SetOutput(io.Discard)
	if code, done := parseFlags(fs, args, usage); done {
		return "", code, true
	}
	if fs.NArg() != 1 {
		return "", fail("%s: give exactly one NAME", fs.Name()), true
	}
	return fs.Arg(0), 0, false
}

func lifecycleCommand(verb string, args []string) int {
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	grace := fs.Duration("time", jail.DefaultStopGrace, "with stop: how long to wait after SIGTERM before SIGKILL")
	force := fs.Bool("f", false, "with rm: remove a running sandbox too (its processes are killed)")
	fs.BoolVar(force, "force", false, "same as -f")
	usage := map[string]string{
		"start": "jail start NAME", "stop": "jail stop [--time DUR] NAME", "kill": "jail kill NAME", "rm": "jail rm [-f] NAME",
	}[verb]
	name, code, done := oneSandbox(fs, args, usage)
	if done {
		return code
	}
	if (*force && verb != "rm") || (*grace != jail.DefaultStopGrace && verb != "stop") {
		return fail("%s: --time is stop's, -f is rm's", verb)
	}
	m, code := openManager()
	if m == nil {
		return code
	}
	defer m.Close()
	if verb == "rm" {
		if err := m.Remove(name, *force); err != nil {
			return fail("%v", err)
		}
		return 0
	}
	sb, err := m.Get(name)
	if err != nil {
		return fail("%v", err)
	}
	switch verb {
	case "start":
		err = sb.Start(context.Background())
	case "stop":
		err = sb.Stop(context.Background(), *grace)
	case "kill":
		err = sb.Kill()
	}
	if err != nil {
		return fail("%v", err)
	}
	return 0
}

func lsCommand(args []string) int {
	fs := flag.NewFlagSet("ls", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "one JSON array of sandboxes")
	labels := labelFlag{}
	fs.Var(labels, "label", "only sandboxes with this K=V label (repeatable)")
	if code, done := parseFlags(fs, args, "jail ls [--json] [--label K=V]..."); done {
		return code
	}
	if fs.NArg() != 0 {
		return fail("ls: takes no arguments")
	}
	m, code := openManager()
	if m == nil {
		return code
	}
	defer m.Close()
	infos, err := m.List(labels)
	if err != nil {
		return fail("%v", err)
	}
	if *asJSON {
		out, _ := json.Marshal(infos)
		fmt.Println(string(out))
		return 0
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tROOT\tLABELS\tCREATED\tLAST EXEC\tCPU\tPEAK MEMORY")
	for _, i := range infos {
		root := i.Image
		if root == "" {
			root = i.Rootfs
		}
		if root == "" {
			root = "(host)"
		}
		var labels []string
		for k, v := range i.Labels {
			labels = append(labels, k+"="+v)
		}
		last := "-"
		if !i.LastExec.IsZero() {
			last = ago(i.LastExec)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%dms\t%s\n", i.Name, i.State, root, strings.Join(sorted(labels), ","),
			ago(i.Created), last, i.CPUMs, humanBytes(i.PeakMemoryBytes))
	}
	tw.Flush()
	return 0
}

func sorted(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

func ago(t time.Time) string {
	d := time.Since(t).Round(time.Second)
	return d.String() + " ago"
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fK", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

func logsCommand(args []string) int {
	fs := flag.NewFlagSet("logs", flag.ContinueOnError)
	tail := fs.Int("tail", 0, "only the last N lines")
	name, code, done := oneSandbox(fs, args, "jail logs [--tail N] NAME")
	if done {
		return code
	}
	if *tail < 0 {
		return fail("logs: --tail must be positive")
	}
	m, code := openManager()
	if m == nil {
		return code
	}
	defer m.Close()
	sb, err := m.Get(name)
	if err != nil {
		return fail("%v", err)
	}
	out, err := sb.Logs(*tail)
	if err != nil {
		return fail("%v", err)
	}
	_, _ = os.Stdout.Write(out)
	return 0
}
