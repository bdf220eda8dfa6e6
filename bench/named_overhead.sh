#!/bin/sh
# named_overhead.sh - what naming a stream costs: the raw Fashion-MNIST
# path (train, 60000 x 792 B records, page-cached, outputs as stored,
# random order, batch 256, 5 epochs) into a client that only releases,
# with and without --name, alternating in one run on one daemon. A named
# stream's position is written to LMDB (its job's record read, its rank's
# position written, one transaction) at every release, which waits for
# it.
#
#   bench/named_overhead.sh [RUNS]      (default 5; medians)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-5}
BENCH=named_overhead
. "$top/bench/common.sh"
bench_init

[ -r "$src/train-labels-idx1-ubyte.gz" ] ||
	skip "Fashion-MNIST not installed (dataset-fashion-mnist)"
"$b/loaderctl" pack --split train "$src" "$w/fm" >/dev/null
cat "$w"/fm/train/shard-*.lds >/dev/null
start_daemon "$w/d.sock" --log-level warn

# rate ARGS...: samples/s of one 5-epoch stream.
rate() {
	"$b/tests/tools/ldclient" --order random --seed 1 --epochs 5 --batch 256 \
		"$@" "$w/d.sock" "$w/fm/train" |
		awk '/^total/ { print $11 }'
}
: >"$w/r"
i=0
while [ $i -lt "$runs" ]; do
	say "run $((i + 1)) of $runs"
	if [ $((i % 2)) -eq 0 ]; then
		p=$(rate); n=$(rate --name bench$i)
	else
		n=$(rate --name bench$i); p=$(rate)
	fi
	say "plain $p, named $n samples/s"
	echo "$p $n" >>"$w/r"
	i=$((i + 1))
done
pm=$(awk '{ print $1 }' "$w/r" | median)
nm=$(awk '{ print $2 }' "$w/r" | median)
echo "== named streams: raw Fashion-MNIST train, random, batch 256, 5 epochs ($runs runs, alternating)"
printf '%-10s %12s\n' stream samples/s
printf '%-10s %12.0f\n' plain "$pm" named "$nm"
awk -v p="$pm" -v n="$nm" 'BEGIN { printf "named / plain: %.3f (medians)\n", n / p }'
