#!/bin/sh
# Faults injected into a real loaderd (LOADERD_FAULT, common/fault.h;
# this machine has no device-mapper, so the reader's seam stands in for
# dm-error and dm-flakey): reads that fail with EIO, at one offset or for
# a whole file, and reads that come back short; shards overwritten in
# place and replaced by rename under running streams; an allocation that
# fails at every allocation point of a stream open, in turn. Each gives a
# clear per-stream error or a skip as the stream's policy says, the other
# streams and the daemon go on, and nothing leaks.
. "$top_srcdir/tests/integration/tap.sh"

need_fmnist
tmpdir
plan 33

# 10000 samples in 8 shards; copies have inodes of their own.
"$LOADERCTL" pack --split test --shard-size 1M "$src" "$T/ds" >/dev/null
# R: records a shard (all but the last); shard i holds [i*R, (i+1)*R).
R=$("$LOADERCTL" inspect --shards "$T/ds/test" | awk '/shard-00000/ { print $2 }')
for c in b c d; do cp -r "$T/ds" "$T/$c"; done
A=$T/ds/test B=$T/b/test C=$T/c/test E=$T/d/test
ino() { stat -c %i "$1"; }
nfds() { ls "/proc/$1/fd" | wc -l; }
distinct() { awk '$1 == "id" { print $4 }' "$1" | sort -un | wc -l; }

# The bytes of clean streams, to compare with.
start_daemon "$T/ref.sock"
ref1=$("$LDCLIENT" --batch 100 --hash "$T/ref.sock" "$A" | grep '^hash')
ref3=$("$LDCLIENT" --batch 100 --epochs 3 --hash "$T/ref.sock" "$A" | grep '^hash')
kill "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null

# --- reads that fail or come back short ------------------------------------
# Shard 3 of A has a bad block at byte 500000, shard 6 of A fails whole,
# every read of B's shards is cut to half.
spec="read-eio=$(ino "$A/shard-00003.lds")@500000,read-eio=$(ino "$A/shard-00006.lds")"
for f in "$B"/shard-*.lds; do spec="$spec,read-short=$(ino "$f")"; done
LOADERD_FAULT=$spec start_daemon "$T/f.sock" --threads 2
F=$DAEMON_PID
like "$(cat "$T/f.sock.log")" 'faults injected on purpose: LOADERD_FAULT=read-eio' \
	"loaderd says loudly that faults are armed"
fds0=$(nfds "$F")

# A bystander on C streams 3 epochs slowly while the others fail.
"$LDCLIENT" --batch 100 --epochs 3 --sleep-ms 2 --hash "$T/f.sock" "$C" >"$T/by.out" 2>&1 &
by=$!

out=$("$LDCLIENT" --batch 100 --hash "$T/f.sock" "$B" 2>&1)
is "$(printf '%s\n' "$out" | grep '^hash')" "$ref1" \
	"every read cut short: the stream's bytes equal a clean run's"

out=$("$LDCLIENT" --batch 100 "$T/f.sock" "$A" 2>&1)
rc=$?
ok "on-bad fail: EIO fails the stream" test "$rc" -ne 0
like "$out" 'sample [0-9]+ \(shard shard-00003\.lds, record [0-9]+\): reading [0-9]+ bytes at offset [0-9]+: Input/output error' \
	"and the error names the sample, shard, record and offset"

# Sequential skip: only the record on the bad block is lost; the first
# batch wholly in shard 6 is all bad, which fails the stream by name.
"$LDCLIENT" --batch 100 --on-bad skip --ids --stats "$T/f.sock" "$A" >"$T/seq.out" 2>&1
like "$(cat "$T/seq.out")" "every sample of batch $(((6 * R + 99) / 100)) of epoch 0 is bad" \
	"on-bad skip, sequential: a batch with no good sample fails, named"
miss=$(awk '$1 == "id" { print $4 }' "$T/seq.out" | sort -un |
	awk -v end=$((6 * R)) 'BEGIN { e = 0 }
	{ while (e < $1) { if (e < end) print e; e++ } e = $1 + 1 }')
ok "before it, one sample is missing, from shard 3 ($miss)" \
	test -n "$miss" -a "${miss:-0}" -ge $((3 * R)) -a "${miss:-0}" -lt $((4 * R))

"$LDCLIENT" --batch 100 --order random --seed 5 --on-bad skip --ids --stats \
	"$T/f.sock" "$A" >"$T/rnd.out" 2>&1
is "$?" 0 "on-bad skip, random order: the stream completes"
like "$(grep '^stats' "$T/rnd.out")" "^stats bad_samples $((R + 1)) " \
	"$((R + 1)) bad samples: shard 6 whole and the record on shard 3's bad block"
is "$(distinct "$T/rnd.out")" $((10000 - R - 1)) "the other $((10000 - R - 1)) samples are delivered"
is "$(awk -v a=$((6 * R)) -v b=$((7 * R)) '$1 == "id" && $4 >= a && $4 < b' "$T/rnd.out" | wc -l)" 0 \
	"none from shard 6"
like "$(cat "$T/f.sock.log")" 'skipped bad sample [0-9]+ \(shard shard-00006\.lds, record [0-9]+\): reading [0-9]+ bytes at offset [0-9]+: Input/output error' \
	"the daemon logs the samples skipped, with the shard and offset"

wait "$by"
is "$(grep '^hash' "$T/by.out")" "$ref3" \
	"the bystander's 3 epochs, streamed meanwhile, equal a clean run's"

# --- shards changed under running streams ----------------------------------
# Slow streams with a small read-ahead, so that the last shard is read
# well after the change.
slow() {
	"$LDCLIENT" --batch 100 --slots 2 --prefetch 200000 --sleep-ms 15 "$@"
}
slow --hash "$T/f.sock" "$E" >"$T/mv.out" 2>&1 &
p=$!
wait_for 'stream open' "$T/f.sock.log"
sleep 0.2
cp "$E/shard-00000.lds" "$T/other"
mv "$T/other" "$E/shard-00007.lds"
wait "$p"
is "$(grep '^hash' "$T/mv.out")" "$ref1" \
	"a shard replaced by rename: the stream reads the file it was given"

rm -rf "$T/d"
cp -r "$T/ds" "$T/d"
slow --on-bad skip --stats "$T/f.sock" "$E" >"$T/ow.out" 2>&1 &
p=$!
sleep 0.3
printf 'scribbled over a record of a shard in place' |
	dd of="$E/shard-00007.lds" bs=1 seek=500000 conv=notrunc 2>/dev/null
wait "$p"
rc=$?
like "$(grep '^stats' "$T/ow.out")" '^stats bad_samples [12] ' \
	"a shard overwritten in place: its damaged samples are skipped ($(grep -o 'bad_samples [0-9]*' "$T/ow.out"))"
is "$rc" 0 "and the stream completes"
out=$("$LDCLIENT" --batch 100 "$T/f.sock" "$E" 2>&1)
like "$out" 'shard-00007\.lds.*checksum' "on-bad fail: the damage is an error naming the shard"

ok "loaderd is still alive" kill -0 "$F"
sleep 0.3
is "$(nfds "$F")" "$fds0" "no descriptor left behind by the failed streams"
stop_daemon "$F" "$T/f.sock.log"

# --- allocations that fail -------------------------------------------------
# alloc-open: the n-th OPEN fails its n-th allocation point, until an
# OPEN passes them all. Each refused OPEN must be refused with a reason.
allocs() {
	n=0 refused=0 bad=
	while [ $n -lt 600 ]; do
		n=$((n + 1))
		out=$("$LDCLIENT" "$@" 2>&1)
		if [ "$(grep -c 'fault: no allocation of this OPEN failed' "$sock.log")" -gt 0 ]; then
			break
		fi
		case $out in
		*"total batches"*) ;; # a failure with a fallback: served
		*error:*) refused=$((refused + 1)) ;;
		*) bad="$bad $n" ;;
		esac
	done
}
LOADERD_FAULT=alloc-open start_daemon "$T/a.sock" --threads 2
P=$DAEMON_PID
fds0=$(nfds "$P")
allocs --batch 100 --name job --fresh --prefetch 200000 "$T/a.sock" "$A"
ok "a named raw stream: all $((n - 1)) allocation points failed in turn ($refused OPENs refused)" \
	test "$n" -lt 600 -a "$refused" -gt 20
is "$bad" "" "every OPEN was refused with a reason or served"
like "$out" '^total batches 100 ' "the OPEN that passed them all streams its epoch"
sleep 0.3
is "$(nfds "$P")" "$fds0" "no descriptor leaked by the refused OPENs"
stop_daemon "$P" "$T/a.sock.log"

mkdir -p "$T/img/c"
for i in 1 2 3 4; do "$TOOLS/mkjpeg" "$T/img/c/$i.jpg" 160 120 $i; done
"$LOADERCTL" pack "$T/img" "$T/jp" >/dev/null
LOADERD_FAULT=alloc-open start_daemon "$T/j.sock" --threads 2
P=$DAEMON_PID
allocs --batch 2 --pipeline 'decode | rrc 64 | u8' "$T/j.sock" "$T/jp"
ok "a JPEG stream: all $((n - 1)) allocation points failed in turn ($refused OPENs refused)" \
	test "$n" -lt 600 -a "$refused" -gt 20
is "$bad" "" "every OPEN was refused with a reason or served"
stop_daemon "$P" "$T/j.sock.log"
