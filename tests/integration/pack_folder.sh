#!/bin/sh
# Pack a generated ImageFolder tree and check it against the source files:
# torchvision's class and file order, labels, JPEG bytes kept as they are,
# --max-side re-encoding, --classes, corrupt files with and without
# --skip-bad, and trees with nothing to pack.
. "$top_srcdir/tests/integration/tap.sh"

for t in mkjpeg dsdump jpegdims; do
	[ -x "$TOOLS/$t" ] || skip_all "tests/tools/$t not built"
done
tmpdir
plan 62

LC_ALL=C
export LC_ALL
tab=$(printf '\t')
src=$T/src

# mkimg REL W H [SEED] [--gray]: a JPEG at $src/REL.
mkimg() {
	mkdir -p "$(dirname "$src/$1")"
	"$TOOLS/mkjpeg" "$src/$1" "$2" "$3" ${4:-1} $5 ||
		echo "# mkjpeg $* failed"
}

# Classes that do not sort in creation order, one with a space. Sizes
# on both sides of 64 and both orientations; two grayscale images.
# "a_dog/sub b" sorts between "a_dog/sub" and "a_dog/sub/deep" by
# directory path, as torchvision orders them, unlike a depth-first walk.
mkimg "b_cat/01.jpg" 160 120 1
mkimg "b_cat/02.jpg" 40 30 2
mkimg "b_cat/g.jpg" 150 100 3 --gray
mkimg "b_cat/g2.jpg" 50 40 4 --gray
mkimg "b_cat/wide.jpg" 400 16 5
mkimg "b_cat/tall.jpg" 16 400 6
mkimg "b_cat/sq64.jpg" 64 64 7
mkimg "b_cat/sq65.jpg" 65 65 8
mkimg "b_cat/x/y.jpg" 90 200 9
mkimg "b_cat/tiny.jpeg" 1 1 10
mkimg "a_dog/01.jpg" 40 30 11
mkimg "a_dog/02.jpeg" 200 150 12
mkimg "a_dog/03.JPG" 64 64 13
mkimg "a_dog/04.JPEG" 65 20 14
mkimg "a_dog/z.jpg" 30 200 15
mkimg "a_dog/sub/n.jpg" 120 90 16
mkimg "a_dog/sub/deep/m.jpg" 17 33 17
mkimg "a_dog/sub b/o.jpg" 90 91 18
mkimg "a_dog/10.jpg" 300 10 19
mkimg "a_dog/05.jpg" 8 8 20
mkimg "c_x y/with space.jpg" 100 70 21
mkimg "c_x y/a.jpg" 70 100 22
mkimg "c_x y/b.jpg" 63 63 23
mkimg "c_x y/c.jpg" 640 480 24
mkimg "c_x y/d.jpg" 333 222 25
mkimg "c_x y/e.jpg" 2 129 26
mkimg "c_x y/f.jpg" 129 2 27
mkimg "c_x y/g.jpg" 128 128 28
mkimg "c_x y/h h/i.jpg" 99 66 29
mkimg "c_x y/j.jpg" 45 45 30
# What ImageFolder does not count: other extensions (even with JPEG
# content), hidden files and directories, files directly in SRC.
echo "not an image" >"$src/a_dog/notes.txt"
cp "$src/a_dog/01.jpg" "$src/b_cat/image.gif"
cp "$src/a_dog/01.jpg" "$src/b_cat/.hidden.jpg"
mkimg "c_x y/.cache/h.jpg" 20 20 31
mkimg ".hidden_class/x.jpg" 20 20 32
mkimg "top.jpg" 20 20 33

# The expected samples, "LABEL<TAB>PATH" in order, built apart from the
# source: classes sorted, then directory path, then file name.
expect() {
	(cd "$src" && label=0 &&
	for cls in $(find . -mindepth 1 -maxdepth 1 -type d ! -name '.*' |
		     sed 's|^\./||; s| |%20|g' | sort); do
		cls=$(echo "$cls" | sed 's|%20| |g')
		find "$cls" -name '.*' -prune -o -type f \
			\( -iname '*.jpg' -o -iname '*.jpeg' \) \
			-printf '%h\t%f\n' |
			sort -t "$tab" -k1,1 -k2,2 |
			sed "s|^|$label$tab|; s|$tab\([^$tab]*\)\$|/\1|"
		label=$((label + 1))
	done)
}
expect >"$T/expect"
total=$(wc -l <"$T/expect")

# check_records DS: labels and JPEG bytes against $T/expect; prints the
# number of mismatches (each is described on stderr).
check_records() {
	i=0 bad=0
	while IFS="$tab" read -r label path; do
		got=$("$TOOLS/dsdump" --raw $i label "$1" | od -An -tu8 | tr -d ' ')
		if [ "$got" != "$label" ]; then
			echo "# record $i ($path): label $got, want $label" >&2
			bad=$((bad + 1))
		fi
		"$TOOLS/dsdump" --raw $i image "$1" >"$T/img"
		if [ "${2:-bytes}" = bytes ] && ! cmp -s "$T/img" "$src/$path"; then
			echo "# record $i: image differs from $path" >&2
			bad=$((bad + 1))
		fi
		if [ "${2:-}" = pixels ] &&
			! "$TOOLS/jpegdims" --same "$T/img" "$src/$path"; then
			echo "# record $i: image decodes unlike $path" >&2
			bad=$((bad + 1))
		fi
		i=$((i + 1))
	done <"$T/expect"
	echo $bad
}

# classes_of DS: the manifest's class names, comma-separated.
classes_of() {
	sed -n '/"classes"/,/\]/p' "$1/manifest.json" |
		sed -n 's/^ *"\(.*\)",\{0,1\}$/\1/p' | paste -sd, -
}

is "$total" 30 "the tree holds 30 ImageFolder samples"
out=$("$LOADERCTL" pack --jpeg-restart off "$src" "$T/plain" 2>&1)
is "$?" 0 "pack detects and packs an ImageFolder tree"
like "$out" '^packed 30 samples' "pack reports 30 samples"
is "$("$TOOLS/dsdump" "$T/plain" | wc -l)" 30 "dataset holds 30 records"
is "$(classes_of "$T/plain")" "a_dog,b_cat,c_x y" "manifest lists classes in sorted order"
like "$(cat "$T/plain/manifest.json")" '"source_format": "imagefolder"' \
	"manifest records the imagefolder format"
is "$(check_records "$T/plain")" 0 \
	"labels are class indices and JPEG bytes are the files', in torchvision order"
# The walk order is the subtle part: say it once more in plain terms.
is "$(sed -n 's/^0\t//p' "$T/expect" | tr '\n' ' ')" \
	"a_dog/01.jpg a_dog/02.jpeg a_dog/03.JPG a_dog/04.JPEG a_dog/05.jpg a_dog/10.jpg a_dog/z.jpg a_dog/sub/n.jpg a_dog/sub b/o.jpg a_dog/sub/deep/m.jpg " \
	"expected order is by directory path, then file name"
"$LOADERCTL" verify "$T/plain" >"$T/verify.out" 2>&1
is "$?" 0 "verify passes on the packed tree"
# verify's pixel limit is the stream's: the largest image, 640x480, has 307200.
"$LOADERCTL" verify --max-pixels 307200 "$T/plain" >"$T/verify.out" 2>&1
is "$?" 0 "verify --max-pixels at the largest image passes"
out=$("$LOADERCTL" verify --max-pixels 307199 "$T/plain" 2>&1)
is "$?" 1 "verify --max-pixels one below it finds a bad record"
like "$out" 'bad: .*record [0-9]+ .*640x480 pixels exceeds the limit of 307199 pixels' \
	"and names the record and the limit, as a stream would"

ok "--classes renames the classes" "$LOADERCTL" pack \
	--classes 'dog,cat,other' "$src" "$T/named"
is "$(classes_of "$T/named")" "dog,cat,other" "renamed classes in label order"
out=$("$LOADERCTL" pack --classes 'dog,cat' "$src" "$T/badnames" 2>&1)
is "$?" 2 "--classes with the wrong count fails"
like "$out" '2 classes.* 3 class directories' "and says how many there are"

# By default every JPEG is transcoded to restart segments: other bytes,
# the same pixels, and inspect and verify say so.
out=$("$LOADERCTL" pack "$src" "$T/rst" 2>&1)
is "$?" 0 "pack with restart segments (the default)"
like "$out" 'JPEGs: 30 with restart segments \([-+][0-9.]+ % in size\), 0 stored as they were' \
	"pack's summary counts the transcoded JPEGs"
is "$(check_records "$T/rst" pixels)" 0 \
	"every packed JPEG decodes to its file's pixels, in torchvision order"
"$TOOLS/dsdump" --raw 0 image "$T/rst" >"$T/img"
ok "the packed bytes are not the file's" \
	sh -c '! cmp -s "$1" "$2"' sh "$T/img" "$src/a_dog/01.jpg"
like "$("$LOADERCTL" inspect "$T/rst")" 'jpeg: +30 of 30 JPEGs restart-indexed \(a marker every 1 MCU\)' \
	"inspect reports the restart-indexed records"
like "$("$LOADERCTL" inspect "$T/plain")" 'jpeg: +stored as they were' \
	"and those packed without"
like "$("$LOADERCTL" verify "$T/rst")" 'restart segments of 30 JPEGs checked' \
	"verify walks every segment"
out=$("$LOADERCTL" pack --jpeg-restart 0 "$src" "$T/r0" 2>&1)
is "$?" 2 "--jpeg-restart 0 is refused"
like "$out" '--jpeg-restart: "0" is neither off nor 1..64 MCUs' "with the range"
out=$("$LOADERCTL" pack --jpeg-restart 65 "$src" "$T/r0" 2>&1)
is "$?" 2 "--jpeg-restart 65 is refused"

# --max-side 64: larger images are shrunk to exactly 64 on the longer
# side with the aspect ratio kept; the others are stored byte for byte.
out=$("$LOADERCTL" pack --jpeg-restart off --max-side 64 "$src" "$T/small" 2>&1)
is "$?" 0 "pack --max-side 64"
i=0 bad=0 shrunk=0
while IFS="$tab" read -r label path; do
	set -- $("$TOOLS/jpegdims" "$src/$path")
	sw=$1 sh=$2 sc=$3
	"$TOOLS/dsdump" --raw $i image "$T/small" >"$T/img"
	set -- $("$TOOLS/jpegdims" "$T/img")
	if [ "$sw" -le 64 ] && [ "$sh" -le 64 ]; then
		cmp -s "$T/img" "$src/$path" ||
			{ echo "# $path: within 64 but changed"; bad=$((bad + 1)); }
	else
		want=$(awk -v w="$sw" -v h="$sh" -v c="$sc" 'BEGIN {
			lo = w < h ? w : h; hi = w < h ? h : w
			s = int((lo * 64 * 2 + hi) / (hi * 2)); if (s < 1) s = 1
			print (w >= h ? 64 : s), (w >= h ? s : 64), c }')
		[ "$1 $2 $3" = "$want" ] ||
			{ echo "# $path: ${sw}x$sh shrunk to $1 $2 $3, want $want"; bad=$((bad + 1)); }
		shrunk=$((shrunk + 1))
	fi
	i=$((i + 1))
done <"$T/expect"
is "$bad" 0 "longer sides above 64 become 64 (aspect kept, gray stays gray), others untouched"
is "$shrunk" 20 "20 of the images were above 64 and re-encoded"
"$LOADERCTL" verify "$T/small" >"$T/verify.out" 2>&1
is "$?" 0 "verify passes on the re-encoded dataset"

# A file named .jpg that is no JPEG stops the pack, by name; --skip-bad
# packs the rest and names it.
printf 'GIF89a not a jpeg at all' >"$src/b_cat/corrupt.jpg"
out=$("$LOADERCTL" pack "$src" "$T/corrupt" 2>&1)
is "$?" 2 "a corrupt JPEG stops the pack"
like "$out" 'b_cat/corrupt\.jpg' "the error names the file"
ok "and no dataset is left behind" test ! -e "$T/corrupt/manifest.json"
out=$("$LOADERCTL" pack --skip-bad "$src" "$T/skip" 2>&1)
is "$?" 0 "--skip-bad packs the rest"
like "$out" 'skipped .*b_cat/corrupt\.jpg' "and names the skipped file"
is "$("$TOOLS/dsdump" "$T/skip" | wc -l)" 30 "all 30 good samples packed"
rm -f "$src/b_cat/corrupt.jpg"

# A JPEG cut to 90 % of its bytes has a valid header and most of its
# data: libjpeg cannot decode it whole, so it is bad at pack time, with
# restart segments or without, and what pack writes passes verify.
sz=$(stat -c %s "$src/c_x y/c.jpg")
head -c $((sz * 9 / 10)) "$src/c_x y/c.jpg" >"$src/a_dog/cut.jpg"
for rst in 1 off; do
	out=$("$LOADERCTL" pack --jpeg-restart $rst "$src" "$T/cut$rst" 2>&1)
	like "$?: $out" "^2: .*a_dog/cut\.jpg: .*Premature end of JPEG file" \
		"--jpeg-restart $rst: a truncated JPEG stops the pack, by name"
	out=$("$LOADERCTL" pack --skip-bad --jpeg-restart $rst "$src" "$T/cut$rst" 2>&1)
	like "$?: $out" "^0: loaderctl pack: skipped .*a_dog/cut\.jpg" \
		"--jpeg-restart $rst --skip-bad: skipped, by name"
	"$LOADERCTL" verify "$T/cut$rst" >/dev/null 2>&1
	is "$?: $("$TOOLS/dsdump" "$T/cut$rst" | wc -l)" "0: 30" \
		"--jpeg-restart $rst: verify passes on the 30 good samples packed"
done
rm -f "$src/a_dog/cut.jpg"

# A photo above the stream's pixel limit (9000x8000, 72M > 64M) is
# refused, saying how to pack it; --max-pixels scales it on the way in.
B=$T/big
mkdir -p "$B/a"
"$TOOLS/mkjpeg" "$B/a/huge.jpg" 9000 8000 7
"$TOOLS/mkjpeg" "$B/a/small.jpg" 90 80 8
out=$("$LOADERCTL" pack "$B" "$T/big_no" 2>&1)
like "$?: $out" '^2: .*huge\.jpg: .*9000x8000 pixels exceeds the limit .*--max-pixels or --max-side' \
	"a 9000x8000 photo is refused, naming the options that scale it"
out=$("$LOADERCTL" pack --max-pixels 16M "$B" "$T/big_ds" 2>&1)
is "$?" 0 "--max-pixels 16M packs it"
"$TOOLS/dsdump" --raw 0 image "$T/big_ds" >"$T/big.jpg"
"$TOOLS/dsdump" --raw 1 image "$T/big_ds" >"$T/small.jpg"
set -- $("$TOOLS/jpegdims" "$T/big.jpg")
ok "scaled to at most 16M pixels, the aspect kept (${1}x$2)" \
	sh -c "[ $(($1 * $2)) -le 16777216 ] && [ $(($1 * $2)) -gt 16000000 ] &&
		[ $(($1 * 8000 / $2)) -ge 8990 ] && [ $(($1 * 8000 / $2)) -le 9010 ]"
is "$("$TOOLS/jpegdims" "$T/small.jpg")" "90 80 3" "a small one is not touched"
ok "verify passes on it" "$LOADERCTL" verify "$T/big_ds"
rm -rf "$B" "$T/big_no" "$T/big_ds"

# CMYK and YCCK above --max-side are decoded as a stream decodes them
# (to RGB) and re-encoded as RGB; a small one is stored as it is.
mkdir -p "$T/cmyk/k"
"$TOOLS/mkjpeg" "$T/cmyk/k/a.jpg" 200 150 41 --cmyk
"$TOOLS/mkjpeg" "$T/cmyk/k/b.jpg" 150 200 42 --cmyk --progressive
"$TOOLS/mkjpeg" "$T/cmyk/k/c.jpg" 40 30 43 --cmyk
out=$("$LOADERCTL" pack --jpeg-restart off --max-side 64 "$T/cmyk" "$T/cmyk_small" 2>&1)
is "$?" 0 "pack --max-side 64 takes CMYK JPEGs larger than 64"
dims=$(for i in 0 1 2; do
	"$TOOLS/dsdump" --raw $i image "$T/cmyk_small" >"$T/img"
	"$TOOLS/jpegdims" "$T/img"
done | paste -sd, -)
is "$dims" "64 48 3,48 64 3,40 30 4" "the large ones become RGB at 64, the small one stays CMYK"
"$TOOLS/dsdump" --raw 2 image "$T/cmyk_small" >"$T/img"
ok "the small one's bytes are the file's" cmp -s "$T/img" "$T/cmyk/k/c.jpg"
"$LOADERCTL" verify "$T/cmyk_small" >"$T/verify.out" 2>&1
is "$?" 0 "verify passes on them"

# Nothing to pack.
mkdir "$T/empty"
out=$("$LOADERCTL" pack "$T/empty" "$T/e1" 2>&1)
is "$?" 2 "an empty directory is not detected as anything"
out=$("$LOADERCTL" pack --format imagefolder "$T/empty" "$T/e2" 2>&1)
like "$out" 'no class directories' "--format imagefolder on it: no class directories"
mkdir -p "$T/noimg/cls"
echo text >"$T/noimg/cls/readme.txt"
out=$("$LOADERCTL" pack --format imagefolder "$T/noimg" "$T/e3" 2>&1)
rc=$?
like "$rc: $out" '^2: .*no \.jpg, \.jpeg or \.png files' "class directories without JPEGs: exit 2, said so"

# Hostile trees. A FIFO named like a JPEG is no regular file: refused by
# name, skipped with --skip-bad, and nothing blocks on it.
mkdir -p "$T/fifo/c"
"$TOOLS/mkjpeg" "$T/fifo/c/a.jpg" 64 48 1
mkfifo "$T/fifo/c/x.jpg"
out=$(timeout 20 "$LOADERCTL" pack "$T/fifo" "$T/f1" 2>&1)
rc=$?
like "$rc: $out" '^2: .*x\.jpg.*not a regular file' "a FIFO named x.jpg stops the pack by name, at once"
out=$(timeout 20 "$LOADERCTL" pack --skip-bad "$T/fifo" "$T/f2" 2>&1)
is "$?" 0 "--skip-bad packs past the FIFO"
is "$("$LOADERCTL" inspect "$T/f2" | sed -n 's/^records: *\([0-9]*\) .*/\1/p')" 1 \
	"one sample: the JPEG"
# A diamond of symbolic links to one directory, and a link loop: each
# directory's JPEGs are packed once.
mkdir -p "$T/dia/c/real"
"$TOOLS/mkjpeg" "$T/dia/c/top.jpg" 64 48 3
"$TOOLS/mkjpeg" "$T/dia/c/real/a.jpg" 64 48 2
d=$T/dia/c/real
for lvl in 1 2 3 4 5 6; do
	mkdir -p "$T/dia/c/l$lvl"
	ln -s "$d" "$T/dia/c/l$lvl/x"
	ln -s "$d" "$T/dia/c/l$lvl/y"
	d=$T/dia/c/l$lvl
done
ln -s "$T/dia/c" "$T/dia/c/real/loop"
out=$("$LOADERCTL" pack "$T/dia" "$T/d1" 2>&1)
is "$?" 0 "a tree of links to one directory packs"
like "$out" 'a directory already packed \(reached again through a symbolic link\): skipped' \
	"and says which directories it skipped"
n=$("$LOADERCTL" inspect "$T/d1" | sed -n 's/^records: *\([0-9]*\) .*/\1/p')
is "$n" 2 "the linked JPEG is one sample, not one per path to it (2 in all)"
# Symbolic links planted in OUTDIR are not written through.
mkdir -p "$T/plant"
echo victim >"$T/victim1"
echo victim >"$T/victim2"
ln -s "$T/victim1" "$T/plant/manifest.json.tmp"
ln -s "$T/victim2" "$T/plant/shard-00000.lds"
"$LOADERCTL" pack --force --skip-bad "$T/fifo" "$T/plant" >/dev/null 2>&1
ok "pack into an OUTDIR with planted links succeeds" "$LOADERCTL" verify "$T/plant"
is "$(cat "$T/victim1") $(cat "$T/victim2")" "victim victim" \
	"and the files the links pointed at are untouched"
