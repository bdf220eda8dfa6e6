#!/bin/sh
# A hostile unprivileged user against a loaderd run by root: as uid
# 65534 (nobody), with every message protoabuse can craft, odd
# descriptors among them (directories, FIFOs, sockets, devices,
# write-only files, O_PATH, eventfds, memfds), it gets no reply that
# breaks the rules, and the daemon stays up. The daemon opens nothing by
# path: a manifest naming root's shards gets nobody nothing; the
# daemon's own descriptors and memory are closed to it (/proc); it sees
# none of root's streams, and root's stream runs on unharmed.
. "$top_srcdir/tests/integration/tap.sh"

[ "$(id -u)" -eq 0 ] || skip_all "needs root, to run a client as another user"
command -v setpriv >/dev/null 2>&1 || skip_all "setpriv not installed (util-linux)"
src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
[ -r "$src/t10k-labels-idx1-ubyte.gz" ] ||
	skip_all "Fashion-MNIST not installed (Debian package dataset-fashion-mnist)"
tmpdir
plan 17
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
