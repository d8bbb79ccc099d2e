#!/bin/sh
# Runs test/startbench inside the cgroup v2 VM of ../shared/tools, with the
# binaries copied to the guest's tmpfs first: a binary run from the VM's 9p
# share of the working directory (cache=mmap) is read again from the host
# on every start, which would be measured as jail's.
#
#   make build && go build -o bin/startbench ./test/startbench
#   ../shared/tools/vm-cgroup2/run.sh -- sh test/bench-vm.sh -n 30 -throughput 0 \
#       -only 'jail,bwrap,jail serve,jail serve --pool 0' -json bin/bench-vm.json
#
# run.sh boots the newest kernel in /boot: where .ci/run has installed
# Debian 12's 6.12 beside the stock 6.1, set VM_KERNEL=/boot/vmlinuz-6.1...
# to compare with the README's figures, which are 6.1's.
set -e
repo=$(pwd)
mkdir -p /dev/shm/jail-bench
cp "$repo/bin/jail" "$repo/bin/startbench" /dev/shm/jail-bench/
exec /dev/shm/jail-bench/startbench -jail /dev/shm/jail-bench/jail "$@"
