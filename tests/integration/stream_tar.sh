#!/bin/sh
# WebDataset tars read in place by a real daemon (pipeline/format/wds.c): tars
# made by GNU tar (long names, pax headers) and by Python's tarfile give
# the very batches a stream of the same tar packed by loaderctl gives
# (raw fields byte for byte, JPEGs through the image pipeline pixel for
# pixel); every sample once per epoch across ranks; the index is made by
# one scan, kept in the daemon's state across streams and restarts, and
# made again when a tar changes; an unsorted tar is refused naming the
# sample; loaderctl inspect and verify take tars and find a damaged one.
. "$top_srcdir/tests/integration/tap.sh"

TOOLS=$top_builddir/tests/tools
command -v tar >/dev/null 2>&1 || skip_all "GNU tar not installed"
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "python3 not installed"
tmpdir
plan 29
N=40
mkdir -p "$T/src/sub"
: >"$T/list"
i=0
while [ $i -lt $N ]; do
	# Keys long enough for GNU long names and pax path records.
	if [ $((i % 4)) -eq 1 ]; then
		k=sub/$(printf 'a%.0s' $(seq 1 120))_$i
	else
		k=s$(printf '%04d' $i)
	fi
	"$TOOLS/mkjpeg" "$T/src/$k.jpg" $((40 + i * 3)) $((32 + i)) $((i + 1)) >/dev/null
	echo $((i % 7)) >"$T/src/$k.cls"
	j=0
	: >"$T/src/$k.txt"
	while [ $j -le $((i % 9)) ]; do
		echo "sample $i line $j" >>"$T/src/$k.txt"
		j=$((j + 1))
	done
	printf '%s\n' "$k.cls" "$k.jpg" "$k.txt" >>"$T/list"
	i=$((i + 1))
done
(cd "$T/src" && tar --format=gnu --no-recursion -cf "$T/gnu.tar" -T "$T/list" &&
	tar --format=pax --no-recursion -cf "$T/pax.tar" -T "$T/list")
like "$(grep -c '././@LongLink' "$T/gnu.tar") $(grep -ac 'path=' "$T/pax.tar")" \
	'^[1-9][0-9]* [1-9]' "GNU tar wrote long-name headers and pax path records"
# Python's tarfile, with .npy arrays (one ragged) beside the labels.
"$PY" - "$T/py.tar" <<'EOF'
import io, sys, tarfile
try:
    import numpy as np
except ImportError:
    np = None
with tarfile.open(sys.argv[1], "w") as tf:
    for i in range(64):
        m = [("cls", b"%d" % (i % 5)), ("txt", b"caption %d" % i * (i % 4))]
        if np is not None:
            for ext, a in (("emb.npy", np.full(3, i, np.float32)),
                           ("tok.npy", np.arange(i % 6, dtype=np.int64))):
                b = io.BytesIO()
                np.save(b, a)
                m.append((ext, b.getvalue()))
        for ext, data in sorted(m):
            ti = tarfile.TarInfo("py/%05d.%s" % (i, ext))
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
EOF
is "$?" 0 "Python's tarfile wrote a tar"
# A tar whose members are not grouped: sample s0000 again at the end.
(cd "$T/src" && tar --no-recursion -cf "$T/unsorted.tar" s0000.cls s0002.cls s0000.txt)

for t in gnu pax; do
	"$LOADERCTL" pack --jpeg-restart off "$T/$t.tar" "$T/packed-$t" >/dev/null
done
# The ragged .npy field is found so in place; pack is told (no NumPy: none).
if "$PY" -c 'import numpy' 2>/dev/null; then
	"$LOADERCTL" pack --ragged tok.npy "$T/py.tar" "$T/packed-py" >/dev/null
else
	"$LOADERCTL" pack "$T/py.tar" "$T/packed-py" >/dev/null
fi
"$LOADERCTL" pack "$T/gnu.tar" "$T/packed-rst" >/dev/null

start_daemon "$T/d.sock" --threads 2
P=$DAEMON_PID
PIPE='decode | resize 24 | center 24 | u8 | nhwc'
same_batches "$T/d.sock" "GNU tar, raw fields" "$T/gnu.tar" "$T/packed-gnu" \
	--outputs cls,txt --order random --seed 4 --batch 7 --epochs 2
same_batches "$T/d.sock" "pax tar, raw fields" "$T/pax.tar" "$T/packed-pax" \
	--outputs cls,txt --order random --seed 4 --batch 7 --epochs 2
same_batches "$T/d.sock" "GNU tar, JPEGs against a restart-transcoded pack" "$T/gnu.tar" \
	"$T/packed-rst" --outputs jpg,cls --pipeline "$PIPE" --order random \
	--seed 2 --batch 8 --epochs 1
same_batches "$T/d.sock" "Python tarfile tar, every field" "$T/py.tar" "$T/packed-py" \
	--order random --seed 1 --batch 10 --epochs 2

# Every sample once per epoch across three ranks, in place.
once_per_epoch "$T/d.sock" "$T/gnu.tar" 3 2 $N \
	"world 3: each (epoch, sample) once" --order random --seed 3 --batch 5 \
	--outputs cls

# A directory of tars is a dataset of them, by name.
mkdir "$T/dir"
cp "$T/gnu.tar" "$T/dir/a.tar"
cp "$T/pax.tar" "$T/dir/b.tar"
like "$("$LDCLIENT" --outputs cls --epochs 1 "$T/d.sock" "$T/dir" | grep '^total')" \
	"samples $((2 * N)) " "a directory of two tars streams both"

# The index: one scan, kept across streams and a restart, redone on change.
n1=$(grep -c 'gnu.tar: scanned' "$T/d.sock.log")
is "$n1" 1 "the GNU tar was scanned once for its streams"
stop_daemon "$P" "$T/d.sock.log"
mv "$T/d.sock.log" "$T/d1.log"
start_daemon "$T/d.sock" --threads 2
P=$DAEMON_PID
"$LDCLIENT" --outputs cls --epochs 1 "$T/d.sock" "$T/gnu.tar" >/dev/null
is "$(grep -c 'scanned' "$T/d.sock.log")" 0 "after a restart the kept index is used"
touch -d '2001-01-01' "$T/gnu.tar"
"$LDCLIENT" --outputs cls --epochs 1 "$T/d.sock" "$T/gnu.tar" >/dev/null
is "$(grep -c 'gnu.tar: scanned' "$T/d.sock.log")" 1 "a tar whose mtime changed is scanned again"
# Rewritten in place (a label changed), its mtime set back as it was: its
# owner can forge size and mtime, not ctime, so it is scanned again (a
# kept index would give the old file's labels and layout).
"$LDCLIENT" --outputs cls --epochs 1 "$T/d.sock" "$T/gnu.tar" >/dev/null
cp -p "$T/gnu.tar" "$T/gnu.keep"
sleep 0.01
# The first .cls member's label, one digit changed (headers unchanged).
off=$(/usr/bin/python3 -c '
import sys, tarfile
for m in tarfile.open(sys.argv[1]):
    if m.name.endswith(".cls"):
        print(m.offset_data)
        break' "$T/gnu.tar")
printf '7' | dd of="$T/gnu.tar" bs=1 seek="$off" conv=notrunc 2>/dev/null
touch -r "$T/gnu.keep" "$T/gnu.tar"
is "$(stat -c '%s %Y' "$T/gnu.tar")" "$(stat -c '%s %Y' "$T/gnu.keep")" \
	"the rewritten tar has the old one's size and mtime"
"$LDCLIENT" --outputs cls --epochs 1 "$T/d.sock" "$T/gnu.tar" >/dev/null 2>&1
is "$(grep -c 'gnu.tar: scanned' "$T/d.sock.log")" 2 \
	"a tar rewritten with its size and mtime forged is scanned again"
cp -p "$T/gnu.keep" "$T/gnu.tar"

out=$("$LDCLIENT" --outputs cls --epochs 1 "$T/d.sock" "$T/unsorted.tar" 2>&1)
like "$out" 'key "s0000" appears again' "an unsorted tar is refused, naming the sample"

# loaderctl inspect and verify take tars.
like "$("$LOADERCTL" inspect "$T/gnu.tar")" "samples:  $N" "inspect a tar: its samples"
like "$("$LOADERCTL" inspect "$T/dir")" "samples:  $((2 * N))" \
	"inspect a directory of tars"
ok "verify a tar and a directory of tars" "$LOADERCTL" verify "$T/gnu.tar" "$T/dir"
cp "$T/gnu.tar" "$T/bad.tar"
off=$("$PY" - "$T/bad.tar" <<'EOF'
import sys, tarfile
with tarfile.open(sys.argv[1]) as tf:
    for m in tf.getmembers():
        if m.name.endswith("s0006.jpg"):
            print(m.offset_data + 2)
EOF
)
printf 'XXXX' | dd of="$T/bad.tar" bs=1 seek="$off" conv=notrunc 2>/dev/null
out=$("$LOADERCTL" verify "$T/bad.tar" 2>&1)
is "$?" 1 "verify: a tar with a damaged JPEG is bad (exit 1)"
like "$out" 'record 6' "verify names the damaged sample"
stop_daemon "$P" "$T/d.sock.log"
