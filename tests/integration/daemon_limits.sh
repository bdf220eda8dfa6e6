#!/bin/sh
# Hostile local users against a real loaderd: connections past the
# per-user and global limits are refused with the limit named and hold
# nothing (and their refusals do not flood the log); a session sending
# garbage in a loop is answered every time but logged a few times a
# second, with a count of the rest; the ranks of one job opening at once
# are not refused by rings they have not made yet. A stream's memory
# counts its dataset's index, so that a shard of many small records is
# refused past the user's memory, and shown in the status.
. "$top_srcdir/tests/integration/tap.sh"

need_fmnist
tmpdir
plan 25

"$LOADERCTL" pack --split test --shard-size 1M "$src" "$T/ds" >/dev/null
D=$T/ds/test

# hold N SOCK: N clients that each take a batch and keep their connection.
holders=
hold() {
	i=0
	while [ $i -lt "$1" ]; do
		"$LDCLIENT" --batch 100 --hold-after 1 "$2" "$D" >"$T/hold.$i" 2>&1 &
		holders="$holders $!"
		wait_for 'holding after' "$T/hold.$i"
		i=$((i + 1))
	done
}
unhold() {
	for p in $holders; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	holders=
}

# --- 1. per-user connections ---------------------------------------------
start_daemon "$T/u.sock" --max-uid-sessions 3
hold 3 "$T/u.sock"
out=$("$LOADERCTL" status --socket "$T/u.sock" 2>&1)
like "$out" "uid $(id -u) has 3 connections to loaderd, the limit \\(max-uid-sessions\\)" \
	"a user's 4th connection is refused, naming the limit"
out=$("$LDCLIENT" --batch 100 "$T/u.sock" "$D" 2>&1)
like "$out" 'has 3 connections to loaderd, the limit' "and libloader says so too"
# Once a second at most, over however long the 200 take: under a loaded
# machine (make -j2 check) they have taken more than 20 s.
t0=$(date +%s)
i=0
while [ $i -lt 200 ]; do
	"$LOADERCTL" status --socket "$T/u.sock" >/dev/null 2>&1
	i=$((i + 1))
done
# One more a second later: the refusals not logged meanwhile are then
# counted in its line, however fast the 200 went.
sleep 1.1
"$LOADERCTL" status --socket "$T/u.sock" >/dev/null 2>&1
secs=$(($(date +%s) - t0))
n=$(grep -c 'connection of pid .* refused' "$T/u.sock.log")
ok "203 refusals, logged $n times (once a second at most, over $secs s)" \
	test "$n" -ge 1 -a "$n" -le $((secs + 2))
kill "${holders##* }" 2>/dev/null
wait "${holders##* }" 2>/dev/null
holders=${holders% *}
sleep 0.3
ok "a connection given back lets the next one in" \
	"$LOADERCTL" status --socket "$T/u.sock"
unhold
like "$(grep 'more connections refused, not logged' "$T/u.sock.log" | head -1)" \
	'[0-9]+ more connections refused' "the refusals not logged are counted"
kill "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null

# --- 2. all users' connections -------------------------------------------
start_daemon "$T/g.sock" --max-sessions 2
hold 2 "$T/g.sock"
out=$("$LOADERCTL" status --socket "$T/g.sock" 2>&1)
like "$out" 'loaderd has 2 connections, its limit \(max-sessions\)' \
	"past the global limit a connection is refused, naming it"
unhold
sleep 0.3
ok "and served again once they are gone" "$LOADERCTL" status --socket "$T/g.sock"

# --- 3. a session that sends garbage in a loop ------------------------------
/usr/bin/python3 - "$T/g.sock" >"$T/flood.out" 2>&1 <<'EOF'
import socket, struct, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
answered = 0
t0 = time.time()
for i in range(3000):
    s.send(b"not a loaderd message at all %d" % i)
    if s.recv(4096):
        answered += 1
print("answered", answered, "seconds %.2f" % (time.time() - t0))
EOF
like "$(cat "$T/flood.out")" '^answered 3000 ' "3000 malformed messages: each answered with an error"
lines=$(grep -c 'refused: ' "$T/g.sock.log")
secs=$(sed -n 's/.*seconds \([0-9]*\).*/\1/p' "$T/flood.out")
ok "but logged $lines times (10 a second at most, over ${secs:-?} s)" \
	test "$lines" -le $(( (${secs:-0} + 2) * 10 ))
like "$(cat "$T/g.sock.log")" '[0-9]+ more refusals not logged' \
	"the rest are counted in the log"
ok "the daemon serves on" "$LOADERCTL" status --socket "$T/g.sock"
kill "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null

# --- 4. the ranks of one job opening at once --------------------------------
# Rings are charged as they are made: 8 opening together, each may get a
# ring of up to 64 MiB, fit in 256 MiB a user (a small ring each).
start_daemon "$T/r.sock" --max-ring 64M --max-uid-ring 256M
pids=
r=0
while [ $r -lt 8 ]; do
	"$LDCLIENT" --batch 100 --rank $r --world 8 "$T/r.sock" "$D" >"$T/rank.$r" 2>&1 &
	pids="$pids $!"
	r=$((r + 1))
done
bad=0
for p in $pids; do wait "$p" || bad=$((bad + 1)); done
is "$bad" 0 "8 ranks opening at once are all served"
grep -h '^error' "$T"/rank.* | head -3 | sed 's/^/# /'

# --- 5. memory a stream holds beside its ring ---------------------------------
# A 1.5 GiB prefetch budget on a 8 MB dataset: the arena is no larger
# than the dataset, so the daemon's peak stays small over two epochs.
start_daemon "$T/m.sock"
"$LDCLIENT" --batch 100 --epochs 2 --prefetch 1610612736 "$T/m.sock" "$D" >"$T/m.out" 2>&1
is "$?" 0 "a stream with a 1.5 GiB prefetch budget on 8 MB runs"
hwm=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$DAEMON_PID/status")
ok "the daemon's peak memory stays small (${hwm} kB < 200 MB)" test "${hwm:-999999}" -lt 204800
kill "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
# Decode scratch is sized by the pipeline: a crop of 8192 takes ~1.9 GB
# a thread. Over the user's memory limit it is refused before it is
# allocated, with the parts named.
mkdir -p "$T/img/c"
for i in 1 2 3; do "$TOOLS/mkjpeg" "$T/img/c/$i.jpg" 320 240 $i; done
"$LOADERCTL" pack "$T/img" "$T/jp" >/dev/null
start_daemon "$T/s.sock" --max-uid-memory 1G
out=$("$LDCLIENT" --batch 2 --pipeline 'decode | rrc 8192 | u8' "$T/s.sock" "$T/jp" 2>&1)
like "$out" 'the stream would hold [0-9]+ bytes beside its ring \(prefetch [0-9]+, decode scratch [0-9]+ x [0-9]+ workers, shard indexes [0-9]+\), more than the 1073741824 bytes uid [0-9]+ may still hold' \
	"a pipeline whose scratch passes max-uid-memory is refused, with the numbers"
hwm=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$DAEMON_PID/status")
ok "and nothing of it was allocated (peak ${hwm} kB)" test "${hwm:-999999}" -lt 204800
out=$("$LDCLIENT" --batch 2 --pipeline 'decode | rrc 64 | u8' "$T/s.sock" "$T/jp" 2>&1)
like "$out" '^total batches 2 ' "a small crop under the same limit runs"

# --- 6. descriptors charged by failed OPENs are given back ------------------
# 10 files an OPEN (a manifest and 9 shards) against a quota of 40: six
# OPENs refused after their files came, then one that must still fit.
start_daemon "$T/f.sock" --max-uid-files 40
ls "$D" | grep -c '^shard-' >"$T/nshards"
refused=0
for i in 1 2 3 4 5 6; do
	"$LDCLIENT" --batch 100 --outputs nosuch "$T/f.sock" "$D" 2>&1 |
		grep -q 'no such field' && refused=$((refused + 1))
done
is "$refused" 6 "six OPENs refused after their $(($(cat "$T/nshards") + 1)) files each came"
out=$("$LDCLIENT" --batch 100 "$T/f.sock" "$D" 2>&1)
like "$out" '^total batches 100 ' "the user's descriptor quota is whole again: the next OPEN is served"
# Four streams held take the 40; a fifth's files are refused by name.
fh=
for i in 1 2 3 4; do
	"$LDCLIENT" --batch 100 --hold-after 1 "$T/f.sock" "$D" >"$T/fh.$i" 2>&1 &
	fh="$fh $!"
	wait_for 'holding after' "$T/fh.$i"
done
out=$("$LDCLIENT" --batch 100 "$T/f.sock" "$D" 2>&1)
like "$out" "uid [0-9]+ holds [0-9]+ dataset descriptors in this daemon; [0-9]+ more would pass max-uid-files 40" \
	"past max-uid-files the client is told the limit by name, not of a malformed message"
kill $fh 2>/dev/null
wait $fh 2>/dev/null
start_daemon "$T/g2.sock" --max-uid-ring 1M
out=$("$LDCLIENT" --batch 1000 "$T/g2.sock" "$D" 2>&1)
like "$out" 'exceeds the 1048576 ring bytes uid [0-9]+ may still take \(its streams. rings hold 0 of max-uid-ring 1048576\)' \
	"a ring past max-uid-ring is refused naming the option and what is held"

# --- 7. shard indexes are memory the stream holds ------------------------------
# 700,000 one-pixel samples in one shard: 1.4 MB of data, a 16.8 MB footer
# (24 bytes a record), which every stream of it holds on the heap.
PY=/usr/bin/python3
mkdir "$T/tiny"
"$PY" - "$T/tiny" <<'PYEOF'
import struct, sys
n = 700000
with open(sys.argv[1] + "/train-images-idx3-ubyte", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, n, 1, 1) + bytes(i % 251 for i in range(n)))
with open(sys.argv[1] + "/train-labels-idx1-ubyte", "wb") as f:
    f.write(struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n)))
PYEOF
"$LOADERCTL" pack --split train "$T/tiny" "$T/tinyds" >/dev/null
start_daemon "$T/x.sock" --max-uid-memory 12M
out=$("$LDCLIENT" --batch 1000 --prefetch 1048576 "$T/x.sock" "$T/tinyds/train" 2>&1)
like "$out" 'the indexes of the dataset.s shards take 168[0-9]{5} bytes of memory by shard 0 \(shard-00000.lds: 168[0-9]{5}\), more than the 12582912 bytes uid [0-9]+ may still hold' \
	"a 16.8 MB index past max-uid-memory 12M is refused, naming it"
kill "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
start_daemon "$T/x.sock" --memory-budget 32M
"$LDCLIENT" --batch 1000 --prefetch 1048576 --hold-after 1 "$T/x.sock" \
	"$T/tinyds/train" >"$T/x.out" 2>&1 &
xc=$!
wait_for 'holding after' "$T/x.out"
used=$("$LOADERCTL" status --json --socket "$T/x.sock" |
	sed -n 's/.*"memory_used": *\([0-9]*\).*/\1/p')
ok "the status counts the index in the stream's memory (${used:-?} bytes > 16.8 MB)" \
	test "${used:-0}" -gt 16800000
out=$("$LDCLIENT" --batch 1000 --prefetch 1048576 --slots 2 "$T/x.sock" \
	"$T/tinyds/train" 2>&1)
like "$out" 'the indexes of the dataset.s shards take 168[0-9]{5} bytes of memory by shard 0 \(shard-00000.lds: 168[0-9]{5}\), more than the [0-9]+ bytes left of loaderd.s memory budget \(the streams hold 180[0-9]{5} of 33554432\)' \
	"... and in the budget: a second stream's index does not fit beside the first's"
kill "$xc" 2>/dev/null
wait "$xc" 2>/dev/null

# --- 8. 0 is the daemon's choice, never "refuse everything" ------------------
start_daemon "$T/z.sock" --max-uid-streams 0 --max-uid-sessions 0
like "$("$LDCLIENT" --batch 100 "$T/z.sock" "$D" 2>&1)" '^total batches 100 ' \
	"max-uid-streams 0 and max-uid-sessions 0 serve a stream (bounded by the next limit up)"
