package main

import (
	"os"
	"path/filepath"

	"github.com/jail-sandbox/jail"
	"github.com/jail-sandbox/jail/internal/oci"
	"github.com/jail-sandbox/jail/profiles"
	"github.com/jail-sandbox/jail/seccomp/filter"
)

// ociName is the name containerd's runc shim is given for jail (its
// BinaryName option): jail started under it is `jail oci`.
const ociName = "jail-runc"

// calledAsRuntime reports whether this program was started as jail-runc.
func calledAsRuntime() bool {
	return len(os.Args) > 0 && filepath.Base(os.Args[0]) == ociName
}

// ociCommand is `jail oci` (docs/oci.md): runc's command line.
func ociCommand(name string, args []string) int {
	cli := &oci.CLI{
		Name: name, Version: jail.Version, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		// Built-in profiles and root's (/etc/jail/profiles), as jail run
		// finds them.
		ResolveProfile: func(profile string) (*profiles.Profile, filter.Filter, error) {
			return jail.ResolveProfile(profiles.DefaultStore(nil), profile)
		},
	}
	return cli.Main(args)
}
