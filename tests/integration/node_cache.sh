#!/bin/sh
# The node cache (loaderd --cache-memory, pipeline/stream/nodecache.h) with real
# daemons: a second stream on the same files reads nothing from storage
# and delivers the very bytes an uncached daemon does; with room for half
# the dataset the same half is hit every epoch (no thrashing under random
# order); streams running together read the dataset about once; a damaged
# record is never served as good; a file written since is another set;
# and (as root) another user's copy of the same bytes, or files it cannot
# open, get nothing through root's cache.
. "$top_srcdir/tests/integration/tap.sh"

need_fmnist
tmpdir
plan 21
"$LOADERCTL" pack --split test --shard-size 2M "$src" "$T/fm" >/dev/null
D=$T/fm/test
N=10000
# field N of the stats line ($2 bad_samples, $4 bytes_read, $8 hits, $10 misses)
stat() { awk -v k="$2" '/^stats/ { for (i = 2; i < NF; i++) if ($i == k) print $(i + 1) }' "$1"; }
run() { # SOCK OUT ARGS...: one stream's hash and stats
	s=$1 o=$2
	shift 2
	"$LDCLIENT" --hash --stats "$@" "$s" "$D" >"$o" 2>&1
}

start_daemon "$T/plain.sock"
start_daemon "$T/big.sock" --cache-memory 16M
BIG=$DAEMON_PID
run "$T/plain.sock" "$T/ref.out" --order random --seed 3 --epochs 3
run "$T/big.sock" "$T/warm.out" --order random --seed 9 --epochs 1
is "$(stat "$T/warm.out" cache_misses)" $N "first stream: every record looked up and read"
run "$T/big.sock" "$T/hit.out" --order random --seed 3 --epochs 3
is "$(stat "$T/hit.out" cache_hits) $(stat "$T/hit.out" cache_misses)" "$((3 * N)) 0" \
	"second stream (another seed): 3 epochs, every record from the cache"
is "$(stat "$T/hit.out" bytes_read)" 0 "second stream: nothing read from storage"
is "$(grep '^epoch' "$T/hit.out")" "$(grep '^epoch' "$T/ref.out")" \
	"its batches hash as an uncached daemon's (3 epochs)"

# Room for about half the dataset (7.9 MB of records).
start_daemon "$T/half.sock" --cache-memory 4M
run "$T/half.sock" "$T/hw.out" --order random --seed 1 --epochs 1
run "$T/half.sock" "$T/hh.out" --order random --seed 2 --epochs 3
h=$(stat "$T/hh.out" cache_hits)
m=$(stat "$T/hh.out" cache_misses)
echo "# half: hits $h misses $m, hit rate $(echo "$h $m" | awk '{ printf "%.3f", $1 / ($1 + $2) }')"
ok "half the room: the hit rate is 0.40..0.56 (it is $h of $((h + m)))" \
	awk -v h="$h" -v m="$m" 'BEGIN { r = h / (h + m); exit !(r >= 0.40 && r <= 0.56) }'
ok "the same records are hit every epoch (hits a multiple of 3)" test $((h % 3)) -eq 0
run "$T/half.sock" "$T/hh2.out" --order random --seed 5 --epochs 2
is "$(stat "$T/hh2.out" cache_hits)" $((2 * h / 3)) "a third stream hits that same part"
is "$(grep '^epoch' "$T/hh.out" | head -1)" "$(
	run "$T/plain.sock" "$T/r2.out" --order random --seed 2 --epochs 1
	grep '^epoch' "$T/r2.out")" "half cached: the bytes are an uncached daemon's"

# Four hyper-parameter streams at once on a fresh daemon: read about once.
start_daemon "$T/hp.sock" --cache-memory 16M --threads 1
hp=
for k in 1 2 3 4; do
	run "$T/hp.sock" "$T/hp$k.out" --order random --seed $k --epochs 3 &
	hp="$hp $!"
done
for p in $hp; do wait "$p"; done
tot=0
for k in 1 2 3 4; do tot=$((tot + $(stat "$T/hp$k.out" bytes_read))); done
one=$(stat "$T/warm.out" bytes_read)
echo "# 4 streams read $tot bytes from storage; one stream alone $one"
ok "4 streams at once read at most 1.5x what one reads ($tot vs $one)" \
	test "$tot" -le $((one * 3 / 2))

# A damaged record is checked before it is cached: bad in every stream.
cp -r "$D" "$T/dmg"
python3 - "$T/dmg" <<'EOF'
import glob, sys
p = sorted(glob.glob(sys.argv[1] + "/shard-*.lds"))[0]
with open(p, "r+b") as f:
    f.seek(5000)
    b = f.read(1)
    f.seek(5000)
    f.write(bytes([b[0] ^ 0x40]))
EOF
for k in 1 2; do
	"$LDCLIENT" --stats --on-bad skip --epochs 1 "$T/big.sock" "$T/dmg" >"$T/dm$k.out" 2>&1
done
is "$(stat "$T/dm1.out" bad_samples) $(stat "$T/dm2.out" bad_samples)" "1 1" \
	"a damaged record is bad in the first stream and again in the second"
ok "the second stream read the damaged record again (not cached)" \
	test "$(stat "$T/dm2.out" cache_misses)" -ge 1

# A file written since is another set: nothing of the old one is served.
cp -r "$D" "$T/mut"
"$LDCLIENT" --stats --epochs 1 "$T/big.sock" "$T/mut" >"$T/mu1.out" 2>&1
touch "$T"/mut/shard-*.lds
"$LDCLIENT" --stats --epochs 1 "$T/big.sock" "$T/mut" >"$T/mu2.out" 2>&1
is "$(stat "$T/mu2.out" cache_hits)" 0 "after the shards' times change: no hit"
ok "the daemon is still up" kill -0 "$BIG"

if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null 2>&1; then
	as_nobody() { setpriv --reuid 65534 --regid 65534 --clear-groups "$@"; }
	start_daemon "$T/users.sock" --cache-memory 32M --socket-mode 0666
	chmod 700 "$T/fm"
	mkdir "$T/pub"
	cp -r "$D" "$T/pub/own"
	chown -R 65534:65534 "$T/pub"
	chmod 755 "$T"
	"$LDCLIENT" --hash --stats --epochs 1 "$T/users.sock" "$D" >"$T/root1.out" 2>&1
	is "$(stat "$T/root1.out" cache_misses)" $N "root's stream fills the cache"
	as_nobody "$LDCLIENT" --epochs 1 "$T/users.sock" "$D" >"$T/nob1.out" 2>&1
	like "$(cat "$T/nob1.out")" "Permission denied|EACCES|permission" \
		"nobody cannot open root's dataset, cached or not"
	as_nobody "$LDCLIENT" --hash --stats --epochs 1 "$T/users.sock" "$T/pub/own" >"$T/nob2.out" 2>&1
	is "$(stat "$T/nob2.out" cache_hits) $(stat "$T/nob2.out" cache_misses)" "0 $N" \
		"nobody's copy of the same bytes gets no hit from root's files"
	is "$(grep '^epoch' "$T/nob2.out")" "$(grep '^epoch' "$T/root1.out")" \
		"nobody reads its own copy, the same bytes"
	"$LDCLIENT" --stats --epochs 1 "$T/users.sock" "$D" >"$T/root2.out" 2>&1
	is "$(stat "$T/root2.out" cache_hits)" $N "root's next stream is served from the cache"
else
	for k in 1 2 3 4 5; do
		tap_n=$((tap_n + 1))
		echo "ok $tap_n # SKIP needs root and setpriv, to run a client as another user"
	done
fi
stop_daemon "$BIG" "$T/big.sock.log"
