#!/bin/sh
# ctl_pipeline.sh - loaderctl pipeline: a spec's canonical text and output,
# strict errors, one JPEG (made by tests/tools/mkjpeg) to a .npy file that
# depends on (seed, epoch, index) only, errors that name the file, and
# --profile's per-stage lines. With numpy importable, numpy reads the
# .npy back; without it that check is skipped.
. "$top_srcdir/tests/integration/tap.sh"
tmpdir
plan 39

rrc='decode | rrc 64 | flip 0.5 | normalize imagenet | f16'

# --- SPEC: canonical text, dtype, shape, bytes -------------------------------
out=$("$LOADERCTL" pipeline 'decode|rrc 224|flip 0.5|normalize imagenet|f16')
is "$?" 0 "a good spec exits 0"
like "$out" '^spec: +decode \| rrc 224 \| flip 0\.5 \| normalize imagenet \| f16 \| nchw$' \
	"its canonical text fills in the default layout"
like "$out" '^output: +f16 \[3,224,224\]$' "dtype and nchw shape"
like "$out" '^bytes: +301056 per sample$' "bytes per sample"
out=$("$LOADERCTL" pipeline 'decode | rrc 160 scale 0.08 1 ratio 3/4 4/3 | u8 | nhwc')
like "$out" '^spec: +decode \| rrc 160 \| u8 \| nhwc$' "default rrc parameters are left out"
like "$out" '^output: +u8 \[160,160,3\]$' "nhwc shape"
out=$("$LOADERCTL" pipeline 'decode  |  resize 256 |center 224')
like "$out" '^spec: +decode \| resize 256 \| center 224 \| f32 \| nchw$' \
	"resize + center, default dtype f32"
out=$("$LOADERCTL" pipeline --json 'decode | center 32 | u8')
like "$(printf '%s' "$out" | tr -d ' \n')" \
	'^\{"spec":"decode\|center32\|u8\|nchw","dtype":"u8","shape":\[3,32,32\],"bytes":3072\}$' \
	"--json: spec, dtype, shape and bytes"

# --- bad specs and usage ---------------------------------------------------
out=$("$LOADERCTL" pipeline 'decode | rrc 224 | flop 0.5' 2>&1)
is "$?" 2 "a bad spec exits 2"
like "$out" 'column 20: .*"flop"' "and names the column and the word"
out=$("$LOADERCTL" pipeline 'decode | rrc 224 | u8 | normalize imagenet' 2>&1)
like "$out" 'column 25: normalize' "a stage out of order names column and stage"
out=$("$LOADERCTL" pipeline 'decode | rrc 224' "$T/a.jpg" 2>&1)
is "$?" 2 "two arguments without --profile is a usage error"
out=$("$LOADERCTL" pipeline --profile --seconds x 'decode | rrc 8' "$T" 2>&1)
like "$out" '--seconds: invalid value "x"' "a bad --seconds is named"

# --- SPEC IN.jpg OUT.npy ---------------------------------------------------
"$TOOLS/mkjpeg" "$T/a.jpg" 320 240 5 || echo "# mkjpeg failed"
out=$("$LOADERCTL" pipeline --seed 3 --epoch 1 --index 7 "$rrc" "$T/a.jpg" "$T/a.npy")
is "$?" 0 "one JPEG to .npy exits 0"
like "$out" 'a\.npy: f16 \[3,64,64\], 24704 bytes' "and says what it wrote"
is "$(wc -c <"$T/a.npy" | tr -d ' ')" 24704 ".npy size: 128-byte header + 3*64*64*2"
is "$(head -c 8 "$T/a.npy" | od -An -c | tr -s ' ')" ' 223 N U M P Y 001 \0' \
	".npy magic and version 1.0"
is "$(dd if="$T/a.npy" bs=1 skip=8 count=2 2>/dev/null | od -An -tu1 | tr -s ' ')" \
	' 118 0' "header length: 10 + 118 is a multiple of 64"
hdr=$(dd if="$T/a.npy" bs=1 skip=10 count=118 2>/dev/null)
like "$hdr" "^\{'descr': '[<>]f2', 'fortran_order': False, 'shape': \(3, 64, 64\), \} *$" \
	"header: descr, order and shape"
"$LOADERCTL" pipeline --seed 3 --epoch 1 --index 7 "$rrc" "$T/a.jpg" "$T/b.npy" >/dev/null
ok "the same seed, epoch and index give the same bytes" cmp "$T/a.npy" "$T/b.npy"
"$LOADERCTL" pipeline --seed 3 --epoch 1 --index 8 "$rrc" "$T/a.jpg" "$T/c.npy" >/dev/null
ok "another index gives other bytes" sh -c "! cmp -s '$T/a.npy' '$T/c.npy'"
"$LOADERCTL" pipeline --index 2 'decode | center 48 | u8 | nhwc' "$T/a.jpg" "$T/u.npy" >/dev/null
is "$(wc -c <"$T/u.npy" | tr -d ' ')" $((128 + 48 * 48 * 3)) "u8 nhwc .npy size"
hdr=$(dd if="$T/u.npy" bs=1 skip=10 count=118 2>/dev/null)
like "$hdr" "'descr': '\|u1', 'fortran_order': False, 'shape': \(48, 48, 3\)" "u8 header"

if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
	got=$(/usr/bin/python3 -c '
import sys, numpy
a = numpy.load(sys.argv[1]); b = numpy.load(sys.argv[2])
print(a.dtype, a.shape, b.dtype, b.shape, bool(numpy.isfinite(a).all()))
' "$T/a.npy" "$T/u.npy" 2>&1)
	is "$got" "float16 (3, 64, 64) uint8 (48, 48, 3) True" "numpy reads both back"
else
	tap_n=$((tap_n + 1))
	echo "ok $tap_n - numpy reads both back # SKIP numpy not importable"
fi

# --- errors name the file --------------------------------------------------
head -c 700 "$T/a.jpg" >"$T/cut.jpg"
out=$("$LOADERCTL" pipeline "$rrc" "$T/cut.jpg" "$T/x.npy" 2>&1)
is "$?" 2 "a truncated JPEG exits 2"
like "$out" 'cut\.jpg: ' "and the message names the file"
ok "and no .npy is left" test ! -e "$T/x.npy"
head -c 3000 /dev/urandom >"$T/junk.jpg"
out=$("$LOADERCTL" pipeline "$rrc" "$T/junk.jpg" "$T/x.npy" 2>&1)
like "$out" 'junk\.jpg: .*Not a JPEG' "a non-JPEG names the file"
out=$("$LOADERCTL" pipeline --max-pixels 1000 "$rrc" "$T/a.jpg" "$T/x.npy" 2>&1)
like "$out" 'a\.jpg: .*limit' "an image above --max-pixels names the file"

# --- --profile ---------------------------------------------------------------
mkdir -p "$T/d/x" "$T/d/y"
"$TOOLS/mkjpeg" "$T/d/x/1.jpg" 200 150 1
"$TOOLS/mkjpeg" "$T/d/y/2.JPEG" 150 200 2
"$TOOLS/mkjpeg" "$T/d/3.jpeg" 120 120 3 --gray
echo "not a jpeg" >"$T/d/notes.txt"
out=$("$LOADERCTL" pipeline --profile --seconds 0.05 "$rrc" "$T/d" 2>&1)
is "$?" 0 "--profile exits 0"
like "$out" '^files +3 under ' "it reads the three JPEGs and only them"
stages=$(printf '%s\n' "$out" |
	grep -Ec '^(header\+params|region decode|resize|emit|other) +[0-9]+\.[0-9]+ +[0-9]+\.[0-9]$')
is "$stages" 5 "one line per stage with us/img and %"
like "$out" '^pipeline .* [0-9.]+ img/s' "the pipeline's img/s"
like "$out" '^full decode .* [0-9.]+ img/s' "the full decode's img/s"
# A file named like a JPEG that does not decode is named and left out;
# the rest are profiled.
head -c 300 "$T/d/x/1.jpg" >"$T/d/x/cut.jpg"
echo "not a jpeg either" >"$T/d/bad.jpg"
out=$("$LOADERCTL" pipeline --profile --seconds 0.05 "$rrc" "$T/d" 2>&1)
like "$?: $out" '^0: ' "--profile goes on past files that do not decode"
like "$out" 'skipped .*d/bad\.jpg: ' "naming each"
like "$out" '^files +3 under .*, 2 skipped \(they do not decode\)' \
	"and profiles the three that do"
rm -f "$T/d/x/cut.jpg" "$T/d/bad.jpg"

# Every stage the parser knows is documented, with its arguments, in
# loaderctl(1)'s and loader(7)'s stage lists and in loaderd(8).
names=$("$LOADERCTL" pipeline 'decode | xyzzy' 2>&1 | sed -n 's/.*(stages: \(.*\))$/\1/p' | tr -d ',')
missing=
for n in $names; do
	for m in loaderctl.1 loader.7 loaderd.8; do
		grep -q "\\(^\\|[ |]\\)$n\\b" "$top_srcdir/man/$m" || missing="$missing $n($m)"
	done
done
is "$(echo "$names" | wc -w | tr -d ' ')" 40 "the parser lists its 40 stages"
is "$missing" "" "each is in loaderctl(1), loader(7) and loaderd(8)"
