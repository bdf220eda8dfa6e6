#!/bin/sh
# Holding several batches and resuming mid-epoch, through a real loaderd:
# a client holding up to slots - 1 batches gets the same bytes as one
# that holds one; holding slots batches is refused with EBUSY; a release
# out of order is refused (ldclient checks it on every batch); a stream
# started at (epoch, batch) delivers exactly the batches an uninterrupted
# stream delivers from there.
. "$top_srcdir/tests/integration/tap.sh"

need_fmnist
tmpdir
plan 9

"$LOADERCTL" pack --split test --shard-size 1M "$src" "$T/ds" >/dev/null
D=$T/ds/test
ok "daemon starts" start_daemon "$T/d.sock" --threads 2

bh() { "$LDCLIENT" --batch-hash --order random --seed 7 --batch 100 \
	--outputs image:unit,label "$@" "$T/d.sock" "$D"; }

bh --epochs 2 >"$T/one"
is "$(grep -c '^batch ' "$T/one")" 200 "two epochs of 100 batches, one held at a time"
bh --epochs 2 --slots 8 --keep 7 >"$T/seven"
is "$(grep '^batch ' "$T/seven")" "$(grep '^batch ' "$T/one")" \
	"holding 7 batches of an 8-slot ring: the same batches, byte for byte"
ok "no release out of order was accepted" sh -c "! grep -q '^error' '$T/seven'"
bh --epochs 2 --slots 4 --keep 4 >"$T/four" || true
like "$(cat "$T/four")" '^error: .*busy' "holding 4 batches of a 4-slot ring: EBUSY"
is "$(grep -c '^batch ' "$T/four")" 3 "... after 3 batches were handed out"

bh --epochs 1 --start-epoch 1 --start-batch 37 >"$T/resume"
awk '$1 == "batch" && ($2 > 1 || ($2 == 1 && $3 >= 37))' "$T/one" >"$T/want"
is "$(grep '^batch ' "$T/resume")" "$(cat "$T/want")" \
	"started at epoch 1 batch 37: the same 63 batches as an uninterrupted stream"
bh --epochs 2 --start-epoch 0 --start-batch 99 >"$T/last"
is "$(grep -c '^batch ' "$T/last")" 101 "started at the last batch of epoch 0: 1 + 100 batches"
bh --epochs 1 --start-batch 100 >"$T/past" || true
like "$(cat "$T/past")" 'start batch 100 of an epoch of 100 batches' \
	"a start batch past the epoch is refused, with the numbers"
