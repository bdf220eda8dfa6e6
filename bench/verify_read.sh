#!/bin/sh
# verify_read.sh - loaderctl verify throughput against a plain sequential
# read of the same page-cached shard bytes, in the same run.
#
#   bench/verify_read.sh [RUNS]       (default 5 runs per case; medians)
#
# Cases (each packed once, then warmed by reading it twice):
#   fmnist-x10   Fashion-MNIST train repeated 10x: 600000 records of 792 B
#   fmnist-dict  the same, zstd with a trained dictionary (verify decompresses)
#   rand-64k     8192 records of 64 KiB random bytes (large records)
# "read" is `cat SHARDS > /dev/null`; the ratio is verify/read throughput.
# Goal (issue 2): ratio >= 0.8 on the uncompressed cases.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-5}
ctl=${LOADERCTL:-$top/build/loaderctl}
src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
[ -x "$ctl" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
[ -r "$src/train-images-idx3-ubyte.gz" ] || { echo "need $src" >&2; exit 1; }
w=$(mktemp -d "${TMPDIR:-/var/tmp}/loaderd-bench.XXXXXX")
trap 'rm -rf "$w"' EXIT

be32() { printf "\\$(printf %03o $(($1 >> 24 & 255)))\\$(printf %03o $(($1 >> 16 & 255)))\\$(printf %03o $(($1 >> 8 & 255)))\\$(printf %03o $(($1 & 255)))"; }

# Fashion-MNIST train, ten times over, as an uncompressed IDX pair.
mkdir -p "$w/x10"
{ printf '\000\000\010\003'; be32 600000; be32 28; be32 28
  zcat "$src/train-images-idx3-ubyte.gz" | tail -c +17 >"$w/img"
  for i in 1 2 3 4 5 6 7 8 9 10; do cat "$w/img"; done; } >"$w/x10/train-images-idx3-ubyte"
{ printf '\000\000\010\001'; be32 600000
  zcat "$src/train-labels-idx1-ubyte.gz" | tail -c +9 >"$w/lab"
  for i in 1 2 3 4 5 6 7 8 9 10; do cat "$w/lab"; done; } >"$w/x10/train-labels-idx1-ubyte"
# 8192 random 256x256 "images": 64 KiB records.
mkdir -p "$w/rand"
{ printf '\000\000\010\003'; be32 8192; be32 256; be32 256
  head -c $((8192 * 65536)) /dev/urandom; } >"$w/rand/train-images-idx3-ubyte"
{ printf '\000\000\010\001'; be32 8192; head -c 8192 /dev/zero; } >"$w/rand/train-labels-idx1-ubyte"
rm -f "$w/img" "$w/lab"

"$ctl" pack "$w/x10" "$w/fmnist-x10" >/dev/null
"$ctl" pack --dict "$w/x10" "$w/fmnist-dict" >/dev/null
"$ctl" pack "$w/rand" "$w/rand-64k" >/dev/null
rm -rf "$w/x10" "$w/rand"

now() { date +%s.%N; }
BENCH=verify_read
. "$top/bench/common.sh"

printf '%-12s %10s %10s %10s %10s %7s\n' case bytes read_MB/s verify_MB/s records/s ratio
for c in fmnist-x10 fmnist-dict rand-64k; do
	d=$w/$c/train
	bytes=$(cat "$d"/shard-*.lds | wc -c)
	recs=$(grep -m1 '"records"' "$d/manifest.json" | tr -dc 0-9)
	cat "$d"/shard-*.lds >/dev/null; cat "$d"/shard-*.lds >/dev/null
	: >"$w/tr"; : >"$w/tv"
	i=0
	while [ $i -lt "$runs" ]; do
		t0=$(now); cat "$d"/shard-*.lds >/dev/null; t1=$(now)
		"$ctl" verify "$d" >/dev/null; t2=$(now)
		awk -v a="$t0" -v b="$t1" "BEGIN { print b - a }" >>"$w/tr"
		awk -v a="$t1" -v b="$t2" "BEGIN { print b - a }" >>"$w/tv"
		i=$((i + 1))
	done
	tr=$(median <"$w/tr"); tv=$(median <"$w/tv")
	awk -v c="$c" -v b="$bytes" -v r="$recs" -v tr="$tr" -v tv="$tv" 'BEGIN {
		printf "%-12s %10d %10.0f %10.0f %10.0f %7.2f\n", c, b,
		       b / tr / 1e6, b / tv / 1e6, r / tv, tr / tv }'
done
echo "(medians of $runs runs; page cache warm; verify includes process start, manifest and footer reads)"
