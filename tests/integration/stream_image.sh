#!/bin/sh
# The image pipeline end to end, through a real loaderd: an ImageFolder of
# generated JPEGs (baseline RGB of many sizes, grayscale, progressive,
# CMYK/YCCK) packed and streamed with training, evaluation and u8 specs;
# the same bytes with 1 or 2 threads, on every run and after a restart,
# other bytes for another seed or epoch; damaged JPEGs (corrupt, truncated,
# empty, not a JPEG) and images above --max-pixels under both bad-sample
# policies, with the daemon serving on; bad specs refused by column.
. "$top_srcdir/tests/integration/tap.sh"

MKJPEG=$TOOLS/mkjpeg
MKBADDS=$TOOLS/mkbadds
TRAIN='decode | rrc 224 | flip 0.5 | normalize imagenet | f16 | nchw'
EVAL='decode | resize 256 | center 224 | f32 | nhwc'
U8='decode | rrc 160 scale 0.25 1 | flip 0.5 | u8 | nhwc'

tmpdir

# --- the datasets ------------------------------------------------------
# An ImageFolder whose sample order is known (classes, then names):
#  0-7  a_rgb:  500x375 100x80 1200x900 224x224 375x500 64x48 333x250 1000x200
#  8-10 b_gray: 300x400 100x80 640x480
# 11-12 c_prog: 640x480, 120x90 gray
# 13-15 d_cmyk: 320x240, 256x256 progressive, 500x375
F=$T/img
mkdir -p "$F/a_rgb" "$F/b_gray" "$F/c_prog" "$F/d_cmyk"
n=0
for wh in 500x375 100x80 1200x900 224x224 375x500 64x48 333x250 1000x200; do
	"$MKJPEG" "$F/a_rgb/0$n.jpg" ${wh%x*} ${wh#*x} $n
	n=$((n + 1))
done
"$MKJPEG" "$F/b_gray/00.jpg" 300 400 10 --gray
"$MKJPEG" "$F/b_gray/01.jpg" 100 80 11 --gray
"$MKJPEG" "$F/b_gray/02.jpg" 640 480 12 --gray
"$MKJPEG" "$F/c_prog/00.jpg" 640 480 13 --progressive
"$MKJPEG" "$F/c_prog/01.jpg" 120 90 14 --progressive --gray
"$MKJPEG" "$F/d_cmyk/00.jpg" 320 240 15 --cmyk
"$MKJPEG" "$F/d_cmyk/01.jpg" 256 256 16 --cmyk --progressive
"$MKJPEG" "$F/d_cmyk/02.jpg" 500 375 17 --cmyk
N=16

# Damaged JPEGs, each made from a good 320x240 one. Damage to the
# entropy-coded data is put in the first MCU row, which every decode of
# every region reads (rows above a region are still Huffman-decoded),
# so that whether a sample is bad does not depend on the crop drawn.
B=$T/bad
mkdir -p "$B"
# sos FILE: the offset of the SOS marker (FF DA).
sos() {
	od -An -tx1 -v "$1" | tr -s ' ' '\n' |
		awk 'NF { n++; if (p == "ff" && $1 == "da") { print n - 2; exit } p = $1 }'
}
i=0
while [ $i -lt 11 ]; do
	"$MKJPEG" "$B/good$i.jpg" 320 240 $((100 + i))
	i=$((i + 1))
done
s=$(sos "$B/good0.jpg")
# corrupt: two bytes of scan data flipped into a marker (FF D5). Bytes
# flipped at random would not do: libjpeg-turbo decodes an invalid
# Huffman code as zero without a warning, so no decoder notices them.
cp "$B/good0.jpg" "$B/corrupt.jpg"
printf '\377\325' | dd of="$B/corrupt.jpg" bs=1 seek=$((s + 40)) conv=notrunc 2>/dev/null
# truncated: the headers and 64 bytes of scan data.
head -c $((s + 64)) "$B/good1.jpg" >"$B/trunc.jpg"
: >"$B/empty.jpg"
echo "not a JPEG at all" >"$B/text.jpg"
{
	printf '\377\330'
	echo "a JPEG's first marker, then text"
} >"$B/soi.jpg"

# The mixed dataset: 16 records, 5 of them bad (1 3 6 9 12), so that
# each batch of 8 holds a good sample whatever the order.
g() { echo "$B/good$1.jpg"; }
"$MKBADDS" "$T/mixed" $(g 0) "$B/corrupt.jpg" $(g 1) "$B/trunc.jpg" $(g 2) \
	$(g 3) "$B/empty.jpg" $(g 4) $(g 5) "$B/text.jpg" $(g 6) $(g 7) \
	"$B/soi.jpg" $(g 8) $(g 9) $(g 10)
BAD="1 3 6 9 12"
NBAD=5

# The io_uring probe: the image pipeline must run on the daemon's real
# read path; a kernel or sandbox without io_uring makes it fall back.
"$LOADERCTL" pack "$F" "$T/ds" >"$T/pack.out" 2>&1
"$LOADERCTL" pack --jpeg-restart off "$F" "$T/ds_off" >"$T/pack_off.out" 2>&1
D=$T/ds
start_daemon "$T/two.sock" --threads 2 || skip_all "loaderd does not start"
two=$DAEMON_PID
"$LDCLIENT" --outputs label "$T/two.sock" "$D" >/dev/null
i=0
while ! grep -q 'stream delivered' "$T/two.sock.log" && [ $i -lt 100 ]; do
	sleep 0.05
	i=$((i + 1))
done
if grep -q 'io_uring unavailable' "$T/two.sock.log"; then
	skip_all "io_uring unavailable here ($(grep -o 'io_uring unavailable ([^)]*)' "$T/two.sock.log" | head -1))"
fi

plan 85

# flat TEXT: the lines of TEXT joined by ';', for patterns over several
# lines (like() matches one line at a time).
flat() {
	printf '%s\n' "$1" | paste -sd ';' -
}

# --- 1. pack and stream the ImageFolder --------------------------------
like "$(cat "$T/pack.out")" "^packed $N samples into 1 shard" "pack takes all $N JPEGs (RGB, gray, progressive, CMYK)"
"$LDCLIENT" --pipeline "$TRAIN" --outputs image,label --batch 4 --epochs 2 \
	--order random --seed 7 --shapes --ids --stats \
	"$T/two.sock" "$D" >"$T/train.out"
out=$(cat "$T/train.out")
like "$out" "^output image dtype 9 shape 4 3 224 224 bytes $((4 * 3 * 224 * 224 * 2))\$" \
	"train spec: image is f16 [4, 3, 224, 224]"
like "$out" '^output label dtype 8 shape 4 bytes 32$' "label is int64 [4]"
like "$out" '^total batches 8 samples 32 ' "2 epochs of 4 full batches"

# exactly_once FILE N EPOCHS: every id 0..N-1 once per epoch in "id E B ID" lines.
exactly_once() {
	awk -v n="$2" -v epochs="$3" '$1 == "id" { c[$2 " " $4]++; e[$2] = 1 }
		END { bad = 0
		      for (k in c) if (c[k] != 1) bad++
		      ne = 0; for (x in e) ne++
		      if (ne != epochs) bad++
		      for (x in e) for (i = 0; i < n; i++) if (!((x " " i) in c)) bad++
		      exit bad != 0 }' "$1"
}
ok "every sample delivered exactly once in each epoch" exactly_once "$T/train.out" $N 2
like "$out" '^stats bad_samples 0 ' "no bad samples among them"

# --- 2. determinism ----------------------------------------------------
# hashes SOCK DATASET ARGS...: the stream's per-epoch digests, one line
# ("epoch 0 batches B samples S xxh3 X; epoch 1 ...").
hashes() {
	sock=$1
	ds=$2
	shift 2
	"$LDCLIENT" --hash --outputs image,label --batch 4 "$@" "$sock" "$ds" |
		awk '$1 == "epoch" { printf "%s%s", sep, $0; sep = "; " }'
}
ok "daemon with 1 thread starts" start_daemon "$T/one.sock" --threads 1
one=$DAEMON_PID
h2=$(hashes "$T/two.sock" "$D" --pipeline "$TRAIN" --order random --seed 7 --epochs 2)
like "$h2" '^epoch 0 batches 4 samples 16 xxh3 [0-9a-f]{16}; epoch 1 batches 4 samples 16 xxh3 [0-9a-f]{16}$' \
	"two epochs hashed"
h1=$(hashes "$T/one.sock" "$D" --pipeline "$TRAIN" --order random --seed 7 --epochs 2)
is "$h1" "$h2" "the same bytes from a daemon with 1 thread and one with 2"
h=$(hashes "$T/two.sock" "$D" --pipeline "$TRAIN" --order random --seed 7 --epochs 2 --threads 1)
is "$h" "$h2" "and from a stream limited to 1 thread"
h=$(hashes "$T/two.sock" "$D" --pipeline "$TRAIN" --order random --seed 7 --epochs 2)
is "$h" "$h2" "and on a second run"
h=$(hashes "$T/one.sock" "$D" --pipeline "$TRAIN" --order random --seed 7 --start-epoch 1 --epochs 1)
is "$h" "${h2#*; }" "a stream started at epoch 1 gives epoch 1's bytes"
# With the sequential order the ids are the same in every epoch and for
# every seed: a different digest means different pixels.
s7=$(hashes "$T/two.sock" "$D" --pipeline "$TRAIN" --order sequential --seed 7 --epochs 2)
s8=$(hashes "$T/two.sock" "$D" --pipeline "$TRAIN" --order sequential --seed 8 --epochs 2)
like "$s7" '^epoch 0 batches 4 samples 16 xxh3 [0-9a-f]{16}; epoch 1 batches 4 samples 16 xxh3 [0-9a-f]{16}$' \
	"sequential order, two epochs hashed"
e0=${s7%%; *}
e1=${s7#*; }
f0=${s8%%; *}
ok "another seed gives other pixels" sh -c '
	case $2 in "epoch 0 batches 4 samples 16 xxh3 "*) test "$1" != "$2" ;; *) exit 1 ;; esac' \
	sh "$e0" "$f0"
ok "another epoch gives other pixels" test "${e0##* }" != "${e1##* }"
# The flip is drawn after the crop: flip 0 changes nothing, flip 1 mirrors.
n0=$(hashes "$T/two.sock" "$D" --pipeline 'decode | rrc 224 | f32' --order sequential --seed 7)
fl0=$(hashes "$T/two.sock" "$D" --pipeline 'decode | rrc 224 | flip 0 | f32' --order sequential --seed 7)
fl1=$(hashes "$T/two.sock" "$D" --pipeline 'decode | rrc 224 | flip 1 | f32' --order sequential --seed 7)
like "$n0" '^epoch 0 batches 4 samples 16 xxh3 [0-9a-f]{16}$' "a stream without flip hashed"
is "$fl0" "$n0" "flip 0 gives the bytes of no flip"
ok "flip 1 gives other bytes" test "${fl1##* }" != "${n0##* }" -a -n "$fl1"
# Packed by default every JPEG has restart segments and crops are cut
# from them; packed with --jpeg-restart off (as before restart segments
# existed) they are decoded from the whole file: the same bytes.
like "$(cat "$T/pack.out")" "JPEGs: $N with restart segments" \
	"pack transcoded all $N JPEGs to restart segments"
h=$(hashes "$T/two.sock" "$T/ds_off" --pipeline "$TRAIN" --order random --seed 7 --epochs 2)
is "$h" "$h2" "a dataset without restart segments streams the same training bytes"
h=$(hashes "$T/two.sock" "$T/ds_off" --pipeline "$U8" --order sequential --seed 3)
is "$h" "$(hashes "$T/two.sock" "$D" --pipeline "$U8" --order sequential --seed 3)" \
	"and the same u8 crops (scale 0.25 to 1)"
# A spec with every stage: the same bytes with 1, 2 or 3 threads, and after
# a named stream is killed and resumed, batch by batch.
# (within the protocol's 512 bytes of spec text)
ALL='decode | rrc 96 | flip 0.5 | vflip 0.5 | brightness 0.3 | contrast 0.3 | saturation 0.3 | hue 0.1 | jitter 0.4 0.4 0.4 0.1 | grayscale p 0.3 | invert p 0.2 | posterize 5 | solarize 200 | autocontrast | equalize | sharpness 2 | gaussian_blur 3 0.1 1 | channel_shift 20 | rotate 20 | affine rotate 9 translate 0.1 0.1 scale 0.9 1 zoom 0.9 1 shear 5 interp bilinear fill reflect | trivialaugment | randaugment 2 9 | autoaugment imagenet | normalize imagenet | erase value random | cutout 16 p 0.5 | f16'
a2=$(hashes "$T/two.sock" "$D" --pipeline "$ALL" --order random --seed 5 --epochs 2)
like "$a2" '^epoch 0 batches 4 samples 16 xxh3 [0-9a-f]{16}; epoch 1 batches 4 samples 16 xxh3 [0-9a-f]{16}$' \
	"every stage at once: two epochs hashed"
is "$(hashes "$T/one.sock" "$D" --pipeline "$ALL" --order random --seed 5 --epochs 2)" \
	"$a2" "every stage at once: the same bytes from 1 thread as from 2"
ok "daemon with 3 threads starts" start_daemon "$T/three.sock" --threads 3
three=$DAEMON_PID
is "$(hashes "$T/three.sock" "$D" --pipeline "$ALL" --order random --seed 5 --epochs 2)" \
	"$a2" "every stage at once: the same bytes from 3 threads as from 1 and 2"
# A named stream of spec $2 (named $1, checks worded after $3) killed
# after 3 batches and resumed gives the batches of an uninterrupted run.
resumes_whole() {
	"$LDCLIENT" --outputs image,label --batch 4 --pipeline "$2" --order random \
		--seed 5 --epochs 2 --batch-hash --name "$1" --fresh --kill-after 3 \
		"$T/two.sock" "$D" >"$T/$1.1" 2>&1
	"$LDCLIENT" --outputs image,label --batch 4 --pipeline "$2" --order random \
		--seed 5 --epochs 2 --batch-hash --name "$1" "$T/two.sock" "$D" \
		>"$T/$1.2" 2>&1
	"$LDCLIENT" --outputs image,label --batch 4 --pipeline "$2" --order random \
		--seed 5 --epochs 2 --batch-hash "$T/two.sock" "$D" >"$T/$1.w" 2>&1
	grep '^batch ' "$T/$1.1" "$T/$1.2" | sed 's/^[^:]*://' | sort >"$T/$1.a"
	grep '^batch ' "$T/$1.w" | sort >"$T/$1.b"
	ok "$3: a named stream killed after 3 batches and resumed gives the uninterrupted run's batches" \
		cmp -s "$T/$1.a" "$T/$1.b"
	is "$(wc -l <"$T/$1.b" | tr -d ' ')" 8 "... all 8 of them"
}
resumes_whole all "$ALL" "every stage at once"
# The batch stages too (their own spec: ALL and they pass the protocol's
# 512 bytes): each batch's lambda and box come from (seed, epoch, batch),
# so the bytes, soft labels included, are the same from 1 and 3 threads
# and after a named stream is killed and resumed.
MIX='decode | rrc 96 | flip 0.5 | trivialaugment | normalize imagenet | erase value random | f16 | mixup 0.2 | cutmix 1 | switch 0.6 | pair roll | label_smoothing 0.1 | classes 5'
m2=$(hashes "$T/two.sock" "$D" --pipeline "$MIX" --order random --seed 5 --epochs 2)
like "$m2" '^epoch 0 batches 4 samples 16 xxh3 [0-9a-f]{16}; epoch 1 batches 4 samples 16 xxh3 [0-9a-f]{16}$' \
	"batch stages: two epochs hashed"
is "$(hashes "$T/one.sock" "$D" --pipeline "$MIX" --order random --seed 5 --epochs 2)" \
	"$m2" "batch stages: the same bytes from 1 thread as from 2"
is "$(hashes "$T/three.sock" "$D" --pipeline "$MIX" --order random --seed 5 --epochs 2)" \
	"$m2" "batch stages: the same bytes from 3 threads as from 1 and 2"
resumes_whole mix "$MIX" "batch stages"
ok "batch stages: the mixed stream differs from the plain one" \
	test "$m2" != "$(hashes "$T/two.sock" "$D" --pipeline "${MIX%% | mixup*}" --order random --seed 5 --epochs 2)"
h=$(hashes "$T/two.sock" "$T/ds_off" --pipeline "$EVAL" --order sequential)
is "$h" "$(hashes "$T/two.sock" "$D" --pipeline "$EVAL" --order sequential)" \
	"and the same evaluation bytes"

# --- 3. evaluation and u8 specs ----------------------------------------
"$LDCLIENT" --pipeline "$EVAL" --outputs image,label --batch 4 --shapes \
	--stats "$T/two.sock" "$D" >"$T/eval.out"
out=$(cat "$T/eval.out")
like "$out" "^output image dtype 10 shape 4 224 224 3 bytes $((4 * 224 * 224 * 3 * 4))\$" \
	"eval spec: image is f32 [4, 224, 224, 3]"
like "$(flat "$out")" '(^|;)total batches 4 samples 16 [^;]*;stats bad_samples 0 ' \
	"every image, 64x48 to 1200x900, resized and center-cropped"
# Resize and center crop draw nothing: the seed cannot change a byte.
e7=$(hashes "$T/two.sock" "$D" --pipeline "$EVAL" --order sequential --seed 7)
e8=$(hashes "$T/two.sock" "$D" --pipeline "$EVAL" --order sequential --seed 8)
like "$e7" '^epoch 0 batches 4 samples 16 xxh3 ' "eval stream hashed"
is "$e8" "$e7" "the eval spec's bytes do not depend on the seed"
"$LDCLIENT" --pipeline "$U8" --outputs image,label --batch 4 --shapes \
	--stats "$T/one.sock" "$D" >"$T/u8.out"
out=$(cat "$T/u8.out")
like "$out" "^output image dtype 1 shape 4 160 160 3 bytes $((4 * 160 * 160 * 3))\$" \
	"u8 spec: image is u8 [4, 160, 160, 3]"
like "$(flat "$out")" '(^|;)total batches 4 samples 16 [^;]*;stats bad_samples 0 ' \
	"u8 spec: every image delivered"
out=$("$LDCLIENT" --pipeline 'decode | center 48 | u8' --outputs image --batch 16 \
	--shapes "$T/two.sock" "$D")
like "$(flat "$out")" '^output image dtype 1 shape 16 3 48 48 bytes 110592;total batches 1 samples 16 ' \
	"a plain center 48 (nchw u8) takes every image"
out=$("$LDCLIENT" --pipeline 'decode | center 224 | f32' --outputs image --batch 2 --order sequential \
	"$T/two.sock" "$D")
like "$out" '^error: .*sample 1 \(shard [^,]*, record 1, source a_rgb/01\.jpg\): .*100x80 is smaller than the center crop of 224' \
	"a plain center 224 fails at the first image smaller than 224 (100x80)"

# --- 4. bad samples ----------------------------------------------------
# fail, one kind at a time: [good, good, BAD, good], sequential.
for kind in corrupt trunc empty text soi; do
	rm -rf "$T/one_$kind"
	"$MKBADDS" "$T/one_$kind" $(g 0) $(g 1) "$B/$kind.jpg" $(g 2)
	out=$("$LDCLIENT" --pipeline "$TRAIN" --outputs image,label --batch 2 \
		--order sequential --on-bad fail "$T/two.sock" "$T/one_$kind")
	rc=$?
	case $kind in
	corrupt) why='jpeg decode: Corrupt JPEG data: premature end of data segment' ;;
	trunc) why='jpeg decode: Premature end of JPEG file' ;;
	empty) why='empty jpeg \(0 bytes\)' ;;
	text) why='jpeg header: Not a JPEG file' ;;
	soi) why='jpeg header: Premature end of JPEG file' ;;
	esac
	ok "on-bad fail, $kind: the client's stream fails (exit 3, got $rc)" test $rc -eq 3
	like "$out" "^error: .*sample 2 \\(shard [^,]*shard-00000\\.lds, record 2\\): $why" \
		"and the error names sample, shard and record, and says why"
done
out=$("$LDCLIENT" --pipeline "$TRAIN" --outputs image,label --batch 4 --stats "$T/two.sock" "$D")
like "$out" '^total batches 4 samples 16 ' "the daemon still serves a good stream after 5 failed ones"

# skip: 2 epochs of the mixed dataset, in random order; the true order
# comes from a stream of the labels alone, which decodes no JPEG.
"$LDCLIENT" --ids --outputs label --batch 8 --epochs 2 --order random --seed 3 \
	"$T/two.sock" "$T/mixed" >"$T/ref.ids"
ok "the reference order has every record once per epoch" exactly_once "$T/ref.ids" 16 2
logged0=$(grep -c 'skipped bad' "$T/two.sock.log")
"$LDCLIENT" --pipeline "$TRAIN" --outputs image,label --batch 8 --epochs 2 \
	--order random --seed 3 --on-bad skip --ids --stats \
	"$T/two.sock" "$T/mixed" >"$T/skip.out"
rc=$?
out=$(cat "$T/skip.out")
is "$rc" 0 "on-bad skip: the stream completes"
like "$out" '^total batches 4 samples 32 ' "with 2 epochs of 2 batches of 8"
ok "every batch full: 8 ids in each" awk '$1 == "id" { c[$2 " " $3]++ }
	END { n = 0; for (k in c) { n++; if (c[k] != 8) exit 1 }; exit n != 4 }' "$T/skip.out"
like "$out" "^stats bad_samples $((NBAD * 2)) " "bad samples counted once per epoch: $NBAD x 2"
ok "no id of a bad record is delivered" awk -v bad=" $BAD " '
	$1 == "id" && index(bad, " " $4 " ") { exit 1 }' "$T/skip.out"
# Each bad place holds the next good sample of its batch (cyclically);
# every other place holds what the order put there.
ok "each bad sample is replaced by the next good one of its batch" awk -v bad=" $BAD " '
	FNR == 1 { f++ }
	$1 != "id" { next }
	f == 1 { k = $2 " " $3; ref[k, n[k]++] = $4; next }
	{ k = $2 " " $3; got[k, m[k]++] = $4 }
	END {
		for (k in n) {
			if (n[k] != m[k]) exit 1
			for (i = 0; i < n[k]; i++) {
				j = i
				while (index(bad, " " ref[k, j] " ")) {
					j = (j + 1) % n[k]
					if (j == i) exit 1
				}
				if (got[k, i] != ref[k, j]) exit 1
			}
		}
	}' "$T/ref.ids" "$T/skip.out"
new=$(grep 'skipped bad' "$T/two.sock.log" | tail -n +$((logged0 + 1)))
is "$(printf '%s\n' "$new" | grep -c 'skipped bad')" $NBAD "the daemon logs $NBAD bad samples over 2 epochs"
ok "each bad record once, by sample, shard and record" sh -c '
	for r in $1; do
		[ "$(printf "%s\n" "$2" | grep -c "bad sample $r (shard [^,]*shard-00000\.lds, record $r)")" = 1 ] || exit 1
	done' sh "$BAD" "$new"
# The skip policy is as deterministic as the rest.
k2=$(hashes "$T/two.sock" "$T/mixed" --pipeline "$TRAIN" --order random --seed 3 --epochs 2 --on-bad skip --batch 8)
k1=$(hashes "$T/one.sock" "$T/mixed" --pipeline "$TRAIN" --order random --seed 3 --epochs 2 --on-bad skip --batch 8)
like "$k2" '^epoch 0 batches 2 samples 16 xxh3 [0-9a-f]{16}; epoch 1 batches 2 samples 16 xxh3 [0-9a-f]{16}$' \
	"the skip stream of the mixed dataset hashed"
is "$k1" "$k2" "skipping gives the same bytes with 1 thread and 2"

# --- 5. --max-pixels ---------------------------------------------------
# 400x250 is exactly the limit (allowed); 500x375 and 1200x900 are above.
P=$T/px
mkdir -p "$P"
"$MKJPEG" "$P/at.jpg" 400 250 31
"$MKJPEG" "$P/big.jpg" 500 375 32
"$MKJPEG" "$P/small.jpg" 320 240 33
"$MKJPEG" "$P/huge.jpg" 1200 900 34 --progressive
"$MKBADDS" "$T/pxds" "$P/at.jpg" "$P/big.jpg" "$P/small.jpg" "$P/huge.jpg"
ok "daemon with --max-pixels 100000 starts" start_daemon "$T/px.sock" --max-pixels 100000 --threads 1
px=$DAEMON_PID
out=$("$LDCLIENT" --pipeline "$TRAIN" --outputs image,label --batch 4 --epochs 2 \
	--on-bad skip --stats "$T/px.sock" "$T/pxds")
like "$(flat "$out")" '(^|;)total batches 2 samples 8 [^;]*;stats bad_samples 4 ' \
	"the two images above the limit are bad samples, twice (2 epochs)"
pxlog=$(grep 'skipped bad' "$T/px.sock.log")
like "$pxlog" 'record 1\): .*500x375 .*exceeds the limit of 100000 pixels' "the log says which image and why"
is "$(printf '%s\n' "$pxlog" | grep -c 'exceeds the limit')" 2 "and names each of the two once"
out=$("$LDCLIENT" --pipeline "$EVAL" --outputs image,label --batch 2 --order sequential \
	"$T/px.sock" "$T/pxds")
like "$out" '^error: .*sample 1 \(shard [^,]*, record 1\): .*exceeds the limit of 100000 pixels' \
	"on-bad fail: the error names the sample and the pixel limit"
out=$("$LDCLIENT" --pipeline "$TRAIN" --outputs image,label --batch 4 --stats \
	"$T/two.sock" "$T/pxds")
like "$out" '^stats bad_samples 0 ' "the same images are good under the default limit"

# --- 6. bad specs --------------------------------------------------------
# refuses SPEC PATTERN DESC: the open of SPEC fails (exit 3) with a
# message matching PATTERN.
refuses() {
	out=$("$LDCLIENT" --pipeline "$1" --outputs image "$T/two.sock" "$D")
	rc=$?
	like "$rc $out" "^3 error: open: $2" "$3"
}
refuses 'decode | rrc 224 | flip 2' \
	'.*column 25: flip: "2" is not a probability' \
	"naming the column, the stage and the word (exit 3)"
refuses 'decode | rcc 224' \
	'.*column 10: .*"rcc" is not a stage' \
	"an unknown stage, by column and word"
refuses 'decode | rrc 224 | normalize imagenet | u8' \
	'.*column 41: u8: .*cannot hold normalized values' \
	"u8 after normalize, by column"
refuses 'decode | rrc 224 | hue 0.7' \
	'.*column 24: hue: "0.7" is not a hue range in 0..0.5' \
	"a colour stage's value out of range, by column, word and range"
refuses 'decode | rrc 224 | brightnes 0.2' \
	'.*"brightnes" is not a stage: did you mean "brightness"\?' \
	"a misspelt stage, with the one meant"
refuses 'decode | rrc 224 | normalize imagenet | erase value x' \
	'.*erase: "x" is not 0, three values V0,V1,V2 or random' \
	"erase's value, refused by word"
refuses 'decode | rrc 224 | affine shear 95' \
	'.*column 33: affine: "95" is not an angle in -89..89' \
	"a geometric stage's value out of range, by column, word and range"
refuses 'decode | rrc 224 | rotate 9 fill wrap | affine shear 5 fill reflect' \
	'.*column 61: affine: "reflect" differs from the fill given at column 34' \
	"two geometric stages with different fills, by both columns"
refuses 'decode | rrc 224 | randaugment 2 31' \
	'.*randaugment: "31" is not a magnitude in 0..30' \
	"a policy's magnitude out of its bins"
refuses 'decode | rrc 224 | trivialaugmnt' \
	'.*"trivialaugmnt" is not a stage: did you mean "trivialaugment"\?' \
	"a misspelt policy, with the one meant"
refuses 'decode | rrc 224@0..x' \
	'.*column 14: rrc: "224@0..x" is not a schedule' \
	"a schedule that does not parse, by column and word"
refuses 'decode | center 64 | gaussian_blur 3@0..9@10 0.1 2' \
	'.*"3.6" is not an odd kernel size in 1..31 \(the value of schedule "3@0..9@10" at epoch 1\)' \
	"a schedule's value out of range at one epoch, naming the schedule and the epoch"
out=$("$LDCLIENT" --outputs image "$T/two.sock" "$D")
like "$out" '^error: open: .*output image: a jpeg field needs an image pipeline' "a jpeg output without a spec"
out=$("$LDCLIENT" --pipeline "$EVAL" --outputs image --batch 16 "$T/two.sock" "$D")
like "$out" '^total batches 1 samples 16 ' "the daemon serves on after the refused opens"
ok "all four daemons are still alive" kill -0 $two $one $three $px
