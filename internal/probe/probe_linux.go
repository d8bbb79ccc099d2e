// Package probe is what `jail check` starts in fresh namespaces to try one
// feature there: the running binary re-executed as Arg (jail.Init runs
// Main). It changes nothing outside those namespaces.
package probe

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Arg is argv[0] of a process started by `jail check` to try one
// feature in fresh namespaces. Its first argument names the feature; it
// exits 0 when the feature works and prints why not otherwise.
const Arg = "jail:probe"

// Main runs the probe of what and exits.
func Main(what string) {
	if err := probe(what); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func probe(what string) error {
	switch what {
	case "namespace":
		return nil
	case "overlay":
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("make mounts private: %w", err)
		}
		if err := unix.Mount("probe", "/tmp", "tmpfs", 0, ""); err != nil {
			return fmt.Errorf("tmpfs: %w", err)
		}
		for _, d := range []string{"lower", "upper", "work", "merged"} {
			if err := os.Mkdir(filepath.Join("/tmp", d), 0o755); err != nil {
				return err
			}
		}
		opts := "lowerdir=/tmp/lower,upperdir=/tmp/upper,workdir=/tmp/work,userxattr"
		if err := unix.Mount("overlay", "/tmp/merged", "overlay", 0, opts); err != nil {
			return fmt.Errorf("overlay: %w", err)
		}
		return nil
	}
	return fmt.Errorf("unknown probe %q", what)
}
