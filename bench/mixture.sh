#!/bin/sh
# mixture.sh - a mixture's rate against one dataset's, in one run, on the
# same daemon, data and cores (ldclient, batch 256, random order):
#   raw   a 0.5/0.5 mixture of two packed copies of Fashion-MNIST train
#         (60000 x 792 B records each, outputs as stored, page-cached)
#         against one copy alone; the same number of samples each run.
#         Goal: >= 0.9 x the single rate.
#   jpeg  a 0.5/0.5 mixture of two packed copies of the photo corpus
#         against one copy alone, through the same pipeline (the
#         torchvision reference's training crop, f16 nchw). Goal: >= 0.95.
# Runs alternate (single, mixture) RUNS times; the figures are medians,
# the ratio that of the medians. The mixtures are mixture files
# (loaderctl mix create), which ldclient opens as a dataset.
#
#   bench/mixture.sh [RUNS]    (default 3)
#
# Environment: BUILD (build directory, default build/), CORPUS, COUNT and
# SEED (the photo corpus, as bench/image_pipeline.sh), CORES (cores the
# daemon and client run on; default all), RAW_SAMPLES (samples a raw run,
# default 1200000), JPEG_SAMPLES (default 2 x COUNT).
# The last line reads: "mixture: raw R, jpeg J".
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
BENCH=mixture
. "$top/bench/common.sh"
py=/usr/bin/python3

usage() {
	echo "usage: bench/mixture.sh [RUNS]  (environment: BUILD CORPUS COUNT SEED CORES RAW_SAMPLES JPEG_SAMPLES)" >&2
	exit 2
}
case "${1:-}" in -h | --help) usage ;; esac
corpus_args "$@"
raw_n=${RAW_SAMPLES:-1200000}
jpeg_n=${JPEG_SAMPLES:-$((2 * count))}
posint RAW_SAMPLES "$raw_n"
posint JPEG_SAMPLES "$jpeg_n"
[ "$cores" -le "$ncpu" ] || { echo "mixture: CORES=$cores: 1..$ncpu" >&2; exit 2; }
pin=
[ "$cores" -lt "$ncpu" ] && pin="taskset -c 0-$((cores - 1))"
b=${BUILD:-$top/build}
[ -x "$b/loaderd" ] && [ -x "$b/loaderctl" ] ||
	{ echo "mixture: no $b/loaderd: build first, or set BUILD" >&2; exit 2; }
bench_init
partial=
trap 'for p in $pids; do kill $p 2>/dev/null || :; done
rm -rf "$w" ${partial:+"$partial"}' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
ldc=$b/tests/tools/ldclient

# run DATASET EPOCHS [ARGS...]: one stream; prints its samples/s (from
# the 4th batch on), and checks it delivered what it should.
run() {
	_ds=$1
	_ep=$2
	shift 2
	out=$($pin "$ldc" --order random --batch 256 --warmup 3 --epochs "$_ep" \
		--timeout-ms 60000 "$@" "$w/d.sock" "$_ds") ||
		{ echo "$out" >&2; echo "mixture: ldclient failed on $_ds" >&2; exit 1; }
	echo "$out" | awk '/^total/ { print $11 }'
}

# compare NAME SINGLE_DS SINGLE_EPOCHS MIX_FILE MIX_EPOCHS [ARGS...]: the
# alternating runs; prints the medians and ratio, and sets ratio.
compare() {
	_name=$1 _sd=$2 _se=$3 _mf=$4 _me=$5
	shift 5
	: >"$w/single"
	: >"$w/mix"
	_i=0
	while [ $_i -lt "$runs" ]; do
		run "$_sd" "$_se" "$@" >>"$w/single"
		run "$_mf" "$_me" "$@" >>"$w/mix"
		_i=$((_i + 1))
	done
	_s=$(median <"$w/single")
	_m=$(median <"$w/mix")
	ratio=$(awk -v s="$_s" -v m="$_m" 'BEGIN { printf "%.3f", m / s }')
	printf '%-6s single %10.0f samples/s (runs: %s)  mixture %10.0f (runs: %s)  ratio %s\n' \
		"$_name" "$_s" "$(tr '\n' ' ' <"$w/single" | sed 's/ $//')" \
		"$_m" "$(tr '\n' ' ' <"$w/mix" | sed 's/ $//')" "$ratio"
}

pool=$((cores > 1 ? cores - 1 : 1))
start_daemon "$w/d.sock" --threads "$pool" --log-level warn

# ---- raw
say "packing Fashion-MNIST train twice"
"$b/loaderctl" pack --split train "$src" "$w/ra" >/dev/null
"$b/loaderctl" pack --split train "$src" "$w/rb" >/dev/null
cat "$w"/ra/train/shard-*.lds "$w"/rb/train/shard-*.lds >/dev/null
"$b/loaderctl" mix create "$w/raw.json" "$w/ra/train=0.5" "$w/rb/train=0.5" >/dev/null
echo "== raw: Fashion-MNIST train, 0.5/0.5 of two copies (120000 an epoch) against one (60000), $raw_n samples a run, $cores cores"
compare raw "$w/ra/train" $((raw_n / 60000)) "$w/raw.json" $((raw_n / 120000))
raw=$ratio

# ---- jpeg
jpeg=na
if "$py" -c 'import PIL, numpy' 2>/dev/null; then
	ensure_corpus "$count" "$seed" "$pin"
	say "packing $corpus twice"
	"$b/loaderctl" pack "$corpus" "$w/ja" >/dev/null
	"$b/loaderctl" pack "$corpus" "$w/jb" >/dev/null
	cat "$w"/ja/shard-*.lds "$w"/jb/shard-*.lds >/dev/null
	"$b/loaderctl" mix create "$w/jpeg.json" "$w/ja=0.5" "$w/jb=0.5" >/dev/null
	spec='decode | rrc 224 | flip 0.5 | normalize imagenet | f16 | nchw'
	echo "== jpeg: $count photographs, 0.5/0.5 of two copies against one, \"$spec\", $jpeg_n samples a run, $cores cores"
	compare jpeg "$w/ja" $((jpeg_n / count)) "$w/jpeg.json" $((jpeg_n / (2 * count))) \
		--pipeline "$spec" --outputs image,label --on-bad skip
	jpeg=$ratio
else
	say "no PIL and NumPy for the photo corpus (scripts/deps.sh --bench): jpeg left out"
fi
echo "mixture: raw $raw, jpeg $jpeg"
