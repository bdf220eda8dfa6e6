#!/bin/sh
# Lifetimes: a client killed mid-epoch frees its stream in the daemon; a
# daemon killed under a client gives the client an error, not a hang; a
# corrupt record fails that stream with a reason, and the daemon serves on.
. "$top_srcdir/tests/integration/tap.sh"

need_fmnist
tmpdir
plan 12

"$LOADERCTL" pack --split test "$src" "$T/fm" >/dev/null
D=$T/fm/test
# Under ASan, freed memory waits in a quarantine and would read as growth.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0"
export ASAN_OPTIONS
ok "daemon starts" start_daemon "$T/d.sock" --threads 2
dpid=$DAEMON_PID
fds() { ls /proc/$dpid/fd | wc -l; }
rss() { awk '/^VmRSS/ { print $2 }' /proc/$dpid/status; }
base=$(fds)

# A client that stops consuming, then dies.
"$LDCLIENT" --hold-after 3 --epochs 0 --order random "$T/d.sock" "$D" >"$T/hold" &
cpid=$!
i=0
while ! grep -q holding "$T/hold" && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
ok "the client holds its stream" grep -q holding "$T/hold"
busy=$(fds)
ok "the daemon holds the stream's descriptors ($busy > $base)" test "$busy" -gt "$base"
kill -9 $cpid
wait $cpid 2>/dev/null
i=0
while [ "$(fds)" -gt "$base" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
is "$(fds)" "$base" "the killed client's stream is freed: descriptors back to $base"
like "$(cat "$T/d.sock.log")" 'session ends: client disconnected' "the daemon logs the end of the session"

# Many short-lived streams do not grow the daemon: after 20 to warm up
# (allocators, and ASan's quarantine, settle), 20 more add nothing.
streams() {
	n=0
	while [ $n -lt $1 ]; do
		"$LDCLIENT" --epochs 1 --batch 500 "$T/d.sock" "$D" >/dev/null
		n=$((n + 1))
	done
	# The daemon frees a stream when it sees the client go: wait for it.
	i=0
	while [ "$(fds)" -gt "$base" ] && [ $i -lt 100 ]; do
		sleep 0.05
		i=$((i + 1))
	done
}
streams 20
r0=$(rss)
streams 20
r1=$(rss)
ok "20 more streams leave the daemon's RSS within 8 MB (${r0} kB -> ${r1} kB)" \
	test $((r1 - r0)) -lt 8192

# A corrupt record fails its stream with a reason naming shard and record.
cp -r "$T/fm" "$T/bad"
printf '\377' | dd of="$T/bad/test/shard-00000.lds" bs=1 seek=500000 conv=notrunc 2>/dev/null
out=$("$LDCLIENT" --epochs 1 --order sequential "$T/d.sock" "$T/bad/test")
like "$out" 'error: .*shard-00000.lds.*record [0-9]+' "a corrupt record fails the stream, naming shard and record"
like "$out" 'checksum' "and the reason says what is wrong"
out=$("$LDCLIENT" --epochs 1 "$T/d.sock" "$D")
like "$out" 'total batches 40 samples 10000' "the daemon still serves other streams"

# The daemon dies under a waiting client: the client gets an error, fast.
"$LDCLIENT" --epochs 0 --sleep-ms 20 --timeout-ms 30000 "$T/d.sock" "$D" >"$T/orphan" &
cpid=$!
# Its stream open first (a loaded machine may take more than 0.5 s).
i=0
while [ $i -lt 200 ] && ! "$LOADERCTL" streams --socket "$T/d.sock" 2>/dev/null |
	grep -q " $cpid "; do
	sleep 0.05
	i=$((i + 1))
done
sleep 0.2
kill -9 $dpid
t0=$(date +%s%N)
wait $cpid
rc=$?
t1=$(date +%s%N)
ms=$(((t1 - t0) / 1000000))
is "$rc" 3 "the client of a killed daemon exits with an error"
like "$(cat "$T/orphan")" 'error: .*(daemon|pipe|Broken|closed)' "and says the daemon went away"
ok "within 2 s, well before its 30 s timeout (${ms} ms)" test "$ms" -lt 2000
