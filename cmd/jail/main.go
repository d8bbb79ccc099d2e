// Command jail runs commands in Linux sandboxes. See the README.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/jail-sandbox/jail"
	"github.com/jail-sandbox/jail/internal/oneline"
)

func main() {
	jail.Init()
	if calledAsRuntime() {
		os.Exit(ociCommand(ociName, os.Args[1:]))
	}
	os.Exit(dispatch(os.Args[1:]))
}

const usage = `usage: jail COMMAND [OPTIONS]

  run [RUN OPTIONS] [--] COMMAND [ARG...]   run a command in a new sandbox
  create [RUN OPTIONS] [--label K=V] [--reuse] [--ttl DUR] [--idle-timeout DUR] NAME
                                            make a persistent sandbox (idle until exec)
  exec [EXEC OPTIONS] NAME -- COMMAND [ARG...]   run a command in a persistent sandbox
  shell [EXEC OPTIONS] NAME SCRIPT          the same as: exec NAME -- /bin/sh -c SCRIPT
  ls [--json] [--label K=V]                 your persistent sandboxes
  logs [--tail N] NAME                      the combined output of a sandbox's execs
  stop [--time DUR] NAME | start NAME | kill NAME | rm [-f] NAME
  check                                     which isolation features this host gives you
  profile ls | show NAME | export NAME --bpf FILE   the named policies
  image import PATH [--name NAME[:TAG]] | pull REF | ls [--json] | rm REF | prune
        (import, pull: --max-size SIZE per image, 32G; --max-layer-size SIZE, 16G)
  secret add NAME --from-file PATH | --from-env VAR | --from-command CMD | ls [--json] | rm NAME
  net check [--json] RULES HOST[:PORT]      which egress rule decides for HOST, and why
  serve [--socket PATH] [--pool N]          the HTTP API on a unix socket
  mcp [--image REF] [--profile P] [--workspace DIR] [--net allow=RULES] ...
                                            a Model Context Protocol server on stdio
  oci [--root DIR] COMMAND ...              an OCI runtime with runc's command line
                                            (installed as jail-runc for containerd; docs/oci.md)
  version                                   print the version

Run 'jail help run' (or 'jail run --help') for the RUN OPTIONS.
`

func dispatch(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return jail.ExitSetup
	}
	switch args[0] {
	case "run":
		return runCommand(args[1:])
	case "check":
		return checkCommand(args[1:])
	case "profile":
		return profileCommand(args[1:])
	case "image":
		return imageCommand(args[1:])
	case "secret":
		return secretCommand(args[1:])
	case "net":
		// The rules' parser lives in the tools program (its public
		// suffix list links net/http, too heavy for every start).
		return runTools(append([]string{"net"}, args[1:]...))
	case "version", "--version":
		fmt.Printf("jail %s\n", jail.Version)
		return 0
	case "help", "-h", "--help":
		// jail help COMMAND: that command's own help.
		if len(args) == 2 && (args[1] == "run" || args[1] == "serve" || args[1] == "mcp") {
			return dispatch([]string{args[1], "--help"})
		}
		fmt.Print(usage)
		return 0
	case "serve":
		return serveCommand(args[1:])
	case "mcp":
		return mcpCommand(args[1:])
	case "oci":
		return ociCommand("jail oci", args[1:])
	case "create":
		return createCommand(args[1:])
	case "exec":
		return execCommand(args[1:], false)
	case "shell":
		return execCommand(args[1:], true)
	case "ls":
		return lsCommand(args[1:])
	case "logs":
		return logsCommand(args[1:])
	case "start", "stop", "kill", "rm":
		return lifecycleCommand(args[0], args[1:])
	default:
		return fail("unknown command %q (see 'jail help')", args[0])
	}
}

// parseFlags parses args into fs. done is true when the command is over:
// help was asked for (code 0, usage and flags printed) or a flag is bad
// (code 125, one line).
func parseFlags(fs *flag.FlagSet, args []string, usage string) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		fmt.Println("usage: " + usage)
		if fs.Name() == "run" {
			printOptions(os.Stdout, runOptions)
			fmt.Println("\nSizes: K, M, G are binary; a bare number is bytes. Durations: 500ms, 30s, 2m.")
		} else {
			printFlags(os.Stdout, fs)
		}
		return 0, true
	default:
		return fail("%s", flagError(fs.Name(), err)), true
	}
}

// fail prints a one-line error (its control characters escaped) and returns the status for jail's own
// failures.
func fail(format string, args ...any) int {
	fmt.Fprintln(os.Stderr, "jail: "+oneline.Escape(fmt.Sprintf(format, args...)))
	return jail.ExitSetup
}
