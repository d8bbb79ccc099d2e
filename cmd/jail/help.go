package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// option is one option as a user types it and reads it in --help: its
// argument's name, what it does, and its default.
type option struct {
	name, arg, meaning string
}

// optionGroup is a heading of a command's help and its options.
type optionGroup struct {
	title   string
	options []option
}

// runOptions are the RUN OPTIONS, grouped as the README's table. Every
// flag runFlags registers is here, and nothing else
// (TestRunHelpListsEveryFlag).
var runOptions = []optionGroup{
	{"Root filesystem and files", []option{
		{"image", "REF", "root filesystem from an image in the local store"},
		{"pull", "never|missing|always", "when to pull --image from its registry first: never, when the store lacks it (default), or always (refresh)"},
		{"rootfs", "DIR", "DIR as the read-only lower layer of / (default: the host's tree, read-only)"},
		{"read-only", "", "no writable root layer (/tmp, /var/tmp, /run, /dev/shm and /workspace stay writable)"},
		{"workspace", "DIR", "DIR read-write at /workspace, the working directory"},
		{"mount", "SRC:DST[:ro|:rw]", "an extra bind mount, read-only unless :rw (repeatable)"},
	}},
	{"Limits", []option{
		{"memory", "SIZE", "memory limit, swap included, e.g. 256M (default 512M)"},
		{"cpus", "N", "CPU quota in cores, e.g. 0.5 (default 1)"},
		{"pids", "N", "most processes and threads at once (default 256)"},
		{"timeout", "DUR", "kill the whole sandbox after DUR, e.g. 30s; exit 124 (default none)"},
	}},
	{"Policy", []option{
		{"profile", "NAME", "named policy: seccomp, limits, masks (default default)"},
		{"net", "none|allow=RULES", "network: none, a loopback interface only (default); allow=RULE[,RULE...], jail's egress gateway to the hosts the rules allow (docs/egress.md)"},
		{"net-limit", "conns=N,bytes=SIZE,rate=SIZE", "the gateway's limits: connections at once (default 256), bytes in all, bytes per second"},
		{"secret", "NAME[@HOST,...]", "a secret (jail secret add) given to the command as the variable NAME, its value scrubbed from the output; bound to hosts, the command gets a placeholder and the gateway puts the value in requests to those hosts only"},
	}},
	{"Identity and environment", []option{
		{"user", "UID[:GID]", "identity inside the sandbox (default 0, never host root)"},
		{"workdir", "DIR", "working directory inside the sandbox"},
		{"hostname", "NAME", "host name inside the sandbox (default jail)"},
		{"env", "K=V", "set a variable, or copy K from the caller (repeatable)"},
	}},
	{"Terminal and output", []option{
		{"tty", "", "run on a pseudo-terminal (also -t)"},
		{"json", "", "capture the output and print one JSON result object"},
		{"output-limit", "SIZE", "with --json, the most bytes kept per stream (default 1M, at most 64M)"},
	}},
}

// printOptions writes groups as --help shows them.
func printOptions(w io.Writer, groups []optionGroup) {
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, o := range g.options {
			typed := "--" + o.name
			if o.arg != "" {
				typed += " " + o.arg
			}
			fmt.Fprintf(w, "  %-28s %s\n", typed, o.meaning)
		}
	}
}

// printFlags writes a flag set's options as users type them (--name ARG),
// for the commands without a table of their own: the argument is the
// back-quoted word of the usage text, as package flag reads it.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w)
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		typed := "--" + f.Name
		if len(f.Name) == 1 {
			typed = "-" + f.Name
		}
		if arg != "" {
			typed += " " + strings.ToUpper(arg)
		}
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
			usage += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, "  %-28s %s\n", typed, usage)
	})
}

// flagError words a package flag parse error as jail's one line: the
// option as typed, and where to look.
func flagError(command string, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return fmt.Sprintf("%s: unknown option %s (see 'jail help %s')", command, dashes(name), command)
	}
	// "invalid value "x" for flag -cpus: parse error", and the like.
	if i := strings.Index(msg, " for flag -"); i >= 0 {
		rest := msg[i+len(" for flag -"):]
		name, why, _ := strings.Cut(rest, ": ")
		return fmt.Sprintf("%s: %s: %s (%s)", command, dashes(name), msg[:i], why)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Sprintf("%s: %s needs a value (see 'jail help %s')", command, dashes(name), command)
	}
	return command + ": " + msg
}

// dashes is a flag's name as users type it.
func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + strings.TrimPrefix(name, "-")
}
