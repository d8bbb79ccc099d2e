#!/bin/sh
# cbuild.sh OUTPUT SOURCE: builds one of jail's static C helper programs (the
# init and the janitor) and writes its SHA-256 beside it.
#
# With musl (Debian's musl-tools) where it is installed: a static glibc
# program probes the CPU's features at every start (its CPUID instructions
# each trap to the hypervisor in a virtual machine), and started in 0.31 ms
# of CPU here against musl's 0.06 ms; the init starts once per sandbox and
# the janitor once per `jail run`. musl-gcc sees only musl's headers; the
# kernel's (linux/, asm/, asm-generic/, from linux-libc-dev) come through a
# directory of links to those alone, so no glibc header can stand in for a
# musl one. Without musl-gcc the program is built with glibc, which works
# the same, only slower to start.
set -e
out=$1
src=$2
flags="-static -Os -s -Wall -Wextra -Werror"
if command -v musl-gcc >/dev/null 2>&1; then
	headers=$(mktemp -d)
	trap 'rm -rf "$headers"' EXIT
	ln -s /usr/include/linux "$headers/linux"
	ln -s /usr/include/asm-generic "$headers/asm-generic"
	ln -s "/usr/include/$(gcc -dumpmachine)/asm" "$headers/asm"
	# shellcheck disable=SC2086
	musl-gcc $flags -isystem "$headers" -o "$out" "$src"
else
	echo "cbuild.sh: no musl-gcc (Debian's musl-tools): $out is built with glibc, and starts slower" >&2
	# shellcheck disable=SC2086
	gcc $flags -o "$out" "$src"
fi
sha256sum "$out" | cut -c1-64 >"$out.sha256"
