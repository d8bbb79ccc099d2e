# jail: build, test and benchmark. Targets that need Debian packages install
# the missing ones first when run as root.

GO ?= go
TEST_PACKAGES := busybox-static bubblewrap util-linux
BENCH_PACKAGES := bubblewrap hyperfine

.PHONY: build test test-deps bench vet clean

build:
	$(GO) build -o bin/jail ./cmd/jail

# The whole suite: unit tests and integration tests that start real
# sandboxes as root and as an unprivileged user (created when missing).
test: test-deps
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 15m ./...

test-deps:
	@missing=""; for p in $(TEST_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
		else echo "make test needs these Debian packages:$$missing" >&2; exit 1; fi; \
	fi

# Start-up time of jail beside bubblewrap, unshare and the bare command,
# interleaved in one run (see test/startbench).
bench: build
	@missing=""; for p in $(BENCH_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi
	$(GO) run ./test/startbench -n 300 -json bin/bench-start.json -- \
		"$(CURDIR)/bin/jail run -- /bin/true" \
		"bwrap --unshare-all --ro-bind / / --proc /proc --dev /dev /bin/true" \
		"unshare -Urmpinuf --mount-proc /bin/true" \
		"/bin/true"

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || { gofmt -l .; exit 1; }

clean:
	rm -rf bin
