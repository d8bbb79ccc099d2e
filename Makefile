# jail: build, test and benchmark. Targets that need Debian packages install
# the missing ones first when run as root.

GO ?= go
# jail is one static pure-Go binary. It embeds three helper programs
# (internal/programs): the helper (a sandbox's init and its cgroup janitor,
# static C with musl), committed for amd64 and arm64 so that the library
# needs no build step, and rebuilt here (make helper; a test checks the
# committed ones are what their sources build to); and the server program
# (jail serve) and the tools program (image import and pull, user profiles
# and seccomp compiling, which links libseccomp statically through cgo),
# built by go generate and not committed. `go build ./cmd/jail` without
# them stops with an error naming what to run.
JAIL_BUILD := CGO_ENABLED=0 GO=$(GO) sh internal/programs/gobuild.sh
TEST_PACKAGES := busybox-static bubblewrap util-linux libseccomp-dev gcc libc6-dev musl-tools linux-libc-dev git python3 debootstrap curl uidmap

.PHONY: build build-deps helper programs test test-deps test-host test-cgroup2 bench vet clean

build: helper programs
	$(JAIL_BUILD) -o bin/jail ./cmd/jail

programs: build-deps
	$(GO) generate ./internal/programs

# The helper for amd64 always, and for arm64 where its cross compiler and
# musl are installed (gcc-aarch64-linux-gnu, and musl-dev:arm64 and
# linux-libc-dev:arm64 after dpkg --add-architecture arm64).
HELPER := internal/programs/helper
helper: build-deps
	sh $(HELPER)/build.sh amd64 $(HELPER)/jail-helper-amd64
	@if command -v aarch64-linux-gnu-gcc >/dev/null && [ -r /usr/lib/aarch64-linux-musl/musl-gcc.specs ]; then \
		echo sh $(HELPER)/build.sh arm64 $(HELPER)/jail-helper-arm64; sh $(HELPER)/build.sh arm64 $(HELPER)/jail-helper-arm64; \
	else echo "helper: no arm64 cross compiler with musl: $(HELPER)/jail-helper-arm64 not rebuilt"; fi
	cd $(HELPER) && for a in amd64 arm64; do sha256sum jail-helper-$$a | cut -c1-64 >jail-helper-$$a.sha256; done

# The tools program needs libseccomp (and gcc for cgo), from Debian's
# packages, and links glibc statically (libc6-dev); the helper links musl
# statically (musl-tools, with the kernel's headers from linux-libc-dev),
# which starts faster (internal/programs/helper/build.sh).
build-deps:
	@dpkg -s libseccomp-dev gcc libc6-dev musl-tools linux-libc-dev >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libseccomp-dev gcc libc6-dev musl-tools linux-libc-dev; \
		else echo "building jail needs: apt-get install libseccomp-dev gcc libc6-dev musl-tools linux-libc-dev" >&2; exit 1; fi; }

# The whole suite: unit tests and integration tests that start real
# sandboxes as root and as an unprivileged user (created when missing), on
# this host, then the integration tests again under a pure cgroup v2 kernel.
test: test-deps test-host test-cgroup2

test-host: programs
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 15m ./...

# The VM tool of ../shared/tools boots Debian's stock kernel with only cgroup
# v2; binaries are built here and only run in the guest: the library's tests
# (Run, Pool), then the integration tests, told by JAIL_TEST_EMULATED that
# they run under software emulation (long loops are shortened). A hung test
# panics at 20 minutes with every goroutine's stack (the suite takes 5–8
# minutes there, twice that when the host is busy). The guest kernel
# sometimes breaks under software emulation, seconds after boot, when the
# first sandbox's cgroup gets its limits: 6.1 spun with "soft lockup" on
# both virtual CPUs for minutes, 6.12 oopsed in the scheduler after an int3
# trap (the kernel patches its code when such a feature is first used, which
# may be what the emulator gets wrong); the next try passed each time. The
# guest panics at the first soft lockup report (softlockup_panic=1, about
# 25 s in) as it does at an oops, rather than wait for the tool's own
# timeout (exit 124), and gets one more try; so does an emulator that fails
# by itself (exit 125: QEMU 7.2 once aborted on an assertion in its MSI-X
# emulation while the guest booted).
VM_RUN ?= $(CURDIR)/../shared/tools/vm-cgroup2/run.sh
VM_PACKAGES := qemu-system-x86 linux-image-amd64 cpio xz-utils
# A pool reuses a v2 cgroup only where memory.peak can be restarted (Linux
# 6.12): Debian 12's stock kernel (6.1) cannot. So the library's and the
# cgroups package's tests run a second time under Debian 12's 6.12 kernel
# (linux-image-6.12.*+deb12-amd64-unsigned, which .ci/run installs) when
# /boot has one; the stock kernel is the one linux-image-amd64 depends on.
# That second guest has one virtual CPU: with two, 6.12 oopsed as its first
# sandbox cgroup got its limits in two of six runs (see below; both right
# after the first guest's run), and one CPU runs these tests as fast (13 s).
VM_STOCK_KERNEL = /boot/vmlinuz-$(shell dpkg-query -W -f='$${Depends}' linux-image-amd64 2>/dev/null | sed -n 's/^linux-image-\([^ ,]*\).*/\1/p')
VM_612_KERNEL = $(shell ls -1 /boot/vmlinuz-6.12.* 2>/dev/null | sort -V | tail -n1)
test-cgroup2:
	@if [ ! -x "$(VM_RUN)" ] || ! command -v qemu-system-x86_64 >/dev/null; then \
		echo "test-cgroup2: skipped: needs $(VM_RUN) and qemu-system-x86"; exit 0; fi; \
	set -e; mkdir -p bin/vm; \
	$(GO) generate ./internal/programs; \
	$(JAIL_BUILD) -o bin/vm/jail ./cmd/jail; \
	CGO_ENABLED=0 $(GO) build -o bin/vm/jailprobe ./test/jailprobe; \
	$(GO) test -c -o bin/vm/integration.test ./test; \
	$(GO) test -c -o bin/vm/library.test .; \
	$(GO) test -c -o bin/vm/cgroups.test ./cgroups; \
	set +e; cd test; \
	vm() { \
		for try in 1 2; do \
			VM_KERNEL=$$1 VM_CPUS=$$3 JAIL_TEST_BINARIES=$(CURDIR)/bin/vm JAIL_TEST_EMULATED=1 VM_APPEND=softlockup_panic=1 $(VM_RUN) --timeout 1800 --share-ro $(CURDIR)/bin/vm -- sh -c "$$2"; \
			rc=$$?; \
			{ [ $$rc = 124 ] || [ $$rc = 125 ]; } && [ $$try = 1 ] || return $$rc; \
			echo "test-cgroup2: the VM stalled or failed (exit $$rc: no test failed, the emulator did); one more try"; \
		done; \
	}; \
	stock=$(VM_STOCK_KERNEL); [ -r "$$stock" ] || stock=; \
	vm "$$stock" '$(CURDIR)/bin/vm/cgroups.test -test.v && $(CURDIR)/bin/vm/library.test -test.v -test.timeout 5m && $(CURDIR)/bin/vm/integration.test -test.v -test.timeout 20m' "$$(nproc)" || exit $$?; \
	if [ -z "$(VM_612_KERNEL)" ]; then echo "test-cgroup2: no Linux 6.12 in /boot: v2 cgroup reuse not tested"; exit 0; fi; \
	vm "$(VM_612_KERNEL)" '$(CURDIR)/bin/vm/cgroups.test -test.v && $(CURDIR)/bin/vm/library.test -test.v -test.timeout 5m' 1

test-deps:
	@missing=""; want="$(TEST_PACKAGES)"; [ -x "$(VM_RUN)" ] && want="$$want $(VM_PACKAGES)"; \
	for p in $$want; do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
		else echo "make test needs these Debian packages:$$missing" >&2; exit 1; fi; \
	fi

# Start-up cost, as root: the Go benchmarks of each step of a start (cgroup
# create and enter, filter load, root filesystem build, and a whole run split
# by step), then jail beside bubblewrap, crun, runc and unshare in one
# interleaved run (test/startbench: cold start on a busybox root and on the
# default root, throughput two at a time; JSON in bin/bench-start.json),
# then image unpacking beside umoci and the cost of --image.
BENCH_PACKAGES := bubblewrap crun runc umoci bc busybox-static util-linux
bench: build
	@missing=""; for p in $(BENCH_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
		else echo "make bench needs root and these Debian packages:$$missing" >&2; exit 1; fi; \
	fi
	$(GO) test -run '^$$' -bench . -benchtime 200x ./cgroups ./seccomp/filter ./rootfs .
	$(GO) run ./test/startbench -jail bin/jail -json bin/bench-start.json
	bash test/bench-images.sh

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || { gofmt -l .; exit 1; }

clean:
	rm -rf bin
