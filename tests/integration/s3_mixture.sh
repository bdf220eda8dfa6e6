#!/bin/sh
# A mixture with an s3:// member beside a local one, against a real Ceph
# RADOS Gateway (tests/integration/ceph.sh): the object-store member is
# staged into the shard cache as a dataset of its own is, and the mixture
# gives, batch for batch and byte for byte, what the same mixture of the
# two datasets from local disk gives, each member's samples of each epoch
# as planned; the same from a mixture file naming the URL, and after the
# daemon restarts under a named stream.
. "$top_srcdir/tests/integration/tap.sh"
. "$top_srcdir/tests/integration/ceph.sh"

ceph_need
src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
[ -f "$src/t10k-images-idx3-ubyte.gz" ] || [ -f "$src/t10k-images-idx3-ubyte" ] ||
	skip_all "Fashion-MNIST not installed (Debian package dataset-fashion-mnist)"
tmpdir
trap 'for p in $DAEMONS; do kill -9 $p 2>/dev/null; done; ceph_stop; rm -rf "$T"' EXIT
plan 9

ceph_start_checked "$T/ceph" "a Ceph cluster with its S3 gateway starts on loopback"
GW=$AWS_ENDPOINT_URL
put() {
	curl -s -o /dev/null -w '%{http_code}' --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
		--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -T "$1" "$GW/data/$2"
}
upload() {
	_st=
	for _f in "$1"/*.lds "$1/manifest.json"; do
		_st="$_st$(put "$_f" "$2/${_f##*/}")"
	done
	echo "$_st" | grep -qx '\(200\)*'
}
curl -s -o /dev/null --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
	--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
	-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X PUT "$GW/data"
"$LOADERCTL" pack --split test --shard-size 2M "$src" "$T/fm" >/dev/null
"$LOADERCTL" pack --split test --shard-size 1M --shuffle 9 "$src" "$T/fm9" >/dev/null
ok "the Fashion-MNIST test set packed and uploaded as s3://data/fm" upload "$T/fm/test" fm

start_daemon "$T/d.sock" --threads 2
LOG=$T/d.sock.log

# multiset FILE: "EPOCH MEMBER ID COUNT" of its "id" lines, sorted.
multiset() {
	awk '$1 == "id" { n[$2 " " $5 " " $4]++ } END { for (k in n) print k, n[k] }' "$1" | sort
}
ARGS="--order random --seed 4 --epochs 2 --batch 100 --ids --batch-hash"
REMOTE="--member proportion:0.5:s3://data/fm --member proportion:0.5:$T/fm9/test"
LOCAL="--member proportion:0.5:$T/fm/test --member proportion:0.5:$T/fm9/test"
# batches FILE: its "id" and "batch" lines (ids, members, digests).
batches() { grep -E '^(id|batch) ' "$1"; }
"$LDCLIENT" $ARGS $REMOTE "$T/d.sock" mix >"$T/remote" 2>&1
is "$?" 0 "a mixture of s3://data/fm and a local dataset streams"
grep '^error' "$T/remote" | sed 's/^/# /'
"$LDCLIENT" $ARGS $LOCAL "$T/d.sock" mix >"$T/local" 2>&1
batches "$T/remote" >"$T/remote.b"
batches "$T/local" >"$T/local.b"
ok "its batches are those of the same mixture from local disk, byte for byte" \
	test -s "$T/local.b" -a "$(cmp "$T/remote.b" "$T/local.b" 2>&1)" = ""
multiset "$T/remote" >"$T/remote.set"
ok "each member gives its 10000 samples each epoch, each once" awk '
	{ s[$1 " " $2] += $4; d[$1 " " $2]++; if ($4 != 1) bad = 1 }
	END { exit bad || s["0 0"] != 10000 || s["0 1"] != 10000 ||
	      s["1 0"] != 10000 || s["1 1"] != 10000 }' "$T/remote.set"
like "$(grep 's3://data/fm: ' "$LOG" | head -1)" 's3://data/fm: [0-9]+ shards fetched \([0-9]+ bytes\) into the shard cache' \
	"the s3:// member was staged into the shard cache"

# A mixture file naming the URL.
cat >"$T/mix.json" <<EOF
{"format": "loaderd-mixture", "version": 1, "members": [
 {"path": "s3://data/fm", "proportion": 0.5},
 {"path": "fm9/test", "proportion": 0.5}]}
EOF
"$LDCLIENT" $ARGS "$T/d.sock" "$T/mix.json" >"$T/file" 2>&1
batches "$T/file" >"$T/file.b"
grep '^error' "$T/file" | sed 's/^/# /'
ok "a mixture file with an s3:// member gives the same batches" \
	test -s "$T/file.b" -a "$(cmp "$T/file.b" "$T/local.b" 2>&1)" = ""

# A named mixture with an s3:// member rides a daemon restart.
"$LDCLIENT" --name s3mix $ARGS $REMOTE --sleep-ms 5 "$T/d.sock" mix >"$T/ride" 2>&1 &
rp=$!
wait_for '^batch ' "$T/ride"
sleep 0.5
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
sleep 0.3
start_daemon "$T/d.sock" --threads 2
wait_exit "$rp" 120
is "$?" 0 "a named mixture with an s3:// member rides a daemon SIGKILL"
grep '^error' "$T/ride" | sed 's/^/# /'
grep '^batch ' "$T/ride" | sort >"$T/ride.sorted"
grep '^batch ' "$T/local" | sort >"$T/local.sorted"
ok "... every batch once, byte for byte, as the uninterrupted stream" \
	test -s "$T/local.sorted" -a "$(cmp "$T/ride.sorted" "$T/local.sorted" 2>&1)" = ""
