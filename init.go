package jail

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/probe"
	"github.com/jail-sandbox/jail/internal/stage"
	"github.com/jail-sandbox/jail/namespaces"
)

// Init runs the helper processes of jail when this process was started as
// one, and never returns then; otherwise it returns at once. Call it first
// thing in main, before flag parsing or anything else: a Pool starts its
// forker and its cgroup janitor by re-executing the calling binary, and so
// do `jail check`'s probes and id-mapped mounts. (A sandbox's init is the
// embedded C helper program, whatever the binary.)
func Init() {
	stage.Main()
	switch os.Args[0] {
	case probe.Arg:
		what := ""
		if len(os.Args) > 1 {
			what = os.Args[1]
		}
		probe.Main(what)
	case namespaces.HolderArg:
		// Owns a user namespace for id-mapped mounts until killed.
		for {
			_ = unix.Pause()
		}
	}
}
