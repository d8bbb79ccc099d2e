package jail

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/jail-sandbox/jail/cgroups/janitor"
	"github.com/jail-sandbox/jail/internal/forker"
	"github.com/jail-sandbox/jail/internal/probe"
	"github.com/jail-sandbox/jail/internal/stage"
	"github.com/jail-sandbox/jail/namespaces"
)

// Init runs the helper processes of jail when this process was started as
// one, and never returns then; otherwise it returns at once. A Pool starts
// its forker and its cgroup janitor by re-executing the calling binary, and
// so do `jail check`'s probes and id-mapped mounts. (A sandbox's init is
// the embedded C helper program, whatever the binary.) The package's own
// initialisation calls it, before main runs, so a program that imports jail
// need not; calling it first thing in main is harmless.
func Init() {
	if role() == "" {
		return
	}
	// jail starts these from a program that runs as its caller; started
	// by another user from a set-user-ID or capability-raising program,
	// one would act with the program's rights on whatever that user passed
	// it (the forker starts inits on descriptor 3's say).
	if secureExec() {
		fmt.Fprintf(os.Stderr, "jail: %s: refused in a program started set-user-ID, set-group-ID or with file capabilities\n", os.Args[0])
		os.Exit(125)
	}
	stage.Main()
	switch os.Args[0] {
	case probe.Arg:
		what := ""
		if len(os.Args) > 1 {
			what = os.Args[1]
		}
		probe.Main(what)
	case holderArg:
		holderMain()
	case namespaces.HolderArg:
		// Owns a user namespace for id-mapped mounts until killed.
		for {
			_ = unix.Pause()
		}
	}
}

// startedWithoutInit refuses to build anything in a process that jail
// started again from this program as one of its helper processes (argv[0]
// names which) and whose main runs all the same: that main would start the
// same helper again, and that one the next, until the host runs out of
// processes. The package's init dispatches before main, so only a change
// that broke the dispatch would get here; this keeps such a break from
// taking the host down.
func startedWithoutInit() error {
	if r := role(); r != "" {
		return invalid("init", "this process was started by jail as %s, and was not dispatched to it (jail.Init)", r)
	}
	return nil
}

// role is the helper process this one was started as (its argv[0]), or ""
// when it is none, which a process without arguments is not either.
func role() string {
	if len(os.Args) == 0 {
		return ""
	}
	switch os.Args[0] {
	case forker.Arg, janitor.Arg, probe.Arg, namespaces.HolderArg, holderArg:
		return os.Args[0]
	}
	return ""
}

// init dispatches before main: were it left to main, a program that forgot
// Init would have its main started again as its pool's forker, which would
// make a pool and start another, until the host had no process left.
func init() { Init() }

// atSecure is AT_SECURE, the auxiliary vector's entry that says whether
// the process was started in secure mode (linux/auxvec.h).
const atSecure = 23

// secureExec reports whether the kernel started this process in secure
// mode (AT_SECURE: set-user-ID, set-group-ID or file capabilities), or
// whether that cannot be told.
func secureExec() bool {
	auxv, err := os.ReadFile("/proc/self/auxv")
	word := int(unsafe.Sizeof(uintptr(0)))
	if err != nil || len(auxv)%(2*word) != 0 {
		return true
	}
	read := func(b []byte) uint64 {
		if word == 4 {
			return uint64(binary.NativeEndian.Uint32(b))
		}
		return binary.NativeEndian.Uint64(b)
	}
	for i := 0; i+2*word <= len(auxv); i += 2 * word {
		if read(auxv[i:]) == atSecure {
			return read(auxv[i+word:]) != 0
		}
	}
	return true
}
