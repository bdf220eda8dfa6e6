#!/bin/sh
# sizing.sh - loaderctl bench pipeline's accelerator sizing against a
# measured fleet, in one run, on the same cores and data:
#   predicted  loaderctl bench pipeline --step-ms STEP --batch BATCH:
#              the AU it predicts for 1 and 2 accelerators, from the CPU
#              it measured per sample (in-process, as loaderd runs the
#              stream) and one host core per accelerator;
#   measured   loaderd, and 1 then 2 concurrent loader-train
#              --simulate-step-ms STEP --simulate-sleep (an accelerator
#              stand-in whose host thread sleeps through the step, as
#              --host-cores 0 assumes): the AU each reports.
# Each run does all three in turn, so that drift hits all alike; the
# figures are medians over the runs. Goal: every prediction within 15 %
# of the measured AU (the ratio predicted / measured in [0.85, 1.15]).
#
# The data is Fashion-MNIST packed as the demo packs it (zstd with a
# dictionary), with the demo's outputs; decoding is the decompression and
# the cast to f32. The step is chosen so that one accelerator is fed and
# two are not: on another machine, pick STEP where the prediction for 2
# falls near 75 %.
#
#   bench/sizing.sh [RUNS]      (default 3)
#
# Environment: BUILD (build directory, default build/), STEP (ms, default
# 2), BATCH (default 512), EPOCHS (of each trainer, default 20), SECONDS
# (of each bench pipeline, default 5). Exit status 77: no Fashion-MNIST.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-${RUNS:-3}}
b=${BUILD:-$top/build}
step=${STEP:-2}
batch=${BATCH:-512}
epochs=${EPOCHS:-20}
secs=${SECONDS_BENCH:-${SECONDS:-5}}
src=/usr/share/datasets/fashion-mnist

BENCH=sizing
. "$top/bench/common.sh"

[ -r "$src/train-images-idx3-ubyte.gz" ] ||
	skip "no Fashion-MNIST in $src (Debian package dataset-fashion-mnist)"
[ -x "$b/loaderd" ] && [ -x "$b/loader-train" ] ||
	{ echo "sizing: no $b/loaderd or loader-train: build first, or set BUILD" >&2; exit 2; }

w=$(mktemp -d "${TMPDIR:-/var/tmp}/loaderd-bench.XXXXXX")
pids=
trap 'for p in $pids; do kill $p 2>/dev/null || :; done; rm -rf "$w"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "packing $src"
"$b/loaderctl" pack --compress zstd --dict "$src" "$w/fm" >/dev/null
cat "$w"/fm/*/shard-*.lds >/dev/null
start_daemon "$w/d.sock" --log-level warn

# json KEY...: a value from the bench's JSON on stdin (KEY path).
json() {
	/usr/bin/python3 -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1:]:
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v)' "$@"
}

# train: one loader-train's AU (percent) on its summary line.
train() {
	"$b/loader-train" --data "$w/fm" --socket "$w/d.sock" --quiet \
		--simulate-step-ms "$step" --simulate-sleep --batch "$batch" \
		--epochs "$epochs" \
		--target 0 | sed -n 's/.* au_pct=\([0-9.]*\).*/\1/p'
}

echo "== sizing: Fashion-MNIST (zstd), image:unit,label, batch $batch, step $step ms, $(nproc) cores"
: >"$w/p1"; : >"$w/p2"; : >"$w/m1"; : >"$w/m2"; : >"$w/r1"; : >"$w/r2"
i=1
while [ $i -le "$runs" ]; do
	say "run $i/$runs: bench pipeline, 1 trainer, 2 trainers"
	"$b/loaderctl" bench pipeline --json --seconds "$secs" \
		--batch "$batch" --step-ms "$step" --host-cores 0 \
		--outputs image:unit,label "$w/fm/train" >"$w/bench.json"
	p1=$(json sizing au_predicted 0 <"$w/bench.json")
	p2=$(json sizing au_predicted 1 <"$w/bench.json")
	m1=$(train)
	train >"$w/t2a" &
	t2a=$!
	train >"$w/t2b"
	wait $t2a
	m2=$(cat "$w/t2a" "$w/t2b" | awk '{ s += $1 } END { print s / NR }')
	say "predicted 1: $(awk -v v="$p1" 'BEGIN { printf "%.1f", v * 100 }') %, 2: $(awk -v v="$p2" 'BEGIN { printf "%.1f", v * 100 }') %; measured 1: $m1 %, 2: $m2 % ($(cat "$w/t2a") and $(cat "$w/t2b"))"
	echo "$p1" >>"$w/p1"
	echo "$p2" >>"$w/p2"
	echo "$m1" >>"$w/m1"
	echo "$m2" >>"$w/m2"
	awk -v p="$p1" -v m="$m1" 'BEGIN { print p * 100 / m }' >>"$w/r1"
	awk -v p="$p2" -v m="$m2" 'BEGIN { print p * 100 / m }' >>"$w/r2"
	i=$((i + 1))
done

status=0
for n in 1 2; do
	p=$(median <"$w/p$n")
	m=$(median <"$w/m$n")
	r=$(median <"$w/r$n")
	verdict=$(awk -v r="$r" 'BEGIN { print (r >= 0.85 && r <= 1.15) ? "PASS" : "MISS" }')
	[ "$verdict" = PASS ] || status=1
	printf '%d accelerator(s): predicted AU %.1f %%, measured %.1f %%, ratio %.3f (goal 0.85..1.15) %s\n' \
		"$n" "$(awk -v v="$p" 'BEGIN { print v * 100 }')" "$m" "$r" "$verdict"
done
echo "medians of $runs runs"
exit $status
