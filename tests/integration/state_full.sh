#!/bin/sh
# A full filesystem under the state directory: loaderd starts, serves
# streams, and refuses named ones with the reason (the disk is full),
# instead of dying of SIGBUS in LMDB's lock file; it does so again with
# the lock file a crashed start left; and once room is made, SIGHUP opens
# the state and named streams are served. Needs root, to mount a 1 MiB
# tmpfs.
. "$top_srcdir/tests/integration/tap.sh"

[ "$(id -u)" -eq 0 ] || skip_all "needs root, to mount a tmpfs"
need_fmnist
tmpdir
mkdir "$T/full"
mount -t tmpfs -o size=1M tmpfs "$T/full" 2>/dev/null ||
	skip_all "cannot mount a tmpfs here"
trap 'umount "$T/full" 2>/dev/null; rm -rf "$T"' EXIT
plan 15
"$LOADERCTL" pack --split test --shard-size 4M "$src" "$T/ds" >/dev/null
D=$T/ds/test
mkdir "$T/full/st" "$T/full/st2"
# A lock file as a start that faulted leaves LMDB's: its size, no
# blocks. (The directory's own lock, loaderd.lock, as an earlier daemon
# left it: a pid written, its block allocated.)
truncate -s 8192 "$T/full/st2/loaderd.mdb-lock"
for st in st st2; do printf '%-20s\n' 1 >"$T/full/$st/loaderd.lock"; done
dd if=/dev/zero of="$T/full/fill" bs=4k 2>/dev/null
is "$(df --output=avail "$T/full" | tail -1 | tr -d ' ')" 0 "the tmpfs is full"

start_daemon "$T/st.sock" --state-dir "$T/full/st"
P1=$DAEMON_PID
start_daemon "$T/st2.sock" --state-dir "$T/full/st2"
P2=$DAEMON_PID
sleep 0.3
kill -0 "$P1" 2>/dev/null
ok "loaderd runs on a full state directory" test $? -eq 0
kill -0 "$P2" 2>/dev/null
ok "... and with the lock file a faulted start left" test $? -eq 0
like "$(grep 'state:' "$T/st.sock.log")" \
	'loaderd.mdb-lock: cannot allocate its 65536 bytes: No space left on device; named streams are refused until a reload' \
	"the log says why, naming the file"
like "$("$LDCLIENT" --batch 5000 "$T/st.sock" "$D" 2>&1)" '^total batches 2 ' \
	"a stream without a name is served"
out=$("$LDCLIENT" --batch 5000 --name job "$T/st.sock" "$D" 2>&1)
like "$out" 'named streams are refused: loaderd could not open its state \(.*No space left on device\); it tries again on SIGHUP' \
	"a named stream is refused with the reason"
like "$("$LOADERCTL" streams --saved --socket "$T/st.sock" 2>&1)" 'No space left on device' \
	"and so is the listing of saved streams"
rm "$T/full/fill"
kill -HUP "$P1"
ok "after room is made, SIGHUP opens the state" \
	wait_for 'state: .*st/loaderd.mdb opened; named streams served' "$T/st.sock.log"
like "$("$LDCLIENT" --batch 5000 --name job "$T/st.sock" "$D" 2>&1)" '^total batches 2 ' \
	"and named streams are served"
stop_daemon "$P1" "$T/st.sock.log"
stop_daemon "$P2" "$T/st2.sock.log"
