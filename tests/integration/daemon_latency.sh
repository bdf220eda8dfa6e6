#!/bin/sh
# A control loop that never waits: a bystander session's requests stay
# fast while another session (1) opens shards that claim a 1 GiB and a
# 4 GiB footer (sparse files: they cost nothing to make), and (2) dies in
# the middle of an expensive JPEG batch. ldping times a STATS round trip
# every 5 ms. The 100 ms bound is a behaviour check, not a benchmark: a
# loop that reads the footer, or joins the dying stream's threads, stalls
# for seconds.
. "$top_srcdir/tests/integration/tap.sh"

tmpdir
plan 9

# ping_start MS: ldping for MS ms in the background, once it is ready.
ping_start() {
	: >"$T/ping"
	"$TOOLS/ldping" --ms "$1" "$T/d.sock" >"$T/ping" 2>&1 &
	PING=$!
	i=0
	while ! grep -q ready "$T/ping" && [ $i -lt 200 ]; do
		sleep 0.05
		i=$((i + 1))
	done
}

# ping_wait: wait for ldping; M is its longest round trip in ms.
ping_wait() {
	wait $PING
	M=$(sed -n 's/.*max_ms \([0-9.]*\).*/\1/p' "$T/ping")
}

below_100() { awk -v m="$1" 'BEGIN { exit !(m != "" && m + 0 < 100) }'; }

# wait_log PATTERN COUNT: up to 30 s for COUNT lines of the daemon's log.
wait_log() {
	i=0
	while [ "$(grep -c -- "$1" "$T/d.sock.log")" -lt "$2" ] && [ $i -lt 600 ]; do
		sleep 0.05
		i=$((i + 1))
	done
}

printf 'x' >"$T/one"
"$TOOLS/mkbadds" --claim-footer 1073741824 "$T/h1" "$T/one"
"$TOOLS/mkbadds" --claim-footer 4294967296 "$T/h4" "$T/one"
ok "daemon starts" start_daemon "$T/d.sock" --threads 1
dpid=$DAEMON_PID

# --- 1: hostile footers ------------------------------------------------
ping_start 3000
sleep 0.2
out1=$("$LDCLIENT" --epochs 1 "$T/d.sock" "$T/h1")
out4=$("$LDCLIENT" --epochs 1 "$T/d.sock" "$T/h4")
ping_wait
echo "# bystander while opening hostile shards: $(grep rounds "$T/ping")"
like "$out1" 'error: .*shard-00000.lds: offset [0-9]+: footer of 1073741824 bytes' \
	"a shard claiming a 1 GiB footer is refused, naming file, offset and size"
like "$out4" 'error: .*shard-00000.lds: offset [0-9]+: footer of 4294967296 bytes' \
	"a shard claiming a 4 GiB footer is refused, naming file, offset and size"
ok "a bystander's request took at most $M ms meanwhile (< 100 ms)" below_100 "$M"
# The footers were never allocated: the daemon's peak RSS stays far
# below the 1 GiB one claimed (sanitizer builds included).
hwm=$(awk '/^VmHWM/ { print $2 }' /proc/$dpid/status)
ok "the daemon's peak RSS is ${hwm} kB (< 512 MB)" test "$hwm" -lt 524288

# --- 2: a client dies mid-batch ----------------------------------------
# 64 JPEGs of 24 megapixels, copies of one: a batch decodes for seconds
# on the one decode thread.
mkdir -p "$T/img/a"
"$TOOLS/mkjpeg" "$T/img/a/x00.jpg" 6000 4000 1
i=1
while [ $i -lt 64 ]; do
	cp "$T/img/a/x00.jpg" "$T/img/a/x$i.jpg"
	i=$((i + 1))
done
"$LOADERCTL" pack "$T/img" "$T/jds" >/dev/null
"$LDCLIENT" --pipeline 'decode | rrc 224 | f32 | nchw' --batch 64 \
	--threads 1 --slots 2 --prefetch 268435456 --epochs 0 \
	"$T/d.sock" "$T/jds" >"$T/jc" 2>&1 &
cpid=$!
wait_log 'stream open' 1
ok "the JPEG stream opens" grep -q 'stream open' "$T/d.sock.log"
ping_start 3000
# Batch 0 is being decoded now: the stream opened a moment ago.
sleep 0.2
kill -9 $cpid
wait $cpid 2>/dev/null
ping_wait
echo "# bystander while a dead client's stream is torn down: $(grep rounds "$T/ping")"
ok "a bystander's request took at most $M ms meanwhile (< 100 ms)" below_100 "$M"
wait_log 'stream freed' 1
freed=$(grep 'stream freed' "$T/d.sock.log")
like "$freed" 'stream freed after [0-9]+ ms' "the killed client's stream is freed"
echo "# ${freed#*info: }"
out=$("$TOOLS/ldping" --ms 100 "$T/d.sock")
like "$out" 'rounds [1-9]' "the daemon serves on"
