package main

import (
	"encoding/json"
	"io"
	"os"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/jail-sandbox/jail/seccomp"
	"github.com/jail-sandbox/jail/seccomp/compile"
)

// maxOCISeccomp bounds the policy read: a bundle's config.json is at most
// 4 MiB (package oci).
const maxOCISeccomp = 4 << 20

func ociCommand(args []string) int {
	if len(args) == 1 && args[0] == "seccomp" {
		return ociSeccompCommand(os.Stdin, os.Stdout)
	}
	return fail("tools: oci: unknown request %q", args)
}

// ociSeccompCommand reads a bundle's linux.seccomp (JSON) and writes its
// compiled filter (filter.Filter), or a seccomp.ResolveError with status 1.
func ociSeccompCommand(in io.Reader, out io.Writer) int {
	var s specs.LinuxSeccomp
	if err := json.NewDecoder(io.LimitReader(in, maxOCISeccomp)).Decode(&s); err != nil {
		return answer(out, seccomp.ResolveError{Message: "read request: " + err.Error()}, 1)
	}
	f, err := compile.CompileOCI(&s)
	if err != nil {
		return answer(out, seccomp.ResolveError{Message: err.Error()}, 1)
	}
	return answer(out, f, 0)
}
