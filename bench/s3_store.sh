#!/bin/sh
# s3_store.sh - s3:// datasets against their peers and limits, in one run,
# on a real single-node Ceph cluster whose RADOS Gateway listens on
# loopback (tests/integration/ceph.sh; the OSD keeps objects in memory):
#
#   raw cold   a stream's first epoch of Fashion-MNIST train from an empty
#              shard cache (the open: HEADs and each shard's first MiB
#              and tail; then the records arrive, 4 MiB ranges 8 at a
#              time, while the epoch runs, and every shard is checked
#              whole) against
#              curl fetching the same shard objects, 8 at a time, to
#              /dev/null: the store's aggregate GET rate, against the
#              open and the records' arrival (the daemon logs how long
#              that took). Goal >= 0.8.
#   raw warm   the same epoch with the shard cache full, against the
#              local packed dataset (page-cached).
#   jpeg cold  the JPEG corpus (CORPUS, default
#              /var/tmp/loaderd-corpus-n2000-s0, made by
#              bench/image_pipeline.sh) through an image pipeline, one
#              epoch from an empty cache, against the same from local
#              disk, twice: a small one (32x32 crops, u8: the decoder
#              scales down in the DCT, by up to 1/8, so each byte
#              fetched buys little decoding) and bench/image_pipeline.sh's training one
#              (224x224, flip, normalized). Goal >= 0.9 (it is
#              decode-bound). The CPU seconds
#              the store's processes (radosgw, ceph-osd, ceph-mon) and
#              loaderd spend give the ceiling on these cores: the store
#              runs beside the decoder here, so the fetch, overlapped
#              with decoding, still costs the decoder its cycles. Those
#              of loaderd's fetch thread (its log says) are shown too:
#              most of what a cold epoch costs loaderd over a local one;
#              and those of its decode pool (threads ld-decode/N), in
#              the cold epoch and the local; and how much longer the
#              cold epoch took than the local one, with what of it went
#              to the open and how long the stream's reader waited for
#              the fetch (the daemon logs it). With the store on cores
#              of its own, the reader's waits came within 70 ms of the
#              fetch's start, while the first ranges arrived (8 GETs
#              at once share the store's rate): with the open, about
#              0.04 s that does not grow with the epoch. On 16 cores
#              the default corpus's epoch lasts 0.2-0.4 s, and that is
#              a tenth of it: a larger CORPUS (bench/mkcorpus.py
#              --count 10000) shows the rate a cold epoch keeps.
#   2 streams  two streams opened at once on a cold daemon: bytes fetched
#              from the store, against one stream's. Goal: equal.
#   half       a shard cache of half the dataset (--cache-disk), so that
#              half the shards are read in place (ranged GETs, batch by
#              batch): raw in the quasi order, the first epoch (the
#              stage fetches the half that fits) and the next; the JPEG
#              corpus in the quasi and the random order, the next epoch;
#              each against the same order from local disk. No goal:
#              what reading in place costs.
#
# Each cold measurement starts a fresh daemon with a fresh cache
# directory.
#
# STORE_CORES=K puts the store's processes on the last K cores and
# everything else (loaderd, its clients, curl) on the others, as a
# cluster's store runs on machines of its own: the cold JPEG epoch then
# shows what overlapping the fetch with decoding gives when the fetch
# does not take the decoder's cores. Default 0: all share every core.
#
#   [STORE_CORES=K] bench/s3_store.sh [RUNS]     (default 3; medians)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}
BENCH=s3_store
. "$top/bench/common.sh"
top_srcdir=$top
. "$top/tests/integration/ceph.sh"
why=$(ceph_missing)
[ -z "$why" ] || skip "$why"
command -v curl >/dev/null 2>&1 || skip "curl not installed"
bench_init
trap 'for p in $pids; do kill $p 2>/dev/null || :; done; ceph_stop || :; rm -rf "$w"' EXIT
corpus=${CORPUS:-/var/tmp/loaderd-corpus-n2000-s0}
PIPE='decode | rrc 32 | u8'
TRAIN_PIPE='decode | rrc 224 | flip 0.5 | normalize imagenet'

say "starting Ceph on loopback"
CEPH_MEMSTORE_BYTES=2147483648 ceph_start "$w/ceph" >/dev/null
ncpu=$(nproc)
store_cores=${STORE_CORES:-0}
if [ "$store_cores" -gt 0 ]; then
	[ "$store_cores" -lt "$ncpu" ] ||
		skip "STORE_CORES=$store_cores leaves none of the $ncpu cores to loaderd"
	command -v taskset >/dev/null 2>&1 || skip "taskset not installed"
	for p in $CEPH_PIDS; do
		taskset -a -p -c $((ncpu - store_cores))-$((ncpu - 1)) "$p" >/dev/null
	done
	# This shell, and so loaderd, its clients and curl.
	taskset -p -c 0-$((ncpu - store_cores - 1)) $$ >/dev/null
	say "the store on cores $((ncpu - store_cores))-$((ncpu - 1)), the rest on 0-$((ncpu - store_cores - 1))"
fi
curl -sf -o /dev/null --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
	--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
	-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X PUT "$AWS_ENDPOINT_URL/bench"
say "packing Fashion-MNIST train (8 MB shards) locally and to s3://bench/fm"
"$b/loaderctl" pack --split train --shard-size 8M "$src" "$w/fm" >/dev/null
"$b/loaderctl" pack --split train --shard-size 8M "$src" s3://bench/fm >/dev/null
sets=raw
if [ -d "$corpus" ] && [ -n "$(ls -A "$corpus")" ]; then
	say "packing $corpus locally and to s3://bench/jp"
	"$b/loaderctl" pack "$corpus" "$w/jp" >/dev/null
	"$b/loaderctl" pack "$corpus" s3://bench/jp >/dev/null
	sets="raw jpeg"
else
	say "no JPEG corpus at $corpus (bench/image_pipeline.sh makes one): raw only"
fi
cat "$w"/fm/train/*.lds "$w"/jp/*.lds >/dev/null 2>&1 || :

now() { date +%s.%N; }
# secs T0: seconds since T0.
secs() { echo "$(now) $1" | awk '{ printf "%.4f\n", $1 - $2 }'; }

# curl_all PREFIX DIR: GET every shard object of the local copy DIR's
# names with one curl, 8 transfers at a time; prints the seconds.
curl_all() {
	_urls=
	for _f in "$2"/*.lds; do
		_urls="$_urls -o /dev/null $AWS_ENDPOINT_URL/bench/$1/${_f##*/}"
	done
	_t0=$(now)
	# shellcheck disable=SC2086
	curl -sf --parallel --parallel-max 8 --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
		--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' $_urls
	secs "$_t0"
}

# epoch SOCK DATASET ARGS...: one epoch's wall seconds, and the open's
# (for an s3:// dataset on a cold daemon: the stage).
epoch() {
	_s=$1 _d=$2
	shift 2
	_t0=$(now)
	"$b/tests/tools/ldclient" --open-time --epochs 1 "$@" "$_s" "$_d" \
		>"$w/ep.out" 2>&1 || { cat "$w/ep.out" >&2; exit 1; }
	echo "$(secs "$_t0") $(sed -n 's/^open_s //p' "$w/ep.out")"
}

# jpeg_pair SPEC: on the daemon fresh just started, a cold epoch of the
# JPEG corpus through the pipeline SPEC, then a local one; prints the wall and open
# seconds of each, the CPU seconds of the store and of loaderd in
# the cold epoch and of loaderd in the local; those of the thread that
# fetched the corpus (of loaderd's cold ones) and the seconds the stream's
# reader waited for it, both from the daemon's log; and the CPU seconds
# of loaderd's decode pool in the cold epoch and in the local.
jpeg_pair() {
	_n0=$(fetch_ends s3://bench/jp) _ln=$(($(wc -l <"$w/daemon.log") + 1))
	_s0=$(cpu_of $CEPH_PIDS) _l0=$(cpu_of "$DPID") _p0=$(cpu_threads "$DPID" ld-decode)
	_c=$(epoch "$w/s.sock" s3://bench/jp --batch 32 --pipeline "$1")
	wait_fetch s3://bench/jp "$_n0"
	_s1=$(cpu_of $CEPH_PIDS) _l1=$(cpu_of "$DPID") _p1=$(cpu_threads "$DPID" ld-decode)
	_l=$(epoch "$w/s.sock" "$w/jp" --batch 32 --pipeline "$1")
	_l2=$(cpu_of "$DPID") _p2=$(cpu_threads "$DPID" ld-decode)
	_f=$(tail -n +"$_ln" "$w/daemon.log" |
		sed -n 's/.*s3:\/\/bench\/jp: .* fetched (.*(\([0-9.]*\) s of this thread.s CPU).* waited \([0-9.]*\) s .*/\1 \2/p' |
		tail -1)
	echo "$_c $_l $(delta "$_s0" "$_s1") $(delta "$_l0" "$_l1") $(delta "$_l1" "$_l2") ${_f:-0 0}" \
		"$(delta "$_p0" "$_p1") $(delta "$_p1" "$_p2")"
}
# fetch_ends URL: how many fetches of URL the daemon log says ended.
fetch_ends() {
	grep -c "$1: .*\\(fetched (\\|fetching stopped\\|could not\\)" "$w/daemon.log" || :
}
# wait_fetch URL N: wait (10 s at most) until more than N fetches of URL
# have ended (a stream's shards arrive on a thread of the daemon's, which
# may end just after the stream does).
wait_fetch() {
	_i=0
	while [ "$(fetch_ends "$1")" -le "$2" ] && [ $_i -lt 200 ]; do
		sleep 0.05
		_i=$((_i + 1))
	done
}

# cpu_of PID...: the CPU seconds (user + system) the processes have used.
cpu_of() {
	for _p in "$@"; do
		awk '{ print $14 + $15 }' "/proc/$_p/stat" 2>/dev/null || :
	done | awk -v t="$(getconf CLK_TCK)" '{ n += $1 } END { printf "%.2f\n", n / t }'
}
# delta A B: B - A.
delta() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f\n", b - a }'; }

# fetched: the bytes the daemon log (emptied before the stream) says were
# fetched into the shard cache for s3://bench/fm/train, once its fetches
# have ended.
fetched() {
	wait_fetch s3://bench/fm/train 0
	sed -n 's/.*s3:\/\/bench\/fm\/train: .* fetched (\([0-9]*\) bytes).*/\1/p' "$w/daemon.log" |
		awk '{ n += $1 } END { print n + 0 }'
}

# fetch_secs: the seconds the daemon log says the records of
# s3://bench/fm/train took to arrive, after the open.
fetch_secs() {
	fetched >/dev/null
	sed -n 's/.*s3:\/\/bench\/fm\/train: .* into the shard cache in \([0-9.]*\) s.*/\1/p' \
		"$w/daemon.log" | tail -1
}

fresh() {
	[ -n "${DPID:-}" ] && { kill "$DPID" 2>/dev/null || :; wait "$DPID" 2>/dev/null || :; }
	rm -rf "$w/cache" "$w/state" "$w/s.sock"
	start_daemon "$w/s.sock" --log-level info "$@"
}

fm_bytes=$(cat "$w"/fm/train/*.lds | wc -c)
jp_bytes=$(cat "$w"/jp/*.lds 2>/dev/null | wc -c)
: >"$w/r.half"
: >"$w/r.raw"
: >"$w/r.jpeg"
: >"$w/r.jpegt"
: >"$w/r.two"
i=0
while [ $i -lt "$runs" ]; do
	say "run $((i + 1)) of $runs"
	c=$(curl_all fm/train "$w/fm/train")
	fresh
	: >"$w/daemon.log"
	cold=$(epoch "$w/s.sock" s3://bench/fm/train --order random --batch 256)
	fs=$(fetch_secs)
	warm=$(epoch "$w/s.sock" s3://bench/fm/train --order random --batch 256)
	local=$(epoch "$w/s.sock" "$w/fm/train" --order random --batch 256)
	echo "$c $cold $warm $local $fs" >>"$w/r.raw"
	if [ "$sets" = "raw jpeg" ]; then
		fresh
		jpeg_pair "$PIPE" >>"$w/r.jpeg"
		fresh
		jpeg_pair "$TRAIN_PIPE" >>"$w/r.jpegt"
	fi
	fresh
	: >"$w/daemon.log"
	"$b/tests/tools/ldclient" --epochs 1 "$w/s.sock" s3://bench/fm/train >/dev/null 2>&1
	one=$(fetched)
	fresh
	: >"$w/daemon.log"
	"$b/tests/tools/ldclient" --epochs 1 --seed 1 "$w/s.sock" s3://bench/fm/train >/dev/null 2>&1 &
	p1=$!
	"$b/tests/tools/ldclient" --epochs 1 --seed 2 "$w/s.sock" s3://bench/fm/train >/dev/null 2>&1
	wait $p1
	two=$(fetched)
	echo "$one $two" >>"$w/r.two"
	fresh --cache-disk $((fm_bytes / 2))
	hq1=$(epoch "$w/s.sock" s3://bench/fm/train --order quasi --batch 256)
	hq2=$(epoch "$w/s.sock" s3://bench/fm/train --order quasi --batch 256)
	hql=$(epoch "$w/s.sock" "$w/fm/train" --order quasi --batch 256)
	hj=
	if [ "$sets" = "raw jpeg" ]; then
		fresh --cache-disk $((jp_bytes / 2))
		epoch "$w/s.sock" s3://bench/jp --batch 32 --pipeline "$PIPE" --order quasi >/dev/null
		hj="$(epoch "$w/s.sock" s3://bench/jp --batch 32 --pipeline "$PIPE" --order quasi)"
		hj="$hj $(epoch "$w/s.sock" "$w/jp" --batch 32 --pipeline "$PIPE" --order quasi)"
		hj="$hj $(epoch "$w/s.sock" s3://bench/jp --batch 32 --pipeline "$PIPE" --order random)"
		hj="$hj $(epoch "$w/s.sock" "$w/jp" --batch 32 --pipeline "$PIPE" --order random)"
	fi
	# wall and open: raw quasi first, next, local; jpeg quasi next,
	# local, random next, local.
	echo "$hq1 $hq2 $hql $hj" >>"$w/r.half"
	i=$((i + 1))
done

med() { awk -v k="$1" '{ print $k }' "$2" | median; }
# r.raw: curl, then wall and open seconds of cold, warm and local, then
# the seconds the cold records took to arrive after the open.
c=$(med 1 "$w/r.raw") cold=$(med 2 "$w/r.raw") stage=$(med 3 "$w/r.raw")
warm=$(med 4 "$w/r.raw") local=$(med 6 "$w/r.raw")
fetch=$(awk '{ print $3 + $8 }' "$w/r.raw" | median)
printf '%-40s %10s %10s %8s\n' case seconds MB/s ratio
awk -v b="$fm_bytes" -v c="$c" -v cold="$cold" -v st="$stage" -v f="$fetch" -v warm="$warm" -v l="$local" 'BEGIN {
	printf "%-40s %10.3f %10.1f %8s\n", "raw: curl, 8 parallel GETs", c, b / c / 1e6, "1.00"
	printf "%-40s %10.3f %10.1f %8s\n", "raw cold: open (HEADs, ends, 1st MiB)", st, b / st / 1e6, "-"
	printf "%-40s %10.3f %10.1f %8.2f\n", "raw cold: open + records arriving", f, b / f / 1e6, c / f
	printf "%-40s %10.3f %10.1f %8.2f\n", "raw cold: open + epoch", cold, b / cold / 1e6, c / cold
	printf "%-40s %10.3f %10.1f %8s\n", "raw: local disk epoch", l, b / l / 1e6, "1.00"
	printf "%-40s %10.3f %10.1f %8.2f\n", "raw warm: epoch from shard cache", warm, b / warm / 1e6, l / warm
}'
# jpeg_rows NAME FILE: the rows of the cold JPEG pairs in FILE
# (jpeg_pair's lines) for the pipeline NAME.
jpeg_rows() {
	[ -s "$2" ] || return 0
	jc=$(med 1 "$2") js=$(med 2 "$2") jl=$(med 3 "$2") lo=$(med 4 "$2")
	sc=$(med 5 "$2") lc=$(med 6 "$2") ll=$(med 7 "$2") fc=$(med 8 "$2")
	rw=$(med 9 "$2") pc=$(med 10 "$2") pl=$(med 11 "$2")
	jb=$(cat "$w"/jp/*.lds | wc -c)
	awk -v jc="$jc" -v js="$js" -v jl="$jl" -v b="$jb" -v sc="$sc" -v lc="$lc" \
		-v ll="$ll" -v fc="$fc" -v pc="$pc" -v pl="$pl" -v rw="$rw" -v lo="$lo" -v n="$ncpu" -v k="$store_cores" -v p="$1" 'BEGIN {
		printf "%-40s %10.3f %10.1f %8s\n", "jpeg " p ": local disk epoch", jl, b / jl / 1e6, "1.00"
		printf "%-40s %10.3f %10.1f %8s\n", "jpeg " p " cold: open", js, b / js / 1e6, "-"
		printf "%-40s %10.3f %10.1f %8.2f\n", "jpeg " p " cold: open + epoch", jc, b / jc / 1e6, jl / jc
		printf "  CPU seconds: local epoch loaderd %.2f (decode pool %.2f); cold epoch loaderd %.2f (decode pool %.2f, fetch thread %.2f) + store %.2f\n", ll, pl, lc, pc, fc, sc
		printf "  the cold epoch took %.3f s longer than the local one: its open %.3f s longer, and the reader waited %.3f s for the fetch\n", jc - jl, js - lo, rw
		if (k) {
			best = lc / (n - k)
			if (best < sc / k) best = sc / k
		} else {
			best = (lc + sc) / n
		}
		if (best < jl) best = jl
		if (k)
			printf "  ceiling, loaderd on %d cores and the store on %d (all that CPU overlapped): %.2f x local\n", n - k, k, jl / best
		else
			printf "  ceiling on these %d cores (all that CPU overlapped): %.2f x local\n", n, jl / best
	}'
}
jpeg_rows "rrc 32 u8" "$w/r.jpeg"
jpeg_rows "training" "$w/r.jpegt"
one=$(med 1 "$w/r.two") two=$(med 2 "$w/r.two")
printf '%-40s %10s %10s %8s\n' "bytes fetched: 1 stream" "$one" - 1.00
printf '%-40s %10s %10s %8s\n' "bytes fetched: 2 streams at once" "$two" - \
	"$(awk -v a="$one" -v b="$two" 'BEGIN { printf "%.2f", a ? b / a : 0 }')"
hq1=$(med 1 "$w/r.half") hq2=$(med 3 "$w/r.half") hql=$(med 5 "$w/r.half")
awk -v b="$fm_bytes" -v a="$hq1" -v n="$hq2" -v l="$hql" 'BEGIN {
	printf "%-40s %10.3f %10.1f %8s\n", "raw half cached: local quasi epoch", l, b / l / 1e6, "1.00"
	printf "%-40s %10.3f %10.1f %8.2f\n", "raw half cached: quasi, first epoch", a, b / a / 1e6, l / a
	printf "%-40s %10.3f %10.1f %8.2f\n", "raw half cached: quasi, next epoch", n, b / n / 1e6, l / n
}'
if [ "$(awk '{ print NF; exit }' "$w/r.half")" -ge 14 ]; then
	jq=$(med 7 "$w/r.half") jql=$(med 9 "$w/r.half")
	jr=$(med 11 "$w/r.half") jrl=$(med 13 "$w/r.half")
	awk -v b="$jp_bytes" -v q="$jq" -v ql="$jql" -v r="$jr" -v rl="$jrl" 'BEGIN {
		printf "%-40s %10.3f %10.1f %8.2f\n", "jpeg half cached: quasi, next epoch", q, b / q / 1e6, ql / q
		printf "%-40s %10.3f %10.1f %8.2f\n", "jpeg half cached: random, next epoch", r, b / r / 1e6, rl / r
		printf "(against local disk epochs of %.3f s quasi, %.3f s random)\n", ql, rl
	}'
fi
echo "(goals: raw cold >= 0.80 x curl, jpeg cold >= 0.90 x local, 2 streams = 1.00 x bytes; medians of $runs runs)"
exit 0
