#!/bin/sh
# recipe_train.sh - a real CNN trained on real photographs with
# torchvision's reference training recipe, fed by loaderd against
# torchvision's DataLoader, in one run, on the same cores and the same
# JPEGs (examples/train_cnn.py does the training):
#   loaderd  the recipe's Compose translated to a pipeline spec
#              decode | rrc 224 | flip 0.5 | trivialaugment interp bilinear
#              | normalize imagenet | erase p 0.1 | f32 | nchw
#            through loader.torch.DataLoader, from the corpus packed by
#            loaderctl pack (restart segments), loaderd --threads 2: two
#            pool threads and the stream's own decode.
#   torch    the same Compose (RandomResizedCrop(224), RandomHorizontal
#            Flip, TrivialAugmentWide(interpolation=BILINEAR), PILToTensor,
#            ConvertImageDtype(float), Normalize, RandomErasing(p=0.1)) in
#            ImageFolder + DataLoader with one worker process per core.
# Both train the same network from the same weights with one intra-op
# thread (examples/train_cnn.py says why this network and these threads),
# batch 32, for WARMUP untimed steps and STEPS timed ones.  For each:
# images/s over the timed steps, and the stall: the share of their wall
# time the loop spent blocked in the loader's next().  The goal: the
# DataLoader input-bound (stall > 50 %), loaderd compute-bound (stall
# < 5 %) and loaderd >= 2.5 x its images/s.  Each run trains both in
# turn (which goes first alternates), so that drift hits both alike; the
# figures are medians over the runs, the ratio the median of each run's.
# The machine's load average is printed before and after: other work on
# the cores shows there first.  The last line:
#   train: loaderd N img/s stall S%, torch N img/s stall S%, ratio R
#
#   bench/recipe_train.sh [RUNS]      (default 3)
#
# Environment: BUILD (build directory, default build/), CORPUS (the
# ImageFolder corpus, made by bench/mkcorpus.py when absent or empty;
# default /var/tmp/loaderd-corpus-nCOUNT-sSEED, kept for the next run, as
# bench/augment.sh's), COUNT (images, default 2000), SEED (corpus seed,
# default 0), CORES (default: all; fewer pins everything to CPUs
# 0..CORES-1), STEPS (timed steps, default 150), WARMUP (untimed steps,
# default 5), WIDTH (the network's width, default the script's), THREADS
# (loaderd --threads, default 2).  With the defaults a run takes about
# 25 s on 2 cores, and packing the corpus 15 s (a corpus to make adds a
# minute).
# Exit status 77: something missing (scripts/deps.sh --bench); 2: a usage
# error; 1: a step failed.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
usage() {
	echo "usage: bench/recipe_train.sh [RUNS]  (environment: BUILD CORPUS" \
		"COUNT SEED CORES STEPS WARMUP WIDTH THREADS)" >&2
	exit 2
}
BENCH=recipe_train
. "$top/bench/common.sh"
[ $# -le 1 ] || usage
corpus_args "$@"
steps=${STEPS:-150}
warmup=${WARMUP:-5}
threads=${THREADS:-2}
posint STEPS "$steps"
posint THREADS "$threads"
case $warmup in '' | *[!0-9]*) echo "$BENCH: WARMUP=$warmup: 0 or more" >&2; usage ;; esac
width=
[ -z "${WIDTH:-}" ] || { posint WIDTH "$WIDTH"; width="--width $WIDTH"; }
py=/usr/bin/python3
b=${BUILD:-$top/build}

[ "$cores" -le "$ncpu" ] ||
	{ echo "$BENCH: CORES=$cores: 1..$ncpu" >&2; exit 2; }
pin=
[ "$cores" -lt "$ncpu" ] && pin="taskset -c 0-$((cores - 1))"
need_python numpy torch torchvision PIL loader

w=$(mktemp -d "${TMPDIR:-/var/tmp}/loaderd-bench.XXXXXX")
pids=
partial=
# set -e holds in traps too: a daemon that is gone must not stop the rm.
trap 'for p in $pids; do kill $p 2>/dev/null || :; done
rm -rf "$w" ${partial:+"$partial"}' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

load0=$(cut -d' ' -f1-3 /proc/loadavg)
# The corpus: made once, then reused.
ensure_corpus "$count" "$seed" "$pin"
say "packing $corpus"
"$b/loaderctl" pack "$corpus" "$w/ds" >"$w/pack.out"
sed 's/^/   /' "$w/pack.out" >&2
# Counting the bytes also reads every file: the page cache is warm for
# both loaders (and the shards are read once too).
n=$(find "$corpus" -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) | wc -l)
kb=$(find "$corpus" -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) \
	-exec cat {} + | wc -c)
kb=$((kb / n / 1000))
cat "$w"/ds/shard-*.lds >/dev/null

say "starting loaderd --threads $threads"
start_daemon "$w/d.sock" --threads "$threads" --log-level warn
dpid=$DPID

# cputime: the daemon's user + system time so far, in clock ticks.
cputime() { awk '{ print $14 + $15 }' "/proc/$dpid/stat"; }

# train LOADER DATA ARGS...: examples/train_cnn.py; prints its key=value
# line, echoes its output to stderr.  A loss that is not finite or a
# failed stream fails the run.
train() {
	_l=$1 _d=$2
	shift 2
	# shellcheck disable=SC2086 # $width is empty or two words
	out=$($pin "$b/loader-python" "$top/examples/train_cnn.py" "$_l" \
		"$_d" --steps "$steps" --warmup "$warmup" --seed "$i" $width \
		"$@" 2>&1) || {
		echo "$out" | sed 's/^/   /' >&2
		echo "$BENCH: examples/train_cnn.py $_l failed" >&2
		exit 1
	}
	echo "$out" | sed "s/^/   $_l: /" >&2
	echo "$out" | grep '^train_cnn ' | tail -1
}

# run_loaderd and run_torch: one side each; each appends "LOADER IMG/S
# STALL IMAGES" to $w/side and says what it saw.
run_loaderd() {
	say "run $i/$runs: loaderd"
	c0=$(cputime)
	line=$(train loaderd "$w/ds" --socket "$w/d.sock") || exit 1
	c1=$(cputime)
	seen=$(field seen "$line")
	echo "$line" | awk -v c=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" \
		-v s="$seen" '{ printf "   loaderd spent %.2f CPU ms an image" \
			" (warm-up included)\n", 1000 * c / hz / s }' >&2
	echo "loaderd $(field img_per_s "$line") $(field stall_pct "$line")" \
		"$(field images "$line")" >>"$w/side"
}
run_torch() {
	say "run $i/$runs: torchvision DataLoader, $cores workers"
	line=$(train torch "$corpus" --workers "$cores") || exit 1
	echo "torch $(field img_per_s "$line") $(field stall_pct "$line")" \
		"$(field images "$line")" >>"$w/side"
}

echo "== training: $n JPEGs (mean $kb KB) from $corpus, $cores cores;" \
	"$warmup + $steps steps of batch 32"
echo "   loaderd --threads $threads (pool and stream threads decode);" \
	"torch: $cores DataLoader workers; the loop: one torch thread"
: >"$w/r"
i=1
while [ $i -le "$runs" ]; do
	: >"$w/side"
	if [ $((i % 2)) -eq 1 ]; then
		run_loaderd
		run_torch
	else
		run_torch
		run_loaderd
	fi
	l=$(awk '$1 == "loaderd" { print $2, $3, $4 }' "$w/side")
	t=$(awk '$1 == "torch" { print $2, $3, $4 }' "$w/side")
	set -- $l $t
	[ "$3" = "$6" ] || {
		echo "$BENCH: run $i: loaderd trained on $3 images, torch on $6" >&2
		exit 1
	}
	printf 'run %d: loaderd %.0f img/s stall %.1f%%, torch %.0f img/s' \
		$i "$1" "$2" "$4"
	printf ' stall %.1f%%, ratio %.2f (%s images each)\n' "$5" \
		"$(awk -v a="$1" -v b="$4" 'BEGIN { print a / b }')" "$3"
	# columns: 1 loaderd img/s 2 loaderd stall 3 torch img/s 4 torch stall
	echo "$1 $2 $4 $5" >>"$w/r"
	i=$((i + 1))
done

# col N FORMAT: the median of column N over the runs.
col() {
	awk -v c="$1" '{ print $c }' "$w/r" | median | awk -v f="$2" '{ printf f, $1 }'
}
ratio=$(awk '{ print $1 / $3 }' "$w/r" | median | awk '{ printf "%.2f", $1 }')
x=$(sed 's/^<[0-9]>/   /' "$w/daemon.log" | head -20)
echo "loaderd log: ${x:+(below)}${x:-nothing at level warn}"
[ -z "$x" ] || echo "$x"
echo "load average (1, 5, 15 min): before $load0, after" \
	"$(cut -d' ' -f1-3 /proc/loadavg)"
echo "goals: torch stall > 50 % (input-bound), loaderd stall < 5 %" \
	"(compute-bound), ratio >= 2.5"
echo "== medians of $runs runs (ratio: the median of each run's)"
echo "train: loaderd $(col 1 %.0f) img/s stall $(col 2 %.1f)%," \
	"torch $(col 3 %.0f) img/s stall $(col 4 %.1f)%, ratio $ratio"
