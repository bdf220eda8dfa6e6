#!/bin/sh
# loaderctl pack, inspect and verify on s3:// datasets, against the real
# Ceph gateway (tests/integration/ceph.sh): the Fashion-MNIST test split
# packed to s3://data/fm stores the very bytes a local pack writes (its
# 6 MiB shard as a two-part multipart upload), inspect shows what it
# shows for the local pack with the URL in place of the path, verify
# finds nothing wrong (and names a corrupted object by its URL); a
# missing bucket, a wrong secret and a dataset already there are refused
# by name; a shard the store refuses leaves no manifest behind, and a
# refused manifest comes after every shard; no staging directory is left.
. "$top_srcdir/tests/integration/tap.sh"
. "$top_srcdir/tests/integration/ceph.sh"

ceph_need
need_fmnist
tmpdir
trap 'ceph_stop; rm -rf "$T"' EXIT
plan 44

ceph_start_checked "$T/ceph" "mon, memstore OSD and radosgw start on loopback"
# Staging directories are made here, so that none may be left unseen.
TMPDIR=$T/tmp
export TMPDIR
mkdir "$TMPDIR"

# s3 CURL-ARGS...: a request signed as the test user; the body goes to
# $T/body, the HTTP status to stdout.
s3() {
	curl -s -o "$T/body" -w '%{http_code}' --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
		--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@"
}
EP=$AWS_ENDPOINT_URL

is "$(s3 -X PUT "$EP/data")" 200 "curl makes the bucket"

# 6 MiB shards split the 10000 test images in two: shard-00000 (just
# under 6 MiB) is above a 5 MiB part size, so it goes up in two parts.
opts="--split test --shuffle 42 --shard-size 6M"
"$LOADERCTL" pack $opts "$src" "$T/local" >/dev/null 2>&1
ok "a local pack with the same options" test -f "$T/local/test/manifest.json"
big=$(stat -c %s "$T/local/test/shard-00000.lds")
ok "its first shard is above the 5 MiB part size ($big bytes)" test "$big" -gt 5242880

out=$("$LOADERCTL" pack $opts --part-size 5M "$src" s3://data/fm 2>"$T/pack.err")
is "$?" 0 "pack to s3://data/fm exits 0"
like "$out" '^packed 10000 samples into 2 shards in s3://data/fm/test: ' \
	"its summary names the URL, not the staging directory"
like "$out" '^uploaded 3 objects, 8\.2 MB to s3://data/fm in [0-9.]+ s \([0-9.]+ [kMG]?B/s\)' \
	"and a line sums up the upload: objects, bytes, rate"
is "$(ls -A "$TMPDIR")" "" "the staging directory is removed"

# Every object is the local pack's file, byte for byte.
same=0 n=0
for f in "$T/local/test"/shard-*.lds "$T/local/test/manifest.json"; do
	n=$((n + 1))
	b=${f##*/}
	[ "$(s3 "$EP/data/fm/test/$b")" = 200 ] && cmp -s "$T/body" "$f" &&
		same=$((same + 1))
done
is "$same/$n" "3/3" "each stored object equals the local pack's file"
etag=$(curl -s -I --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
	--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
	-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
	"$EP/data/fm/test/shard-00000.lds" | tr -d '\r' | sed -n 's/^[Ee][Tt][Aa][Gg]: *//p')
like "$etag" '-2"$' "shard-00000 was stored as a two-part multipart upload (ETag $etag)"
etag=$(curl -s -I --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
	--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
	-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
	"$EP/data/fm/test/shard-00001.lds" | tr -d '\r' | sed -n 's/^[Ee][Tt][Aa][Gg]: *//p')
like "$etag" '^"[0-9a-f]{32}"$' "shard-00001, below the part size, in one PUT (ETag $etag)"

# inspect: what it shows for the local pack, the URL in place of its path.
"$LOADERCTL" inspect --shards "$T/local/test" | sed "s|$T/local/test|s3://data/fm/test|" >"$T/want"
"$LOADERCTL" inspect --shards s3://data/fm/test >"$T/got" 2>"$T/inspect.err"
is "$?" 0 "inspect s3://data/fm/test exits 0"
is "$(cat "$T/got")" "$(cat "$T/want")" "and prints what inspect of the local pack prints"
"$LOADERCTL" inspect --json "$T/local/test" | sed "s|$T/local/test|s3://data/fm/test|" >"$T/want"
"$LOADERCTL" inspect --json s3://data/fm/test >"$T/got" 2>/dev/null
is "$(cat "$T/got")" "$(cat "$T/want")" "inspect --json too"
like "$(cat "$T/inspect.err")" '^fetched 3 objects, 8\.2 MB from s3://data/fm/test in ' \
	"inspect says on stderr what it fetched"
"$LOADERCTL" inspect "$T/local/test/shard-00001.lds" | sed "s|$T/local/test|s3://data/fm/test|" >"$T/want"
"$LOADERCTL" inspect s3://data/fm/test/shard-00001.lds >"$T/got" 2>/dev/null
is "$(cat "$T/got")" "$(cat "$T/want")" "inspect of one shard object prints what it prints for the file"
out=$("$LOADERCTL" inspect s3://data/nothing 2>&1)
like "$?: $out" '^2: .*s3://data/nothing: no such dataset' "inspect of a missing dataset exits 2 and says so"

# verify
out=$("$LOADERCTL" verify s3://data/fm/test 2>"$T/verify.err")
is "$?" 0 "verify s3://data/fm/test exits 0"
like "$out" '^verified 10000 records in 2 shards .*: 0 bad records, 0 bad shards$' \
	"and reports 10000 records, no bad record"
is "$(ls -A "$TMPDIR")" "" "inspect and verify remove their staging directories"

# Refusals, each naming what is at fault.
out=$("$LOADERCTL" pack $opts "$src" s3://nosuch/fm 2>&1)
is "$?" 2 "a pack to a missing bucket exits 2"
like "$out" 'bucket "nosuch" does not exist' "and names the bucket"
out=$(AWS_SECRET_ACCESS_KEY=ldtest0WRONG0secret "$LOADERCTL" pack $opts "$src" s3://data/fm2 2>&1)
is "$?" 2 "a pack signed with a wrong secret exits 2"
like "$out" "s3://data/fm2/test/manifest.json: .*403.*access denied.*access key id $AWS_ACCESS_KEY_ID" \
	"and says 403, access denied, naming the object and the access key id"
case $out in *ldtest0WRONG0secret* | *"$AWS_SECRET_ACCESS_KEY"*) leak=yes ;; *) leak=no ;; esac
is "$leak" no "without showing a secret"
out=$("$LOADERCTL" pack $opts "$src" s3://data/fm 2>&1)
is "$?" 2 "packing again to s3://data/fm without --force exits 2"
like "$out" 's3://data/fm/test already holds a dataset.*--force' "and says why"
out=$("$LOADERCTL" pack $opts --tmp-dir "$T/no-such-dir" "$src" s3://data/fm3 2>&1)
like "$?: $out" "^2: .*staging directory in $T/no-such-dir" "--tmp-dir chooses where to stage"
out=$("$LOADERCTL" pack --force $opts --part-size 5M "$src" s3://data/fm)
is "$?" 0 "--force replaces it"
like "$out" '^removed 2 shards of the dataset it replaced$' \
	"and says it removed the replaced dataset's shards"
# The new shards went up beside the old ones, under names the old
# manifest did not use; the old ones are gone now.
s3 "$EP/data/fm/test/manifest.json" >/dev/null
names=$(/usr/bin/python3 -c 'import json,sys; print(" ".join(s["file"] for s in json.load(open(sys.argv[1]))["shards"]))' "$T/body")
like "$names" '^shard-[0-9a-f]{8}-00000\.lds shard-[0-9a-f]{8}-00001\.lds$' \
	"the new manifest names shards of new names ($names)"
same=0 i=0
for b in $names; do
	[ "$(s3 "$EP/data/fm/test/$b")" = 200 ] &&
		cmp -s "$T/body" "$T/local/test/shard-0000$i.lds" && same=$((same + 1))
	i=$((i + 1))
done
is "$same" 2 "each is the local pack's shard, byte for byte"
is "$(s3 -I "$EP/data/fm/test/shard-00000.lds") $(s3 -I "$EP/data/fm/test/shard-00001.lds")" \
	"404 404" "and the replaced dataset's shards were deleted"
fm_shard1=$(echo "$names" | cut -d' ' -f2)

# A --force pack killed (SIGKILL) at random moments: the dataset at the
# URL is always the old one or the new one, whole, and verify passes:
# the old shards stay readable until the new manifest is in place.
kopt="--split test --shard-size 1M"
"$LOADERCTL" pack $kopt --shuffle 1 "$src" s3://data/kill >/dev/null 2>&1
t0=$(date +%s%N)
"$LOADERCTL" pack --force $kopt --shuffle 2 "$src" s3://data/kill >/dev/null 2>&1
ms=$((($(date +%s%N) - t0) / 1000000 + 50))
seed=${PACK_KILL_SEED:-$(date +%s)}
echo "# a --force pack to s3:// takes $ms ms; kill moments from seed $seed"
good=0 seeds=
k=0
while [ $k -lt 8 ]; do
	k=$((k + 1))
	at=$(awk -v s="$seed" -v k="$k" -v m="$ms" \
		'BEGIN { srand((s % 100000) * 100 + k); printf "%.3f", rand() * m * 1.25 / 1000 }')
	"$LOADERCTL" pack --force $kopt --shuffle $((k % 2 + 1)) "$src" \
		s3://data/kill >/dev/null 2>&1 &
	pid=$!
	sleep "$at"
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	rm -rf "$TMPDIR"/*
	s3 "$EP/data/kill/test/manifest.json" >/dev/null
	sd=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["packed"]["shuffle_seed"])' "$T/body" 2>/dev/null)
	seeds="$seeds $sd"
	if "$LOADERCTL" verify s3://data/kill/test >/dev/null 2>&1 &&
		{ [ "$sd" = 1 ] || [ "$sd" = 2 ]; }; then
		good=$((good + 1))
	else
		echo "# kill $k at $at s: verify failed or seed '$sd'"
	fi
done
echo "# the dataset's shuffle seed after each kill:$seeds"
is "$good" 8 "after 8 kills at random moments the dataset is whole, old or new, and verify passes"

# A dataset stored at the URL while a pack without --force packs (here
# its manifest, put by curl) is not replaced: the pack looks again
# before it stores anything.
"$LOADERCTL" pack $kopt --compress zstd --level 19 --shuffle 3 "$src" s3://data/race >"$T/race.out" 2>&1 &
pid=$!
sleep 0.3
s3 -T "$T/local/test/manifest.json" "$EP/data/race/test/manifest.json" >/dev/null
wait $pid
like "$?: $(cat "$T/race.out")" "^2: .*s3://data/race/test already holds a dataset" \
	"a pack refuses a dataset that came while it packed"
s3 "$EP/data/race/test/manifest.json" >/dev/null
ok "and leaves it as it was" cmp -s "$T/body" "$T/local/test/manifest.json"

# The store refuses one shard (a bucket policy): no manifest is stored.
# It refuses the manifest: every shard was stored before it was tried.
is "$(s3 -X PUT "$EP/deny")" 200 "curl makes a second bucket"
cat >"$T/policy.json" <<'EOF'
{"Version": "2012-10-17", "Statement": [{"Effect": "Deny", "Principal": "*",
 "Action": "s3:PutObject", "Resource": ["arn:aws:s3:::deny/a/test/shard-00001.lds",
 "arn:aws:s3:::deny/b/test/manifest.json"]}]}
EOF
is "$(s3 -X PUT -T "$T/policy.json" "$EP/deny?policy=")" 204 "and a policy that refuses two objects"
out=$("$LOADERCTL" pack $opts "$src" s3://deny/a 2>&1)
like "$?: $out" '^2: .*s3://deny/a/test/shard-00001.lds: PUT HTTP 403' \
	"a refused shard fails the pack, naming the object"
is "$(s3 -I "$EP/deny/a/test/manifest.json")" 404 "and no manifest is stored"
out=$("$LOADERCTL" pack $opts "$src" s3://deny/b 2>&1)
like "$?: $out" '^2: .*s3://deny/b/test/manifest.json: PUT HTTP 403' "a refused manifest fails the pack"
is "$(s3 -I "$EP/deny/b/test/shard-00000.lds") $(s3 -I "$EP/deny/b/test/shard-00001.lds")" \
	"200 200" "after both shards were stored"
is "$(ls -A "$TMPDIR")" "" "failed packs remove their staging directories too"

# A corrupted object: verify exits 1 and names it by its URL.
cp "$T/local/test/shard-00001.lds" "$T/bad.lds"
printf 'X' | dd of="$T/bad.lds" bs=1 seek=100000 conv=notrunc 2>/dev/null
s3 -T "$T/bad.lds" "$EP/data/fm/test/$fm_shard1" >/dev/null
out=$("$LOADERCTL" verify s3://data/fm/test 2>/dev/null)
like "$?: $out" "^1: bad: s3://data/fm/test/$fm_shard1: record " \
	"verify of a corrupted object exits 1 and names it by its URL"
