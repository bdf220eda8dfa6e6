#!/bin/sh
# pack_tar.sh - loaderctl pack of WebDataset-style tars, checked bit for
# bit against the files that went into the tar, and the errors a broken
# tar must give.
#
# 30 samples (KEY.jpg, KEY.cls, KEY.txt), some in a subdirectory and some
# under paths longer than 100 (and 255) characters, so that GNU tar
# writes long-name headers ('L') and pax writes "path" records. Helpers:
# tests/tools/mkjpeg makes the JPEGs, tests/tools/dsdump reads the packed
# dataset back (XXH3 per field, or one field's bytes).

: "${top_srcdir:?run through make check}"
: "${top_builddir:?run through make check}"
LOADERCTL=$top_builddir/loaderctl
TOOLS=$top_builddir/tests/tools
N=30
n=0

# A TAP skip plan, and exit 77 (tests/exit77.sh tells the driver).
skip_all() {
	echo "1..0 # SKIP $*"
	exit 77
}

pass() {
	n=$((n + 1))
	echo "ok $n - $1"
}

fail() {
	n=$((n + 1))
	echo "not ok $n - $1"
	shift
	for line in "$@"; do
		printf '%s\n' "$line" | head -5 | sed 's/^/#   /'
	done
}

# ok DESC CMD...: CMD must succeed.
ok() {
	desc=$1
	shift
	if out=$("$@" 2>&1); then
		pass "$desc"
	else
		fail "$desc" "exit $?: $*" "$out"
	fi
}

# is GOT WANT DESC
is() {
	if [ "$1" = "$2" ]; then
		pass "$3"
	else
		fail "$3" "got:  $1" "want: $2"
	fi
}

# like TEXT ERE DESC
like() {
	if printf '%s\n' "$1" | grep -Eq -- "$2"; then
		pass "$3"
	else
		fail "$3" "got: $1" "want match: $2"
	fi
}

# fails_with DESC PATTERN OUTDIR ARGS...: pack must exit 2 with a message
# matching PATTERN and leave nothing in OUTDIR.
fails_with() {
	desc=$1 pat=$2 outdir=$3
	shift 3
	err=$("$LOADERCTL" pack "$@" "$outdir" 2>&1 >/dev/null)
	is "$?" 2 "$desc: pack exits 2"
	like "$err" "$pat" "$desc: message matches /$pat/"
	if [ -d "$outdir" ] && [ -n "$(ls -A "$outdir")" ]; then
		fail "$desc: nothing is left in OUTDIR" "$(ls -A "$outdir")"
	else
		pass "$desc: nothing is left in OUTDIR"
	fi
}

for tool in tar cmp od dd mktemp sort sed head wc; do
	command -v $tool >/dev/null 2>&1 || skip_all "$tool not found"
done
tar --version 2>/dev/null | grep -q 'GNU tar' || skip_all "GNU tar not found"
if [ ! -x "$TOOLS/mkjpeg" ] || [ ! -x "$TOOLS/dsdump" ] ||
   [ ! -x "$LOADERCTL" ]; then
	echo "Bail out! $TOOLS/mkjpeg, $TOOLS/dsdump or $LOADERCTL not built"
	exit 1
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/pack_tar.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
trap 'exit 1' HUP INT TERM

echo "1..75"

# --- the samples ----------------------------------------------------------
# Keys in tar order: s0000-s0009 at the top, s0010-s0019 in sub/, s0020-
# s0024 under a 120-character directory (fits ustar's prefix field, needs
# 'L' in GNU format) and s0025-s0029 under a 262-character path (pax
# needs a "path" record).
A=long/$(printf '%0115d' 0 | tr 0 a)
B=$(printf '%0100d' 0 | tr 0 b)/$(printf '%0100d' 0 | tr 0 c)/$(printf '%059d' 0 | tr 0 e)
mkdir -p "$T/src/sub" "$T/src/$A" "$T/src/$B"

key() {
	i=$1
	k=$(printf 's%04d' "$i")
	if [ "$i" -lt 10 ]; then echo "$k"
	elif [ "$i" -lt 20 ]; then echo "sub/$k"
	elif [ "$i" -lt 25 ]; then echo "$A/$k"
	else echo "$B/$k"
	fi
}

# Sample 13 has a negative label with white space around it.
label() {
	if [ "$1" -eq 13 ]; then echo -42; else echo $(($1 * 3 % 10)); fi
}

# txt: the extension of the text member; sample 3 spells it in capitals,
# which WebDataset (and we) read as the same field.
txt_ext() {
	if [ "$1" -eq 3 ]; then echo TXT; else echo txt; fi
}

: >"$T/list"
i=0
gen_ok=true
while [ $i -lt $N ]; do
	k=$(key $i)
	gray=
	[ $((i % 5)) -eq 4 ] && gray=--gray
	"$TOOLS/mkjpeg" "$T/src/$k.jpg" $((16 + i * 3)) $((24 + i)) $((i + 1)) \
		$gray || gen_ok=false
	if [ "$i" -eq 13 ]; then
		printf '  -42 \n' >"$T/src/$k.cls"
	else
		label $i >"$T/src/$k.cls"
	fi
	# Sample 11 has an empty text member.
	j=0
	: >"$T/src/$k.$(txt_ext $i)"
	while [ $i -ne 11 ] && [ $j -le $i ]; do
		echo "sample $i line $j of the tar test" >>"$T/src/$k.$(txt_ext $i)"
		j=$((j + 1))
	done
	# Members in the order WebDataset writers use: one sample at a time.
	printf '%s\n' "$k.cls" "$k.jpg" "$k.$(txt_ext $i)" >>"$T/list"
	[ $i -eq 9 ] && printf '%s\n' sub >>"$T/list"
	i=$((i + 1))
done
# Members that are not fields: a hidden file and one without extension.
echo hidden >"$T/src/sub/.hidden.txt"
echo readme >"$T/src/README"
printf '%s\n' README sub/.hidden.txt >>"$T/list"
is "$gen_ok" true "mkjpeg wrote $N JPEGs"

( cd "$T/src" && tar --format=gnu --no-recursion -cf "$T/gnu.tar" -T "$T/list" &&
  tar --format=pax --no-recursion -cf "$T/pax.tar" -T "$T/list" )
is "$?" 0 "GNU tar built the gnu and pax archives"
like "$(grep -c '././@LongLink' "$T/gnu.tar")" '^[1-9]' \
	"the gnu tar uses long-name headers"
like "$(grep -ac 'path=' "$T/pax.tar")" '^[1-9]' \
	"the pax tar uses pax path records"

# --- pack and read back -----------------------------------------------------
ok "pack the gnu tar" "$LOADERCTL" pack "$T/gnu.tar" "$T/gnu"
ok "pack it with --jpeg-restart off" "$LOADERCTL" pack --jpeg-restart off \
	"$T/gnu.tar" "$T/gnu_off"
like "$(cat "$T/gnu/manifest.json" 2>&1)" '"cls: int64"' \
	"schema: cls is int64"
like "$(cat "$T/gnu/manifest.json" 2>&1)" '"jpg: jpeg"' "schema: jpg is jpeg"
like "$(cat "$T/gnu/manifest.json" 2>&1)" '"txt: bytes"' "schema: txt is bytes"
"$TOOLS/dsdump" "$T/gnu" >"$T/gnu.dump" 2>"$T/err"
is "$?" 0 "dsdump reads the dataset"
is "$(wc -l <"$T/gnu.dump" | tr -d ' ')" $N "$N records"
like "$(head -1 "$T/gnu.dump")" '^0 cls=[0-9a-f]{16} jpg=[0-9a-f]{16} txt=[0-9a-f]{16} __key__=[0-9a-f]{16}$' \
	"fields in extension order, then each sample's key"
is "$("$TOOLS/dsdump" --raw 0 __key__ "$T/gnu")" "$(sed -n 1p "$T/list" | sed 's/\.cls$//')" \
	"the key field holds the sample's key, as the tar names it"

# Every field of every sample, bit for bit, in tar order; JPEGs as they
# were with --jpeg-restart off, and with the same pixels by default.
bad_jpg= bad_px= bad_txt= bad_cls=
i=0
while [ $i -lt $N ]; do
	k=$(key $i)
	"$TOOLS/dsdump" --raw $i jpg "$T/gnu_off" >"$T/x" &&
		cmp -s "$T/x" "$T/src/$k.jpg" || bad_jpg="$bad_jpg $i"
	"$TOOLS/dsdump" --raw $i jpg "$T/gnu" >"$T/x" &&
		"$TOOLS/jpegdims" --same "$T/x" "$T/src/$k.jpg" 2>/dev/null ||
		bad_px="$bad_px $i"
	"$TOOLS/dsdump" --raw $i txt "$T/gnu" >"$T/x" &&
		cmp -s "$T/x" "$T/src/$k.$(txt_ext $i)" || bad_txt="$bad_txt $i"
	v=$("$TOOLS/dsdump" --raw $i cls "$T/gnu" | od -An -t d8 --endian=little |
		tr -d ' ')
	[ "$v" = "$(label $i)" ] || bad_cls="$bad_cls $i($v)"
	i=$((i + 1))
done
is "$bad_jpg" "" "every JPEG is stored bit for bit with --jpeg-restart off"
is "$bad_px" "" "and decodes to its member's pixels with restart segments"
is "$bad_txt" "" "every txt member is stored bit for bit (one is empty)"
is "$bad_cls" "" "every label parses to the .cls value"

"$LOADERCTL" verify "$T/gnu" >"$T/out" 2>&1
is "$?" 0 "verify passes on the packed tar"

ok "pack the pax tar" "$LOADERCTL" pack "$T/pax.tar" "$T/pax"
"$TOOLS/dsdump" "$T/pax" >"$T/pax.dump" 2>&1
ok "the pax tar packs to the same records" cmp "$T/gnu.dump" "$T/pax.dump"

# ustar holds at most 255 characters, split between its prefix and name
# fields: samples s0000-s0024 (the first 76 lines of the list).
head -n 76 "$T/list" | ( cd "$T/src" &&
	tar --format=ustar --no-recursion -cf "$T/ustar.tar" -T - )
ok "pack a ustar tar (prefix field)" "$LOADERCTL" pack "$T/ustar.tar" \
	"$T/ustar"
"$TOOLS/dsdump" "$T/ustar" >"$T/ustar.dump" 2>&1
head -n 25 "$T/gnu.dump" >"$T/gnu25.dump"
ok "the ustar tar packs to the same 25 records" cmp "$T/gnu25.dump" \
	"$T/ustar.dump"

ok "pack with --compress zstd" "$LOADERCTL" pack --compress zstd \
	"$T/gnu.tar" "$T/zstd"
like "$(cat "$T/zstd/manifest.json" 2>&1)" '"txt: bytes zstd' \
	"txt is stored compressed"
"$TOOLS/dsdump" "$T/zstd" >"$T/zstd.dump" 2>&1
ok "zstd records unpack to the same bytes" cmp "$T/gnu.dump" "$T/zstd.dump"
"$LOADERCTL" verify "$T/zstd" >"$T/out" 2>&1
is "$?" 0 "verify passes on the compressed dataset"

ok "pack with --shuffle 7" "$LOADERCTL" pack --shuffle 7 "$T/gnu.tar" \
	"$T/shuf"
"$TOOLS/dsdump" "$T/shuf" >"$T/shuf.dump" 2>&1
sed 's/^[0-9]* //' "$T/gnu.dump" >"$T/a"
sed 's/^[0-9]* //' "$T/shuf.dump" >"$T/b"
if cmp -s "$T/a" "$T/b"; then
	fail "shuffled order differs from the tar's"
else
	pass "shuffled order differs from the tar's"
fi
sort "$T/a" >"$T/a.sorted"
sort "$T/b" >"$T/b.sorted"
ok "shuffled dataset holds the same samples" cmp "$T/a.sorted" "$T/b.sorted"
"$LOADERCTL" pack --shuffle 7 "$T/gnu.tar" "$T/shuf2" >/dev/null 2>&1
"$TOOLS/dsdump" "$T/shuf2" >"$T/shuf2.dump" 2>&1
ok "the same seed gives the same order" cmp "$T/shuf.dump" "$T/shuf2.dump"

# Auto-detection by the header when the name does not end in .tar.
cp "$T/gnu.tar" "$T/data.bin"
ok "a tar not named .tar is detected by its header" "$LOADERCTL" pack \
	"$T/data.bin" "$T/bin"
"$TOOLS/dsdump" "$T/bin" >"$T/bin.dump" 2>&1
ok "... and packs to the same records" cmp "$T/gnu.dump" "$T/bin.dump"

ok "pack with --classes" "$LOADERCTL" pack --classes a,b,c "$T/gnu.tar" \
	"$T/cls"
like "$(tr -d ' \n' <"$T/cls/manifest.json")" '"classes":\["a","b","c"\]' \
	"class names in the manifest"

# --- broken tars ------------------------------------------------------------
# Where a member's header lies: "block N:" lines of GNU tar -R.
header_off() {
	tar -tvR -f "$1" | grep -F -- " $2" | head -1 |
		sed 's/^block \([0-9]*\):.*/\1/' | awk '{ print $1 * 512 }'
}

# A tar of the members listed on stdin. A name listed twice is stored twice
# (not as a hard link to the first), as a broken writer would.
mk_tar() {
	( cd "$T/src" && tar --format=gnu --no-recursion --hard-dereference -cf "$1" -T - )
}

# Sample s0002 without its txt member.
grep -v '^s0002\.txt$' "$T/list" | mk_tar "$T/missing.tar"
fails_with "sample without a .txt" 's0002.*no \.txt member' "$T/o1" \
	"$T/missing.tar"

# Sample s0004 with an extra json member.
echo '{}' >"$T/src/s0004.json"
sed 's/^s0004\.jpg$/s0004.jpg\ns0004.json/' "$T/list" | mk_tar "$T/extra.tar"
fails_with "sample with an extra .json" 's0004.*extra member "s0004\.json"' \
	"$T/o2" "$T/extra.tar"

# A key whose members are not consecutive.
sed 's/^s0002\.txt$/s0002.txt\ns0001.cls/' "$T/list" | mk_tar "$T/split.tar"
fails_with "a key seen again later" 'key "s0001" appears again' "$T/o3" \
	"$T/split.tar"

# Cut in the middle of s0005.jpg's data.
h=$(header_off "$T/gnu.tar" s0005.jpg)
head -c $((h + 512 + 100)) "$T/gnu.tar" >"$T/trunc.tar"
fails_with "a tar cut inside a member" "offset $h: truncated" "$T/o4" \
	"$T/trunc.tar"
# Cut inside a header, at no block boundary.
head -c $((h + 200)) "$T/gnu.tar" >"$T/trunc2.tar"
fails_with "a tar cut inside a header" "offset $h: truncated" "$T/o5" \
	"$T/trunc2.tar"

# One byte of s0006.cls's header changed: its checksum no longer holds.
cp "$T/gnu.tar" "$T/sum.tar"
h=$(header_off "$T/gnu.tar" s0006.cls)
printf 'X' | dd of="$T/sum.tar" bs=1 seek=$((h + 2)) conv=notrunc 2>/dev/null
fails_with "a bad header checksum" "offset $h: bad tar header checksum" \
	"$T/o6" "$T/sum.tar"

# A label that is not a number: get() fails after a shard was started.
cp -R "$T/src" "$T/src2"
echo seven >"$T/src2/s0001.cls"
( cd "$T/src2" && tar --format=gnu --no-recursion -cf "$T/nan.tar" -T "$T/list" )
h=$(header_off "$T/nan.tar" s0001.cls)
fails_with "a label that is not a number" \
	"member s0001\.cls at offset $((h + 512)): \"seven\" is not a decimal integer" \
	"$T/o7" "$T/nan.tar"
"$LOADERCTL" pack --skip-bad "$T/nan.tar" "$T/o8" >"$T/out" 2>&1
is "$?" 0 "--skip-bad packs around the bad label"
like "$(cat "$T/o8/manifest.json" 2>&1 | tr -d ' \n')" "\"records\":$((N - 1))," \
	"--skip-bad leaves $((N - 1)) records"

# A .jpg that is not a JPEG.
cp -R "$T/src" "$T/src3"
echo 'not a jpeg' >"$T/src3/s0002.jpg"
( cd "$T/src3" && tar --format=gnu --no-recursion -cf "$T/notjpeg.tar" -T "$T/list" )
fails_with "a .jpg that is not a JPEG" 's0002\.jpg at offset [0-9]+: not a JPEG' \
	"$T/o9" "$T/notjpeg.tar"

# Trailing zero blocks are optional, but not a partial block.
h=$(header_off "$T/gnu.tar" README)
head -c "$h" "$T/gnu.tar" >"$T/noeof.tar"
ok "a tar without end-of-archive blocks packs" "$LOADERCTL" pack \
	"$T/noeof.tar" "$T/noeof"
"$TOOLS/dsdump" "$T/noeof" >"$T/noeof.dump" 2>&1
ok "... to the same records" cmp "$T/gnu.dump" "$T/noeof.dump"

# .npy members, in a tar made by Python's tarfile (PAX headers): tensor
# fields whose bytes are NumPy's own (little-endian, C order).
py=/usr/bin/python3
if ! $py -c 'import numpy' 2>/dev/null; then
	for i in 1 2 3 4 5 6 7 8 9 10 11 12 13; do
		n=$((n + 1))
		echo "ok $n # SKIP NumPy not installed (python3-numpy)"
	done
	exit 0
fi
$py - "$T" <<'PY'
import io, os, sys, tarfile
import numpy as np
T = sys.argv[1]
def add(t, name, data):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    t.addfile(ti, io.BytesIO(data))
def npy(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()
rng = np.random.default_rng(5)
with tarfile.open(os.path.join(T, "npy.tar"), "w", format=tarfile.PAX_FORMAT) as t:
    for i in range(12):
        k = "d/%04d" % i
        x = rng.standard_normal((3, 4)).astype("<f4")
        boxes = (np.arange(8, dtype=">i2") * (i + 1)).reshape(2, 4)
        add(t, k + ".npy", npy(x))
        add(t, k + ".boxes.npy", npy(boxes))
        add(t, k + ".cls", b"%d\n" % (i % 3))
        add(t, k + ".json", b'{"i": %d}' % i)
        # What pack must deliver: little-endian bytes.
        open(os.path.join(T, "x%d" % i), "wb").write(x.tobytes())
        open(os.path.join(T, "b%d" % i), "wb").write(boxes.astype("<i2").tobytes())
with tarfile.open(os.path.join(T, "ragged.tar"), "w") as t:
    for i in range(3):
        add(t, "s%d.npy" % i, npy(np.zeros((3, 4 + (i == 2)), dtype="<f4")))
with tarfile.open(os.path.join(T, "dtypes.tar"), "w") as t:
    add(t, "s0.npy", npy(np.zeros(4, dtype="<f4")))
    add(t, "s1.npy", npy(np.zeros(4, dtype="<f8")))
with tarfile.open(os.path.join(T, "fortran.tar"), "w") as t:
    add(t, "s0.npy", npy(np.asfortranarray(np.zeros((3, 4), dtype="<f4"))))
with tarfile.open(os.path.join(T, "object.tar"), "w") as t:
    add(t, "s0.npy", npy(np.array([1, "a"], dtype=object)))
PY
ok "pack a tar of .npy, .cls and .json members made by Python's tarfile" \
	"$LOADERCTL" pack "$T/npy.tar" "$T/np"
out=$("$LOADERCTL" inspect "$T/np" 2>&1)
like "$out" 'boxes\.npy: tensor i16 \[2,4\]' "a .npy member is a tensor field: dtype and shape from its header"
like "$out" 'npy: tensor f32 \[3,4\]' "... for every .npy field"
like "$out" 'json: bytes' ".json stays bytes"
same=0
for i in 0 1 2 3 4 5 6 7 8 9 10 11; do
	"$TOOLS/dsdump" --raw $i npy "$T/np" | cmp -s - "$T/x$i" &&
		"$TOOLS/dsdump" --raw $i boxes.npy "$T/np" | cmp -s - "$T/b$i" &&
		same=$((same + 1))
done
is "$same" 12 "every sample's arrays are NumPy's bytes, a big-endian one swapped"
fails_with "a .npy of another shape" \
	'member s2\.npy at offset [0-9]+: array <f4 \(3, 5\) differs from the first sample.s f32 \(3, 4\)' \
	"$T/o10" "$T/ragged.tar"
like "$("$LOADERCTL" pack "$T/dtypes.tar" "$T/o11" 2>&1)" \
	'array <f8 \(4\) differs from the first sample.s f32 \(4\)' "a .npy of another dtype is refused too"
fails_with "a Fortran-order .npy" 'Fortran-order array' "$T/o12" "$T/fortran.tar"
like "$("$LOADERCTL" pack "$T/object.tar" "$T/o13" 2>&1)" "dtype '\|O': only bool, integers and floats" \
	"an object array is refused, naming its dtype"
exit 0
