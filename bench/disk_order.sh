#!/bin/sh
# disk_order.sh - what the sample order costs when storage is the limit:
# every stream reads with O_DIRECT (nothing from the page cache: a cold
# cache every epoch), once with one read in flight (--io-depth 1, how a
# disk that seeks serves) and once with 64, in sequential, quasi and
# random order, on the same data in one run. Prints samples/s and MB/s
# read per case, and each order against sequential at the same depth.
#
#   raw   Fashion-MNIST train, 60000 records of 792 B: small reads
#   jpeg  the JPEG corpus of bench/image_pipeline.sh (CORPUS, default
#         /var/tmp/loaderd-corpus-n2000-s0; skipped when absent), packed
#         as pack packs it, streamed through 'decode | rrc 32 | u8'
#         (DCT-scaled: little decode per byte read)
#
#   bench/disk_order.sh [RUNS]      (default 3; medians)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}
corpus=${CORPUS:-/var/tmp/loaderd-corpus-n2000-s0}
BENCH=disk_order
. "$top/bench/common.sh"
bench_init


"$b/loaderctl" pack --split train "$src" "$w/fm" >/dev/null
sets="raw"
if [ -d "$corpus" ] && [ -n "$(ls -A "$corpus")" ]; then
	say "packing $corpus"
	"$b/loaderctl" pack "$corpus" "$w/jp" >/dev/null
	sets="raw jpeg"
else
	say "no JPEG corpus at $corpus (bench/image_pipeline.sh makes one): raw only"
fi
start_daemon "$w/d1.sock" --io-depth 1 --log-level warn
start_daemon "$w/d64.sock" --io-depth 64 --log-level warn

# one SET ORDER DEPTH: "samples/s MB/s" of one epoch (MB read from storage).
one() {
	if [ "$1" = raw ]; then
		"$b/tests/tools/ldclient" --direct --order "$2" --seed 1 --stats \
			--batch 256 "$w/d$3.sock" "$w/fm/train"
	else
		"$b/tests/tools/ldclient" --direct --order "$2" --seed 1 --stats \
			--batch 32 --pipeline 'decode | rrc 32 | u8' \
			"$w/d$3.sock" "$w/jp"
	fi 2>/dev/null | awk '/^stats/ { r = $5 } /^total/ { s = $11; t = $9 }
		END { if (t > 0) printf "%.0f %.1f\n", s, r / t / 1e6 }'
}

printf '%-5s %-10s %5s %11s %9s %8s\n' set order depth samples/s MB/s vs_seq
for set in $sets; do
	for dp in 1 64; do
		seq=
		for o in sequential quasi random; do
			: >"$w/r"
			i=0
			while [ $i -lt "$runs" ]; do
				one $set $o $dp >>"$w/r"
				i=$((i + 1))
			done
			s=$(cut -d' ' -f1 "$w/r" | median)
			m=$(cut -d' ' -f2 "$w/r" | median)
			[ -n "$seq" ] || seq=$s
			printf '%-5s %-10s %5s %11.0f %9.1f %8.2f\n' $set $o $dp "$s" "$m" \
				"$(echo "$s $seq" | awk '{ print $1 / $2 }')"
		done
	done
done
