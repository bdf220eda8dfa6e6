#!/bin/sh
# A client's S3 credentials leave no copy in the daemon's memory once its
# streams are gone (issue 39). A real daemon streams an s3:// dataset
# from a real Ceph RADOS Gateway (tests/integration/ceph.sh) with a
# distinctive secret key and session token, half of it fetched into the
# shard cache and half read in place; then, with no session left but
# loaderctl's own, tests/integration/memscan.py reads every writable
# private mapping of the daemon (heap, stacks, libraries' data) through
# /proc/PID/mem and counts the copies of the token, the secret and the
# secret's tail (what is left of a string whose first 16 bytes a free()
# overwrote). Each count must be 0. While a stream is still open the
# same scan must find them: the scan sees the memory it claims to.
# Needs root (or a ptrace that lets this shell read the daemon).
. "$top_srcdir/tests/integration/tap.sh"
. "$top_srcdir/tests/integration/ceph.sh"

ceph_need
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "python3 not installed"
src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
[ -f "$src/t10k-images-idx3-ubyte.gz" ] || [ -f "$src/t10k-images-idx3-ubyte" ] ||
	skip_all "Fashion-MNIST not installed (Debian package dataset-fashion-mnist)"
"$PY" "$top_srcdir/tests/integration/memscan.py" $$ x=x >/dev/null 2>&1 ||
	skip_all "cannot read another process's memory through /proc/PID/mem (run as root)"
tmpdir
HOLD=
trap 'for p in $DAEMONS $HOLD; do kill -9 $p 2>/dev/null; done; ceph_stop; rm -rf "$T"' EXIT
plan 17

ceph_start_checked "$T/ceph" "a Ceph cluster with its S3 gateway starts on loopback"
GW=$AWS_ENDPOINT_URL

# The credentials looked for: random, so that no copy can come from
# anywhere but this run. radosgw without STS ignores the session token
# (but the daemon sends it, signed, with every request).
AK=ldwipe$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
SK=$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')
TOKEN=ldwipetoken$(od -An -N160 -tx1 /dev/urandom | tr -d ' \n')
ceph_user wipe "$AK" "$SK"
SKTAIL=$(printf %s "$SK" | cut -c 17-)
TKTAIL=$(printf %s "$TOKEN" | cut -c 300-)

# scan: "token N token_tail N secret N secret_tail N", the copies of each
# in the daemon's memory.
scan() {
	"$PY" "$top_srcdir/tests/integration/memscan.py" "$DAEMON_PID" \
		token="$TOKEN" token_tail="$TKTAIL" secret="$SK" \
		secret_tail="$SKTAIL" 2>>"$T/scan.err" | tr '\n' ' ' | sed 's/ $//'
}
# idle: the daemon has no session but loaderctl's, and no stream.
idle() {
	"$LOADERCTL" status --socket "$T/d.sock" 2>/dev/null |
		grep -q '^sessions 1, streams 0'
}
wait_idle() {
	_i=0
	while ! idle && [ $_i -lt 200 ]; do sleep 0.05; _i=$((_i + 1)); done
	idle
}
# scan_idle: scan once the daemon is idle and the shard cache's fetch
# has ended (it logs its end just before it lets go of its copy), again
# up to 3 times a second apart while a copy is still found.
scan_idle() {
	wait_idle
	_n=0
	while :; do
		_s=$(scan)
		case $_s in *[1-9]*) ;; *) break ;; esac
		[ $_n -lt 3 ] || break
		sleep 1
		_n=$((_n + 1))
	done
	echo "$_s"
}
# as_client CMD...: CMD with the test's credentials and token (one
# process: env execs CMD, so that $! of one run in the background is
# CMD's).
CLIENT_ENV="AWS_ENDPOINT_URL=$GW AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK AWS_SESSION_TOKEN=$TOKEN"
as_client() {
	env $CLIENT_ENV "$@"
}
put() {
	curl -s -o /dev/null -w '%{http_code}' --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
		--user "$AK:$SK" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@"
}

st=$(put -X PUT "$GW/wipe")
"$LOADERCTL" pack --split test --shard-size 1M "$src" "$T/fm" >/dev/null
for f in "$T/fm/test"/*.lds "$T/fm/test/manifest.json"; do
	st="$st$(put -T "$f" "$GW/wipe/fm/${f##*/}")"
done
like "$st" '^(200)+$' "a bucket of the user's, and the Fashion-MNIST test set packed and uploaded"
DSB=$(cat "$T/fm/test"/*.lds | wc -c)
URL=s3://wipe/fm

# The daemon gets no credentials of its own: none in its environment.
save_ak=$AWS_ACCESS_KEY_ID save_sk=$AWS_SECRET_ACCESS_KEY
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN
ok "a daemon starts, its shard cache half the dataset's size" \
	start_daemon "$T/d.sock" --threads 2 --cache-disk $((DSB / 2))
AWS_ACCESS_KEY_ID=$save_ak AWS_SECRET_ACCESS_KEY=$save_sk
export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
LOG=$T/d.sock.log
pid=$DAEMON_PID

# --- while a stream is open, the scan finds its credentials -----------
env $CLIENT_ENV "$LDCLIENT" --epochs 0 --hold-after 3 "$T/d.sock" "$URL" >"$T/hold" 2>&1 &
HOLD=$!
ok "a stream of $URL, half fetched into the shard cache, half read in place, is held open" \
	wait_for holding "$T/hold"
like "$(grep "$URL: .*read in place" "$LOG" | head -1)" \
	"[1-9][0-9]* fetching .*, [1-9][0-9]* read in place" \
	"its shards are both fetched and read in place"
held=$(scan)
echo "# while the stream is open: $held"
like "$held" '^token [1-9][0-9]* token_tail [1-9][0-9]* secret [1-9][0-9]* ' \
	"the scan finds the token and the secret in the daemon while the stream uses them"
kill -9 $HOLD 2>/dev/null
wait $HOLD 2>/dev/null
HOLD=

# --- its client gone, none is left -----------------------------------
wait_for "$URL: .*\(shards fetched\|fetching stopped\|could not be fetched\)" "$LOG"
ok "the daemon is left with no session and no stream" wait_idle
idle || "$LOADERCTL" status --socket "$T/d.sock" 2>&1 | sed 's/^/# /'
after=$(scan_idle)
echo "# a held stream's client killed, no session left: $after"
is "$after" "token 0 token_tail 0 secret 0 secret_tail 0" \
	"no copy of the token or the secret is left in the daemon's memory"

# --- whole epochs, from the cache and in place ------------------------
out=$(as_client "$LDCLIENT" --hash --epochs 2 "$T/d.sock" "$URL" 2>&1 | grep -c '^epoch')
is "$out" 2 "two epochs stream, the cached shards checked and the others read in place"
after=$(scan_idle)
echo "# two epochs streamed, no session left: $after"
is "$after" "token 0 token_tail 0 secret 0 secret_tail 0" \
	"no copy of the token or the secret is left after they end"

# --- refused: a wrong secret and the right token ------------------------
out=$(as_client env AWS_SECRET_ACCESS_KEY="$SK" AWS_ACCESS_KEY_ID=wrong0access \
	"$LDCLIENT" "$T/d.sock" "$URL" 2>&1)
like "$out" "$URL/manifest.json.*403" "an unknown access key is refused"
after=$(scan_idle)
echo "# a refused open, no session left: $after"
is "$after" "token 0 token_tail 0 secret 0 secret_tail 0" \
	"no copy of the token or the secret is left after a refused open"

# --- a stream still staging when its client goes -----------------------
# The first stream of another prefix: killed during its fetch.
for f in "$T/fm/test"/*.lds "$T/fm/test/manifest.json"; do
	put -T "$f" "$GW/wipe/fm2/${f##*/}" >/dev/null
done
as_client "$LDCLIENT" --kill-after 1 "$T/d.sock" s3://wipe/fm2 >/dev/null 2>&1
wait_for "s3://wipe/fm2: .*\(shards fetched\|fetching stopped\|could not be fetched\)" "$LOG"
after=$(scan_idle)
echo "# a client killed after one batch of a cold dataset: $after"
is "$after" "token 0 token_tail 0 secret 0 secret_tail 0" \
	"no copy is left after a client killed while its dataset was fetched"

hits=$(grep -l -e "$SK" -e "$TOKEN" "$LOG" 2>/dev/null | wc -l)
is "$hits" 0 "neither is in the daemon's log"
stop_daemon "$pid" "$LOG"
sed 's/^/# memscan: /' "$T/scan.err" | sort -u | head -3
