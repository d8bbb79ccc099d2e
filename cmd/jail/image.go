package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/jail-sandbox/jail"
	"github.com/jail-sandbox/jail/internal/programs"
	"github.com/jail-sandbox/jail/namespaces"
)

func imageCommand(args []string) int {
	if len(args) == 0 {
		return fail("image: which subcommand? (import, ls, rm, prune)")
	}
	store := jail.ImageStore()
	// A rootless caller with subordinate ids stores layers with their
	// owners, in a user namespace that maps them, where alone they can be
	// removed again: import, pull, rm and prune run in the tools program
	// there (programs.RunToolsMapped). Nothing else starts a process.
	if args[0] == "rm" && len(args) != 2 {
		return fail("image rm: takes one image reference")
	}
	if id, ok := storeMapping(args[0]); ok {
		code, err := programs.RunToolsMapped(id, append([]string{"image"}, args...), os.Stdin, os.Stdout, os.Stderr)
		if err != nil {
			return fail("image %s: %v", args[0], err)
		}
		return code
	}
	switch args[0] {
	case "import", "pull":
		// Registry client and layer unpacking live in the tools program.
		return runTools(append([]string{"image"}, args...))
	case "ls":
		imgs, err := store.List()
		if err != nil {
			return fail("image ls: %v", err)
		}
		if len(args) > 1 && args[1] == "--json" {
			out, _ := json.Marshal(imgs)
			fmt.Println(string(out))
			return 0
		}
		for _, img := range imgs {
			fmt.Printf("%-50s %s %7.1f MiB\n", img.Name, strings.TrimPrefix(img.Digest, "sha256:")[:12], float64(img.Size)/(1<<20))
		}
		return 0
	case "rm":
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
	}
	return fail("image: unknown subcommand %q", args[0])
}

// storeMapping is the identity whose maps image subcommand sub runs under:
// a rootless caller's with subordinate ids, for those that change the
// store.
func storeMapping(sub string) (namespaces.Identity, bool) {
	if os.Geteuid() == 0 || (sub != "import" && sub != "pull" && sub != "rm" && sub != "prune") {
		return namespaces.Identity{}, false
	}
	id, err := namespaces.ForCaller(nil, 0, 0)
	return id, err == nil && id.SubIDs
}

// runTools runs the tools program with the caller's stdio.
func runTools(args []string) int {
	code, err := programs.RunTools(args, os.Stdin, os.Stdout, os.Stderr)
	if err != nil {
		return fail("%v", err)
	}
	return code
}
