#!/bin/sh
# A bad sample is named by its source file everywhere it is reported: an
# ImageFolder packed keeps each file's path as the record's key
# (__key__), and a record damaged on disk after packing is then named by
# verify, by inspect --record, in the daemon's log (bad samples skipped)
# and in the error a client gets (bad samples fail the stream). The key
# is no default output: a stream of every field delivers image and
# label, as before.
. "$top_srcdir/tests/integration/tap.sh"

[ -x "$TOOLS/mkjpeg" ] && [ -x "$LDCLIENT" ] && [ -x "$TOOLS/mkbadds" ] ||
	skip_all "test tools not built"
tmpdir
plan 17

F=$T/img
mkdir -p "$F/a" "$F/b/nested"
for i in 0 1 2 3; do
	"$TOOLS/mkjpeg" "$F/a/$i.jpg" 64 48 $i
	"$TOOLS/mkjpeg" "$F/b/nested/$i.jpg" 64 48 $((i + 10))
done
"$LOADERCTL" pack "$F" "$T/ds" >/dev/null 2>&1
out=$("$LOADERCTL" inspect --record 5 "$T/ds" 2>&1)
like "$out" 'source:   b/nested/1\.jpg' "inspect --record names the record's source file"
like "$out" '__key__: bytes +"b/nested/1\.jpg"' "its key field is the path under SRC"

# Damage record 5 in the middle: its checksum no longer holds.
off=$(printf '%s\n' "$out" | sed -n 's/.* \([0-9]*\) bytes at offset \([0-9]*\)$/\2 \1/p')
set -- $off
dd if=/dev/zero of="$T/ds/shard-00000.lds" bs=1 seek=$(($1 + $2 / 2)) \
	count=32 conv=notrunc 2>/dev/null
out=$("$LOADERCTL" verify "$T/ds" 2>&1)
like "$?: $out" '^1: bad: .*record 5 at offset .*checksum .*\(source b/nested/1\.jpg\)' \
	"verify names the bad record's source"
like "$("$LOADERCTL" inspect -r 5 "$T/ds" 2>&1)" 'checksum: bad: .*
source:   b/nested/1\.jpg' "inspect --record of the damaged record still names it"

ok "daemon starts" start_daemon "$T/d.sock"
P='decode | center 32 | u8'
out=$("$LDCLIENT" --pipeline "$P" --on-bad skip --epochs 1 --batch 4 \
	"$T/d.sock" "$T/ds" 2>&1)
like "$out" '^total batches 2 samples 8' "with bad samples skipped the epoch is whole"
ok "the daemon's log names the skipped sample's source" \
	grep -q 'skipped bad sample 5 (shard .*, record 5, source b/nested/1\.jpg)' "$T/d.sock.log"
out=$("$LDCLIENT" --pipeline "$P" --on-bad fail --epochs 1 --batch 4 \
	"$T/d.sock" "$T/ds" 2>&1)
st=$?
like "$st: $(printf '%s\n' "$out" | grep error:)" '^[1-9][0-9]*: error: .*source b/nested/1\.jpg' \
	"with bad samples failing the stream, the client's error names the source"
if "$top_builddir/loader-python" -c 'import numpy' 2>/dev/null; then
	out=$(LOADERD_SOCKET=$T/d.sock "$top_builddir/loader-python" -c "
import loader
s = loader.Stream('$T/ds', batch_size=4, pipeline='$P', on_bad='fail')
try:
    for b in s:
        pass
except loader.Error as e:
    print('raised', e)
" 2>&1)
	like "$out" '^raised .*source b/nested/1\.jpg' "so does the Python package's exception"
else
	tap_n=$((tap_n + 1))
	echo "ok $tap_n # SKIP NumPy is not installed"
fi
# Every field by default: the key is not one of them.
out=$("$LDCLIENT" --pipeline "$P" --epochs 1 --batch 4 --on-bad skip \
	--shapes "$T/d.sock" "$T/ds" 2>&1)
like "$out" "output image dtype" "a stream of the default outputs delivers the image"
case $out in *__key__*) key=yes ;; *) key=no ;; esac
is "$key" no "and not the key"

# Damaged PNGs reach the daemon only through a dataset written without
# pack's checks (mkbadds): each is a bad sample with a clear reason,
# under both policies, and the daemon serves on.
B=$T/png
mkdir -p "$B"
/usr/bin/python3 - "$B" <<'PY'
import struct, sys, zlib
d = sys.argv[1]
def chunk(t, b):
    return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b))
def png(w, h, hdr_w=None, hdr_h=None):
    raw = b"".join(b"\0" + bytes((x * 7 + y) & 255 for x in range(w * 3)) for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" +
            chunk(b"IHDR", struct.pack(">IIBBBBB", hdr_w or w, hdr_h or h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
good = png(48, 40)
open(d + "/good0.png", "wb").write(good)
open(d + "/good1.png", "wb").write(png(60, 36))
open(d + "/cut.png", "wb").write(good[: len(good) * 2 // 3])
bad = bytearray(good); bad[len(good) // 2] ^= 0x55
open(d + "/crc.png", "wb").write(bytes(bad))
open(d + "/huge.png", "wb").write(png(4, 4, 60000, 60000))
PY
"$TOOLS/mkbadds" "$T/pngds" "$B/good0.png" "$B/cut.png" "$B/good1.png" \
	"$B/crc.png" "$B/huge.png" "$B/good0.png" >/dev/null
out=$("$LDCLIENT" --pipeline "$P" --on-bad skip --epochs 1 --batch 3 \
	--stats "$T/d.sock" "$T/pngds" 2>&1)
like "$out" '^total batches 2 samples 6' "a PNG dataset with 3 damaged records streams whole, bad ones skipped"
like "$out" 'bad_samples 3' "and counts the 3 bad samples"
ok "the log says the cut PNG's data ends early" \
	grep -q 'skipped bad sample 1 .*png decode: ' "$T/d.sock.log"
ok "and names the PNG above the pixel limit" \
	grep -q 'skipped bad sample 4 .*png of 60000x60000 pixels exceeds the limit' "$T/d.sock.log"
out=$("$LDCLIENT" --pipeline "$P" --on-bad fail --epochs 1 --batch 3 \
	"$T/d.sock" "$T/pngds" 2>&1)
like "$(printf '%s\n' "$out" | grep error:)" 'error: .*sample 1 .*png decode' \
	"with bad samples failing the stream, the error says why"
like "$("$LDCLIENT" --pipeline "$P" --on-bad skip --epochs 1 --batch 4 "$T/d.sock" "$T/ds" 2>&1)" \
	'^total batches 2 samples 8' "and the daemon serves the next stream"
