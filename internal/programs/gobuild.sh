#!/bin/sh
# gobuild.sh [GO BUILD FLAGS...] PACKAGE: go build -trimpath of one of jail's
# Go programs (the jail binary, and the stage, server and tools programs),
# with extra linker flags from $LDFLAGS, and with the Go runtime's
# disablethp setting on by default in the binary.
#
# Why: where the kernel gives transparent huge pages to every mapping (THP
# "always", the default of Debian's and RHEL's kernels), the Go heap's
# first touches each fault in a 2 MB page that the kernel zeroes whole,
# though a `jail run` uses about 1 MB of heap: in the cgroup v2 VM (Debian's
# kernel) the CLI held 2 to 3 such pages, and `jail run` took 10-14 ms
# longer, `jail version` 10-13 ms. disablethp=1 makes the runtime advise
# against huge pages on its heap. It changes nothing for the processes jail
# starts, unlike PR_SET_THP_DISABLE, which they would inherit.
#
# The setting cannot be given by //go:debug or go.mod's godebug (the
# toolchain refuses it), so it goes where the go command puts a module's
# own defaults, runtime.godebugDefault; those (go list's DefaultGODEBUG,
# empty while go.mod's go line is the toolchain's) are kept in front of it.
set -e
for package; do :; done
defaults=$(${GO:-go} list -f '{{.DefaultGODEBUG}}' "$package")
exec ${GO:-go} build -trimpath -ldflags="$LDFLAGS -X=runtime.godebugDefault=${defaults:+$defaults,}disablethp=1" "$@"
