#!/usr/bin/env bash
# Image benchmarks (make bench): jail's import and unpack of the Debian
# Python image beside `umoci unpack` of the same OCI layout, interleaved
# round by round, and the start-up cost of --image over the default root.
# The image is the one the test suite builds (make test); root is needed.
set -euo pipefail
cd "$(dirname "$0")/.."
archive=/var/cache/jail-test/python-bookworm-oci-v2.tar
jail=$PWD/bin/jail
rounds=${ROUNDS:-5}
if [ ! -f "$archive" ]; then
	echo "bench-images: skipped: $archive is built by 'make test' first"; exit 0
fi
command -v umoci >/dev/null || { echo "bench-images: skipped: needs Debian's umoci"; exit 0; }
work=$(mktemp -d /var/tmp/jail-bench.XXXXXX)
chmod 755 "$work" # the sandboxes' init, an unprivileged host id, walks into the store
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/layout"
tar -C "$work/layout" -xf "$archive"
# umoci names images by a plain tag.
python3 - "$work/layout/index.json" <<'PY'
import json, sys
p = sys.argv[1]; idx = json.load(open(p))
for m in idx["manifests"]:
    m.setdefault("annotations", {})["org.opencontainers.image.ref.name"] = "bench"
json.dump(idx, open(p, "w"))
PY
size=$(du -sb "$work/layout" | cut -f1)
now() { date +%s.%N; }
jail_times=(); umoci_times=()
for i in $(seq "$rounds"); do
	rm -rf "$work/store" "$work/umoci"; sync
	t0=$(now); JAIL_IMAGE_STORE=$work/store "$jail" image import "$work/layout" --name bench:1 --quiet; t1=$(now)
	umoci unpack --image "$work/layout:bench" "$work/umoci" >/dev/null; t2=$(now)
	jail_times+=("$(echo "$t1 - $t0" | bc)"); umoci_times+=("$(echo "$t2 - $t1" | bc)")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
jm=$(median "${jail_times[@]}"); um=$(median "${umoci_times[@]}")
printf 'unpack of the Python image (%d MiB of layout), median of %d interleaved rounds:\n' $((size >> 20)) "$rounds"
printf '  jail image import  %6.2f s  %6.1f MiB/s\n' "$jm" "$(echo "$size / 1048576 / $jm" | bc -l)"
printf '  umoci unpack       %6.2f s  %6.1f MiB/s   (jail/umoci time: %.2fx)\n' "$um" "$(echo "$size / 1048576 / $um" | bc -l)" "$(echo "$jm / $um" | bc -l)"
echo "start-up with --image beside the default root (same run):"
JAIL_IMAGE_STORE=$work/store go run ./test/startbench -jail "$jail" -scenarios image -image bench:1 -throughput 0 -n 200 -json bin/bench-image.json
