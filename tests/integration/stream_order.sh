#!/bin/sh
# The order contract end to end, through a real loaderd: exactly once per
# epoch for world 1, 2 and 3; the same bytes with 1 or 4 threads and on
# every run; epochs differ; shapes and dtypes as asked.
. "$top_srcdir/tests/integration/tap.sh"

need_fmnist
tmpdir
plan 25

"$LOADERCTL" pack --split test --shard-size 1M "$src" "$T/plain" >/dev/null
"$LOADERCTL" pack --split test --shard-size 1M --dict "$src" "$T/dict" >/dev/null
D=$T/plain/test
ok "daemon with 1 thread starts" start_daemon "$T/one.sock" --threads 1
ok "daemon with 4 threads starts" start_daemon "$T/four.sock" --threads 4

# exactly_once FILE EPOCHS: every id 0..9999 once per epoch in "id E B ID" lines.
exactly_once() {
	awk -v epochs="$2" '$1 == "id" { n[$2 " " $4]++; e[$2] = 1 }
		END { bad = 0
		      for (k in n) if (n[k] != 1) bad++
		      ne = 0; for (x in e) ne++
		      if (ne != epochs) bad++
		      for (x in e) for (i = 0; i < 10000; i++) if (!((x " " i) in n)) bad++
		      exit bad != 0 }' "$1"
}

for order in random quasi sequential; do
	"$LDCLIENT" --ids --order $order --seed 5 --epochs 2 --batch 100 \
		"$T/one.sock" "$D" >"$T/ids.$order"
	ok "world 1, $order: every sample exactly once in each of 2 epochs" exactly_once "$T/ids.$order" 2
done

for world in 2 3; do
	: >"$T/ids.w$world"
	counts=
	r=0
	while [ $r -lt $world ]; do
		"$LDCLIENT" --ids --order random --seed 9 --epochs 2 --batch 64 \
			--rank $r --world $world "$T/four.sock" "$D" >"$T/r$r"
		cat "$T/r$r" >>"$T/ids.w$world"
		counts="$counts $(grep -c '^id 0 ' "$T/r$r")/$(awk '$1 == "id" && $2 == 0 { b[$3] = 1 } END { n = 0; for (k in b) n++; print n }' "$T/r$r")"
		r=$((r + 1))
	done
	ok "world $world: the ranks together deliver every sample exactly once per epoch" \
		exactly_once "$T/ids.w$world" 2
	nb=$(printf '%s\n' $counts | cut -d/ -f2 | sort -u | wc -l)
	is "$nb" 1 "world $world: every rank gets the same number of batches ($counts)"
done

"$LDCLIENT" --ids --order random --seed 9 --epochs 1 --batch 64 --rank 1 \
	--world 3 --drop-last "$T/one.sock" "$D" >"$T/dl"
short=$(awk '$1 == "id" { c[$3]++ } END { s = 0; for (b in c) if (c[b] != 64) s++; print s }' "$T/dl")
is "$short" 0 "drop_last: every batch is full"

# hashes ARGS...: the per-epoch digests of a stream (not the timing line).
hashes() { "$LDCLIENT" --hash "$@" | grep '^epoch'; }
h1=$(hashes --order random --seed 3 --epochs 2 --outputs image:unit,label "$T/one.sock" "$D")
h4=$(hashes --order random --seed 3 --epochs 2 --outputs image:unit,label "$T/four.sock" "$D")
h4b=$(hashes --order random --seed 3 --epochs 2 --outputs image:unit,label "$T/four.sock" "$D")
like "$h1" '^epoch 1 batches 40 samples 10000 xxh3' "two epochs of 40 batches delivered"
is "$h4" "$h1" "4 threads deliver the same bytes as 1 thread"
is "$h4b" "$h4" "a second run delivers the same bytes"
e0=$(printf '%s\n' "$h1" | awk '$2 == 0 { print $NF }')
e1=$(printf '%s\n' "$h1" | awk '$2 == 1 { print $NF }')
ok "epoch 0 and epoch 1 differ" test "$e0" != "$e1"
hs=$(hashes --order random --seed 4 --epochs 1 "$T/one.sock" "$D" | awk '{ print $NF }')
ok "another seed gives another order" test "$hs" != "$e0"
hz=$(hashes --order random --seed 3 --epochs 2 --outputs image:unit,label "$T/four.sock" "$T/dict/test")
is "$hz" "$h1" "a zstd-dictionary dataset streams the same bytes as the plain one"
hq1=$(hashes --order quasi --seed 3 --epochs 1 "$T/one.sock" "$D")
hq4=$(hashes --order quasi --seed 3 --epochs 1 --threads 2 "$T/four.sock" "$D")
is "$hq4" "$hq1" "quasi order: same bytes with 1 and 2 threads"
# A prefetch budget below two batches, and a short last batch (10000 =
# 1428 x 7 + 4): the arena's head stops below a batch's need, and the
# next epoch's first batch must still find room once the arena is empty.
hp1=$(hashes --order sequential --batch 7 --epochs 2 --prefetch 8192 --timeout-ms 5000 "$T/one.sock" "$D")
hp2=$(hashes --order sequential --batch 7 --epochs 2 "$T/one.sock" "$D")
like "$hp1" "^epoch 1 batches 1429 samples 10000 xxh3 ${hp2##* }\$" \
	"an 8 kB prefetch budget with 5.5 kB batches: 2 epochs, the bytes of a large budget"

# O_DIRECT reads (aligned, past the page cache) deliver the same bytes.
if dd if="$D/shard-00000.lds" of=/dev/null bs=4096 count=1 iflag=direct 2>/dev/null; then
	hd=$(hashes --direct --order random --seed 3 --epochs 2 --outputs image:unit,label "$T/four.sock" "$D")
	is "$hd" "$h1" "O_DIRECT reads deliver the same bytes (random order)"
	hs1=$(hashes --order sequential --epochs 1 "$T/one.sock" "$D")
	hs2=$(hashes --direct --order sequential --epochs 1 "$T/one.sock" "$D")
	is "$hs2" "$hs1" "O_DIRECT reads deliver the same bytes (sequential order)"
else
	for i in 1 2; do
		tap_n=$((tap_n + 1))
		echo "ok $tap_n # SKIP the file system here has no O_DIRECT"
	done
fi

out=$("$LDCLIENT" --shapes --batch 32 --outputs image:unit,label:f32 "$T/one.sock" "$D")
like "$out" 'output image dtype 10 shape 32 28 28 bytes 100352' "image as f32 [32,28,28]"
like "$out" 'output label dtype 10 shape 32 bytes 128' "label cast to f32 [32]"
out=$("$LDCLIENT" --shapes --batch 32 "$T/one.sock" "$D")
like "$out" 'output image dtype 1 shape 32 28 28 bytes 25088' "fields as stored: image u8"
like "$out" 'output label dtype 8 shape 32 bytes 256' "fields as stored: label i64"
out=$("$LDCLIENT" --outputs nosuch "$T/one.sock" "$D")
like "$out" 'error: open: .*nosuch' "an unknown output field is refused, named"
