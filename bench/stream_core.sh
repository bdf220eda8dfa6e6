#!/bin/sh
# stream_core.sh - the core path against its limits, in one run:
#   raw    Fashion-MNIST u8 records, page-cached, delivered into a client
#          (ldclient), against memcpy of the same bytes in the same client
#          process; sequential and random order, read from the page
#          cache and served by the node cache. Goal: >= 0.5 x memcpy.
#          The rate counts from the 51st batch on (ldclient --warmup):
#          a stream's start (connect, open, first reads) is not part
#          of its throughput, and would weigh on a run this short.
#   handoff loader_next + loader_release when batches are ready: p50, p99.
#          Goal: p99 <= 10 us.
#   rss    the daemon's peak RSS streaming a dataset about 1x and about 4x
#          its prefetch budget (12 MiB). Goal: flat.
#   au     loader-train --simulate-step-ms: accelerator utilisation at a
#          rate the loader sustains. Goal: >= 99 %.
#
#   bench/stream_core.sh [RUNS]      (default 3; medians)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}
BENCH=stream_core
. "$top/bench/common.sh"
bench_init

"$b/loaderctl" pack "$src" "$w/fm" >/dev/null
cat "$w"/fm/*/shard-*.lds >/dev/null

daemon() { start_daemon "$@" --log-level warn; }

daemon "$w/d.sock"
# The node cache (--cache-memory), warmed by one epoch: records served
# from the daemon's memory, no read at all.
daemon "$w/c.sock" --cache-memory 256M
"$b/tests/tools/ldclient" --order random --epochs 1 "$w/c.sock" "$w/fm/train" >/dev/null
echo "== raw path: Fashion-MNIST train (60000 x 792 B), 20 epochs, batch 256, outputs as stored"
echo "   (page-cached reads; 'cached': from the node cache, warmed before)"
printf '%-18s %12s %10s %10s %7s\n' order samples/s GB/s memcpy_GB/s ratio
for mode in d c; do
	for order in sequential random; do
		: >"$w/r"
		i=0
		while [ $i -lt "$runs" ]; do
			"$b/tests/tools/ldclient" --order $order --epochs 20 --batch 256 \
				--warmup 50 --memcpy-ref "$w/$mode.sock" "$w/fm/train" |
				awk '/^total/ { s = $11; g = $13 } /^memcpy/ { m = $7 } END { print s, g, m, g / m }' >>"$w/r"
			i=$((i + 1))
		done
		name=$order
		[ $mode = c ] && name="$order, cached"
		printf '%-18s %12.0f %10.3f %10.3f %7.2f\n' "$name" \
			"$(cut -d' ' -f1 "$w/r" | median)" "$(cut -d' ' -f2 "$w/r" | median)" \
			"$(cut -d' ' -f3 "$w/r" | median)" "$(cut -d' ' -f4 "$w/r" | median)"
	done
done

echo "== limits: the same gather in one thread, no daemon (bench/gather_limit: 792 B records at random"
echo "   from memory, batch 256, 20 epochs); 'with wake-ups': and one wake-up round trip with"
echo "   another process per batch, as a client that sleeps until each batch comes"
make -s -C "$b" bench/gather_limit >/dev/null
for hand in "" --handoff; do
	: >"$w/g"
	i=0
	while [ $i -lt "$runs" ]; do
		"$b/bench/gather_limit" $hand 792 60000 256 20 |
			awk '{ print $5, $8, $10 }' >>"$w/g"
		i=$((i + 1))
	done
	name="gather"
	[ -n "$hand" ] && name="with wake-ups"
	printf '%-18s %12s %10.3f %10.3f %7.2f\n' "$name" - \
		"$(cut -d' ' -f1 "$w/g" | median)" "$(cut -d' ' -f2 "$w/g" | median)" \
		"$(cut -d' ' -f3 "$w/g" | median)"
done

echo "== handoff: loader_next + loader_release of ready batches"
: >"$w/h"
i=0
while [ $i -lt "$runs" ]; do
	"$b/tests/tools/ldclient" --handoff 200 --epochs 0 "$w/d.sock" "$w/fm/train" |
		awk '/^handoff/ { print $5, $8 }' >>"$w/h"
	i=$((i + 1))
done
echo "p50 $(cut -d' ' -f1 "$w/h" | median) us, p99 $(cut -d' ' -f2 "$w/h" | median) us (median over $runs runs of 1400 calls)"

echo "== rss: prefetch budget 12 MiB, batch 256, 8 slots, 2 epochs, random order"
for ds in test train; do
	daemon "$w/r$ds.sock"
	"$b/tests/tools/ldclient" --order random --epochs 2 --prefetch $((12 << 20)) \
		"$w/r$ds.sock" "$w/fm/$ds" >/dev/null
	hwm=$(awk '/^VmHWM/ { print $2 }' /proc/$DPID/status)
	size=$(cat "$w"/fm/$ds/shard-*.lds | wc -c)
	echo "dataset $ds: $((size >> 20)) MiB ($(awk -v s="$size" 'BEGIN { printf "%.1f", s / (12 * 1048576) }')x budget): daemon peak RSS $((hwm >> 10)) MiB"
	kill $DPID
done

echo "== au: loader-train --simulate-step-ms T, 5 epochs, batch 128 (random order)"
for t in 1 2 5; do
	: >"$w/au"
	i=0
	while [ $i -lt "$runs" ]; do
		"$b/loader-train" --data "$w/fm" --socket "$w/d.sock" --epochs 5 \
			--simulate-step-ms $t --target 0 --quiet 2>&1 | tail -1 |
			tr ' ' '\n' | awk -F= '$1 == "au_pct" { a = $2 } $1 == "stall_pct" { s = $2 } $1 == "samples_per_s" { r = $2 } END { print a, s, r }' >>"$w/au"
		i=$((i + 1))
	done
	echo "step $t ms: AU $(cut -d' ' -f1 "$w/au" | median) %, stall $(cut -d' ' -f2 "$w/au" | median) %, $(cut -d' ' -f3 "$w/au" | median) samples/s"
done
