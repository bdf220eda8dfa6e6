#!/bin/sh
# keras_flow.sh - Keras training batches from loaderd against Keras' own
# image loader, in one run, on the same cores and the same JPEGs:
#   flow     Debian's python3-keras-preprocessing 1.1.0, what a Keras
#            user has called for a decade:
#              ImageDataGenerator(rescale=1/255, horizontal_flip=True)
#              .flow_from_directory(CORPUS, target_size=(224, 224),
#                                   batch_size=64)
#            fetched as Keras' OrderedEnqueuer does for fit(workers=cores)
#            (threads, not processes): a pool of cores threads calls it[i]
#            for i in order, a queue of 10 (max_queue_size) gives the
#            batches in order, and at an epoch's end the queue is drained
#            (Keras looks every 0.1 s) before on_epoch_end(), as Keras 2's
#            enqueuer does (bench/keras_flow.py).
#   loaderd  loader.keras.PyDataset(DATASET, x="image", y="label",
#            batch_size=64, pipeline=PIPELINE, outputs="image,label",
#            copy=True) over the corpus packed by loaderctl pack, called
#            as Keras 3 calls a PyDataset with workers=1 (its default):
#            ds[i] for i in range(len(ds)), then ds.on_epoch_end().
#            copy=True makes each batch arrays of the caller's own, as
#            flow_from_directory's are (without it they view the ring). A
#            loaderd with --threads cores - 1 (a stream's own thread
#            decodes beside the pool's) makes the batches.  Keras is not
#            installed: loader.keras gets a stand-in module with
#            keras.utils.PyDataset and keras.backend.backend().
# The pipelines, and how they differ:
#   flow_from_directory decodes the whole JPEG with Pillow, resizes it to
#   224x224 with Image.resize (aspect ratio ignored; its default filter,
#   "nearest"), flips it with probability 0.5 and multiplies by 1/255:
#   f32 in [0, 1], 224x224x3 (channels last); y one-hot f32 (64 x classes).
#   loaderd's closest: 'decode | rrc 224 scale 1 1 ratio 1/8 8 | flip 0.5
#   | f32 | nhwc'.  There is no stage that resizes to a size ignoring the
#   aspect ratio; rrc with area fraction 1 comes to it: no ratio it draws
#   fits the whole image's area but the image's own, so after 10 tries it
#   falls back to the central crop clamped to [1/8, 8], which is the whole
#   image, resized to 224x224 aspect ignored (as Image.resize does).  Its
#   filter is Pillow's antialiased bilinear, not "nearest": each sample is
#   Image.resize((224, 224), Image.BILINEAR) of the image, bit for bit, as
#   flow_from_directory(interpolation="bilinear") gives.  That is more
#   work than "nearest": the default is the cheaper peer (with "bilinear"
#   flow_from_directory gives loaderd's pixels, and fewer img/s).
#   Then the same flip, x / 255 as f32, channels last; y the class index
#   (int64, 64), not one-hot.  ("decode | resize 224 | center 224" would
#   keep the aspect ratio and drop the long side's ends: other pixels,
#   and a cheaper decode; PIPELINE=... runs it or any other.)
# Both read the page cache (every file and shard is read first), deliver
# all of an epoch's images (the last batch short), and go for the same
# epochs; the first 3 batches of each are not timed (they start the pool
# or open the stream), the clock runs to the end of the last epoch.  The
# consumer only takes the batches.  Each run measures both, which goes
# first alternating, so that drift hits both alike; the figures are
# medians over the runs.  The last line:
#   keras: loaderd N img/s, flow_from_directory N img/s, ratio R
# (R = loaderd / flow_from_directory, of the medians).
#
#   bench/keras_flow.sh [RUNS]      (default 3)
#
# Environment: BUILD (build directory, default build/), CORPUS (the
# ImageFolder corpus, CLASS/IMAGE.jpg; default
# /var/tmp/loaderd-corpus-n2000-s0, made by bench/mkcorpus.py when absent
# and kept for the next run), EPOCHS (per side and run, default 3),
# BATCH (default 64), PIPELINE (loaderd's, default the one above).  With
# the defaults it takes about a minute on 2 cores (with a corpus to make,
# a minute more).  Exit status 77: python3, keras_preprocessing, SciPy
# (which its transforms need, even a flip alone), Pillow, NumPy or the
# corpus missing (scripts/deps.sh --bench); 2: a usage error.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
usage() {
	echo "usage: bench/keras_flow.sh [RUNS]  (environment: BUILD CORPUS" \
		"EPOCHS BATCH PIPELINE)" >&2
	exit 2
}
BENCH=keras_flow
. "$top/bench/common.sh"
[ $# -le 1 ] || usage
runs=${1:-3}
b=${BUILD:-$top/build}
corpus=${CORPUS:-/var/tmp/loaderd-corpus-n2000-s0}
epochs=${EPOCHS:-3}
batch=${BATCH:-64}
posint RUNS "$runs"
posint EPOCHS "$epochs"
posint BATCH "$batch"
spec=${PIPELINE:-decode | rrc 224 scale 1 1 ratio 1/8 8 | flip 0.5 | f32 | nhwc}
cores=$(nproc)
py=/usr/bin/python3


need_python numpy scipy.ndimage PIL keras_preprocessing.image loader.keras

w=$(mktemp -d "${TMPDIR:-/var/tmp}/loaderd-bench.XXXXXX")
pids=
partial=
# set -e holds in traps too: a daemon that is gone must not stop the rm.
trap 'for p in $pids; do kill $p 2>/dev/null || :; done
rm -rf "$w" ${partial:+"$partial"}' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The default corpus is made once (as bench/image_pipeline.sh makes it),
# then reused; one named by CORPUS must be there.
if [ -n "${CORPUS:-}" ] && { [ ! -d "$corpus" ] || [ -z "$(ls -A "$corpus")" ]; }; then
	skip "no corpus in $corpus (bench/mkcorpus.py makes one)"
fi
ensure_corpus 2000 0

say "packing $corpus"
"$b/loaderctl" pack "$corpus" "$w/ds" >"$w/pack.out"
sed 's/^/   /' "$w/pack.out" >&2
# Counting the bytes reads every file, and cat every shard: the page
# cache is warm for both.
n=$(find "$corpus" -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) | wc -l)
kb=$(find "$corpus" -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) -exec cat {} + | wc -c)
kb=$((kb / n / 1000))
cat "$w"/ds/shard-*.lds >/dev/null
pool=$((cores > 1 ? cores - 1 : 1))
start_daemon "$w/d.sock" --threads "$pool" --log-level warn

echo "== Keras batches: $n JPEGs (mean $kb KB) from $corpus, $cores cores, batch $batch,"
echo "   $epochs epochs per side and run, the first 3 batches untimed"
echo "   flow_from_directory: OrderedEnqueuer-style, $cores threads, queue 10"
echo "   loaderd --threads $pool: PyDataset, copy=True, '$spec'"

# side NAME RUN: one run of bench/keras_flow.py's side NAME; its line
# on stdout, echoed to stderr.
side() {
	if [ "$1" = flow ]; then
		set -- "$1" "$2" "$corpus" --workers "$cores"
	else
		set -- "$1" "$2" "$w/ds" --socket "$w/d.sock" --pipeline "$spec"
	fi
	_s=$1 _r=$2
	shift 2
	"$b/loader-python" "$top/bench/keras_flow.py" --side "$_s" \
		--epochs "$epochs" --batch-size "$batch" --seed "$_r" "$@" \
		>"$w/out" 2>"$w/err" || {
		cat "$w/err" "$w/out" >&2
		x=$(sed 's/^<[0-9]>/   /' "$w/daemon.log" | head -20)
		[ -z "$x" ] || echo "loaderd log:" "$x" >&2
		echo "keras_flow: keras_flow.py --side $_s failed" >&2
		exit 1
	}
	sed 's/^/   /' "$w/out" >&2
	cat "$w/out"
}

: >"$w/r"
i=1
while [ $i -le "$runs" ]; do
	order="flow loaderd"
	[ $((i % 2)) -eq 1 ] || order="loaderd flow"
	for s in $order; do
		say "run $i/$runs: $s, $epochs epochs"
		line=$(side "$s" $i)
		echo "$s $(field img_per_s "$line") $(field images "$line")" \
			"$(field seconds "$line") $(field samples "$line")" \
			"$(field x "$line") $(field range "$line")" >>"$w/r"
	done
	printf 'run %d: flow_from_directory %.0f img/s, loaderd %.0f img/s\n' \
		$i "$(awk '$1 == "flow" { r = $2 } END { print r }' "$w/r")" \
		"$(awk '$1 == "loaderd" { r = $2 } END { print r }' "$w/r")"
	i=$((i + 1))
done

# Both must have given the same images: as many an epoch (flow_from_
# directory finds what loaderctl pack packed), x of the same shape and
# type, in [0, 1].
awk -v n="$n" '
	$5 != "None" && $5 != n {
		printf "%s gave %s images an epoch, not %s\n", $1, $5, n
		bad = 1
	}
	x == "" { x = $6; s = $1 }
	$6 != x { printf "%s gave x %s, %s %s\n", $1, $6, s, x; bad = 1 }
	{ split($7, r, /\.\./) }
	r[1] < 0 || r[2] > 1 { printf "%s gave x in %s\n", $1, $7; bad = 1 }
	END { exit bad }' "$w/r" >&2 || {
	echo "keras_flow: the two sides do not give the same batches" >&2
	exit 1
}

med() { awk -v s="$1" '$1 == s { print $2 }' "$w/r" | median; }
f=$(med flow)
l=$(med loaderd)
x=$(sed 's/^<[0-9]>/   /' "$w/daemon.log" | head -20)
echo "loaderd log: ${x:+(below)}${x:-nothing at level warn}"
[ -z "$x" ] || echo "$x"
echo "== medians of $runs runs, x $(awk 'NR == 1 { print $6 }' "$w/r")"
awk -v l="$l" -v f="$f" 'BEGIN {
	printf "keras: loaderd %.0f img/s, flow_from_directory %.0f img/s, ratio %.2f\n",
		l, f, l / f }'
