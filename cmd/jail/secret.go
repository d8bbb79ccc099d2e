package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/jail-sandbox/jail/internal/oneline"
	"github.com/jail-sandbox/jail/internal/secrets"
)

const secretUsage = `usage: jail secret add NAME --from-file PATH | --from-env VAR | --from-command CMD
       jail secret ls [--json]
       jail secret rm NAME

A secret is defined by where its value comes from, never by the value; it
is read when a sandbox asks for it (--secret NAME). Definitions are kept in
$XDG_CONFIG_HOME/jail/secrets.json (~/.config/jail/secrets.json), 0600.
`

// secretCommand is jail secret: definitions only, no value is read or
// shown here (add checks a --from-file file's owner and mode, not its
// content).
func secretCommand(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, secretUsage)
		return fail("secret: which subcommand? (add, ls, rm)")
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Print(secretUsage)
		return 0
	}
	store, err := secrets.DefaultStore(os.Getenv)
	if err != nil {
		return fail("secret: %v", err)
	}
	switch args[0] {
	case "add":
		return secretAdd(store, args[1:])
	case "ls":
		return secretList(store, args[1:])
	case "rm":
		if len(args) != 2 {
			return fail("secret rm: takes one secret name")
		}
		if err := store.Remove(args[1]); err != nil {
			return fail("secret rm: %v", err)
		}
		return 0
	}
	return fail("secret: unknown subcommand %q (add, ls, rm)", args[0])
}

// secretAdd is jail secret add NAME SOURCE, the name before or after the
// source's option.
func secretAdd(store secrets.Store, args []string) int {
	fs := flag.NewFlagSet("secret", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var src secrets.Source
	fs.StringVar(&src.File, "from-file", "", "read the value from `PATH`, a file of yours that only you can read")
	fs.StringVar(&src.Env, "from-env", "", "take the value from the variable `VAR` of the caller's environment")
	fs.StringVar(&src.Command, "from-command", "", "take the value from the output of /bin/sh -c `CMD`")
	var name string
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fmt.Print(secretUsage)
			return 0
		}
		return fail("%s", flagError("secret", err))
	}
	if name == "" && fs.NArg() == 1 {
		name = fs.Arg(0)
	} else if fs.NArg() != 0 || name == "" {
		return fail("secret add: usage: jail secret add NAME --from-file PATH | --from-env VAR | --from-command CMD")
	}
	if src.File != "" {
		// Stored absolute: the definition is used from other directories
		// (and by jail serve).
		abs, err := filepath.Abs(src.File)
		if err != nil {
			return fail("secret add: %v", err)
		}
		src.File = abs
	}
	if err := store.Add(name, src); err != nil {
		return fail("secret add: %v", err)
	}
	return 0
}

// secretList is jail secret ls [--json]: names and sources.
func secretList(store secrets.Store, args []string) int {
	asJSON := len(args) == 1 && args[0] == "--json"
	if len(args) > 0 && !asJSON {
		return fail("secret ls: takes only --json")
	}
	defs, err := store.List()
	if err != nil {
		return fail("secret ls: %v", err)
	}
	if asJSON {
		if defs == nil {
			defs = []secrets.Definition{}
		}
		out, err := json.Marshal(defs)
		if err != nil {
			return fail("secret ls: %v", err)
		}
		fmt.Println(string(out))
		return 0
	}
	for _, d := range defs {
		// A path or command may hold control characters: one line each.
		fmt.Printf("%-24s %s\n", d.Name, oneline.Escape(d.Source.String()))
	}
	return 0
}
