package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/images"
	"github.com/jail-sandbox/jail/images/fetch"
)

// imageCommand runs `jail image import` and `jail image pull`.
func imageCommand(args []string) int {
	if len(args) == 0 {
		return fail("image: which subcommand? (import, pull)")
	}
	store := images.CallerStore()
	switch args[0] {
	case "import":
		fs := flag.NewFlagSet("image import", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		name := fs.String("name", "", "NAME[:TAG] for the image")
		quiet := fs.Bool("quiet", false, "print nothing but errors")
		path, rest := firstArg(args[1:])
		if err := fs.Parse(rest); err != nil {
			return fail("image import: %v", err)
		}
		if path == "" && fs.NArg() == 1 {
			path = fs.Arg(0)
		}
		if path == "" {
			return fail("image import: usage: jail image import PATH [--name NAME[:TAG]]")
		}
		if !*quiet && isTerminal(os.Stderr) {
			store.Progress = os.Stderr
		}
		imgs, err := fetch.Import(store, path, *name)
		if err != nil {
			return fail("image %s: %v", path, err)
		}
		if !*quiet {
			for _, img := range imgs {
				fmt.Printf("%s\t%s\t%d layers\n", img.Name, img.Digest, len(img.Layers))
			}
		}
		return 0
	case "pull":
		ref, rest := firstArg(args[1:])
		quiet := len(rest) == 1 && rest[0] == "--quiet"
		if ref == "" || (len(rest) > 0 && !quiet) {
			return fail("image pull: usage: jail image pull REF [--quiet]")
		}
		if !quiet && isTerminal(os.Stderr) {
			store.Progress = os.Stderr
		}
		img, err := fetch.Pull(store, ref)
		if err != nil {
			return fail("image %s: %v", ref, err)
		}
		if !quiet {
			fmt.Printf("%s\t%s\t%d layers\n", img.Name, img.Digest, len(img.Layers))
		}
		return 0
	}
	return fail("image: unknown subcommand %q", args[0])
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// firstArg splits a leading positional argument from flags after it.
func firstArg(args []string) (string, []string) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], args[1:]
	}
	return "", args
}
