#!/bin/sh
# A hostile unprivileged user against a loaderd run by root: as uid
# 65534 (nobody), with every message protoabuse can craft, odd
# descriptors among them (directories, FIFOs, sockets, devices,
# write-only files, O_PATH, eventfds, memfds), it gets no reply that
# breaks the rules, and the daemon stays up. The daemon opens nothing by
# path: a manifest naming root's shards gets nobody nothing; the
# daemon's own descriptors and memory are closed to it (/proc); it sees
# none of root's streams, and root's stream runs on unharmed. Nor can it
# fill the state that named streams are kept in: past its own quota of
# names, or of bytes, its new names are refused naming the limit, while
# root's are not. The index kept for root's stream of a tar is root's
# alone: nobody's stream of the same file makes its own.
. "$top_srcdir/tests/integration/tap.sh"

[ "$(id -u)" -eq 0 ] || skip_all "needs root, to run a client as another user"
command -v setpriv >/dev/null 2>&1 || skip_all "setpriv not installed (util-linux)"
need_fmnist
tmpdir
plan 35
as_nobody() { setpriv --reuid 65534 --regid 65534 --clear-groups "$@"; }

# root's dataset, closed to others; nobody's own copy, open to it.
"$LOADERCTL" pack --split test --shard-size 2M "$src" "$T/root" >/dev/null
chmod 700 "$T/root"
mkdir "$T/pub"
cp -r "$T/root/test" "$T/pub/own"
chown -R 65534:65534 "$T/pub"
chmod 755 "$T"
# nobody's manifest, its shards symbolic links to root's.
mkdir "$T/pub/trick"
cp "$T/pub/own/manifest.json" "$T/pub/trick/"
for f in "$T"/root/test/shard-*; do ln -s "$f" "$T/pub/trick/"; done
chown -hR 65534:65534 "$T/pub/trick"

start_daemon "$T/d.sock" --socket-mode 0666 --threads 1 --max-ring 64M --max-uid-files 1000
P=$DAEMON_PID
# root's stream, running while nobody tries its worst.
"$LDCLIENT" --batch 100 --epochs 0 --name rootjob --hold-after 5 "$T/d.sock" "$T/root/test" >"$T/root.out" 2>&1 &
rootc=$!
wait_for 'holding after' "$T/root.out"

out=$(TMPDIR=$T/pub timeout 120 setpriv --reuid 65534 --regid 65534 --clear-groups \
	"$TOOLS/protoabuse" "$T/d.sock" "$T/pub/own" 2>&1)
rc=$?
printf '%s\n' "$out" | sed 's/^/# /'
total=$(printf '%s\n' "$out" | sed -n 's/^1\.\.\([0-9]*\)$/\1/p')
failed=$(printf '%s\n' "$out" | grep -c '^not ok ')
is "$rc:$failed" "0:0" "as nobody: all ${total:-?} abuse cases answered as they must be"
like "$out" 'FILES with a shard opened write-only' "odd descriptors among them"

out=$(as_nobody cat "$T/root/test/manifest.json" 2>&1)
ok "nobody cannot read root's dataset itself" test $? -ne 0
opens=$(grep -c 'stream open' "$T/d.sock.log")
out=$(as_nobody "$LDCLIENT" --batch 100 "$T/d.sock" "$T/pub/trick" 2>&1)
rc=$?
ok "shards that link to root's: the client cannot open them" test $rc -ne 0
like "$out" 'Permission denied' "... for want of permission"
ok "and the daemon was never asked: it opens nothing by path" \
	test "$(grep -c 'stream open' "$T/d.sock.log")" -eq "$opens"
for f in environ mem maps; do
	as_nobody cat "/proc/$P/$f" >/dev/null 2>&1
	ok "nobody cannot read the daemon's /proc/PID/$f" test $? -ne 0
done
as_nobody ls "/proc/$P/fd" >/dev/null 2>&1
ok "nor list its descriptors (root's shards among them)" test $? -ne 0
n=$(ls "/proc/$P/fd" | wc -l)
shard=$(ls -l "/proc/$P/fd" | awk '/root\/test\/shard-/ { print $9; exit }')
as_nobody cat "/proc/$P/fd/$shard" >/dev/null 2>&1
ok "nor open root's shard through /proc/PID/fd/$shard" test $? -ne 0

out=$(as_nobody "$LOADERCTL" streams --socket "$T/d.sock" 2>&1)
ok "nobody's streams listing shows none of root's" \
	sh -c "! printf '%s' \"\$1\" | grep -q rootjob" _ "$out"
out=$(as_nobody "$LDCLIENT" --batch 100 --hash "$T/d.sock" "$T/pub/own" 2>&1)
like "$out" '^total batches 100 ' "nobody streams its own copy"
kill -0 "$rootc" 2>/dev/null
ok "root's stream is still held open, unharmed" test $? -eq 0
kill "$rootc" 2>/dev/null
wait "$rootc" 2>/dev/null
stop_daemon "$P" "$T/d.sock.log"

# The state's quotas, per uid: nobody fills its own, root is unaffected.
# Each stream: 2 batches of 5000, released, its position saved.
named() {
	"$LDCLIENT" --batch 5000 --epochs 1 --name "$2" "$1" "$3" 2>&1
}
start_daemon "$T/q.sock" --socket-mode 0666 --threads 1 --max-uid-names 3
P=$DAEMON_PID
refused=
for i in 1 2 3 4; do
	out=$(as_nobody "$LDCLIENT" --batch 5000 --epochs 1 --name "n$i" \
		"$T/q.sock" "$T/pub/own" 2>&1) || { refused=$i; break; }
done
is "$refused" 4 "nobody's fourth name is refused (max-uid-names 3)"
like "$out" 'uid 65534 holds 3 named streams, as many as max-uid-names \(3\)' \
	"... naming the limit and what it holds"
out=$(named "$T/q.sock" r1 "$T/root/test")
like "$out" '^total batches 2 ' "root's new name is not refused"
as_nobody "$LOADERCTL" forget --socket "$T/q.sock" n1 >/dev/null 2>&1
out=$(as_nobody "$LDCLIENT" --batch 5000 --epochs 1 --name n4 \
	"$T/q.sock" "$T/pub/own" 2>&1)
like "$out" '^total batches 2 ' "forgetting one makes room for another"
stop_daemon "$P" "$T/q.sock.log"

# The same state, now with room for names but 4 KiB of records each.
start_daemon "$T/q.sock" --socket-mode 0666 --threads 1 \
	--state-dir "$T/q.sock.state" --max-uid-names 1000 --max-uid-state 4K
P=$DAEMON_PID
refused=
for i in $(seq 5 60); do
	out=$(as_nobody "$LDCLIENT" --batch 5000 --epochs 1 --name "n$i" \
		"$T/q.sock" "$T/pub/own" 2>&1) || { refused=$i; break; }
done
ok "nobody's names are refused once its records pass 4 KiB (name n${refused:-none})" \
	test -n "$refused"
like "$out" 'needs [0-9]+ bytes of state, and uid 65534 holds [0-9]+ of the 4096 max-uid-state allows' \
	"... naming the limit, what it holds and what the record needs"
out=$(named "$T/q.sock" r2 "$T/root/test")
like "$out" '^total batches 2 ' "root's new name is still not refused"
stop_daemon "$P" "$T/q.sock.log"

# Tar indexes are kept per user: a tar both may read, root's index kept
# for root, never given to nobody.
mkdir "$T/tsrc"
for i in 0 1 2 3; do echo "$i" >"$T/tsrc/s$i.cls"; done
(cd "$T/tsrc" && tar -cf "$T/pub/shared.tar" s0.cls s1.cls s2.cls s3.cls)
chmod 644 "$T/pub/shared.tar"
start_daemon "$T/t.sock" --socket-mode 0666 --threads 1
P=$DAEMON_PID
for who in root root nobody; do
	if [ $who = root ]; then
		"$LDCLIENT" --outputs cls --epochs 1 "$T/t.sock" "$T/pub/shared.tar"
	else
		as_nobody "$LDCLIENT" --outputs cls --epochs 1 "$T/t.sock" "$T/pub/shared.tar"
	fi >"$T/t.$who" 2>&1
done
like "$(cat "$T/t.nobody")" '^total batches [0-9]+ samples 4 ' "nobody streams the tar root streamed"
is "$(grep -c 'shared.tar: scanned' "$T/t.sock.log")" 2 \
	"root's second stream used root's kept index; nobody's scanned the tar itself"
stop_daemon "$P" "$T/t.sock.log"
