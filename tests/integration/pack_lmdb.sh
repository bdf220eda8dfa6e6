#!/bin/sh
# loaderctl pack of LMDB databases made by mdb_load (lmdb-utils), in the
# convention loaderctl(1) gives: JPEG values under CLASS/NAME keys, Caffe
# Datums with encoded JPEGs and labels (as convert_imageset writes
# ImageNet), Datums of raw pixels; checked byte for byte against what
# went in, streamed through a real daemon, and the errors a database that
# breaks the convention must give.
. "$top_srcdir/tests/integration/tap.sh"

command -v mdb_load >/dev/null 2>&1 || skip_all "mdb_load not installed (lmdb-utils; scripts/deps.sh --test)"
[ -x /usr/bin/python3 ] || skip_all "no /usr/bin/python3"
tmpdir
plan 13

for i in 1 2 3 4 5 6; do "$TOOLS/mkjpeg" "$T/$i.jpg" 64 48 $i; done
/usr/bin/python3 - "$T" "$top_srcdir/tests/integration" <<'PY'
import os, sys
T = sys.argv[1]
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[2])
from mklmdb import datum, dump_in
def dump(name, pairs): dump_in(T, name, pairs)
jp = [open(os.path.join(T, "%d.jpg" % i), "rb").read() for i in range(1, 7)]
# Key order is LMDB's: cat/1 cat/3 cat/5 dog/2 dog/4 dog/6.
dump("plain", [(("%s/%d" % ("cat" if i % 2 else "dog", i)).encode(), jp[i - 1]) for i in range(1, 7)])
dump("caffe", [(b"%08d_n%d.JPEG" % (i, i), datum(3, 48, 64, jp[i], 10 + i % 3, True)) for i in range(6)])
dump("pixels", [(b"%08d" % i, datum(3, 4, 5, bytes(range(i, i + 60)), 7 - i, False)) for i in range(5)])
dump("shapes", [(b"%08d" % i, datum(3, 4, 5 + (i == 3), bytes(60 + 12 * (i == 3)), 1, False)) for i in range(5)])
dump("noclass", [(b"cat/1", jp[0]), (b"loose", jp[1])])
for i in range(5):
    open(os.path.join(T, "px%d" % i), "wb").write(bytes(range(i, i + 60)))
PY
for n in plain caffe pixels shapes noclass; do
	mdb_load -n -f "$T/$n.txt" "$T/$n.mdb" 2>/dev/null
done
mkdir "$T/dirdb"
mdb_load -f "$T/caffe.txt" "$T/dirdb" 2>/dev/null

# raw I FIELD DS: the stored bytes of sample I's FIELD.
raw() { "$TOOLS/dsdump" --raw "$1" "$2" "$3"; }
label() { raw "$1" cls "$2" | od -An -td8 | tr -d ' '; }

ok "pack JPEG values under CLASS/NAME keys" \
	"$LOADERCTL" pack --jpeg-restart off "$T/plain.mdb" "$T/p"
like "$("$LOADERCTL" inspect "$T/p")" 'classes: +2: 0=cat, 1=dog' \
	"the classes are the keys' CLASS parts, sorted"
same=0 k=0
for i in 1 3 5 2 4 6; do
	raw $k jpg "$T/p" | cmp -s - "$T/$i.jpg" &&
		[ "$(label $k "$T/p")" = $(((i + 1) % 2)) ] && same=$((same + 1))
	k=$((k + 1))
done
is "$same" 6 "every sample's JPEG and label, in key order"

ok "pack Caffe Datums with encoded JPEGs" \
	"$LOADERCTL" pack --jpeg-restart off "$T/caffe.mdb" "$T/c"
same=0
for i in 0 1 2 3 4 5; do
	raw $i jpg "$T/c" | cmp -s - "$T/$((i + 1)).jpg" &&
		[ "$(label $i "$T/c")" = $((10 + i % 3)) ] && same=$((same + 1))
done
is "$same" 6 "each Datum's JPEG and its label"
ok "an environment directory (data.mdb inside) packs too" \
	"$LOADERCTL" pack --jpeg-restart off "$T/dirdb" "$T/cd"
"$TOOLS/dsdump" "$T/c" >"$T/c.dump" 2>&1
"$TOOLS/dsdump" "$T/cd" >"$T/cd.dump" 2>&1
ok "... to the same records" cmp "$T/c.dump" "$T/cd.dump"

ok "pack Caffe Datums of raw pixels" "$LOADERCTL" pack "$T/pixels.mdb" "$T/x"
like "$("$LOADERCTL" inspect "$T/x")" 'image: tensor u8 \[3,4,5\]' "their pixels are a u8 tensor [channels, height, width]"
same=0
for i in 0 1 2 3 4; do
	raw $i image "$T/x" | cmp -s - "$T/px$i" &&
		[ "$(label $i "$T/x")" = $((7 - i)) ] && same=$((same + 1))
done
is "$same" 5 "each Datum's pixels and label"

out=$("$LOADERCTL" pack "$T/shapes.mdb" "$T/s" 2>&1)
like "$out" 'shapes\.mdb: key "00000003": a Datum of 3x4x6 pixels \(72 bytes\), the first one 3x4x5' \
	"a Datum of another shape is refused, naming its key"
out=$("$LOADERCTL" pack "$T/noclass.mdb" "$T/n" 2>&1)
like "$out" 'key "loose" has no CLASS/' "a key without the CLASS/ the first key has is refused"

start_daemon "$T/d.sock" --threads 1
out=$("$LDCLIENT" --batch 3 --pipeline 'decode | rrc 32 | u8' --outputs jpg,cls --shapes "$T/d.sock" "$T/c" 2>&1)
like "$out" 'total batches 2 samples 6 ' "the Caffe dataset streams through the JPEG pipeline"
