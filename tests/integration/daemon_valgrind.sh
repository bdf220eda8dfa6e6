#!/bin/sh
# loaderd under valgrind (memcheck), stopped with SIGTERM: idle; with a
# live stream; with a JPEG stream through the image pipeline; after a
# stream that ended, a stream whose client was
# killed, and an OPEN refused for a hostile shard; with OPENs in flight
# on the thread pool; with named streams (their saver threads and
# LMDB state): resumed, resumed with another world, listed, forgotten,
# one live at the stop; and with the node cache, a WebDataset tar read
# in place (its index scanned, kept, used) and ragged outputs (values
# moved under the skip policy). Every error valgrind
# reports fails the test, definite and indirect leaks included (possible
# leaks are listed in the log, not counted: they are guesses about
# interior pointers). tests/valgrind.supp holds the suppressions, each
# with its reason. ASan and valgrind exclude each other: under the
# sanitizer build, which the suite runs too, this test skips.
. "$top_srcdir/tests/integration/tap.sh"

command -v valgrind >/dev/null 2>&1 ||
	skip_all "valgrind not installed (scripts/deps.sh --test)"
case "${LOADER_SAN_CFLAGS:-}" in
*sanitize*) skip_all "sanitizer build: valgrind cannot run ASan binaries" ;;
esac
# The stream's reader (pipeline/stream/reader.c) marks io_uring's buffers
# defined only in a build configured with valgrind present
# (HAVE_VALGRIND); in one configured before valgrind came, every read
# would show as uninitialised. Say so rather than fail on thousands of
# errors (scripts/build.sh reconfigures such a build by itself).
if ! grep -q '^#define HAVE_VALGRIND 1' "$top_builddir/config.h"; then
	echo "1..1"
	echo "not ok 1 - this build was configured without valgrind:" \
		"reconfigure it (scripts/build.sh does) now that valgrind is installed"
	exit 1
fi
need_fmnist
tmpdir
plan 33

"$LOADERCTL" pack --split test "$src" "$T/fm" >/dev/null
D=$T/fm/test
printf 'x' >"$T/one"
"$TOOLS/mkbadds" --claim-footer 1073741824 "$T/huge" "$T/one"
# 128 shards: an OPEN reads 128 footers, which takes a while here.
"$LOADERCTL" pack --split test --shard-size 65536 "$src" "$T/many" >/dev/null

# vg_start NAME: loaderd under valgrind on $T/NAME.sock, its valgrind
# report in $T/NAME.vg, with $VG_ARGS. Fails if the socket does not appear.
vg_start() {
	rm -f "$T/$1.sock"
	valgrind -q --error-exitcode=99 --leak-check=full \
		--errors-for-leak-kinds=definite,indirect \
		--show-leak-kinds=definite,indirect,possible \
		--suppressions="$top_srcdir/tests/valgrind.supp" \
		--log-file="$T/$1.vg" \
		"$top_builddir/loaderd" -f --socket "$T/$1.sock" --threads 2 \
		--state-dir "$T/$1.state" --cache-dir "$T/$1.cache" \
		$VG_ARGS 2>>"$T/$1.log" &
	VG=$!
	DAEMONS="$DAEMONS $VG"
	i=0
	while [ ! -S "$T/$1.sock" ] && [ $i -lt 600 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	[ -S "$T/$1.sock" ]
}

# vg_stop NAME DESC: SIGTERM, then check valgrind's verdict.
vg_stop() {
	kill -TERM $VG
	wait $VG
	rc=$?
	is "$rc" 0 "$2: valgrind reports no error (exit $rc)"
	if [ "$rc" != 0 ]; then
		grep -E '^==[0-9]+== +(at|by|Invalid|Conditional|Use|[0-9,]+ bytes)' \
			"$T/$1.vg" | head -20 | sed 's/^/# /'
	fi
	like "$(tail -3 "$T/$1.log")" 'info: stopped' "$2: the daemon stops"
}

# wait_log NAME PATTERN: up to 60 s for PATTERN in the daemon's log.
wait_log() {
	i=0
	while ! grep -q -- "$2" "$T/$1.log" && [ $i -lt 1200 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	grep -q -- "$2" "$T/$1.log"
}

# A JPEG stream through the image pipeline: decode, crop, flip, resize
# on the pool's threads, then the stop while it runs.
mkdir -p "$T/img/a" "$T/img/b"
for i in 1 2 3 4 5 6; do
	"$TOOLS/mkjpeg" "$T/img/a/$i.jpg" 160 120 $i
	"$TOOLS/mkjpeg" "$T/img/b/$i.jpg" 96 128 $((i + 10)) --progressive
done
"$LOADERCTL" pack "$T/img" "$T/jp" >/dev/null

# 1. Start and stop.
ok "idle: daemon starts under valgrind" vg_start idle
vg_stop idle "idle"

# 2. Stop with a stream running.
ok "live stream: daemon starts under valgrind" vg_start live
"$LDCLIENT" --epochs 0 --sleep-ms 20 --timeout-ms 60000 "$T/live.sock" "$D" \
	>"$T/live.out" 2>&1 &
cpid=$!
wait_log live 'stream open'
sleep 1
vg_stop live "live stream"

# 2b. A JPEG stream through the image pipeline (warps, policies, colour
# stages, a size that changes at epoch 1 and the batch stages too),
# stopped while it runs.
ok "jpeg stream: daemon starts under valgrind" vg_start jpeg
"$LDCLIENT" --epochs 0 --batch 4 --order random --seed 1 \
	--pipeline 'decode | rrc 32@0..48@1 | flip 0.5 | rotate 20 interp bilinear fill context | trivialaugment | randaugment 2 9 | jitter 0.4 0.4 0.4 0.1 | gaussian_blur 3 0.1 1 | normalize imagenet | erase | nchw | mixup 0.2 | cutmix 1 | label_smoothing 0.1' \
	--timeout-ms 60000 "$T/jpeg.sock" "$T/jp" >"$T/jpeg.out" 2>&1 &
cpid=$!
wait_log jpeg 'stream open'
ok "jpeg stream: epoch 1 makes its images 48 x 48 (a schedule), mixed" wait_log jpeg 'epoch 1: images 48 x 48'
vg_stop jpeg "jpeg stream"
wait "$cpid" 2>/dev/null
wait $cpid
is "$?" 3 "live stream: the client gets an error, not a hang"

# 3. Stop after streams that ended: one to its end, one whose client was
# killed, and an OPEN refused.
ok "ended streams: daemon starts under valgrind" vg_start ended
out=$("$LDCLIENT" --epochs 1 --timeout-ms 60000 "$T/ended.sock" "$D")
like "$out" 'total batches 40 samples 10000' "ended streams: a whole epoch"
"$LDCLIENT" --epochs 0 --timeout-ms 60000 "$T/ended.sock" "$D" >/dev/null 2>&1 &
cpid=$!
sleep 1
kill -9 $cpid
wait $cpid 2>/dev/null
out=$("$LDCLIENT" --epochs 1 --timeout-ms 60000 "$T/ended.sock" "$T/huge")
like "$out" 'error: .*footer of 1073741824 bytes' "ended streams: a hostile shard is refused"
# Both streams freed before the stop.
i=0
while [ "$(grep -c 'stream freed' "$T/ended.log")" -lt 2 ] && [ $i -lt 1200 ]; do
	sleep 0.05
	i=$((i + 1))
done
is "$(grep -c 'stream freed' "$T/ended.log")" 2 "ended streams: both streams freed"
vg_stop ended "ended streams"

# 4. Stop while six OPENs of the many-shard dataset are in flight: some
# are queued on the thread pool (cancelled), some running (their streams
# are torn down when they complete), some still sending their files.
ok "opens in flight: daemon starts under valgrind" vg_start opening
for i in 1 2 3 4 5 6; do
	"$LDCLIENT" --epochs 1 --timeout-ms 60000 "$T/opening.sock" \
		"$T/many/test" >/dev/null 2>&1 &
done
sleep 0.5
vg_stop opening "opens in flight"
wait
echo "# at the stop: $(grep -c 'stream open' "$T/opening.log") of 6 streams" \
	"open, $(grep -c 'stream freed' "$T/opening.log") freed after it"

# 5. Named streams: their savers and the LMDB state. One is killed
# mid-epoch and resumed, the saved names are listed and one forgotten,
# a refused open, and one named stream is live at the stop.
ok "named streams: daemon starts under valgrind" vg_start named
"$LDCLIENT" --name vg --epochs 1 --batch 100 --kill-after 7 --timeout-ms 60000 \
	"$T/named.sock" "$D" >/dev/null 2>&1
out=$("$LDCLIENT" --name vg --epochs 1 --batch 100 --timeout-ms 60000 \
	"$T/named.sock" "$D")
like "$out" '^start 0 7 resumed 1' "named streams: a killed one resumes under valgrind"
out=$("$LDCLIENT" --name vg --epochs 1 --batch 50 --timeout-ms 60000 \
	"$T/named.sock" "$D" 2>&1)
like "$out" 'saved with other batch size' "named streams: other options are refused"
# An elastic resume: world 2 killed part-way, world 3 goes on (the plan
# is made in the stream and written with the job).
for r in 0 1; do
	"$LDCLIENT" --name el --epochs 1 --batch 100 --rank $r --world 2 \
		--kill-after $((20 + r)) --timeout-ms 60000 "$T/named.sock" "$D" \
		>/dev/null 2>&1
done
out=$(for r in 0 1 2; do
	"$LDCLIENT" --name el --epochs 1 --batch 100 --rank $r --world 3 \
		--timeout-ms 60000 "$T/named.sock" "$D" 2>&1 | sed -n 's/^start //p'
done | sort -u)
like "$out" '^0 [0-9]+ resumed 1$' "named streams: world 3 goes on from world 2 under valgrind"
"$LOADERCTL" streams --saved --socket "$T/named.sock" >"$T/saved.out" 2>&1
"$LOADERCTL" forget --socket "$T/named.sock" vg >>"$T/saved.out" 2>&1
like "$(cat "$T/saved.out")" 'forgot "vg"' "named streams: listed and forgotten"
"$LDCLIENT" --name live --epochs 0 --sleep-ms 20 --timeout-ms 60000 \
	"$T/named.sock" "$D" >/dev/null 2>&1 &
cpid=$!
wait_log named 'stream "live" starts'
sleep 1
vg_stop named "named streams"
wait $cpid 2>/dev/null || :

# 6. The node cache, tars in place and ragged outputs.
/usr/bin/python3 - "$T/w.tar" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as tf:
    for i in range(300):
        for ext, data in (("cls", b"%d" % (i % 3)),
                          ("txt", b"id=%06d;" % i + b"x" * (i * 37 % 900))):
            ti = tarfile.TarInfo("s%05d.%s" % (i, ext))
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
EOF
"$LOADERCTL" pack "$T/w.tar" "$T/wp" >/dev/null
/usr/bin/python3 - "$T/wp" <<'EOF'
import glob, sys
p = sorted(glob.glob(sys.argv[1] + "/shard-*.lds"))[0]
with open(p, "r+b") as f:
    data = bytearray(f.read())
    for i in (3, 50, 51, 52, 200):
        at = data.find(b"id=%06d;" % i)
        data[at + 4] ^= 0x20
    f.seek(0)
    f.write(data)
EOF
VG_ARGS="--cache-memory 64M"
ok "sources: daemon starts under valgrind" vg_start src
VG_ARGS=
out=$(for k in 1 2; do
	"$LDCLIENT" --hash --order random --seed 3 --batch 16 --epochs 2 \
		--timeout-ms 60000 "$T/src.sock" "$T/w.tar" 2>&1 | grep '^epoch 1'
	"$LDCLIENT" --stats --order random --seed $k --epochs 2 \
		--timeout-ms 60000 "$T/src.sock" "$D" 2>&1 | grep '^stats'
done)
like "$out" 'cache_hits 20000 cache_misses 0' \
	"sources: the second packed stream is served by the cache"
like "$(echo "$out" | grep '^epoch' | uniq | wc -l)" '^1$' \
	"sources: the tar, read in place twice, gives the same batches"
out=$("$LDCLIENT" --stats --on-bad skip --order random --seed 5 --batch 16 \
	--epochs 2 --timeout-ms 60000 "$T/src.sock" "$T/wp" 2>&1 | grep '^stats')
like "$out" '^stats bad_samples 10 ' \
	"sources: ragged values of bad samples replaced and moved (5 an epoch)"
vg_stop src "sources"
