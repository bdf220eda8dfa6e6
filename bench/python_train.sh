#!/bin/sh
# python_train.sh - a PyTorch training loop's data stall, fed by loaderd
# against torchvision's DataLoader, at several accelerator step times, in
# one run, on the same cores and the same JPEGs:
#   loaderd  loader.torch.DataLoader: the pipeline
#            'decode | rrc 224 | flip 0.5 | normalize imagenet | f32 | nchw'
#            in a loaderd with --threads cores - 1 (a stream's own thread
#            decodes beside the pool's), 4 ring slots.
#   torch    torchvision ImageFolder + DataLoader, num_workers = cores,
#            RandomResizedCrop(224), RandomHorizontalFlip, ToTensor,
#            Normalize (bench/peer_torch.py).
# The loop (bench/python_train.py) takes a batch, touches every page of
# it and sums the labels (the host side of a step), then sleeps STEP ms:
# a simulated accelerator, which leaves the cores to the loaders as a
# real one would.  The training process runs torch with one thread.  For
# each step time and loader: samples/s, and the data stall (time waiting
# for the next batch over the loop's wall time).  Each run measures every
# step time with both loaders in turn (which goes first alternates), so
# that drift hits all alike; the figures are medians over the runs.
#
# The comparison that matters is at the step time where the DataLoader
# starts to stall: the largest one at which its stall exceeds 5 %, i.e.
# the fastest accelerator it can almost feed.  There the goal is loaderd's
# stall <= 1/3 of the DataLoader's (the ratio of the medians).
#
#   bench/python_train.sh [RUNS]      (default 3)
#
# Environment: BUILD (build directory, default build/), CORPUS (the
# ImageFolder corpus, default /var/tmp/loaderd-corpus-n2000-s0, made by
# bench/mkcorpus.py or bench/image_pipeline.sh), STEPS (step times in
# ms, default "0 50 100 200 300 400": the DataLoader's stall should fall
# from ~100 % to ~0 along them; on a faster machine use shorter ones),
# BATCHES (timed batches per run, default 16, after 3 untimed ones),
# BATCH (batch size, default 64).  With the defaults a run takes about a
# minute on 2 cores.  Exit status 77: python3, torch, torchvision or the
# corpus missing.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-${RUNS:-3}}
b=${BUILD:-$top/build}
corpus=${CORPUS:-/var/tmp/loaderd-corpus-n2000-s0}
steps=${STEPS:-0 50 100 200 300 400}
batches=${BATCHES:-16}
batch=${BATCH:-64}
cores=$(nproc)

BENCH=python_train
. "$top/bench/common.sh"

need_python numpy torch torchvision PIL loader
[ -d "$corpus" ] && [ -n "$(ls -A "$corpus")" ] ||
	skip "no corpus in $corpus (bench/image_pipeline.sh makes it, or" \
		"bench/mkcorpus.py --count 2000 --seed 0 $corpus)"

w=$(mktemp -d "${TMPDIR:-/var/tmp}/loaderd-bench.XXXXXX")
pids=
# set -e holds in traps too: a daemon that is gone must not stop the rm.
trap 'for p in $pids; do kill $p 2>/dev/null || :; done; rm -rf "$w"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "packing $corpus"
"$b/loaderctl" pack "$corpus" "$w/ds" >/dev/null
n=$(find "$corpus" -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) | wc -l)
cat "$w"/ds/shard-*.lds >/dev/null
# As bench/image_pipeline.sh: cores - 1 pool threads, and the stream's
# own thread, decode on cores threads; one core still gets two.
pool=$((cores > 1 ? cores - 1 : 1))
start_daemon "$w/d.sock" --threads "$pool" --log-level warn

echo "== simulated training: $n JPEGs from $corpus, batch $batch, $cores cores,"
echo "   $batches timed batches per run; loaderd --threads $pool vs DataLoader($cores workers)"
: >"$w/r"
i=1
while [ $i -le "$runs" ]; do
	say "run $i/$runs: step times $steps ms, both loaders"
	"$b/loader-python" "$top/bench/python_train.py" --seed $i \
		--steps "$(echo $steps | tr ' ' ',')" --batches "$batches" \
		--batch-size "$batch" --workers "$cores" \
		"$w/d.sock" "$w/ds" "$corpus" >"$w/out" ||
		{ cat "$w/out" >&2; echo "python_train: python_train.py failed" >&2; exit 1; }
	sed 's/^/   /' "$w/out" >&2
	while read -r line; do
		echo "$(field loader "$line") $(field step_ms "$line")" \
			"$(field samples_per_s "$line") $(field stall_pct "$line")"
	done <"$w/out" >>"$w/r"
	i=$((i + 1))
done

# med LOADER STEP COLUMN: the median over the runs.
med() { awk -v l="$1" -v s="$2" -v c="$3" '$1 == l && $2 == s { print $c }' "$w/r" | median; }
echo "== medians of $runs runs"
printf '%8s | %12s %8s | %12s %8s | %s\n' step_ms "loaderd/s" stall% \
	"torch/s" stall% "stall ratio"
: >"$w/m"
for s in $steps; do
	lrate=$(med loaderd "$s" 3) lstall=$(med loaderd "$s" 4)
	trate=$(med torch "$s" 3) tstall=$(med torch "$s" 4)
	echo "$s $lstall $tstall" >>"$w/m"
	printf '%8s | %12.0f %8.1f | %12.0f %8.1f | %s\n' "$s" "$lrate" \
		"$lstall" "$trate" "$tstall" "$(awk -v a="$lstall" -v b="$tstall" \
		'BEGIN { if (b > 0) printf "%.2f", a / b; else print "na" }')"
done
# The step time where the DataLoader starts to stall: the largest at
# which its median stall is above 5 %.
awk -v last="$(echo $steps | awk '{ print $NF }')" '
	$3 > 5 { s = $1; l = $2; t = $3 }
	END {
		if (s == "") {
			print "the DataLoader stalls <= 5 % at every step time: use shorter STEPS"
			exit
		}
		printf "the DataLoader starts to stall at %s ms (largest step with stall > 5 %%): ", s
		printf "loaderd %.1f %% / DataLoader %.1f %% = %.2f; goal <= 0.33\n", l, t, l / t
		if (s == last)
			print "(the DataLoader still stalls at the longest step: add longer STEPS)"
	}' "$w/m"
x=$(sed 's/^<[0-9]>/   /' "$w/daemon.log" | head -20)
echo "loaderd log: ${x:+(below)}${x:-nothing at level warn}"
[ -z "$x" ] || echo "$x"
