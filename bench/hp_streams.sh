#!/bin/sh
# hp_streams.sh - N identical hyper-parameter-search streams (same dataset
# and pipeline, different seeds) on one daemon, against one stream alone,
# in one run: total throughput, and bytes read from storage, with and
# without the node cache (--cache-memory). Goal: read once.
#
# Raw Fashion-MNIST train (60000 x 792 B), random order, batch 256,
# 3 epochs each, page-cached files. Each measurement starts a fresh
# daemon, so its cache starts cold.
#
#   bench/hp_streams.sh [N] [RUNS]   (default 4 streams, 3 runs; medians)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-4}
runs=${2:-3}
BENCH=hp_streams
. "$top/bench/common.sh"
bench_init

"$b/loaderctl" pack "$src" "$w/fm" >/dev/null
cat "$w"/fm/train/shard-*.lds >/dev/null

# streams K CACHE: K streams at once on a fresh daemon; prints
# "samples/s bytes_read" (all streams together).
streams() {
	k=$1
	start_daemon "$w/s.sock" --log-level warn --cache-memory "$2"
	t0=$(date +%s.%N)
	j=1
	cl=
	while [ $j -le "$k" ]; do
		"$b/tests/tools/ldclient" --stats --order random --seed $j --epochs 3 \
			--batch 256 "$w/s.sock" "$w/fm/train" >"$w/o$j" &
		cl="$cl $!"
		j=$((j + 1))
	done
	for p in $cl; do wait "$p"; done
	t1=$(date +%s.%N)
	kill "$DPID"
	wait "$DPID" 2>/dev/null || :
	rm -f "$w/s.sock"
	cat "$w"/o* | awk -v t0="$t0" -v t1="$t1" '
		/^total/ { s += $5 } /^stats/ { r += $5 }
		END { printf "%.0f %d\n", s / (t1 - t0), r }'
	rm -f "$w"/o*
}

printf '%-22s %12s %14s %10s %10s\n' case samples/s bytes_read x_one_rate x_one_read
for cache in 0 256M; do
	for k in 1 "$n"; do
		: >"$w/r"
		i=0
		while [ $i -lt "$runs" ]; do
			streams "$k" "$cache" >>"$w/r"
			i=$((i + 1))
		done
		rate=$(cut -d' ' -f1 "$w/r" | median)
		read=$(cut -d' ' -f2 "$w/r" | median)
		if [ "$k" -eq 1 ]; then
			rate1=$rate read1=$read
		fi
		printf '%-22s %12.0f %14.0f %10.2f %10.2f\n' \
			"$k stream(s), cache $cache" "$rate" "$read" \
			"$(awk -v a="$rate" -v b="$rate1" 'BEGIN { print a / b }')" \
			"$(awk -v a="$read" -v b="$read1" 'BEGIN { print b ? a / b : 0 }')"
	done
done
