#!/bin/sh
# loaderctl status, streams and stats against a real loaderd: the daemon's
# summary; each stream's rates and where its time goes; the bottleneck
# named right on a live JPEG stream (decode when the trainer only
# releases, the trainer when it sleeps between batches); JSON and
# Prometheus's text format; --watch; another user seeing only its own.
. "$top_srcdir/tests/integration/tap.sh"

MKJPEG=$TOOLS/mkjpeg
tmpdir
plan 24

# A JPEG dataset whose decoding dominates: 48 photos-sized images.
mkdir -p "$T/img/a" "$T/img/b"
i=0
while [ $i -lt 48 ]; do
	"$MKJPEG" "$T/img/$( [ $((i % 2)) -eq 0 ] && echo a || echo b)/$i.jpg" 800 600 $i
	i=$((i + 1))
done
"$LOADERCTL" pack "$T/img" "$T/jpg" >/dev/null
ok "daemon starts (1 decode thread, socket 0666)" start_daemon "$T/d.sock" --threads 1 --socket-mode 0666
S=$T/d.sock
CTL="$LOADERCTL"

out=$("$CTL" status --socket "$S")
like "$out" "^loaderd pid $DAEMON_PID, up " "status: the daemon's pid and uptime"
like "$out" '^sessions 1, streams 0' "status: no streams yet (its own session only)"
like "$out" '^\(no streams\)' "status: says there are none"

P='decode | rrc 224 | flip 0.5 | normalize imagenet | f16 | nchw'
"$LDCLIENT" --epochs 0 --batch 16 --outputs image,label --pipeline "$P" \
	"$S" "$T/jpg" >/dev/null 2>&1 &
fast=$!
# The slow trainer: 2 slots fill at once, then each batch waits 1 s for
# a release, however slowly a loaded machine decodes.
"$LDCLIENT" --epochs 0 --batch 16 --outputs image,label --pipeline "$P" \
	--slots 2 --sleep-ms 1000 "$S" "$T/jpg" >/dev/null 2>&1 &
slow=$!
DAEMONS="$DAEMONS $fast $slow"
sleep 2

"$CTL" stats --socket "$S" --interval 3 --json >"$T/stats.json"
# field PID KEY: the value of KEY for the stream of client PID.
field() {
	/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
s = [x for x in d["streams"] if x["pid"] == int(sys.argv[2])]
print(s[0][sys.argv[3]] if s else "none")' "$T/stats.json" "$1" "$2" 2>/dev/null ||
		sed -n "s/.*\"pid\":$1,[^}]*\"$2\":\"\{0,1\}\([^,\"}]*\).*/\1/p" "$T/stats.json"
}
is "$(field $fast bottleneck)" decode \
	"a trainer that only releases: the bottleneck is decode"
is "$(field $slow bottleneck)" trainer \
	"a trainer that sleeps 1 s a batch: the bottleneck is the trainer"
ok "the fast trainer waited for its batches (trainer_waited_pct > 50)" \
	awk -v v="$(field $fast trainer_waited_pct)" 'BEGIN { exit !(v > 50) }'
ok "the slow one's stream waited for free slots (slot_wait_pct > 50)" \
	awk -v v="$(field $slow slot_wait_pct)" 'BEGIN { exit !(v > 50) }'
ok "samples/s measured for the fast one" \
	awk -v v="$(field $fast samples_per_s)" 'BEGIN { exit !(v > 0) }'
top() { # KEY: a top-level number of the stats reading
	sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" "$T/stats.json"
}
ok "decode pool use measured: the pool's one thread busy (decode_pool_use_pct > 20)" \
	awk -v v="$(top decode_pool_use_pct)" 'BEGIN { exit !(v > 20 && v <= 101) }'
ok "cores decoding, the streams' own threads with the pool's (0.2 < decode_cores <= 2.1)" \
	awk -v v="$(top decode_cores)" 'BEGIN { exit !(v > 0.2 && v <= 2.1) }'
is "$(field $fast dataset)" "$T/jpg" "the stream's dataset is named"
is "$(field $fast pipeline)" "$P" "... and its pipeline"

out=$("$CTL" status --socket "$S")
like "$out" '^decode: pool of 1 threads [0-9]+% busy, [0-9.]+ cores decoding' \
	"status: the decode pool's use"
out=$("$CTL" streams --socket "$S")
like "$out" "^[0-9]+ +$fast +" "streams: a line for each stream"
like "$out" "^ID +PID +UID +BATCH" "streams: with a header"

"$CTL" stats --socket "$S" --prometheus --interval 0.1 >"$T/prom"
bad=$(grep -v -E '^(# (HELP|TYPE) [a-z_]+ .+|[a-z_]+(\{[a-z]+="[^"]*"(,[a-z]+="[^"]*")*\})? [0-9.e+-]+)$' "$T/prom" | head -3)
is "$bad" "" "--prometheus: every line is a comment or a sample of the text format"
like "$(cat "$T/prom")" "^loaderd_stream_batches_total\\{session=\"[0-9]+\",pid=\"$fast\",uid=\"[0-9]+\"\\} [0-9]+" \
	"--prometheus: a batches counter per stream"

n=$("$CTL" stats --socket "$S" --watch --count 3 --interval 0.2 | grep -c '^ID ')
is "$n" 3 "--watch --count 3: three readings"

if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null 2>&1; then
	chmod 755 "$T" # the socket is 0666; let the other user reach it
	out=$(setpriv --reuid 65534 --regid 65534 --clear-groups \
		"$CTL" status --socket "$S" 2>&1)
	like "$out" 'uid 65534 sees its own 0 streams; root sees all' \
		"another user sees none of root's streams"
else
	echo "ok $((tap_n = tap_n + 1)) # SKIP not root, or no setpriv"
fi
kill $fast $slow 2>/dev/null

out=$("$CTL" status --socket "$T/none.sock" 2>&1)
like "$out" "connect $T/none.sock: .*is loaderd running" \
	"no daemon: the socket and the likely cause are named"
"$CTL" stats --socket "$T/none.sock" --prometheus >"$T/prom.down" 2>"$T/prom.err"
is "$?:$(grep -v '^#' "$T/prom.down")" "2:loaderd_up 0" \
	"--prometheus with no daemon: loaderd_up 0 (and exit 2), the reason on stderr"
start_daemon "$T/j.sock" --max-uid-streams 7
out=$("$CTL" status --json --socket "$T/j.sock")
like "$(printf '%s' "$out" | tr -d ' \n')" '"limits":\{"max_ring_bytes":1073741824,"max_uid_ring_bytes":4294967296,"max_uid_streams":7\}' \
	"status --json carries the limits"
out=$("$CTL" stats --prometheus --watch --socket "$T/j.sock" 2>&1)
like "$?: $out" '^2: .*--prometheus prints one reading, as a scrape takes it: not with --watch' \
	"--prometheus --watch is refused: one exposition a scrape"
