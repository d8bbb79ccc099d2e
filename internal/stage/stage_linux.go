// Package stage is the entry of the Go processes jail starts on a
// sandbox's behalf from the running binary re-executed, chosen by argv[0]:
// a pool's forker (package forker) and the cgroup janitor that watches a
// pool's sandboxes (package janitor). The jail command and the server
// program call Main first thing (jail.Init does). What runs per sandbox
// (its init and its own cgroup janitor) is the C helper program instead
// (internal/programs).
package stage

import (
	"os"

	"github.com/jail-sandbox/jail/cgroups/janitor"
	"github.com/jail-sandbox/jail/internal/forker"
	"github.com/jail-sandbox/jail/internal/procname"
)

// Main runs the stage that argv[0] names and never returns then; otherwise
// it returns at once.
func Main() {
	switch os.Args[0] {
	case janitor.Arg:
		procname.Set("jail-janitor")
		janitor.Main(os.Args[1:])
	case forker.Arg:
		procname.Set("jail-forker")
		forker.Main()
	}
}
