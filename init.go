package jail

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/internal/initstage"
	"github.com/jail-sandbox/jail/internal/stage"
	"github.com/jail-sandbox/jail/namespaces"
)

// Init runs the sandbox stages of jail when this process was started as one,
// and never returns then; otherwise it returns at once. Call it first thing
// in main, before flag parsing or anything else: without the embedded stage
// program (see package jail), Run re-executes the calling binary as the init
// of each sandbox; `jail check` and id-mapped mounts always do.
func Init() {
	// Builds that embed the stage program start the init and the janitor
	// from it; others start them from this binary.
	stage.Main()
	switch os.Args[0] {
	case initstage.ProbeArg:
		what := ""
		if len(os.Args) > 1 {
			what = os.Args[1]
		}
		initstage.Probe(what)
	case namespaces.HolderArg:
		// Owns a user namespace for id-mapped mounts until killed.
		for {
			_ = unix.Pause()
		}
	}
}
