// Package serveflags defines the flags of `jail serve` once, for the two
// processes that read them: jail, which checks them before it execs the
// server program, and the server program, which gets them as typed (so
// that ps shows the command the user ran) and parses them again. It links
// only the flag package, so that jail's own start stays short.
package serveflags

import (
	"flag"
	"fmt"
)

// Usage is the synopsis of `jail serve`.
const Usage = "jail serve [--socket PATH] [--pool N] [--max-runs N]"

// Flags are the options of `jail serve`.
type Flags struct {
	Socket  string // "" for the default
	Pool    int
	MaxRuns int // 0 for the default
}

// Register defines the flags in fs, with their defaults.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Socket, "socket", "", "the unix socket `PATH` to listen on (default /run/jail/jail.sock for root, $XDG_RUNTIME_DIR/jail/jail.sock otherwise)")
	fs.IntVar(&f.Pool, "pool", 2, "`N` sandboxes kept ready per (image, root, profile); 0 for none")
	fs.IntVar(&f.MaxRuns, "max-runs", 0, "at most `N` runs at once; later requests wait (default 16 per CPU)")
}

// Check refuses values out of range, in jail's one-line form.
func (f *Flags) Check() error {
	if f.Pool < 0 || f.Pool > 64 {
		return fmt.Errorf("--pool %d: must be between 0 and 64", f.Pool)
	}
	if f.MaxRuns < 0 {
		return fmt.Errorf("--max-runs %d: must be positive", f.MaxRuns)
	}
	return nil
}
