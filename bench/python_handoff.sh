#!/bin/sh
# python_handoff.sh - what the Python package adds to a handoff, against the
# C library doing the same, in one run, on the same daemon and dataset:
#   C       loader_next + loader_release of a ready batch (ldclient
#           --handoff: bursts of 8 calls after a 20 ms sleep that lets the
#           ring fill; the first call after each sleep is left out).  The
#           floor: what the Python side cannot go below.
#   Python  loader.Stream.next() + torch.from_dlpack of both outputs
#           (image, label), the tensors of the batch before dropped (which
#           releases it), as a training loop does (bench/python_handoff.py:
#           bursts of 6 calls after a 20 ms sleep, the first left out).
#           Goal: p50 <= 20 us.  The medians of its three parts are
#           printed too.
#   adapter one step of loader.torch.DataLoader (x, y = next(it)): the same
#           plus the adapter's epoch bookkeeping.  For information.
# The stream is Fashion-MNIST train, batch 256, outputs image:unit,label
# (f32 pixels and int64 labels, as examples/torch_mlp.py takes them),
# random order, 8 ring slots.  Every call is meant to find its batch
# published; the script prints how many bursts had a call that waited
# (the library's wait counter, read between bursts), which should be 0.
# Each run does all three in turn, so that drift hits all alike; the
# figures are medians over the runs.  On a machine with few cores the
# daemon, refilling the ring while a burst runs, competes with the loop
# for a core: the p99 shows it (tens of us when the two are pinned to
# cores of their own, milliseconds when they share two).
#
#   bench/python_handoff.sh [RUNS]      (default 3)
#
# Environment: BUILD (build directory, default build/), FASHION_MNIST_DIR
# (default /usr/share/datasets/fashion-mnist), ROUNDS (bursts per run,
# default 200).  Exit status 77: python3, torch, NumPy or the dataset
# missing.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}
b=${BUILD:-$top/build}
src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
rounds=${ROUNDS:-200}
goal=20

BENCH=python_handoff
. "$top/bench/common.sh"

need_python numpy torch loader
[ -f "$src/train-images-idx3-ubyte.gz" ] || [ -f "$src/train-images-idx3-ubyte" ] ||
	skip "no Fashion-MNIST in $src (Debian package dataset-fashion-mnist)"
ldc=$b/tests/tools/ldclient
# ldclient is a check program: built by make check, or here when absent.
[ -x "$ldc" ] || make -s -C "$b" tests/tools/ldclient >/dev/null

w=$(mktemp -d "${TMPDIR:-/var/tmp}/loaderd-bench.XXXXXX")
pids=
# set -e holds in traps too: a daemon that is gone must not stop the rm.
trap 'for p in $pids; do kill $p 2>/dev/null || :; done; rm -rf "$w"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "packing $src (train) into $w/fm"
"$b/loaderctl" pack --split train "$src" "$w/fm" >/dev/null
cat "$w"/fm/train/shard-*.lds >/dev/null
start_daemon "$w/d.sock" --log-level warn

# pyrun [--dataloader]: one run of the Python loop; prints
# "P50 P90 P99 WAITED_BURSTS NEXT_P50 RELEASE_P50 DLPACK_P50".
pyrun() {
	out=$("$b/loader-python" "$top/bench/python_handoff.py" "$@" \
		--rounds "$rounds" "$w/d.sock" "$w/fm/train") ||
		{ echo "$out" >&2; echo "python_handoff: python_handoff.py failed" >&2; exit 1; }
	echo "   $out" >&2
	echo "$(field p50_us "$out") $(field p90_us "$out") $(field p99_us "$out")" \
		"$(field waited_bursts "$out") $(field next_p50_us "$out")" \
		"$(field release_p50_us "$out") $(field dlpack_p50_us "$out")"
}

echo "== handoff of a ready batch: Fashion-MNIST train, batch 256, image:unit,label, 8 slots"
: >"$w/c"
: >"$w/p"
: >"$w/a"
i=1
while [ $i -le "$runs" ]; do
	say "run $i/$runs: C (ldclient --handoff $rounds)"
	out=$("$ldc" --handoff "$rounds" --epochs 0 --batch 256 \
		--outputs image:unit,label --order random "$w/d.sock" "$w/fm/train")
	echo "   $out" >&2
	echo "$out" | awk '/^handoff/ { print $5, $8 }' >>"$w/c"
	say "run $i/$runs: Python, Stream + torch.from_dlpack"
	pyrun >>"$w/p"
	say "run $i/$runs: Python, loader.torch.DataLoader"
	pyrun --dataloader >>"$w/a"
	i=$((i + 1))
done

# col FILE N: the median of column N of FILE over the runs.
col() { awk -v c="$2" '$c != "na" { print $c }' "$1" | median; }
cp50=$(col "$w/c" 1)
pp50=$(col "$w/p" 1)
echo "== medians of $runs runs (us per call)"
printf '%-44s %8s %8s %8s\n' "" p50 p90 p99
printf '%-44s %8.2f %8s %8.2f\n' "C: loader_next + loader_release" \
	"$cp50" na "$(col "$w/c" 2)"
printf '%-44s %8.2f %8.2f %8.2f\n' "Python: Stream.next + 2 x torch.from_dlpack" \
	"$pp50" "$(col "$w/p" 2)" "$(col "$w/p" 3)"
printf '%-44s %8.2f %8.2f %8.2f\n' "Python: loader.torch.DataLoader step" \
	"$(col "$w/a" 1)" "$(col "$w/a" 2)" "$(col "$w/a" 3)"
echo "Python's parts (medians): Stream.next $(col "$w/p" 5) us, release of the" \
	"batch before $(col "$w/p" 6) us, 2 x torch.from_dlpack $(col "$w/p" 7) us"
echo "bursts with a call that waited for the daemon (should be 0):" \
	"Stream $(awk '{ s += $4 } END { print s }' "$w/p"), DataLoader" \
	"$(awk '{ s += $4 } END { print s }' "$w/a") of $((runs * rounds)) each"
awk -v p="$pp50" -v c="$cp50" -v g="$goal" 'BEGIN {
	printf "goal: Python p50 <= %d us: %.2f us = %.2f x the goal (<= 1.00 meets it); %.1f x the C floor\n", g, p, p / g, p / c
}'
