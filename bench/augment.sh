#!/bin/sh
# augment.sh - heavy augmentation recipes, loaderd against its peers, in one
# run, on the same cores and the same files:
#   recipe   torchvision's ImageNet reference training recipe
#            (bench/peer_torch.py --transforms recipe): RandomResizedCrop
#            (224), RandomHorizontalFlip, TrivialAugmentWide(interpolation=
#            BILINEAR), PILToTensor, ConvertImageDtype(float), Normalize,
#            RandomErasing(p=0.1), in ImageFolder + DataLoader with
#            num_workers = cores, batch 256; loaderd:
#              decode | rrc 224 | flip 0.5 | trivialaugment interp bilinear
#              | normalize imagenet | erase p 0.1 | f32 | nchw
#            Goal: loaderd >= 4.0 x torch.
#   plain    loaderd without the recipe's augmentations:
#              decode | rrc 224 | flip 0.5 | normalize imagenet | f32 | nchw
#            Goal: cost (recipe img/s / plain img/s) >= 0.75: the recipe
#            takes at most a quarter of loaderd's rate.
#   keras    Keras-style augmentation after Resize(256) + CenterCrop(224):
#            rotate 20 degrees, shift 0.1, shear 0.2 degrees, zoom 0.2,
#            horizontal flip, fill nearest.  The peer is torchvision's
#            (peer_torch.py --transforms keras): RandomHorizontalFlip,
#            RandomAffine(degrees=20, translate=(0.1, 0.1), scale=(0.8,
#            1.2), shear=0.2, interpolation=BILINEAR), ToTensor, Normalize
#            in the same DataLoader (it fills with black: torchvision has no
#            "nearest" fill); loaderd:
#              decode | resize 256 | center 224 | flip 0.5 | affine rotate
#              20 translate 0.1 0.1 zoom 0.8 1.2 shear 0.2 interp bilinear
#              fill nearest | normalize imagenet | f32 | nchw
#            Goal: loaderd >= 4.5 x torch.  Keras' own ImageDataGenerator
#            (Debian's keras_preprocessing 1.1.0, peer_torch.py
#            --transforms keras-idg: its random_transform in the same
#            DataLoader, so with the same parallelism) is reported beside
#            it, not in the goal.
# loaderd runs cores decoding threads (--threads cores - 1: a stream's own
# thread decodes alongside the pool's) on the corpus packed as loaderctl
# pack packs it by default (restart segments), into a consumer that only
# releases batches (ldclient); the peers' consumer only iterates.  The
# specs are checked first (loaderctl pipeline), so that a stage loaderd
# does not know stops the run at once, with the parser's word on it.
# Each run does all of them in turn, so that drift hits all alike; the
# figures are medians over the runs, the ratios medians of each run's.
# loaderd skips bad samples and the script prints how many there were (and
# the daemon's warnings); then loaderctl pipeline --profile says where the
# recipe's time goes, stage by stage, on one thread.  The last lines:
#   keras peer: ImageDataGenerator N img/s (loaderd ratio R)
#   recipe: loaderd N img/s, torch N img/s, ratio R; plain loaderd N img/s, cost C
#   keras: loaderd N img/s, torch N img/s, ratio R
#
#   bench/augment.sh [RUNS]      (default 3)
#
# Environment: BUILD (build directory, default build/), CORPUS (the
# ImageFolder corpus, made by bench/mkcorpus.py when absent or empty;
# default /var/tmp/loaderd-corpus-nCOUNT-sSEED, kept for the next run),
# COUNT (images, default 2000), SEED (corpus seed, default 0), CORES
# (default: all; fewer pins everything to CPUs 0..CORES-1), TORCH_EPOCHS
# (default 2), LD_EPOCHS (default 4), SLOTS (ring slots, default 4: a
# 256-image f32 batch is 154 MB), RECIPE_SPEC and KERAS_SPEC (replace
# loaderd's recipe and keras specs, whole: to try the script, or another
# spelling).  With the defaults it takes about 7 minutes on 2 cores (a
# corpus to make adds a minute).
# Exit status 77: something missing (scripts/deps.sh --bench); 2: a usage
# error; 1: a step failed (a spec loaderd refuses among them).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
usage() {
	echo "usage: bench/augment.sh [RUNS]  (environment: BUILD CORPUS COUNT" \
		"SEED CORES TORCH_EPOCHS LD_EPOCHS SLOTS RECIPE_SPEC KERAS_SPEC)" >&2
	exit 2
}
BENCH=augment
. "$top/bench/common.sh"
[ $# -le 1 ] || usage
corpus_args "$@"
torch_epochs=${TORCH_EPOCHS:-2}
ld_epochs=${LD_EPOCHS:-4}
slots=${SLOTS:-4}
posint TORCH_EPOCHS "$torch_epochs"
posint LD_EPOCHS "$ld_epochs"
posint SLOTS "$slots"
py=/usr/bin/python3
recipe="decode | rrc 224 | flip 0.5 | trivialaugment interp bilinear"
recipe=${RECIPE_SPEC:-"$recipe | normalize imagenet | erase p 0.1 | f32 | nchw"}
keras="decode | resize 256 | center 224 | flip 0.5 | affine rotate 20"
keras="$keras translate 0.1 0.1 zoom 0.8 1.2 shear 0.2 interp bilinear"
keras=${KERAS_SPEC:-"$keras fill nearest | normalize imagenet | f32 | nchw"}
plain='decode | rrc 224 | flip 0.5 | normalize imagenet | f32 | nchw'

b=${BUILD:-$top/build}

[ "$cores" -le "$ncpu" ] ||
	{ echo "augment: CORES=$cores: 1..$ncpu" >&2; exit 2; }
pin=
[ "$cores" -lt "$ncpu" ] && pin="taskset -c 0-$((cores - 1))"
[ -x "$py" ] || skip "no $py (Debian's python3)"
"$py" -c 'import torch, torchvision, PIL, numpy, scipy.ndimage
import keras_preprocessing.image' 2>/dev/null ||
	skip "$py cannot import torch, torchvision, PIL, numpy, scipy and" \
		"keras_preprocessing (scripts/deps.sh --bench installs" \
		"python3-torch, python3-torchvision, python3-pil, python3-numpy," \
		"python3-scipy and python3-keras-preprocessing)"
[ -x "$b/loaderd" ] ||
	{ echo "augment: no $b/loaderd: build first, or set BUILD" >&2; exit 2; }
make -s -C "$b" tests/tools/ldclient >/dev/null
ldc=$b/tests/tools/ldclient

w=$(mktemp -d "${TMPDIR:-/var/tmp}/loaderd-bench.XXXXXX")
pids=
partial=
# set -e holds in traps too: a daemon that is gone must not stop the rm.
trap 'for p in $pids; do kill $p 2>/dev/null || :; done
rm -rf "$w" ${partial:+"$partial"}' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The specs first: a stage that loaderd does not know (or a word it does
# not take) would otherwise stop the run only after the peers' minutes.
# checkspec NAME SPEC [VAR]: loaderctl pipeline's word on SPEC, or exit 1.
checkspec() {
	"$b/loaderctl" pipeline "$2" >/dev/null 2>"$w/spec.err" && return 0
	sed 's/^/   /' "$w/spec.err" >&2
	echo "augment: loaderd cannot run the $1 spec${3:+ ($3 replaces it)}:" \
		"'$2'" >&2
	exit 1
}
checkspec recipe "$recipe" RECIPE_SPEC
checkspec keras "$keras" KERAS_SPEC
checkspec plain "$plain"

# The corpus: made once, then reused.
ensure_corpus "$count" "$seed" "$pin"
say "packing $corpus"
"$b/loaderctl" pack "$corpus" "$w/ds" >"$w/pack.out"
sed 's/^/   /' "$w/pack.out" >&2
# Counting the bytes also reads every file: the page cache is warm.
n=$(find "$corpus" -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) | wc -l)
kb=$(find "$corpus" -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) \
	-exec cat {} + | wc -c)
kb=$((kb / n / 1000))
cat "$w"/ds/shard-*.lds >/dev/null

# As bench/image_pipeline.sh: cores - 1 pool threads and the stream's own
# thread decode on cores threads.  One core still gets two, as --threads
# 0 means the default.
pool=$((cores > 1 ? cores - 1 : 1))
say "starting loaderd --threads $pool"
start_daemon "$w/d.sock" --threads "$pool" --log-level info
dpid=$DPID

# cputime: the daemon's user + system time so far, in clock ticks.
cputime() { awk '{ print $14 + $15 }' "/proc/$dpid/stat"; }

# daemon_log: the daemon's log, but for the lines every stream writes.
daemon_log() {
	grep -v -e 'stream open' -e 'delivered all' -e ': connected$' \
		-e ': pipeline "' -e 'session ends' -e 'listening on' \
		-e ': stream freed after' "$w/daemon.log" |
		sed 's/^<[0-9]>/   /' | head -20 || :
}

# loaderd_run NAME SPEC: one stream of SPEC on the packed corpus; prints
# "IMG_PER_S BAD_SAMPLES" and echoes ldclient's report to stderr.  Bad
# samples are skipped (a skipped sample's place is taken by a copy of
# another), so that a run still ends: the count is reported, not hidden.
# A stream that fails, or ends without a rate, fails the run.
loaderd_run() {
	c0=$(cputime)
	out=$($pin "$ldc" --pipeline "$2" --outputs image,label \
		--on-bad skip --stats --order random --batch 256 --warmup 3 \
		--epochs "$ld_epochs" --slots "$slots" --timeout-ms 60000 \
		"$w/d.sock" "$w/ds" 2>&1) || {
		echo "$out" | sed 's/^/   /' >&2
		x=$(daemon_log)
		[ -z "$x" ] || echo "   loaderd log:" "$x" >&2
		echo "augment: ldclient failed on the $1 spec: '$2'" >&2
		exit 1
	}
	c1=$(cputime)
	echo "$out" | sed "s/^/   ldclient $1: /" >&2
	echo "$out" | awk -v c=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" \
		'/^total/ { printf "   loaderd used %.2f cores (CPU time, warm-up" \
			" included, over the timed wall time)\n", c / hz / $9 }' >&2
	echo "$out" | awk -v want=$((ld_epochs * n)) -v name="$1" '
		/^total/ { r = $11; s = $5 }
		/^stats/ { for (i = 1; i < NF; i++) if ($i == "bad_samples") bad = $(i + 1) }
		END {
			if (!(r > 0)) {
				printf "augment: ldclient gave no rate for the %s spec\n", name | "cat >&2"
				exit 1
			}
			if (s != want)
				printf "augment: %s: %s samples, expected %s\n", name, s, want | "cat >&2"
			print r, (bad == "" ? "na" : bad)
		}'
}

# torch_run TRANSFORMS: the DataLoader with peer_torch.py's TRANSFORMS;
# prints its img/s and echoes its line to stderr.
torch_run() {
	out=$($pin "$py" "$top/bench/peer_torch.py" --transforms "$1" \
		--workers "$cores" --epochs "$torch_epochs" --seed $i "$corpus") ||
		{ echo "augment: peer_torch.py --transforms $1 failed" >&2; exit 1; }
	echo "   $out" >&2
	r=$(field img_per_s "$out")
	awk -v r="$r" 'BEGIN { exit !(r > 0) }' ||
		{ echo "augment: peer_torch.py --transforms $1 gave no rate" >&2; exit 1; }
	echo "$r"
}

echo "== augmentation: $n JPEGs (mean $kb KB) from $corpus, $cores cores," \
	"batch 256"
echo "   recipe: $recipe"
echo "   keras:  $keras"
echo "   plain:  $plain"
echo "   torch: $cores DataLoader workers, $torch_epochs epochs;" \
	"loaderd: $((pool + 1)) threads, $ld_epochs epochs"
: >"$w/r"
i=1
while [ $i -le "$runs" ]; do
	say "run $i/$runs: recipe: torchvision DataLoader"
	tre=$(torch_run recipe) || exit 1
	say "run $i/$runs: recipe: loaderd"
	r=$(loaderd_run recipe "$recipe") || exit 1
	lr=${r% *} badr=${r#* }
	say "run $i/$runs: plain: loaderd"
	r=$(loaderd_run plain "$plain") || exit 1
	lp=${r% *} badp=${r#* }
	say "run $i/$runs: keras: torchvision DataLoader"
	tk=$(torch_run keras) || exit 1
	say "run $i/$runs: keras: ImageDataGenerator in the DataLoader"
	ik=$(torch_run keras-idg) || exit 1
	say "run $i/$runs: keras: loaderd"
	r=$(loaderd_run keras "$keras") || exit 1
	lk=${r% *} badk=${r#* }
	printf 'run %d: recipe loaderd %.0f torch %.0f; plain loaderd %.0f;' \
		$i "$lr" "$tre" "$lp"
	printf ' keras loaderd %.0f torch %.0f ImageDataGenerator %.0f img/s\n' \
		"$lk" "$tk" "$ik"
	# columns: 1 torch recipe 2 loaderd recipe 3 loaderd plain 4 torch
	# keras 5 ImageDataGenerator 6 loaderd keras 7-9 bad samples of
	# loaderd's recipe, plain and keras
	echo "$tre $lr $lp $tk $ik $lk $badr $badp $badk" >>"$w/r"
	i=$((i + 1))
done

# col N: the median of column N over the runs.
col() {
	awk -v c="$1" '{ print $c }' "$w/r" | median | awk '{ printf "%.0f", $1 }'
}
# rat N M: the median over the runs of column N / column M.
rat() {
	awk -v a="$1" -v b="$2" '{ print $a / $b }' "$w/r" |
		median | awk '{ printf "%.2f", $1 }'
}
echo "goals: recipe >= 4.00 x torch, cost (recipe / plain) >= 0.75;" \
	"keras >= 4.50 x torch"
echo "bad samples per run (recipe/plain/keras):" \
	"$(awk '{ printf "%s%s/%s/%s", (NR > 1 ? ", " : ""), $7, $8, $9 }' "$w/r")"
o=$(grep -c 'stream open' "$w/daemon.log") || :
e=$(grep -c 'delivered all' "$w/daemon.log") || :
x=$(daemon_log)
echo "loaderd log: $o streams opened, $e delivered all their batches;" \
	"other lines: ${x:+(below)}${x:-none}"
[ -z "$x" ] || echo "$x"

# Where the recipe's time goes: on one thread, stage by stage, the files
# transcoded as pack stores them (restart segments), as the streams above
# read them; against the full decode of the same files (once, not a
# median).
echo "== where the time goes: loaderctl pipeline --profile of the recipe," \
	"one thread, restart segments"
$pin "$b/loaderctl" pipeline --profile --jpeg-restart 1 "$recipe" \
	"$corpus" >"$w/profile" ||
	{
		cat "$w/profile"
		echo "augment: loaderctl pipeline --profile failed" >&2
		exit 1
	}
sed -n '/^jpeg restart/,$p' "$w/profile"

echo "== medians of $runs runs (ratios: medians of each run's)"
echo "keras peer: ImageDataGenerator $(col 5) img/s (loaderd ratio $(rat 6 5))"
echo "recipe: loaderd $(col 2) img/s, torch $(col 1) img/s, ratio $(rat 2 1);" \
	"plain loaderd $(col 3) img/s, cost $(rat 2 3)"
echo "keras: loaderd $(col 6) img/s, torch $(col 4) img/s, ratio $(rat 6 4)"
