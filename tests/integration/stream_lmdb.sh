#!/bin/sh
# LMDB databases read in place by a real daemon (pipeline/format/lmdbds.c): made
# by mdb_load, they give the very batches a stream of the same database
# packed by loaderctl gives (JPEG values under CLASS/NAME keys, Caffe
# Datums encoded and of pixels, bytes values); every sample once per
# epoch across ranks; the index is made once (in a child process) and
# kept; a damaged database is refused with a reason while the daemon
# serves on; loaderctl inspect and verify take them.
. "$top_srcdir/tests/integration/tap.sh"

TOOLS=$top_builddir/tests/tools
command -v mdb_load >/dev/null 2>&1 || skip_all "mdb_load not installed (lmdb-utils; scripts/deps.sh --test)"
[ -x /usr/bin/python3 ] || skip_all "no /usr/bin/python3"
tmpdir
plan 23

for i in $(seq 1 24); do "$TOOLS/mkjpeg" "$T/$i.jpg" $((40 + i)) $((30 + i % 7)) $i >/dev/null; done
/usr/bin/python3 - "$T" "$top_srcdir/tests/integration" <<'PY'
import os, sys
T = sys.argv[1]
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[2])
from mklmdb import datum, dump_in
def dump(name, pairs): dump_in(T, name, pairs)
jp = [open(os.path.join(T, "%d.jpg" % i), "rb").read() for i in range(1, 25)]
dump("plain", [(("%s/%02d" % (("cat", "dog", "emu")[i % 3], i)).encode(), jp[i]) for i in range(24)])
dump("caffe", [(b"%08d_n%d.JPEG" % (i, i), datum(3, 30, 40, jp[i], 10 + i % 3, True)) for i in range(24)])
dump("pixels", [(b"%08d" % i, datum(3, 4, 5, bytes((i + k) % 256 for k in range(60)), i % 4, False)) for i in range(50)])
dump("bytes", [(b"k%04d" % i, b"value %d " % i * (1 + i % 50)) for i in range(200)])
PY
for n in plain caffe pixels bytes; do
	mkdir "$T/$n"
	mdb_load -f "$T/$n.txt" "$T/$n" 2>/dev/null
	"$LOADERCTL" pack --jpeg-restart off "$T/$n" "$T/packed-$n" >/dev/null
done

start_daemon "$T/d.sock" --threads 2
P=$DAEMON_PID
PIPE='decode | resize 24 | center 24 | u8 | nhwc'
same_batches "$T/d.sock" "JPEG values under CLASS/NAME keys" "$T/plain" "$T/packed-plain" \
	--pipeline "$PIPE" --order random --seed 3 --batch 5 --epochs 2
same_batches "$T/d.sock" "Caffe Datums, encoded" "$T/caffe" "$T/packed-caffe" \
	--pipeline "$PIPE" --order random --seed 2 --batch 6 --epochs 1
same_batches "$T/d.sock" "Caffe Datums of pixels" "$T/pixels" "$T/packed-pixels" \
	--order random --seed 1 --batch 7 --epochs 2
same_batches "$T/d.sock" "bytes values (ragged), the data file named" "$T/bytes/data.mdb" \
	"$T/packed-bytes" --order random --seed 4 --batch 16 --epochs 2

once_per_epoch "$T/d.sock" "$T/bytes" 3 2 200 "world 3: each (epoch, sample) once" \
	--order random --seed 3 --batch 7 --outputs value
# A mixture of an LMDB database read in place and the shards packed
# from another: 24 + 10 samples an epoch, each member's as planned.
out=$("$LDCLIENT" --pipeline "$PIPE" --batch 5 --epochs 2 --ids --hash \
	--member repeat:1:"$T/plain" --member choose:10:"$T/packed-caffe" \
	"$T/d.sock" mix 2>&1)
like "$out" '^epoch 1 batches 7 samples 34 ' \
	"an LMDB database read in place mixes with packed shards: 24 + 10 samples an epoch"
is "$(echo "$out" | awk '$1 == "id" && $2 == 1 { n[$5]++; d[$5 " " $4] = 1 }
	END { for (k in d) { split(k, a, " "); u[a[1]]++ } print n[0] + 0, u[0] + 0, n[1] + 0, u[1] + 0 }')" \
	"24 24 10 10" "... every sample of the database once, 10 distinct of the other"
is "$(grep -c 'data.mdb: scanned' "$T/d.sock.log")" 4 \
	"each database was scanned once (4), whatever the streams"

# A damaged database: the scan's child fails, the stream is refused with
# the file named, and the daemon serves on.
mkdir "$T/bad"
cp "$T/bytes/data.mdb" "$T/bad/data.mdb"
/usr/bin/python3 - "$T/bad/data.mdb" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    data = bytearray(f.read())
    for at in range(16, len(data), 4096):  # every page's header
        data[at:at + 16] = b"\xff" * 16
    f.seek(0)
    f.write(data)
PY
out=$("$LDCLIENT" --epochs 1 "$T/d.sock" "$T/bad" 2>&1)
like "$out" 'error: open: .*data.mdb' "a damaged database is refused, naming it"
ok "the daemon is alive after it" kill -0 "$P"
# Pages past the meta pages scrambled: LMDB, trusting them, may crash
# (here it dies of SIGBUS) in the scanning child, never in the daemon.
mkdir "$T/bad2"
cp "$T/bytes/data.mdb" "$T/bad2/data.mdb"
/usr/bin/python3 - "$T/bad2/data.mdb" <<'PY'
import random, sys
r = random.Random(1)
with open(sys.argv[1], "r+b") as f:
    data = bytearray(f.read())
    for at in range(2 * 4096, len(data)):
        data[at] = r.randrange(256)
    f.seek(0)
    f.write(data)
PY
out=$("$LDCLIENT" --epochs 1 --outputs value "$T/d.sock" "$T/bad2" 2>&1)
like "$out" 'error: open: .*data.mdb' "a scrambled database is refused, naming it ($out)"
ok "the daemon is alive after it" kill -0 "$P"
like "$("$LDCLIENT" --epochs 1 --outputs value "$T/d.sock" "$T/bytes" | grep '^total')" \
	'samples 200 ' "and streams the sound database again"

like "$("$LOADERCTL" inspect "$T/plain")" 'samples: +24' "inspect an LMDB database"
ok "verify an LMDB database" "$LOADERCTL" verify "$T/caffe"
out=$("$LOADERCTL" verify "$T/bad" 2>&1)
is "$?" 1 "verify: a damaged database is bad (exit 1)"
stop_daemon "$P" "$T/d.sock.log"
