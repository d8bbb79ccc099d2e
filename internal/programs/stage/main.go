// Command stage is the stage program of jail (see package programs): a
// sandbox's init and the cgroup janitor, chosen by argv[0]. It is embedded
// in jail at build time and never installed on its own.
package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/jail-sandbox/jail/internal/stage"
)

// The init changes the ids of the thread it runs on only (see
// initstage.takeRoot); running main on the startup thread makes that the
// thread ps and /proc/PID/status show.
func init() { runtime.LockOSThread() }

func main() {
	stage.Main()
	fmt.Fprintln(os.Stderr, "jail: this program is started by jail only")
	os.Exit(125)
}
