#!/bin/sh
# Pack the bundled Fashion-MNIST, check it bit for bit against the IDX
# files, and check that verify catches corruption anywhere in a shard.
. "$top_srcdir/tests/integration/tap.sh"

src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
[ -r "$src/train-labels-idx1-ubyte.gz" ] ||
	skip_all "Fashion-MNIST not installed (Debian package dataset-fashion-mnist)"
tmpdir
plan 29

ok "pack plain" "$LOADERCTL" pack "$src" "$T/plain"
ok "train split bit-exact against the IDX files" "$TOOLS/idxcheck" \
	"$src/train-images-idx3-ubyte.gz" "$src/train-labels-idx1-ubyte.gz" "$T/plain/train"
ok "test split bit-exact against the IDX files" "$TOOLS/idxcheck" \
	"$src/t10k-images-idx3-ubyte.gz" "$src/t10k-labels-idx1-ubyte.gz" "$T/plain/test"
out=$("$LOADERCTL" inspect --json "$T/plain/train")
like "$out" '"records": 60000' "inspect counts 60000 train records"
like "$out" '"schema": "image: tensor u8 \[28,28\]"' "inspect shows the image schema"
out=$("$LOADERCTL" inspect --json "$T/plain/test")
like "$out" '"records": 10000' "inspect counts 10000 test records"

# A small dictionary keeps training quick under sanitizers too.
ok "pack zstd with a trained dictionary" "$LOADERCTL" pack --compress zstd --dict --dict-size 16K \
	--classes 'T-shirt/top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Ankle boot' \
	"$src" "$T/dict"
ok "dictionary-compressed train split bit-exact" "$TOOLS/idxcheck" \
	"$src/train-images-idx3-ubyte.gz" "$src/train-labels-idx1-ubyte.gz" "$T/dict/train"
ok "dictionary-compressed test split bit-exact" "$TOOLS/idxcheck" \
	"$src/t10k-images-idx3-ubyte.gz" "$src/t10k-labels-idx1-ubyte.gz" "$T/dict/test"
out=$("$LOADERCTL" inspect "$T/dict/train")
like "$out" 'zstd 3 dict .*dictionary [0-9]+ B' "inspect shows the dictionary"
tiny=$("$LOADERCTL" pack --dict --dict-size 16K --shard-size 8K --split test "$src" "$T/tiny" 2>&1)
like "$?: $tiny" '^2: .*--shard-size 8192 is not above --dict-size 16384.*single record' \
	"a shard size below the dictionary is refused, not a shard per record"
like "$out" '9=Ankle boot' "class names kept in label order"
p=$(du -b "$T/plain/train"/shard-*.lds | awk '{s+=$1} END {print s}')
z=$(du -b "$T/dict/train"/shard-*.lds | awk '{s+=$1} END {print s}')
ok "compressed shards are smaller ($z < $p bytes)" test "$z" -lt "$p"
out=$("$LOADERCTL" verify "$T/plain/train" "$T/dict/train" "$T/dict/test")
is "$?" 0 "verify passes on good datasets"
like "$out" ' 0 bad records, 0 bad shards' "verify reports no bad records"

ok "pack shuffled into 4 MB shards" "$LOADERCTL" pack --split test --shuffle 42 \
	--shard-size 4M "$src" "$T/shuf"
n=$(ls "$T/shuf/test"/shard-*.lds | wc -l)
ok "several shards written ($n)" test "$n" -gt 1
ok "shuffled test split is a permutation of the IDX items" "$TOOLS/idxcheck" --shuffled \
	"$src/t10k-images-idx3-ubyte.gz" "$src/t10k-labels-idx1-ubyte.gz" "$T/shuf/test"
"$LOADERCTL" pack --split test --shuffle 42 --shard-size 4M "$src" "$T/shuf2" >/dev/null
ok "same seed, same bytes" cmp "$T/shuf/test/shard-00001.lds" "$T/shuf2/test/shard-00001.lds"
ok "--split packs only that split" test ! -e "$T/shuf/train"
ok "pack creates missing parent directories" "$LOADERCTL" pack --split test "$src" "$T/a/b/c"

out=$("$LOADERCTL" pack "$src" "$T/plain" 2>&1)
is "$?" 2 "packing over a dataset without --force fails"
like "$out" 'already holds a dataset.*--force' "and says why"
ok "--force replaces it" "$LOADERCTL" pack --force --split test "$src" "$T/plain"

# Flip one byte at 60 spread offsets of a compressed shard, one at a time:
# every flip must be caught, and the report must name the shard.
shard=$T/dict/test/shard-00000.lds
size=$(stat -c %s "$shard")
cp "$shard" "$T/orig.lds"
missed=0 unnamed=0
for off in $(awk -v s="$size" 'BEGIN { srand(7); for (i = 0; i < 60; i++) print int(rand() * s); print 0; print s - 1; print s - 40 }'); do
	cp "$T/orig.lds" "$shard"
	b=$(od -An -tu1 -j "$off" -N1 "$shard" | tr -d ' ')
	printf "$(printf '\\%03o' $(((b + 1) % 256)))" |
		dd of="$shard" bs=1 seek="$off" conv=notrunc 2>/dev/null
	out=$("$LOADERCTL" verify "$T/dict/test" 2>&1)
	[ $? -eq 1 ] || { missed=$((missed + 1)); echo "# missed flip at $off"; }
	printf '%s' "$out" | grep -q "shard-00000.lds" || unnamed=$((unnamed + 1))
done
is "$missed" 0 "every one of 63 byte flips is caught by verify"
is "$unnamed" 0 "every report names the shard file"
cp "$T/orig.lds" "$shard"

truncate -s $((size - 1)) "$shard"
out=$("$LOADERCTL" verify "$T/dict/test" 2>&1)
is "$?" 1 "a shard one byte short fails verify"
like "$out" 'shard-00000.lds.*(truncated|bytes)' "the report names the file and the problem"
cp "$T/orig.lds" "$shard"
ok "restored shard verifies again" "$LOADERCTL" verify "$T/dict/test"
