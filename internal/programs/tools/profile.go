package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/jail-sandbox/jail/profiles"
	"github.com/jail-sandbox/jail/profiles/files"
	"github.com/jail-sandbox/jail/seccomp"
	"github.com/jail-sandbox/jail/seccomp/compile"
)

func profileCommand(args []string) int {
	switch {
	case len(args) == 1 && args[0] == "resolve":
		return resolveCommand(os.Stdin, os.Stdout)
	case len(args) == 1 && args[0] == "ls":
		for _, i := range files.List(profiles.DefaultStore(nil).Files()) {
			fmt.Printf("%-12s %-10s %s\n", i.Name, i.Source, i.Description)
		}
		return 0
	case len(args) == 2 && args[0] == "show":
		p, err := files.Resolve(profiles.DefaultStore(nil).Files(), args[1])
		if err != nil {
			return fail("%v", err)
		}
		out, err := files.Marshal(p)
		if err != nil {
			return fail("profile show: %v", err)
		}
		fmt.Printf("# profile %s (%s), resolved\n%s", p.Name, p.Source, out)
		return 0
	}
	return fail("tools: profile: unknown request %q", args)
}

// resolveCommand reads a seccomp.ResolveRequest and writes the profile
// resolved with its filter, or a seccomp.ResolveError with status 1.
func resolveCommand(in io.Reader, out io.Writer) int {
	var req seccomp.ResolveRequest
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		return answer(out, seccomp.ResolveError{Message: "read request: " + err.Error()}, 1)
	}
	p, err := files.Resolve(req.Files, req.Name)
	if err != nil {
		return answer(out, resolveError(err), 1)
	}
	f, err := compile.Compile(p)
	if err != nil {
		return answer(out, resolveError(err), 1)
	}
	return answer(out, seccomp.Resolved{Profile: p, Filter: f}, 0)
}

func resolveError(err error) seccomp.ResolveError {
	var pe *profiles.Error
	if errors.As(err, &pe) {
		return seccomp.ResolveError{Profile: pe.Profile, Line: pe.Line, Message: pe.Err.Error()}
	}
	return seccomp.ResolveError{Message: err.Error()}
}
