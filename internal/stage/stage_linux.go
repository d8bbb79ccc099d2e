// Package stage is the entry of the processes jail starts on a sandbox's
// behalf, chosen by argv[0]: the init (package initstage), the cgroup
// janitor (package janitor) and a pool's forker (package forker). The stage program (internal/programs) runs
// them; a build without it runs them from the jail binary, whose main
// calls Main first (jail.Init does).
package stage

import (
	"os"

	"github.com/jail-sandbox/jail/cgroups/janitor"
	"github.com/jail-sandbox/jail/internal/forker"
	"github.com/jail-sandbox/jail/internal/initstage"
)

// Main runs the stage that argv[0] names and never returns then; otherwise
// it returns at once.
func Main() {
	switch os.Args[0] {
	case initstage.Arg:
		initstage.Main()
	case janitor.Arg:
		janitor.Main(os.Args[1:])
	case forker.Arg:
		forker.Main()
	}
}
