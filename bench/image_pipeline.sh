#!/bin/sh
# image_pipeline.sh - the image pipeline against its peer and its limit, in
# one run, on the same cores and the same files:
#   torch    torchvision ImageFolder + DataLoader (bench/peer_torch.py):
#            num_workers = cores, batch 256, RandomResizedCrop(224),
#            RandomHorizontalFlip, ToTensor, Normalize.
#   loaderd  loaderd with cores decoding threads (--threads cores - 1: a
#            stream's own thread decodes alongside the pool's), the same
#            transforms as a pipeline spec, into a consumer that only
#            releases batches (ldclient):
#            f32 NCHW, as ToTensor + Normalize give, and f16 NCHW, as a
#            GPU trainer would take.  Goal: >= 3.0 x torch.
#   decode   libjpeg-turbo full decode of the same files, one thread
#            (bench/jpeg_decode), times cores.  Goal: loaderd >= 1.5 x.
# loaderd reads the corpus packed as loaderctl pack packs it by default,
# with restart segments (a crop decodes from its own segments), and, for
# the before and after, packed with --jpeg-restart off (the region path);
# goals: f32 with restart segments >= 3.5 x torch, >= 1.5 x decode.
# Then the evaluation path, Resize(256) + CenterCrop(224), against
# torchvision's (peer_torch.py --eval), both ways; and the corpus packed
# with --max-side 256 (as FFCV stores ImageNet), reported on its own: other
# data, so its ratio to torch on the full files says what the practice
# buys, not how the code compares.
# Each run does all of them in turn, so that drift hits all alike; the
# figures are medians over the runs, the ratios medians of each run's.
# loaderd skips bad samples and the script prints how many there were (and
# the daemon's warnings); last, loaderctl pipeline --profile says where
# the time goes, stage by stage, on one thread.
#
#   bench/image_pipeline.sh [RUNS]      (default 3)
#
# Environment: BUILD (build directory, default build/), CORPUS (the
# ImageFolder corpus, made by bench/mkcorpus.py when absent or empty;
# default /var/tmp/loaderd-corpus-nCOUNT-sSEED, kept for the next run),
# COUNT (images, default 2000), SEED (corpus seed, default 0), CORES
# (default: all; fewer pins everything to CPUs 0..CORES-1), TORCH_EPOCHS
# (default 2), LD_EPOCHS (default 4), SLOTS (ring slots, default 4: a
# 256-image f32 batch is 154 MB).  Exit status 77: something missing.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
usage() {
	echo "usage: bench/image_pipeline.sh [RUNS]  (environment: BUILD CORPUS" \
		"COUNT SEED CORES TORCH_EPOCHS LD_EPOCHS SLOTS)" >&2
	exit 2
}
b=${BUILD:-$top/build}
torch_epochs=${TORCH_EPOCHS:-2}
ld_epochs=${LD_EPOCHS:-4}
slots=${SLOTS:-4}
py=/usr/bin/python3
spec='decode | rrc 224 | flip 0.5 | normalize imagenet'

BENCH=image_pipeline
. "$top/bench/common.sh"
corpus_args "$@"
# rate LINE: the value of img_per_s=... in LINE.
rate() {
	echo "$1" | tr ' ' '\n' |
		awk -F= '$1 == "img_per_s" { r = $2 } END { if (r == "") exit 1; print r }'
}

[ "$cores" -ge 1 ] && [ "$cores" -le "$ncpu" ] ||
	{ echo "image_pipeline: CORES=$cores: 1..$ncpu" >&2; exit 2; }
pin=
[ "$cores" -lt "$ncpu" ] && pin="taskset -c 0-$((cores - 1))"
[ -x "$py" ] || skip "no $py (Debian's python3)"
"$py" -c 'import torch, torchvision, PIL, numpy' 2>/dev/null ||
	skip "$py cannot import torch, torchvision, PIL and numpy" \
		"(scripts/deps.sh --bench installs python3-torch," \
		"python3-torchvision, python3-pil and python3-numpy)"
[ -x "$b/loaderd" ] ||
	{ echo "image_pipeline: no $b/loaderd: build first, or set BUILD" >&2; exit 2; }
make -s -C "$b" tests/tools/ldclient bench/jpeg_decode >/dev/null
ldc=$b/tests/tools/ldclient
ld=yes
"$ldc" --help 2>&1 | grep -q -e '--pipeline.*--stats' || ld=no

w=$(mktemp -d "${TMPDIR:-/var/tmp}/loaderd-bench.XXXXXX")
pids=
partial=
# set -e holds in traps too: a daemon that is gone must not stop the rm.
trap 'for p in $pids; do kill $p 2>/dev/null || :; done
rm -rf "$w" ${partial:+"$partial"}' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The corpus: made once, then reused.
ensure_corpus "$count" "$seed" "$pin"
say "packing $corpus: restart segments, as they are, --max-side 256"
"$b/loaderctl" pack "$corpus" "$w/ds" >"$w/pack.out"
"$b/loaderctl" pack --jpeg-restart off "$corpus" "$w/ds_off" >"$w/pack_off.out"
"$b/loaderctl" pack --max-side 256 "$corpus" "$w/ds_256" >"$w/pack_256.out"
sed 's/^/   /' "$w/pack.out" "$w/pack_off.out" "$w/pack_256.out" >&2
# Counting the bytes also reads every file: the page cache is warm.
n=$(find "$corpus" -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) | wc -l)
kb=$(find "$corpus" -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) -exec cat {} + | wc -c)
kb=$((kb / n / 1000))
cat "$w"/ds/shard-*.lds "$w"/ds_off/shard-*.lds "$w"/ds_256/shard-*.lds >/dev/null

if [ $ld = yes ]; then
	# pool_run() puts the stream's own thread to work beside the pool's:
	# cores - 1 pool threads decode on cores threads (the daemon's
	# default).  One core still gets two, as --threads 0 means the default.
	pool=$((cores > 1 ? cores - 1 : 1))
	say "starting loaderd --threads $pool"
	start_daemon "$w/d.sock" --threads "$pool" --log-level info
	dpid=$DPID
else
	say "this ldclient has no --pipeline: the loaderd rows are left out"
fi

# cputime: the daemon's user + system time so far, in clock ticks.
cputime() { awk '{ print $14 + $15 }' "/proc/$dpid/stat"; }

# loaderd_run TYPE [DATASET [SPEC]]: one stream of the pipeline SPEC
# (default: the training one) with TYPE output on DATASET (default: the
# restart-segmented one); prints "IMG_PER_S BAD_SAMPLES" and echoes
# ldclient's report to stderr.  Bad samples are skipped (a skipped
# sample's place is taken by a copy of another), so that a run still
# ends: the count is reported, not hidden.
loaderd_run() {
	c0=$(cputime)
	out=$($pin "$ldc" --pipeline "${3:-$spec} | $1 | nchw" --outputs image,label \
		--on-bad skip --stats --order random --batch 256 --warmup 3 \
		--epochs "$ld_epochs" --slots "$slots" --timeout-ms 60000 \
		"$w/d.sock" "$w/${2:-ds}") ||
		{ echo "$out" >&2; echo "image_pipeline: ldclient failed" >&2; exit 1; }
	c1=$(cputime)
	echo "$out" | sed "s/^/   ldclient $1 ${2:-ds}: /" >&2
	echo "$out" | awk -v c=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" \
		'/^total/ { printf "   loaderd used %.2f cores (CPU time, warm-up included, over the timed wall time)\n", c / hz / $9 }' >&2
	echo "$out" | awk -v want=$((ld_epochs * n)) '
		/^total/ { r = $11; s = $5 }
		/^stats/ { for (i = 1; i < NF; i++) if ($i == "bad_samples") bad = $(i + 1) }
		END {
			if (s != want)
				printf "image_pipeline: %s samples, expected %s\n", s, want | "cat >&2"
			print r, (bad == "" ? "na" : bad)
		}'
}

espec='decode | resize 256 | center 224 | normalize imagenet'
echo "== image pipeline: $n JPEGs (mean $kb KB) from $corpus, $cores cores, batch 256,"
echo "   RandomResizedCrop 224 + flip 0.5 + normalize; loaderd: $spec | f32|f16 | nchw"
echo "   eval: Resize 256 + CenterCrop 224 + normalize; loaderd: $espec | f32 | nchw"
echo "   packed: $(sed -n 's/.*JPEGs: //p' "$w/pack.out"); --max-side 256: $(sed -n 's/.* \([0-9.]* [kMG]B\) out,.*/\1/p' "$w/pack_256.out") out"
: >"$w/r"
i=1
while [ $i -le "$runs" ]; do
	say "run $i/$runs: torchvision DataLoader, $cores workers, $torch_epochs epochs"
	out=$($pin "$py" "$top/bench/peer_torch.py" --workers "$cores" \
		--epochs "$torch_epochs" --seed $i "$corpus")
	echo "   $out" >&2
	t=$(rate "$out") || exit 1
	say "run $i/$runs: torchvision DataLoader, eval transforms"
	out=$($pin "$py" "$top/bench/peer_torch.py" --eval --workers "$cores" \
		--epochs "$torch_epochs" --seed $i "$corpus")
	echo "   $out" >&2
	te=$(rate "$out") || exit 1
	f32=na bad32=na f16=na bad16=na off=na e32=na eoff=na s256=na
	if [ $ld = yes ]; then
		say "run $i/$runs: loaderd f32, $ld_epochs epochs"
		r=$(loaderd_run f32) || exit 1
		set -- $r
		f32=$1 bad32=$2
		say "run $i/$runs: loaderd f16, $ld_epochs epochs"
		r=$(loaderd_run f16) || exit 1
		set -- $r
		f16=$1 bad16=$2
		say "run $i/$runs: loaderd f32 without restart segments"
		r=$(loaderd_run f32 ds_off) || exit 1
		set -- $r
		off=$1
		say "run $i/$runs: loaderd f32 eval, with and without restart segments"
		r=$(loaderd_run f32 ds "$espec") || exit 1
		set -- $r
		e32=$1
		r=$(loaderd_run f32 ds_off "$espec") || exit 1
		set -- $r
		eoff=$1
		say "run $i/$runs: loaderd f32 on the --max-side 256 dataset"
		r=$(loaderd_run f32 ds_256) || exit 1
		set -- $r
		s256=$1
	fi
	say "run $i/$runs: decode-only, one thread"
	out=$($pin "$b/bench/jpeg_decode" -t 2 "$corpus")
	echo "   $out" >&2
	d=$(rate "$out") || exit 1
	# The same, on every core at once: what the cores deliver together
	# (on these virtual machines two decoders run at about 0.7 of one
	# each, so "1 thread x cores" overstates the machine).
	say "run $i/$runs: decode-only, $cores at once"
	k=0 dp=
	while [ $k -lt "$cores" ]; do
		$pin "$b/bench/jpeg_decode" -t 2 "$corpus" >"$w/dec$k" &
		dp="$dp $!"
		k=$((k + 1))
	done
	for p in $dp; do wait "$p" || exit 1; done
	dall=$(cat "$w"/dec* | tr ' ' '\n' | awk -F= '$1 == "img_per_s" { s += $2 } END { print s }')
	echo "   decode-only, $cores at once: $dall img/s together" >&2
	rm -f "$w"/dec*
	# columns: 1 torch 2 f32 3 f16 4 decode 5 bad32 6 bad16 7 torch-eval
	# 8 f32 without segments 9 eval 10 eval without segments 11 max-side
	# 12 decode-only on every core at once (summed)
	echo "$t $f32 $f16 $d $bad32 $bad16 $te $off $e32 $eoff $s256 $dall" >>"$w/r"
	i=$((i + 1))
done

# col N: the median of column N over the runs ("na" when not measured).
col() { awk -v c="$1" '$c != "na" { print $c }' "$w/r" | median; }
# rat N J M K: the median over the runs of (J x column N) / (K x column M).
rat() {
	awk -v a="$1" -v j="$2" -v b="$3" -v k="$4" \
		'$a != "na" { print j * $a / (k * $b) }' "$w/r" |
		median | awk '{ printf "%.2f", $1 }'
}
row() { # NAME IMG/S VS_TORCH VS_DECODE
	if [ -z "$2" ]; then
		printf '%-36s %9s\n' "$1" "n/a"
	else
		printf '%-36s %9.0f %9s %10s\n' "$1" "$2" "$3" "$4"
	fi
}
echo "== medians of $runs runs (ratios: medians of each run's)"
printf '%-36s %9s %9s %10s\n' "" img/s "/torch" "/decode"
row "torchvision DataLoader ($cores workers)" "$(col 1)" 1.00 "$(rat 1 1 4 "$cores")"
if [ $ld = yes ]; then
	row "loaderd f32 nchw ($((pool + 1)) threads)" "$(col 2)" "$(rat 2 1 1 1)" "$(rat 2 1 4 "$cores")"
	row "loaderd f16 nchw ($((pool + 1)) threads)" "$(col 3)" "$(rat 3 1 1 1)" "$(rat 3 1 4 "$cores")"
	row "loaderd f32, no restart segments" "$(col 8)" "$(rat 8 1 1 1)" "$(rat 8 1 4 "$cores")"
	echo "   restart segments: f32 $(rat 2 1 8 1) x the same without"
else
	row "loaderd f32 nchw (no --pipeline)" ""
	row "loaderd f16 nchw (no --pipeline)" ""
fi
row "decode-only: 1 thread x $cores" \
	"$(awk -v k="$cores" '{ print $4 * k }' "$w/r" | median)" "$(rat 4 "$cores" 1 1)" 1.00
row "decode-only: $cores at once" "$(col 12)" "$(rat 12 1 1 1)" "$(rat 12 1 4 "$cores")"
echo "goals: loaderd f32 >= 3.50 x torch, >= 1.50 x decode-only (1 thread x $cores)"
if [ $ld = yes ]; then
	echo "   loaderd f32 / decode-only on $cores cores at once: $(rat 2 1 12 1)"
fi
echo "== evaluation path: Resize 256 + CenterCrop 224 (ratios to torchvision's eval)"
row "torchvision DataLoader eval" "$(col 7)" 1.00 "$(rat 7 1 4 "$cores")"
if [ $ld = yes ]; then
	row "loaderd f32 eval" "$(col 9)" "$(rat 9 1 7 1)" "$(rat 9 1 4 "$cores")"
	row "loaderd f32 eval, no restart segments" "$(col 10)" "$(rat 10 1 7 1)" "$(rat 10 1 4 "$cores")"
	echo "== packed with --max-side 256 (other data: ratios to torch and decode on the full files)"
	row "loaderd f32, --max-side 256" "$(col 11)" "$(rat 11 1 1 1)" "$(rat 11 1 4 "$cores")"
fi
if [ $ld = yes ]; then
	echo "bad samples per run (f32/f16):" \
		"$(awk '{ printf "%s%s/%s", (NR > 1 ? ", " : ""), $5, $6 }' "$w/r")"
	o=$(grep -c 'stream open' "$w/daemon.log") || :
	e=$(grep -c 'delivered all' "$w/daemon.log") || :
	x=$(grep -v -e 'stream open' -e 'delivered all' -e ': connected$' \
		-e ': pipeline "' -e 'session ends' -e 'listening on' \
		-e ': stream freed after' \
		"$w/daemon.log" | sed 's/^<[0-9]>/   /' | head -20) || :
	other=none
	[ -z "$x" ] || other="(below)"
	echo "loaderd log: $o streams opened, $e delivered all their batches;" \
		"other lines: $other"
	[ -z "$x" ] || echo "$x"
fi

# Where the time goes: the same pipeline on one thread, stage by stage,
# against the full decode of the same files (once, not a median).
if [ $ld = yes ] && "$b/loaderctl" pipeline --help >/dev/null 2>&1; then
	echo "== where the time goes: loaderctl pipeline --profile, one thread, f32"
	echo "   the files as they are (the region path):"
	$pin "$b/loaderctl" pipeline --profile "$spec | f32 | nchw" "$corpus" |
		sed -n '/^segments/,$p'
	echo "   transcoded as pack stores them (restart segments):"
	$pin "$b/loaderctl" pipeline --profile --jpeg-restart 1 \
		"$spec | f32 | nchw" "$corpus" | sed -n '/^jpeg restart/,$p'
fi
