#!/bin/sh
# soak.sh - streams opening and closing against one loaderd for a set
# time, to show what grows: every INTERVAL seconds a line with the
# daemon's RSS, descriptors and threads, the streams run and the errors
# seen. Not part of make check (it runs for minutes to hours).
#
#   tests/soak/soak.sh [--minutes N] [--interval S] [--build DIR]
#
# Four client loops run at once, each picking its next stream from a
# fixed cycle: raw epochs, a JPEG pipeline, named streams resumed, the
# two ranks of a job, a client killed mid-stream, an OPEN refused (an
# output that does not exist), a client that stops reading and is killed.
# An error is any stream that ends otherwise than its kind should. Exit
# status: 0 if no error was seen, descriptors ended where they started
# and RSS at the end is within 32 MB of RSS after the first interval; 1
# otherwise.
set -u
minutes=30 interval=60 build=
while [ $# -gt 0 ]; do
	case $1 in
	--minutes) minutes=$2; shift 2 ;;
	--interval) interval=$2; shift 2 ;;
	--build) build=$2; shift 2 ;;
	*) echo "usage: soak.sh [--minutes N] [--interval S] [--build DIR]" >&2; exit 2 ;;
	esac
done
top=$(cd "$(dirname "$0")/../.." && pwd)
B=${build:-$top/build}
LOADERD=$B/loaderd LOADERCTL=$B/loaderctl LDCLIENT=$B/tests/tools/ldclient
[ -x "$LDCLIENT" ] || make -C "$B" tests/tools/ldclient tests/tools/mkjpeg >/dev/null
src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
T=$(mktemp -d "${TMPDIR:-/tmp}/loaderd-soak.XXXXXX")
trap 'kill -9 $dpid 2>/dev/null; kill $(cat "$T"/loop.* 2>/dev/null) 2>/dev/null; rm -rf "$T"' EXIT
"$LOADERCTL" pack --split test --shard-size 1M "$src" "$T/fm" >/dev/null || exit 1
mkdir -p "$T/img/c"
i=0
while [ $i -lt 64 ]; do "$B/tests/tools/mkjpeg" "$T/img/c/$i.jpg" 320 240 $i; i=$((i + 1)); done
"$LOADERCTL" pack "$T/img" "$T/jp" >/dev/null || exit 1
D=$T/fm/test S=$T/d.sock
"$LOADERD" -f --socket "$S" --state-dir "$T/state" --cache-dir "$T/cache" \
	--threads 2 </dev/null >"$T/d.log" 2>&1 &
dpid=$!
while [ ! -S "$S" ]; do sleep 0.05; done

# One stream of kind K; prints "ok" or "error K: what happened".
one() {
	k=$1 w=$2
	case $k in
	raw) out=$("$LDCLIENT" --batch 100 --epochs 2 --order random --seed $w "$S" "$D" 2>&1)
		case $out in *"total batches 200 "*) echo ok ;; *) echo "error $k: $out" ;; esac ;;
	jpeg) out=$("$LDCLIENT" --batch 8 --epochs 2 --pipeline 'decode | rrc 96 | flip 0.5 | u8' "$S" "$T/jp" 2>&1)
		case $out in *"total batches 16 "*) echo ok ;; *) echo "error $k: $out" ;; esac ;;
	named) out=$("$LDCLIENT" --batch 100 --epochs 1 --name "job$w" --fresh "$S" "$D" 2>&1)
		case $out in *"total batches 100 "*) echo ok ;; *) echo "error $k: $out" ;; esac ;;
	world)
		"$LDCLIENT" --batch 100 --rank 1 --world 2 "$S" "$D" >"$T/r1.$w" 2>&1 &
		r=$!
		out=$("$LDCLIENT" --batch 100 --rank 0 --world 2 "$S" "$D" 2>&1)
		wait $r
		case "$out $(cat "$T/r1.$w")" in *"total batches 50 "*"total batches 50 "*) echo ok ;;
		*) echo "error $k: $out $(cat "$T/r1.$w")" ;; esac ;;
	killed) out=$("$LDCLIENT" --batch 100 --epochs 0 --kill-after 7 "$S" "$D" 2>&1)
		echo ok ;; # it dies by design; the daemon must free its stream
	refused) out=$("$LDCLIENT" --batch 100 --outputs nosuch "$S" "$D" 2>&1)
		case $out in *"no such field"*) echo ok ;; *) echo "error $k: $out" ;; esac ;;
	stuck)
		"$LDCLIENT" --batch 100 --epochs 0 --hold-after 3 "$S" "$D" >"$T/st.$w" 2>&1 &
		p=$!
		sleep 1
		kill -9 $p 2>/dev/null
		wait $p 2>/dev/null
		echo ok ;;
	esac
}

loop() { # W: client loop W, until $T/stop
	w=$1
	set -- raw jpeg named world killed refused stuck
	while [ ! -e "$T/stop" ]; do
		for k in "$@"; do
			[ -e "$T/stop" ] && break
			r=$(one $k $w)
			echo "$k $r" >>"$T/results.$w"
		done
	done
}
for w in 1 2 3 4; do
	loop $w 2>>"$T/loop.err" &
	echo $! >"$T/loop.$w"
done

fds() { ls "/proc/$dpid/fd" 2>/dev/null | wc -l; }
rss() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$dpid/status"; }
threads() { sed -n 's/^Threads:[[:space:]]*//p' "/proc/$dpid/status"; }
count() { cat "$T"/results.* 2>/dev/null | grep -c "$1"; }
fds0=$(fds)
start=$(date +%s)
end=$((start + minutes * 60))
rss1=
printf '%8s %10s %5s %7s %8s %7s\n' elapsed rss_kB fds threads streams errors
while [ "$(date +%s)" -lt $end ]; do
	sleep "$interval"
	kill -0 $dpid 2>/dev/null || { echo "loaderd died"; exit 1; }
	r=$(rss)
	[ -n "$rss1" ] || rss1=$r
	printf '%7ss %10s %5s %7s %8s %7s\n' $(($(date +%s) - start)) "$r" "$(fds)" \
		"$(threads)" "$(count '')" "$(count ' error ')"
done
touch "$T/stop"
for w in 1 2 3 4; do wait "$(cat "$T/loop.$w")" 2>/dev/null; done
sleep 2
r=$(rss) f=$(fds) e=$(count ' error ')
echo "streams: $(count ''), by kind: $(cat "$T"/results.* | awk '{ n[$1]++ } END { for (k in n) printf "%s %d, ", k, n[k] }')"
echo "errors: $e"
cat "$T"/results.* | grep ' error ' | sort | uniq -c | head -10
echo "descriptors: $fds0 at start, $f at the end (no stream open)"
echo "rss: ${rss1:-?} kB after ${interval} s, $r kB at the end"
echo "daemon log: $(grep -c 'error' "$T/d.log") error lines, $(grep -c 'stream freed' "$T/d.log") streams freed"
grep -Eq 'Sanitizer|runtime error|Segmentation|Aborted' "$T/d.log" && { echo "crash in the daemon log"; exit 1; }
[ "$e" -eq 0 ] && [ "$f" -le "$fds0" ] && [ "$r" -le $((${rss1:-0} + 32768)) ]
