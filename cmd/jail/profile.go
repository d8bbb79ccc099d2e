package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/jail-sandbox/jail"
	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/profiles"
)

const profileUsage = `usage: jail profile ls
       jail profile show NAME
       jail profile export NAME --bpf FILE [--denials FILE]
`

func profileCommand(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, profileUsage)
		return fail("profile: which subcommand?")
	}
	switch args[0] {
	case "ls", "show":
		// Both read profile files, which only the tools program can.
		if args[0] == "ls" && len(args) != 1 {
			return fail("profile ls: takes no arguments")
		}
		if args[0] == "show" && len(args) != 2 {
			return fail("profile show: takes one profile name")
		}
		return fail("profile %s: %v", args[0], programs.Exec(programs.Tools, append([]string{"jail-tools", "profile"}, args...)))
	case "export":
		return profileExport(profiles.DefaultStore(nil), args[1:])
	}
	return fail("profile: unknown subcommand %q", args[0])
}

// profileExport writes the compiled filter as raw BPF, for other tools
// (bwrap --seccomp FD). The argument-specific denials, when the profile has
// any, are a second program (bwrap --add-seccomp-fd).
func profileExport(store profiles.Store, args []string) int {
	fs := flag.NewFlagSet("profile export", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	bpf := fs.String("bpf", "", "write the allowlist program here")
	denials := fs.String("denials", "", "write the program of argument-specific denials here")
	var name string
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return fail("profile export: %v", err)
	}
	if name == "" && fs.NArg() == 1 {
		name = fs.Arg(0)
	}
	if name == "" || *bpf == "" {
		return fail("profile export: usage: jail profile export NAME --bpf FILE [--denials FILE]")
	}
	_, f, err := jail.ResolveProfile(store, name)
	if err != nil {
		return failProfile(err)
	}
	if err := os.WriteFile(*bpf, f.Allowlist, 0o644); err != nil {
		return fail("profile export: %v", err)
	}
	if *denials != "" {
		if err := os.WriteFile(*denials, f.Denials, 0o644); err != nil {
			return fail("profile export: %v", err)
		}
	}
	return 0
}

func failProfile(err error) int {
	var pe *profiles.Error
	if errors.As(err, &pe) {
		return fail("%v", pe)
	}
	return fail("%v", err)
}
