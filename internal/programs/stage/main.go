// Command stage is the stage program of jail (see package programs): a
// sandbox's init and the cgroup janitor, chosen by argv[0]. It is embedded
// in jail at build time and never installed on its own.
package main

import (
	"fmt"
	"os"

	"github.com/jail-sandbox/jail/internal/stage"
)

func main() {
	stage.Main()
	fmt.Fprintln(os.Stderr, "jail: this program is started by jail only")
	os.Exit(125)
}
