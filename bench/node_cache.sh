#!/bin/sh
# node_cache.sh - the node cache (loaderd --cache-memory) under the random
# order, with room for half the dataset and for twice it, against no
# cache, in one run: the hit rate of a stream after a first one warmed
# the cache, bytes read from storage, and samples/s.
#
# Raw Fashion-MNIST train (60000 x 792 B records, 47.5 MB; the index
# costs 16 B a record more), batch 256, 3 epochs, page-cached files.
# Each case starts a fresh daemon; a first stream (1 epoch, another
# seed) warms it.
#
#   bench/node_cache.sh [RUNS]   (default 3; medians)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}
BENCH=node_cache
. "$top/bench/common.sh"
bench_init

"$b/loaderctl" pack "$src" "$w/fm" >/dev/null
cat "$w"/fm/train/shard-*.lds >/dev/null
bytes=$(cat "$w"/fm/train/shard-*.lds | wc -c)

# one CACHE: "hit_rate bytes_read samples/s" of the measured stream.
one() {
	start_daemon "$w/s.sock" --log-level warn --cache-memory "$1"
	"$b/tests/tools/ldclient" --order random --seed 99 --epochs 1 \
		"$w/s.sock" "$w/fm/train" >/dev/null
	"$b/tests/tools/ldclient" --stats --order random --seed 1 --epochs 3 \
		--batch 256 "$w/s.sock" "$w/fm/train" | awk '
		/^total/ { rate = $11 }
		/^stats/ { for (i = 2; i < NF; i++) v[$i] = $(i + 1) }
		END { h = v["cache_hits"]; m = v["cache_misses"];
		      printf "%.3f %d %.0f\n", (h + m) ? h / (h + m) : 0,
			     v["bytes_read"], rate }'
	kill "$DPID"
	wait "$DPID" 2>/dev/null || :
	rm -f "$w/s.sock"
}

echo "== node cache, random order: Fashion-MNIST train, $bytes bytes of shards"
printf '%-28s %9s %14s %12s\n' budget hit_rate bytes_read samples/s
for case in "0:none" "$((bytes / 2)):0.5x dataset" "$((bytes * 2)):2x dataset"; do
	budget=${case%%:*}
	: >"$w/r"
	i=0
	while [ $i -lt "$runs" ]; do
		one "$budget" >>"$w/r"
		i=$((i + 1))
	done
	printf '%-28s %9.3f %14.0f %12.0f\n' "${case#*:} ($budget B)" \
		"$(cut -d' ' -f1 "$w/r" | median)" \
		"$(cut -d' ' -f2 "$w/r" | median)" \
		"$(cut -d' ' -f3 "$w/r" | median)"
done
