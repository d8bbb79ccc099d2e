#!/bin/sh
# build.sh GOARCH OUTPUT: builds jail's helper program for GOARCH (amd64 or
# arm64) from ../init/init.c, ../janitor/janitor.c and ../monitor/monitor.c:
# one static binary that is a sandbox's init (argv[0] "jail:init"), one
# sandbox's cgroup janitor (argv[0] "jail:cgroup-janitor") or a persistent
# sandbox's monitor (argv[0] "jail:monitor"). The binaries are committed
# beside this script (jail-helper-GOARCH) and embedded by package programs,
# so that the library needs no build step; `make helper` rebuilds them and
# TestHelperIsBuiltFromItsSources checks that the committed ones are what
# this script makes of the sources, byte for byte.
#
# Static musl (Debian's musl-tools; musl-dev:arm64 and gcc-aarch64-linux-gnu
# for arm64): a static glibc program probes the CPU's features at every
# start (its CPUID instructions each trap to the hypervisor in a virtual
# machine) and started in 0.31 ms of CPU here against musl's 0.06 ms; the
# init starts once per sandbox and the janitor once per `jail run`.
# musl's specs see only musl's headers; the kernel's (linux/, asm/,
# asm-generic/, from linux-libc-dev) come through a directory of links to
# those alone, so no glibc header can stand in for a musl one.
#
# Reproducible: no build id, no debug information (-s), and the temporary
# directory's name mapped away (-ffile-prefix-map), so two builds from the
# same sources with the same Debian packages give the same bytes. The
# committed ones come from Debian 12's (gcc 12.2.0, musl 1.2.3, binutils
# 2.40); another compiler gives other bytes, which the test reports.
set -e
arch=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
case $arch in
amd64)
	cc=x86_64-linux-gnu-gcc
	musl=/usr/lib/x86_64-linux-musl
	asm=/usr/include/x86_64-linux-gnu/asm
	need="musl-tools linux-libc-dev"
	;;
arm64)
	cc=aarch64-linux-gnu-gcc
	musl=/usr/lib/aarch64-linux-musl
	asm=/usr/include/aarch64-linux-gnu/asm
	need="gcc-aarch64-linux-gnu musl-dev:arm64 linux-libc-dev:arm64 (after dpkg --add-architecture arm64)"
	;;
*)
	echo "helper/build.sh: no helper for GOARCH $arch (amd64 and arm64 are built)" >&2
	exit 1
	;;
esac
if ! command -v "$cc" >/dev/null 2>&1 || [ ! -r "$musl/musl-gcc.specs" ] || [ ! -d "$asm" ]; then
	echo "helper/build.sh: building the $arch helper needs Debian's $need" >&2
	exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/include"
ln -s /usr/include/linux "$work/include/linux"
ln -s /usr/include/asm-generic "$work/include/asm-generic"
ln -s "$asm" "$work/include/asm"
"$cc" -specs "$musl/musl-gcc.specs" -static -Os -s -Wall -Wextra -Werror \
	-ffile-prefix-map="$work"=/build -ffile-prefix-map="$here/.."=. \
	-Wl,--build-id=none -isystem "$work/include" \
	-o "$work/helper" "$here/../init/init.c" "$here/../janitor/janitor.c" "$here/../monitor/monitor.c"
# Written whole, in place of the old one only once built.
mv "$work/helper" "$out"
