#!/bin/sh
# Streams of s3:// datasets through real daemons and their shard caches,
# against a real Ceph RADOS Gateway (tests/integration/ceph.sh) reached
# through tests/integration/s3fault.py, a proxy that logs every request
# and fails some on purpose. A stream of s3://BUCKET/PREFIX gives the
# very batches the same dataset gives from local disk, in every order,
# rank and world and across a resume, with path-style or virtual-host
# addressing; the second stream is served from
# the shard cache without a byte fetched; three daemons as three nodes
# deliver each sample once per epoch across their ranks, a late rank
# holding up none, and a job resumed with world 3, then 2, then 4 across
# them from the positions its trainer gathered keeps each sample once
# per epoch; credentials are the client's own (another user's, a
# wrong secret or none are refused, cached or not) and are found in no
# log, cache or state file; throttling, resets and short bodies are
# retried; a changed object is fetched anew; a damaged one is refused
# naming it, and nothing of it is kept; the cache keeps to its budget,
# and a dataset larger than it streams, the rest read in place.
. "$top_srcdir/tests/integration/tap.sh"
. "$top_srcdir/tests/integration/ceph.sh"

ceph_need
PY=/usr/bin/python3
[ -x "$PY" ] && "$PY" -c "import numpy" 2>/dev/null ||
	skip_all "python3 with NumPy not installed"
src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
[ -f "$src/t10k-images-idx3-ubyte.gz" ] || [ -f "$src/t10k-images-idx3-ubyte" ] ||
	skip_all "Fashion-MNIST not installed (Debian package dataset-fashion-mnist)"
tmpdir
PXPID=
trap 'for p in $DAEMONS $PXPID; do kill -9 $p 2>/dev/null; done; ceph_stop; rm -rf "$T"' EXIT
plan 105

ceph_start_checked "$T/ceph" "a Ceph cluster with its S3 gateway starts on loopback"
GW=$AWS_ENDPOINT_URL
SECRET=$AWS_SECRET_ACCESS_KEY

# The proxy every request goes through: its log counts what the store
# served, its faults file says what to fail.
: >"$T/px.faults"
"$PY" "$top_srcdir/tests/integration/s3fault.py" "$GW" "$T/px.port" \
	"$T/px.log" "$T/px.faults" 2>"$T/px.err" &
PXPID=$!
i=0
while [ ! -s "$T/px.port" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
AWS_ENDPOINT_URL=http://127.0.0.1:$(cat "$T/px.port")
export AWS_ENDPOINT_URL

# put FILE KEY: store FILE as KEY with curl (the gateway directly).
put() {
	curl -s -o /dev/null -w '%{http_code}' --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
		--user "$AWS_ACCESS_KEY_ID:$SECRET" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
		-T "$1" "$GW/data/$2"
}
# upload DIR PREFIX: a packed dataset's files, the manifest last.
upload() {
	_st=
	for _f in "$1"/*.lds "$1/manifest.json"; do
		_st="$_st$(put "$_f" "$2/${_f##*/}")"
	done
	echo "$_st" | tr -d 0-9 | grep -q . && return 1
	echo "$_st" | grep -qv '^\(200\)*$' && return 1
	return 0
}
# damaged SRC NAME OFFSET: SRC's dataset, with the byte at OFFSET of its
# first shard flipped, copied to $T/NAME and uploaded as NAME.
damaged() {
	mkdir "$T/$2"
	cp "$1"/* "$T/$2/"
	"$PY" -c 'import sys
f = open(sys.argv[1], "r+b"); o = int(sys.argv[2]); f.seek(o); b = f.read(1)
f.seek(o); f.write(bytes([b[0] ^ 0x55]))' "$T/$2/shard-00000.lds" "$3"
	upload "$T/$2" "$2"
}
# gets PREFIX: bytes of shard GETs, whole or ranged, the store served for
# PREFIX so far; ranged PREFIX: those of ranged GETs (reads in place, and
# the parts of shards fetched as their stream reads them).
gets() {
	awk -v p="/data/$1/shard-" '$1 == "GET" && index($2, p) == 1 && ($3 == 200 || $3 == 206) { n += $4 }
		END { print n + 0 }' "$T/px.log"
}
# gets_settled NAME WANT: gets NAME once it has reached WANT, or after
# 10 s. The proxy logs a response after its last byte is sent, which may
# be after the daemon has said the fetch ended; a count that goes past
# WANT (a shard fetched twice) still shows.
gets_settled() {
	_i=0
	while [ "$(gets "$1")" -lt "$2" ] && [ $_i -lt 200 ]; do
		sleep 0.05
		_i=$((_i + 1))
	done
	gets "$1"
}
ranged() {
	awk -v p="/data/$1/shard-" '$1 == "GET" && index($2, p) == 1 && $3 == 206 { n += $4 }
		END { print n + 0 }' "$T/px.log"
}

curl -s -o /dev/null --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
	--user "$AWS_ACCESS_KEY_ID:$SECRET" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
	-X PUT "$GW/data"
"$LOADERCTL" pack --split test --shard-size 2M "$src" "$T/fm" >/dev/null &&
	"$LOADERCTL" pack --split test --shard-size 2M --shuffle 9 "$src" "$T/fm9" >/dev/null
ok "a bucket, and the Fashion-MNIST test set packed in 2 MB shards and uploaded" \
	upload "$T/fm/test" fm
NSH=$(ls "$T/fm/test"/*.lds | wc -l)
DSB=$(cat "$T/fm/test"/*.lds | wc -c)

start_daemon "$T/d.sock" --threads 2 --cache-memory 64M
LOG=$T/d.sock.log
URL=s3://data/fm

# --- the same batches as from local disk -----------------------------
same_batches "$T/d.sock" "random order, 2 epochs" "$URL" "$T/fm/test" \
	--order random --seed 5 --epochs 2 --batch 100
like "$(grep "$URL: " "$LOG" | head -1)" \
	"$NSH shards: 0 from the shard cache, $NSH fetching \($DSB bytes\) as the stream reads" \
	"the first stream's shards were fetched as it read them"
ok "every shard came whole into the shard cache" \
	wait_for "$URL: $NSH shards fetched ($DSB bytes) into the shard cache" "$LOG"
is "$(gets fm)" "$DSB" "the store served the dataset's bytes once"
same_batches "$T/d.sock" "quasi order, drop_last" "$URL" "$T/fm/test" \
	--order quasi --seed 2 --drop-last --batch 64
like "$(grep "$URL: " "$LOG" | tail -1)" "$NSH shards: $NSH from the shard cache, 0 fetching" \
	"the next stream is served from the shard cache"
is "$(gets fm)" "$DSB" "and the store served no more shard bytes for it"
# The node cache knows the shard cache's files as the same files from
# one stream to the next (the stage leaves their times alone).
out=$("$LDCLIENT" --stats --order random --seed 11 "$T/d.sock" "$URL" 2>&1 |
	sed -n 's/^stats .* cache_hits \([0-9]*\) cache_misses \([0-9]*\)$/\1 \2/p')
like "$out" '^[1-9][0-9]* 0$' "a later stream's records all come from the node cache"

# Virtual-host addressing: the bucket in the host name (radosgw's
# "rgw dns name" is localhost, and curl resolves data.localhost itself).
AWS_ENDPOINT_URL=http://localhost:${GW##*:} AWS_S3_ADDRESSING_STYLE=virtual
export AWS_S3_ADDRESSING_STYLE
same_batches "$T/d.sock" "virtual-host addressing" "$URL" "$T/fm/test" \
	--order random --seed 3
AWS_ENDPOINT_URL=http://127.0.0.1:$(cat "$T/px.port")
unset AWS_S3_ADDRESSING_STYLE
once_per_epoch "$T/d.sock" "$URL" 3 2 10000 \
	"ranks 0..2 of world 3 deliver each sample once per epoch" --order random --seed 4
# One shard of many chunks (the train set, 47 MB): its records arrive in
# 4 MiB ranges fetched at once, the stream reading each as it comes.
"$LOADERCTL" pack --split train --shard-size 64M "$src" "$T/big" >/dev/null
upload "$T/big/train" big || echo "# upload big failed"
BIGB=$(cat "$T/big/train"/*.lds | wc -c)
same_batches "$T/d.sock" "a shard of $BIGB bytes, in chunks" s3://data/big "$T/big/train" \
	--order sequential --batch 500
ok "it came whole into the shard cache" \
	wait_for "s3://data/big: 1 shards fetched ($BIGB bytes) into the shard cache" "$LOG"
# A byte damaged inside a chunk: its record fails its checksum as the
# bytes come; the stream skips it, and the shard is not kept.
damaged "$T/big/train" bigbad 20000000 || echo "# upload bigbad failed"
out=$("$LDCLIENT" --on-bad skip --stats --order sequential --batch 500 "$T/d.sock" s3://data/bigbad 2>&1)
like "$?: $out" '^0: .*total batches 120 ' "a shard with a record damaged mid-chunk streams"
like "$out" '^stats bad_samples 1 ' \
	"skipping that record, and only it"
ok "and the copy is refused for that record" \
	wait_for 's3://data/bigbad: 1 of 1 shards could not be fetched .*: 1 of its [0-9]* records do not match their checksums as fetched' "$LOG"
kept=0
for f in "$T/d.sock.cache/s3"/*; do
	cmp -s "$f" "$T/bigbad/shard-00000.lds" && kept=$((kept + 1))
done
is "$kept" 0 "and is not in the shard cache"
# A chunk cut short, then damaged when fetched again: what the cut try
# checked is checked again, so the copy is refused.
upload "$T/big/train" bigflip || echo "# upload bigflip failed"
printf 'short 1 bigflip/shard-00000.lds bytes=5242880-\nflip 1 bigflip/shard-00000.lds bytes=5242880-\n' \
	>"$T/px.faults"
"$LDCLIENT" --on-bad skip --order sequential --batch 500 "$T/d.sock" s3://data/bigflip >/dev/null 2>&1
ok "a chunk damaged on its second try makes the copy refused" \
	wait_for 's3://data/bigflip: 1 of 1 shards could not be fetched .*: 1 of its [0-9]* records do not match their checksums as fetched' "$LOG"
is "$(grep -c 'bigflip/shard-00000.lds short ' "$T/px.log") $(grep -c 's3://data/bigflip: .*shards fetched (' "$LOG")" \
	"1 0" "(the chunk was cut once; the shard was not kept)"
: >"$T/px.faults"

# --- the Python package and the reference trainer ----------------------
# pylabels DATASET: the labels of one random epoch through loader.Stream.
pylabels() {
	"$top_builddir/loader-python" - "$T/d.sock" "$1" <<'EOF' 2>&1
import sys
import loader
import numpy
s = loader.Stream(sys.argv[2], socket=sys.argv[1], batch_size=100,
                  order="random", seed=12, outputs="label")
n, h = 0, 0
for b in s:
    for v in numpy.asarray(b["label"]).tolist():
        h = (h * 31 + int(v) + 1) % (1 << 61)
        n += 1
s.close()
print(n, h)
EOF
}
got=$(pylabels "$URL")
like "$got" '^10000 [0-9]+$' "loader.Stream streams the s3:// dataset"
is "$got" "$(pylabels "$T/fm/test")" "with the labels, in the order, of the local one"
"$LOADERCTL" pack --shard-size 8M "$src" s3://data/full >/dev/null 2>"$T/full.err"
out=$("$top_builddir/loader-train" --data s3://data/full --socket "$T/d.sock" \
	--epochs 1 --target 0 --quiet 2>&1)
is "$?" 0 "loader-train --data s3://data/full trains an epoch (both splits packed there by loaderctl)"
like "$out" 'test_accuracy=0\.[6-9]' "and its MLP learns from the streamed batches"

# --- a named stream resumes --------------------------------------------
"$LDCLIENT" --name s3job --order random --seed 8 --ids --kill-after 7 \
	"$T/d.sock" "$URL" >"$T/r0" 2>&1
"$LDCLIENT" --name s3job --order random --seed 8 --ids "$T/d.sock" "$URL" >"$T/r1" 2>&1
like "$(grep '^start' "$T/r1")" '^start 0 [1-9][0-9]* resumed 1$' \
	"a named stream killed after 7 batches resumes where it stopped"
is "$(cat "$T/r0" "$T/r1" | awk '$1 == "id" { print $2, $4 }' | sort -u | wc -l) $(cat "$T/r0" "$T/r1" | grep -c '^id')" \
	"10000 10000" "and its epoch delivers every sample exactly once over the two runs"

# --- whose credentials ---------------------------------------------------
ceph_user other ldtest1access ldtest1secret0key0for0ceph0tests
out=$(AWS_ACCESS_KEY_ID=ldtest1access AWS_SECRET_ACCESS_KEY=ldtest1secret0key0for0ceph0tests \
	"$LDCLIENT" "$T/d.sock" "$URL" 2>&1)
like "$out" "Permission denied.*s3://data/fm/manifest.json.*403" \
	"another user's credentials are refused, though the shards are cached"
# A bucket policy lets that user read fm/ but one shard: every object is
# checked with the client's own credentials, cached or not.
allow='{"Effect": "Allow", "Principal": {"AWS": ["arn:aws:iam:::user/other"]},
  "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::data/fm/*"]}'
deny='{"Effect": "Deny", "Principal": {"AWS": ["arn:aws:iam:::user/other"]},
  "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::data/fm/shard-00001.lds"]}'
echo "{\"Version\": \"2012-10-17\", \"Statement\": [$allow, $deny]}" >"$T/policy.json"
echo "{\"Version\": \"2012-10-17\", \"Statement\": [$allow]}" >"$T/allow.json"
policy() {
	curl -s -o /dev/null -w '%{http_code}' --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
		--user "$AWS_ACCESS_KEY_ID:$SECRET" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
		"$@" "$GW/data?policy="
}
st=$(policy -X PUT -T "$T/policy.json")
out=$(AWS_ACCESS_KEY_ID=ldtest1access AWS_SECRET_ACCESS_KEY=ldtest1secret0key0for0ceph0tests \
	"$LDCLIENT" "$T/d.sock" "$URL" 2>&1)
like "$st: $out" "^204: .*Permission denied.*s3://data/fm/shard-00001.lds: HEAD HTTP 403" \
	"a user the store lets read all but one cached shard is refused, naming that shard"
st=$(policy -X PUT -T "$T/allow.json")
out=$(AWS_ACCESS_KEY_ID=ldtest1access AWS_SECRET_ACCESS_KEY=ldtest1secret0key0for0ceph0tests \
	"$LDCLIENT" --hash "$T/d.sock" "$URL" 2>&1 | grep '^epoch')
is "$st: $out" "204: $("$LDCLIENT" --hash "$T/d.sock" "$T/fm/test" 2>&1 | grep '^epoch')" \
	"allowed every shard, that user streams the dataset"
like "$(grep "$URL: " "$LOG" | tail -1)" "$NSH from the shard cache, 0 fetching" \
	"from the copy another user's stream put in the shard cache"
policy -X DELETE >/dev/null
out=$(AWS_SECRET_ACCESS_KEY=wrong0secret "$LDCLIENT" "$T/d.sock" "$URL" 2>&1)
like "$out" "s3://data/fm/manifest.json.*403" "a wrong secret is refused"
out=$(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY HOME="$T" \
	"$LDCLIENT" "$T/d.sock" "$URL" 2>&1)
like "$out" "s3://data/fm/manifest.json.*403" "no credentials (anonymous) are refused"
# The profile's credentials file is read in the client's process.
mkdir -p "$T/home/.aws"
printf '[job]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
	"$AWS_ACCESS_KEY_ID" "$SECRET" >"$T/home/.aws/credentials"
out=$(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY HOME="$T/home" AWS_PROFILE=job \
	"$LDCLIENT" --hash "$T/d.sock" "$URL" 2>&1 | grep '^epoch')
is "$out" "$("$LDCLIENT" --hash "$T/d.sock" "$T/fm/test" 2>&1 | grep '^epoch')" \
	"credentials from ~/.aws/credentials (AWS_PROFILE) stream it"
hits=$(grep -rl -e "$SECRET" -e ldtest1secret0key0for0ceph0tests "$LOG" "$T/d.sock.cache" \
	"$T/d.sock.state" 2>/dev/null | wc -l)
is "$hits" 0 "no secret is in the daemon's log, shard cache or state"

# --- faults ----------------------------------------------------------------
upload "$T/fm/test" fm2 || echo "# upload fm2 failed"
printf '503 2\nreset 1\nshort 1 GET /data/fm2/shard-00001\n500 1 HEAD\n' >"$T/px.faults"
same_batches "$T/d.sock" "through 503 SlowDown, 500, a reset and a short body" \
	s3://data/fm2 "$T/fm/test" --order random --seed 5
like "$(grep 's3://data/fm2: ' "$LOG" | grep -E ' [1-9][0-9]* retries')" ' [1-9][0-9]* retries' \
	"the daemon says it retried"
is "$(cat "$T/px.faults" | awk '{ n += $2 } END { print n + 0 }')" 0 \
	"every fault asked for was met"
printf '503 100\n' >"$T/px.faults"
out=$("$LDCLIENT" "$T/d.sock" s3://data/fm2/again 2>&1)
like "$out" 's3://data/fm2/again/manifest.json: GET HTTP 503 \(SlowDown\), after [0-9]+ tries' \
	"a store that keeps throttling ends the open with a clear error"
: >"$T/px.faults"
out=$("$LDCLIENT" --hash "$T/d.sock" "$T/fm/test" 2>&1 | grep -c '^epoch')
is "$out" 1 "and the daemon goes on serving other streams"

# Two streams opened at once on a cold daemon: one fetches, the other
# waits for it, and the store serves the dataset once.
before=$(gets fm2)
start_daemon "$T/two.sock" --threads 1
"$LDCLIENT" --seed 1 --order random "$T/two.sock" s3://data/fm2 >"$T/two1" 2>&1 &
p1=$!
"$LDCLIENT" --seed 2 --order random "$T/two.sock" s3://data/fm2 >"$T/two2" 2>&1
wait $p1
is "$(grep -c '^total batches 40 samples 10000' "$T/two1" "$T/two2" | cut -d: -f2 | tr '\n' ' ')" "1 1 " \
	"two streams opened at once on a cold daemon both stream"
is "$(($(gets_settled fm2 $((before + DSB))) - before))" "$DSB" "and the store served the dataset's bytes once"
# A stream opened while another's shards arrive (sent slowly) reads them
# as they come, from that fetch: its open does not wait for the fetch to
# end, and the fetch goes on for it after the first stream is gone.
rm -f "$T/two.sock.cache/s3"/*.shard
printf 'slow 100 GET /data/fm2/shard-\n' >"$T/px.faults"
before=$(gets fm2)
# stages N: the two.sock log has more than N stage lines of fm2.
stages() {
	[ "$(grep -c "s3://data/fm2: $NSH shards:" "$T/two.sock.log")" -gt "$1" ]
}
n0=$(grep -c "s3://data/fm2: $NSH shards:" "$T/two.sock.log")
f0=$(grep -c "s3://data/fm2: $NSH shards fetched" "$T/two.sock.log")
"$LDCLIENT" --seed 1 --order random "$T/two.sock" s3://data/fm2 >"$T/lk1" 2>&1 &
p1=$!
i=0
while ! stages "$n0" && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
"$LDCLIENT" --seed 2 --order random "$T/two.sock" s3://data/fm2 >"$T/lk2" 2>&1 &
p2=$!
i=0
while ! stages $((n0 + 1)) && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
f1=$(grep -c "s3://data/fm2: $NSH shards fetched" "$T/two.sock.log")
like "$f1 $(grep "s3://data/fm2: $NSH shards:" "$T/two.sock.log" | tail -1)" \
	"^$f0 .*0 fetching .*, $NSH fetched by another stream meanwhile" \
	"a stream opened while another's shards arrive starts before they have all come"
kill -9 $p1 2>/dev/null
wait $p1 2>/dev/null
wait_exit $p2 120
: >"$T/px.faults"
is "$(grep -c '^total batches 40 samples 10000' "$T/lk2")" 1 \
	"and streams them whole, though the stream that fetches them was killed"
i=0
while [ "$(grep -c "s3://data/fm2: $NSH shards fetched" "$T/two.sock.log")" -le "$f0" ] &&
	[ $i -lt 200 ]; do
	sleep 0.05
	i=$((i + 1))
done
is "$(($(gets_settled fm2 $((before + DSB))) - before))" "$DSB" \
	"and the store served the dataset's bytes once, for both"
like "$(grep "s3://data/fm2: $NSH shards fetched" "$T/two.sock.log" | tail -1)" \
	'the readers waited ([1-9][0-9]*\.[0-9]*|0\.[0-9]*[1-9][0-9]*) s for them$' \
	"and says how long the streams waited for the slow store"
# Another dataset of as many shards staged while the first's arrive (one
# sent slowly): both stream whole. Each stage's temporary files must have
# names of their own; names made from where a stage's items lay in memory
# (freed, then handed out again to the next stage) could repeat, and the
# second stage would fail with "File exists" and delete the first's file.
upload "$T/fm/test" fm3 || echo "# upload fm3 failed"
rm -f "$T/two.sock.cache/s3"/*.shard
printf 'slow 1 GET /data/fm2/shard-\n' >"$T/px.faults"
n0=$(grep -c "s3://data/fm2: $NSH shards:" "$T/two.sock.log")
"$LDCLIENT" "$T/two.sock" s3://data/fm2 >"$T/tn1" 2>&1 &
p1=$!
i=0
while ! stages "$n0" && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
out=$("$LDCLIENT" "$T/two.sock" s3://data/fm3 2>&1)
like "$out" '^total batches 40 samples 10000' \
	"a dataset staged while another's shards arrive streams whole"
wait_exit $p1 120
: >"$T/px.faults"
is "$(grep -c '^total batches 40 samples 10000' "$T/tn1")" 1 \
	"and so does the other, its fetch undisturbed"
is "$(grep -c 'File exists' "$T/two.sock.log")" 0 "no stage found its temporary file taken"
# A client that leaves while its dataset is staged (throttled by the
# store): the daemon finishes or ends the stage, and serves on.
# Every GET of its shards throttled: on its own the stage would give up
# after 6 tries each (about 3 s); the client's leaving stops it at once.
n0=$(wc -l <"$T/px.log")
printf '503 40 GET /data/fm2/shard-\n' >"$T/px.faults"
rm -f "$T/two.sock.cache/s3"/*.shard
# killed_when CMD...: a client of s3://data/fm2 on two.sock, killed with
# SIGKILL once CMD succeeds (tried for up to 20 s).
killed_when() {
	"$LDCLIENT" "$T/two.sock" s3://data/fm2 >/dev/null 2>&1 &
	_p=$!
	_i=0
	while ! "$@" && [ $_i -lt 400 ]; do
		sleep 0.05
		_i=$((_i + 1))
	done
	kill -9 $_p 2>/dev/null
	wait $_p 2>/dev/null
}
throttled() {
	tail -n +$((n0 + 1)) "$T/px.log" | grep -q 'GET /data/fm2/shard-[0-9]*\.lds 503'
}
killed_when throttled
ok "the stage of a client gone mid-stage stops, and says so" \
	wait_for "s3://data/fm2: staging stopped, the client gone" "$T/two.sock.log"
: >"$T/px.faults"
out=$("$LDCLIENT" --hash "$T/two.sock" s3://data/fm2 2>&1 | grep '^epoch')
like "$out" '^epoch 0 batches 40 samples 10000' \
	"a client gone mid-stage leaves a daemon that streams the dataset"
# A client that leaves while its shards arrive (sent slowly): the fetch
# stops, leaving no part of a shard behind.
printf 'slow 100 GET /data/fm2/shard-\n' >"$T/px.faults"
rm -f "$T/two.sock.cache/s3"/*.shard
n0=$(grep -c "s3://data/fm2: $NSH shards:" "$T/two.sock.log")
opened() {
	[ "$(grep -c "s3://data/fm2: $NSH shards:" "$T/two.sock.log")" -gt "$n0" ]
}
killed_when opened
ok "a client gone while its shards arrive stops their fetch, and the daemon says so" \
	wait_for "s3://data/fm2: fetching stopped, its stream ended: 0 of $NSH shards fetched" \
	"$T/two.sock.log"
is "$(ls -A "$T/two.sock.cache/s3" | grep -c '^\.tmp-')" 0 \
	"and no part of a shard is left in the shard cache"
: >"$T/px.faults"
# A store that ignores Range (a 200 with all of the object) is caught:
# neither a header nor a record is taken from the wrong bytes.
printf 'norange 100 GET /data/fm2/shard-\n' >"$T/px.faults"
out=$("$LDCLIENT" "$T/two.sock" s3://data/fm2 2>&1)
like "$out" 's3://data/fm2/shard-[0-9]+\.lds: GET the store sent the whole object for a range' \
	"a store that ignores Range is refused, naming the object"
: >"$T/px.faults"
out=$("$LDCLIENT" --hash "$T/two.sock" s3://data/fm2 2>&1 | grep '^epoch')
like "$out" '^epoch 0 batches 40 samples 10000' \
	"and the daemon streams the dataset once the store answers right"
kill $DAEMON_PID

# --- a changed object, a damaged one -------------------------------------
upload "$T/fm9/test" fm || echo "# upload fm9 failed"
same_batches "$T/d.sock" "after the dataset was replaced in the store" \
	"$URL" "$T/fm9/test" --order sequential
like "$(grep "$URL: $NSH shards:" "$LOG" | tail -1)" "$NSH fetching" \
	"every changed shard was fetched anew (its ETag names another cache file)"
printf 'etag 1 GET /data/fm/shard-00000\n' >"$T/px.faults"
rm -f "$T/d.sock.cache/s3"/*.shard
out=$("$LDCLIENT" --hash --order sequential "$T/d.sock" "$URL" 2>&1 | grep '^epoch')
is "$out" "$("$LDCLIENT" --hash --order sequential "$T/d.sock" "$T/fm9/test" 2>&1 | grep '^epoch')" \
	"an ETag that changes between HEAD and GET: looked at again, streamed right"
: >"$T/px.faults"
damaged "$T/fm/test" bad 1000 || echo "# upload bad failed"
out=$("$LDCLIENT" "$T/d.sock" s3://data/bad 2>&1)
like "$out" 's3://data/bad/shard-00000.lds: .*checksum' \
	"a damaged shard is refused naming its object (its records checked as they are read)"
# The fetch ends: stopped with its stream, or with the copy refused.
wait_for 's3://data/bad: \(fetching stopped\|.* could not be fetched\)' "$LOG"
kept=0
for f in "$T/d.sock.cache/s3"/* "$T/d.sock.cache/s3"/.tmp-*; do
	[ -f "$f" ] || continue
	case $f in */.tmp-*) kept=$((kept + 1)) ;; esac
	cmp -s "$f" "$T/bad/shard-00000.lds" && kept=$((kept + 1))
done
is "$kept" 0 "and nothing of it is left in the shard cache"

pid=$DAEMON_PID
stop_daemon "$pid" "$LOG"

# --- the budget: a dataset larger than the shard cache -----------------------
# The shards that fit are fetched into the cache, the others are read in
# place, batch by batch, with ranged GETs; the same ones at every stage.
upload "$T/fm/test" fmh || echo "# upload fmh failed"
HALF=$((DSB / 2))
start_daemon "$T/small.sock" --cache-disk $HALF --socket-mode 0666
SLOG=$T/small.sock.log
same_batches "$T/small.sock" "twice the shard cache's budget, quasi order, 2 epochs" \
	s3://data/fmh "$T/fm/test" --order quasi --seed 3 --epochs 2
l1=$(grep 's3://data/fmh: ' "$SLOG" | head -1)
like "$l1" "$NSH shards: 0 from the shard cache, [1-9][0-9]* fetching .*, [1-9][0-9]* read in place" \
	"the shards that fit are fetched into the shard cache, the others read in place"
nin=$(echo "$l1" | sed -n 's/.*, \([0-9]*\) read in place.*/\1/p')
used=$(cat "$T/small.sock.cache/s3"/*.shard | wc -c)
ok "the shard cache holds $used bytes, within its budget of $HALF" \
	test "$used" -le $HALF
before=$(ranged fmh)
n1=$(wc -l <"$T/px.log")
same_batches "$T/small.sock" "twice the budget, random order" \
	s3://data/fmh "$T/fm/test" --order random --seed 5
like "$(grep 's3://data/fmh: ' "$SLOG" | tail -1)" \
	"$NSH shards: $((NSH - nin)) from the shard cache, 0 fetching .*, $nin read in place" \
	"the next stream finds the same shards cached: the part kept does not churn"
inb=$(($(ranged fmh) - before))
ind=$((DSB - used))
ok "its epoch read $inb bytes in place, of the $ind bytes of shards not cached" \
	test "$inb" -ge $((ind * 9 / 10)) -a "$inb" -le $((ind * 2))
# The last shard read in place (this stream's ranged GETs: it fetched none).
last=$(tail -n +$((n1 + 1)) "$T/px.log" |
	awk '$1 == "GET" && $3 == 206 && index($2, "/data/fmh/shard-") == 1 { print $2 }' |
	sort | tail -1)
last=${last##*/}
# Replaced in the store while a slow stream is part-way through it: once
# its stage is done, and long before it reaches the last shard read in
# place (the reader runs at most a ring and a read-ahead ahead).
n0=$(grep -c 's3://data/fmh: ' "$SLOG")
"$LDCLIENT" --order sequential --sleep-ms 60 "$T/small.sock" s3://data/fmh \
	>"$T/chg" 2>&1 &
p1=$!
i=0
while [ "$(grep -c 's3://data/fmh: ' "$SLOG")" -le "$n0" ] && [ $i -lt 200 ]; do
	sleep 0.05
	i=$((i + 1))
done
put "$T/fm9/test/$last" "fmh/$last" >/dev/null
wait $p1
out=$(cat "$T/chg")
like "$(grep 'reading in place' "$SLOG")" \
	"reading in place: s3://data/fmh/$last: GET HTTP 412: the object changed" \
	"a shard that changes mid-epoch fails its reads, naming the object"
like "$out" 'error|bad' "and the stream reports it by its bad-sample policy"
put "$T/fm/test/$last" "fmh/$last" >/dev/null
printf '503 2 GET /data/fmh/\nshort 1 GET /data/fmh/%s\n' "$last" >"$T/px.faults"
same_batches "$T/small.sock" "reads in place through 503 SlowDown and a short body" \
	s3://data/fmh "$T/fm/test" --order quasi --seed 4
is "$(awk '{ n += $2 } END { print n + 0 }' "$T/px.faults")" 0 \
	"every fault asked for was met by a read in place or the stage"
: >"$T/px.faults"
# A dataset whose one shard is larger than the whole budget is read in
# place, and takes nobody's cached shards for room it cannot use.
kept=$(ls "$T/small.sock.cache/s3"/*.shard 2>/dev/null | sort | xargs cat 2>/dev/null | wc -c)
same_batches "$T/small.sock" "a $BIGB-byte shard, past the whole budget" s3://data/big \
	"$T/big/train" --order sequential --batch 500
like "$(grep 's3://data/big: ' "$SLOG" | tail -1)" ', 1 read in place' \
	"it is read in place"
# Its index is memory the stream holds twice: the footer on the heap, and
# the header and tail in the memfd that stands for the shard.
sess=$(grep 's3://data/big: ' "$SLOG" | tail -1 | sed -n 's/.*\(session [0-9]*\) (.*/\1/p')
ix=$(grep "$sess (.*stream open" "$SLOG" | tail -1 |
	sed -n 's/.*(shard indexes \([0-9]*\)).*/\1/p')
ok "its index is charged to the stream twice over (${ix:-none} bytes >= 2 x 60000 x 24)" \
	test "${ix:-0}" -ge 2880000
is "$(ls "$T/small.sock.cache/s3"/*.shard 2>/dev/null | sort | xargs cat 2>/dev/null | wc -c)" "$kept" \
	"and the other dataset's $kept cached bytes stay"
# The same from another user (uid 65534, when the test runs as root):
# its dataset takes none of this user's kept shards.
other= who="this user"
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null 2>&1; then
	other="env HOME=/nonexistent setpriv --reuid 65534 --regid 65534 --clear-groups" who="uid 65534"
	chmod 755 "$T" # the socket is 0666; let the other user reach it
fi
out=$($other "$LDCLIENT" --order sequential --batch 500 "$T/small.sock" s3://data/big 2>&1)
like "$out" '^total batches 120 samples 60000 ' "$who streams it, read in place"
is "$(ls "$T/small.sock.cache/s3"/*.shard 2>/dev/null | sort | xargs cat 2>/dev/null | wc -c)" "$kept" \
	"and the $kept bytes another user's dataset keeps in the cache stay"
kill $DAEMON_PID
# Two streams staging it at once into an empty cache: what one fetches
# counts against the budget the other sees.
start_daemon "$T/small2.sock" --cache-disk $HALF --cache-memory 64M
# (Each waits up to 60 s for a batch, not 10: the two share the reads in
# place of half the dataset, which a loaded machine makes slow.)
"$LDCLIENT" --order quasi --seed 1 --timeout-ms 60000 "$T/small2.sock" \
	s3://data/fmh >"$T/h1" 2>&1 &
p1=$!
"$LDCLIENT" --order quasi --seed 2 --timeout-ms 60000 "$T/small2.sock" \
	s3://data/fmh >"$T/h2" 2>&1
wait $p1
both=$(grep -c '^total batches 40 samples 10000' "$T/h1" "$T/h2" | cut -d: -f2 | tr '\n' ' ')
is "$both" "1 1 " "two streams staging a dataset larger than the cache at once both stream"
[ "$both" = "1 1 " ] ||
	grep -v '^epoch' "$T/h1" "$T/h2" "$T/small2.sock.log" | tail -20 | sed 's/^/# /'

used=$(cat "$T/small2.sock.cache/s3"/*.shard | wc -c)
ok "and the shard cache holds $used bytes, within its budget of $HALF" \
	test "$used" -le $HALF
# Records read in place went into the node cache under their object's
# version: the next stream reads nothing from the store.
before=$(ranged fmh)
out=$("$LDCLIENT" --hash --order random --seed 7 "$T/small2.sock" s3://data/fmh 2>&1 | grep '^epoch')
is "$out" "$("$LDCLIENT" --hash --order random --seed 7 "$T/small2.sock" "$T/fm/test" 2>&1 | grep '^epoch')" \
	"a later stream of it gives the same batches"
# The stage's ranges of a shard read in place: its header, and its tail
# (64 KiB and the index of the records the manifest counts). The shards
# read in place are those whose copy is not in the cache (told apart by
# size: shards of one size hold as many records here).
ends=$("$PY" - "$T/fm/test/manifest.json" "$T/small2.sock.cache/s3" <<'EOF'
import glob, json, os, sys
shards = json.load(open(sys.argv[1]))["shards"]
for f in glob.glob(os.path.join(sys.argv[2], "*.shard")):
    size = os.path.getsize(f)
    shards.remove(next(s for s in shards if s["bytes"] == size))
n = 0
for s in shards:
    tail = min(s["bytes"], 65536 + 24 * s["records"])
    n += tail + (64 if tail < s["bytes"] else 0)
print(n)
EOF
)
is "$(($(ranged fmh) - before))" "$ends" \
	"from the node cache, which holds what the earlier streams read in place: the store served only the stage's header and tail of each shard read in place"
kill $DAEMON_PID
upload "$T/fm/test" fmb || echo "# upload fmb failed"
start_daemon "$T/mid.sock" --cache-disk $((DSB * 3 / 2))
"$LDCLIENT" "$T/mid.sock" s3://data/fm >/dev/null 2>&1
"$LDCLIENT" "$T/mid.sock" s3://data/fmb >/dev/null 2>&1
like "$(grep 's3://data/fmb: ' "$T/mid.sock.log")" "$NSH fetching .* [1-9][0-9]* bytes evicted" \
	"a second dataset evicts the least recently used shards to keep to the budget"
used=$(cat "$T/mid.sock.cache/s3"/*.shard | wc -c)
ok "the shard cache holds $used bytes, within its budget of $((DSB * 3 / 2))" \
	test "$used" -le $((DSB * 3 / 2))
kill $DAEMON_PID

# --- three daemons as three nodes -------------------------------------------
before=$(gets fm)
for n in 0 1 2; do
	start_daemon "$T/n$n.sock" --threads 1
done
: >"$T/nodes.ids"
pids=
for n in 0 2; do
	"$LDCLIENT" --ids --order random --seed 6 --epochs 2 --rank $n --world 3 \
		"$T/n$n.sock" "$URL" >"$T/node$n" 2>&1 &
	pids="$pids $!"
done
wait $pids
"$LDCLIENT" --ids --order random --seed 6 --epochs 2 --rank 1 --world 3 \
	"$T/n1.sock" "$URL" >"$T/node1" 2>&1
ok "ranks 0 and 2 finished without waiting for rank 1, which started after them" \
	grep -q '^total' "$T/node0" "$T/node2"
cat "$T/node0" "$T/node1" "$T/node2" | awk '/^id/ { print $2, $4 }' >"$T/nodes.ids"
is "$(sort -u "$T/nodes.ids" | wc -l) $(wc -l <"$T/nodes.ids")" "20000 20000" \
	"three nodes' ranks deliver each sample once per epoch"
is "$(sed -n 's/^total batches \([0-9]*\) .*/\1/p' "$T/node0" "$T/node1" "$T/node2" | sort -u | wc -l)" 1 \
	"with equal batch counts"
is "$(($(gets fm) - before))" "$((3 * DSB))" "each node fetched the dataset once"

# A named stream over the three nodes, each rank killed and resumed on
# its node: every sample once in its epoch. A world change needs every
# old rank's position, which each node keeps of its own ranks only: the
# daemon refuses it, naming the ranks it lacks, rather than guess.
: >"$T/mn.ids"
for n in 0 1 2; do
	"$LDCLIENT" --name mn --ids --order random --seed 6 --rank $n --world 3 \
		--kill-after 3 "$T/n$n.sock" "$URL" >"$T/mnA$n" 2>&1
	"$LDCLIENT" --name mn --ids --order random --seed 6 --rank $n --world 3 \
		"$T/n$n.sock" "$URL" >"$T/mnB$n" 2>&1
	cat "$T/mnA$n" "$T/mnB$n" | awk '/^id/ { print $2, $4 }' >>"$T/mn.ids"
done
is "$(sort -u "$T/mn.ids" | wc -l) $(wc -l <"$T/mn.ids") $(cat "$T"/mnB? | grep -c 'resumed 1')" \
	"10000 10000 3" "three nodes' ranks killed and resumed on their nodes: each sample once"
out=$("$LDCLIENT" --name mn --order random --seed 6 --rank 0 --world 2 "$T/n0.sock" "$URL" 2>&1)
like "$out" 'saved with world 3 and this loaderd has no position of 2 of its ranks \(1, 2\)' \
	"a world change on one node is refused, naming the ranks other nodes ran"

# The trainer's checkpoint holds every rank's position (gathered at each
# checkpoint), and gives them all to each new rank: world 3 on nodes
# 0-2, killed part-way; world 2 on nodes 1 and 2 from those, killed
# part-way (a plan now deals epoch 0); world 4 from those on the nodes
# that ran world 2, two ranks each, opening together. Node 0 lacks the
# plan and refuses rather than deal differently.
EL="--name el --ids --order random --seed 6 --epochs 2"
next_pos() { # the next batch after the last released: E:B
	awk '$1 == "id" { e = $2; b = $3 } END { print e ":" b + 1 }' "$1"
}
for r in 0 1 2; do
	"$LDCLIENT" $EL --rank $r --world 3 --kill-after $((4 + r)) \
		"$T/n$r.sock" "$URL" >"$T/el3.$r" 2>&1
done
P3=$(for r in 0 1 2; do next_pos "$T/el3.$r"; done | paste -sd,)
for r in 0 1; do
	"$LDCLIENT" $EL --rank $r --world 2 --from "$P3" --kill-after $((3 + r)) \
		"$T/n$((r + 1)).sock" "$URL" >"$T/el2.$r" 2>&1
done
P2=$(for r in 0 1; do next_pos "$T/el2.$r"; done | paste -sd,)
PL=$(awk '$1 == "plan" { print $2 ":" $3; exit }' "$T/el2.0")
like "$(grep -h '^start\|^plan\|^error' "$T"/el2.? | sort -u | tr '\n' ';')" \
	'^plan [0-9a-f]{16} 1;start 0 [0-9]+ resumed 1;$' \
	"world 2 on nodes 1 and 2 goes on from world 3's positions, under a plan of epoch 0"
out=$("$LDCLIENT" $EL --rank 0 --world 4 --from "$P2" --from-plan "$PL" \
	"$T/n0.sock" "$URL" 2>&1)
like "$out" 'positions given are of world 2, which went on from another world, or changed its mixture.s weights, part-way through an epoch before 1 .*this loaderd has no record of that world' \
	"a node that did not run world 2 refuses while its plan is in force"
pids=
for r in 0 1 2 3; do
	"$LDCLIENT" $EL --rank $r --world 4 --from "$P2" --from-plan "$PL" \
		"$T/n$((r % 2 + 1)).sock" "$URL" >"$T/el4.$r" 2>&1 &
	pids="$pids $!"
done
wait $pids
like "$(grep -h '^start\|^error' "$T"/el4.? | sort | uniq -c | sed 's/^ *//' | tr '\n' ';')" \
	'^4 start 0 [0-9]+ resumed 1;$' \
	"world 4's ranks, two to a node opening together, all go on at the same batch"
cat "$T"/el3.? "$T"/el2.? "$T"/el4.? | awk '/^id/ { print $2, $4 }' >"$T/el.ids"
is "$(sort -u "$T/el.ids" | wc -l) $(wc -l <"$T/el.ids")" "20000 20000" \
	"across worlds 3, 2 and 4 on three nodes, each sample once in each of 2 epochs"
is "$(for r in 0 1 2 3; do grep -c '^id' "$T/el4.$r"; done | sort -u | wc -l)" 1 \
	"world 4's ranks got as many samples each"
