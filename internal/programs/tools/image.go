package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/images"
	"github.com/jail-sandbox/jail/images/fetch"
)

// imageCommand runs `jail image import` and `jail image pull` in store,
// and `jail image rm` and `prune` where jail hands them over (a store whose
// layers hold files of subordinate ids, which only a process in the user
// namespace that maps them may remove).
func imageCommand(store images.Store, args []string) int {
	if len(args) == 0 {
		return fail("image: which subcommand? (import, pull, rm, prune)")
	}
	switch args[0] {
	case "rm":
		if len(args) != 2 {
			return fail("image rm: takes one image reference")
		}
		if err := store.RemoveImage(args[1]); err != nil {
			return fail("%v", err)
		}
		return 0
	case "prune":
		n, err := store.Prune()
		if err != nil {
			return fail("image prune: %v", err)
		}
		fmt.Printf("removed %d unused layers\n", n)
		return 0
	case "import":
		fs := flag.NewFlagSet("image import", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		name := fs.String("name", "", "NAME[:TAG] for the image")
		quiet := fs.Bool("quiet", false, "print nothing but errors")
		lim := limitFlags(fs)
		path, rest := firstArg(args[1:])
		if err := fs.Parse(rest); err != nil {
			return fail("image import: %v", err)
		}
		if path == "" && fs.NArg() == 1 {
			path = fs.Arg(0)
		}
		if path == "" || fs.NArg() > 1 || (fs.NArg() == 1 && path != fs.Arg(0)) {
			return fail("image import: usage: jail image import PATH [--name NAME[:TAG]] [--max-size SIZE] [--max-layer-size SIZE] [--quiet]")
		}
		if !*quiet && isTerminal(os.Stderr) {
			store.Progress = os.Stderr
		}
		imgs, err := fetch.Import(store, path, *name, lim.limits())
		if err != nil {
			return fail("image import %s: %v", path, err)
		}
		if !*quiet {
			for _, img := range imgs {
				fmt.Printf("%s\t%s\t%d layers\n", img.Name, img.Digest, len(img.Layers))
			}
		}
		return 0
	case "pull":
		fs := flag.NewFlagSet("image pull", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		quiet := fs.Bool("quiet", false, "print nothing but errors")
		// --progress: progress lines on stdout, whatever it is (a run's
		// pull, whose caller keeps stderr for the error).
		progress := fs.Bool("progress", false, "progress on stdout")
		lim := limitFlags(fs)
		ref, rest := firstArg(args[1:])
		if err := fs.Parse(rest); err != nil {
			return fail("image pull: %v", err)
		}
		if ref == "" && fs.NArg() == 1 {
			ref = fs.Arg(0)
		} else if fs.NArg() > 0 {
			ref = ""
		}
		if ref == "" {
			return fail("image pull: usage: jail image pull REF [--max-size SIZE] [--max-layer-size SIZE] [--quiet] [--progress]")
		}
		if *progress {
			store.Progress = os.Stdout
		} else if !*quiet && isTerminal(os.Stderr) {
			store.Progress = os.Stderr
		}
		img, err := fetch.Pull(store, ref, lim.limits())
		if err != nil {
			return fail("image pull %s: %v", ref, err)
		}
		if !*quiet {
			fmt.Printf("%s\t%s\t%d layers\n", img.Name, img.Digest, len(img.Layers))
		}
		return 0
	}
	return fail("image: unknown subcommand %q", args[0])
}

// sizeFlags are --max-size and --max-layer-size (fetch.Limits).
type sizeFlags struct{ image, layer sizeFlag }

func limitFlags(fs *flag.FlagSet) *sizeFlags {
	f := &sizeFlags{image: sizeFlag(fetch.DefaultLimits.Image), layer: sizeFlag(fetch.DefaultLimits.Layer)}
	fs.Var(&f.image, "max-size", "the most an image may unpack to (default 32G)")
	fs.Var(&f.layer, "max-layer-size", "the most one layer may unpack to (default 16G)")
	return f
}

func (f *sizeFlags) limits() fetch.Limits {
	return fetch.Limits{Image: int64(f.image), Layer: int64(f.layer)}
}

// sizeFlag is a size as jail's options take it: a number of bytes with an
// optional binary K, M, G or T.
type sizeFlag int64

func (s *sizeFlag) String() string { return strconv.FormatInt(int64(*s), 10) }

func (s *sizeFlag) Set(v string) error {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(v), "B"), "i")
	shift := 0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			shift = 10
		case 'm', 'M':
			shift = 20
		case 'g', 'G':
			shift = 30
		case 't', 'T':
			shift = 40
		}
		if shift > 0 {
			t = t[:n-1]
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || t == "" || n < 1 || n*float64(int64(1)<<shift) > math.MaxInt64/2 {
		return fmt.Errorf("%q is not a size (e.g. 512M, 40G)", v)
	}
	*s = sizeFlag(n * float64(int64(1)<<shift))
	return nil
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
