// Command tools is the tools program of jail (see package programs): image
// import and pull, what reads profile files (YAML) or compiles seccomp
// filters, and what loads cgroup v2 device programs (eBPF). jail runs it
// with the caller's arguments and stdio; it is embedded in jail at build
// time and never installed on its own.
//
//	tools profile resolve     {"name", "files"} on stdin: the profile resolved
//	                          and its filter on stdout (seccomp.Resolved)
//	tools profile ls          jail profile ls
//	tools profile show NAME   jail profile show NAME
//	tools image import PATH [--name NAME[:TAG]] [--max-size SIZE] [--max-layer-size SIZE] [--quiet]
//	tools image pull REF [--max-size SIZE] [--max-layer-size SIZE] [--quiet] [--progress]
//	                          --progress: progress on stdout, whatever it
//	                          is (a run's pull: jail keeps stderr for the error)
//	tools oci seccomp         a bundle's linux.seccomp (JSON) on stdin: its
//	                          compiled filter on stdout (filter.Filter)
//	tools oci devices         device rules (JSON, []specs.LinuxDeviceCgroup)
//	                          on stdin, a cgroup v2 directory on descriptor 3:
//	                          their eBPF program attached there, the former
//	                          ones detached (package internal/oci/devices)
//	tools mapped image import|pull|rm|prune ...
//	                          the same in a user namespace mapped with the
//	                          caller's subordinate ids (programs.RunToolsMapped),
//	                          once descriptor 3 says its maps are written
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/jail-sandbox/jail/images"
	"github.com/jail-sandbox/jail/internal/oneline"
	"github.com/jail-sandbox/jail/internal/procname"
)

// mappedCommand runs an image command as root of a user namespace mapped
// with the caller's subordinate ids, once its starter has written the maps
// (one byte on descriptor 3; without it, nothing is done).
func mappedCommand(args []string) int {
	sync := os.NewFile(3, "ready")
	if sync == nil {
		return fail("tools: mapped: no descriptor to wait on")
	}
	var b [1]byte
	n, _ := sync.Read(b[:])
	sync.Close()
	if n != 1 {
		return fail("tools: mapped: the user namespace's ids were not mapped")
	}
	if len(args) == 0 || args[0] != "image" {
		return fail("tools: mapped: only image commands run mapped")
	}
	store, err := images.MappedStore()
	if err != nil {
		return fail("image: %v", err)
	}
	return imageCommand(store, args[1:])
}

func main() {
	procname.Set("jail-tools")
	if len(os.Args) < 2 {
		os.Exit(fail("tools: which command? (profile, image)"))
	}
	switch os.Args[1] {
	case "profile":
		os.Exit(profileCommand(os.Args[2:]))
	case "image":
		os.Exit(imageCommand(images.CallerStore(), os.Args[2:]))
	case "mapped":
		os.Exit(mappedCommand(os.Args[2:]))
	case "net":
		os.Exit(netCommand(os.Args[2:]))
	case "oci":
		os.Exit(ociCommand(os.Args[2:]))
	}
	os.Exit(fail("tools: unknown command %q", os.Args[1]))
}

func answer(out io.Writer, v any, code int) int {
	if err := json.NewEncoder(out).Encode(v); err != nil {
		return 1
	}
	return code
}

// fail prints a one-line error (its control characters escaped) as jail does and returns jail's status for
// its own failures.
func fail(format string, args ...any) int {
	fmt.Fprintln(os.Stderr, "jail: "+oneline.Escape(fmt.Sprintf(format, args...)))
	return 125
}
