package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/jail-sandbox/jail"
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
	store := profiles.DefaultStore()
	switch args[0] {
	case "ls":
		infos, err := store.List()
		if err != nil {
			return fail("profile ls: %v", err)
		}
		for _, i := range infos {
			fmt.Printf("%-12s %-10s %s\n", i.Name, i.Source, i.Description)
		}
		return 0
	case "show":
		if len(args) != 2 {
			return fail("profile show: takes one profile name")
		}
		p, err := store.Resolve(args[1])
		if err != nil {
			return failProfile(err)
		}
		out, err := profiles.Marshal(p)
		if err != nil {
			return fail("profile show: %v", err)
		}
		fmt.Printf("# profile %s (%s), resolved\n%s", p.Name, p.Source, out)
		return 0
	case "export":
		return profileExport(store, args[1:])
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
