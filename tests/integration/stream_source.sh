#!/bin/sh
# A bad sample is named by its source file everywhere it is reported: an
# ImageFolder packed keeps each file's path as the record's key
# (__key__), and a record damaged on disk after packing is then named by
# verify, by inspect --record, in the daemon's log (bad samples skipped)
# and in the error a client gets (bad samples fail the stream). The key
# is no default output: a stream of every field delivers image and
# label, as before.
. "$top_srcdir/tests/integration/tap.sh"

[ -x "$TOOLS/mkjpeg" ] && [ -x "$LDCLIENT" ] || skip_all "test tools not built"
tmpdir
plan 11

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
