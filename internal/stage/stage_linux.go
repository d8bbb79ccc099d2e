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
	"github.com/jail-sandbox/jail/internal/procname"
)

// Main runs the stage that argv[0] names and never returns then; otherwise
// it returns at once.
func Main() {
	switch os.Args[0] {
	case initstage.Arg:
		procname.Set("jail-init")
		initstage.Main()
	case janitor.Arg:
		procname.Set("jail-janitor")
		janitor.Main(os.Args[1:])
	case forker.Arg:
		procname.Set("jail-forker")
		forker.Main()
	}
}
