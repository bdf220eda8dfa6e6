#!/bin/sh
# The S3 store the s3:// tests run against, checked on its own: a real
# single-node Ceph cluster (tests/integration/ceph.sh) starts on loopback,
# its gateway takes SigV4-signed requests as curl signs them (the way the
# daemon will: CURLOPT_AWS_SIGV4 with an UNSIGNED-PAYLOAD content hash),
# serves byte ranges, refuses a bad signature and keeps one user's bucket
# from another; then it stops, leaving no process behind.
. "$top_srcdir/tests/integration/tap.sh"
. "$top_srcdir/tests/integration/ceph.sh"

ceph_need
tmpdir
trap 'ceph_stop; rm -rf "$T"' EXIT
plan 9

ceph_start_checked "$T/ceph" "mon, memstore OSD and radosgw start on loopback"

# s3 USER:SECRET CURL-ARGS...: a signed request; prints the HTTP status.
s3() {
	_u=$1
	shift
	curl -s -o "$T/body" -w '%{http_code}' --aws-sigv4 "aws:amz:$AWS_REGION:s3" \
		--user "$_u" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@"
}
me=$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY
EP=$AWS_ENDPOINT_URL

is "$(s3 "$me" -X PUT "$EP/data")" 200 "a signed PUT makes a bucket"
head -c 1048576 /dev/urandom >"$T/obj"
is "$(s3 "$me" -T "$T/obj" "$EP/data/shards/obj")" 200 "a signed PUT stores a 1 MiB object"
s3 "$me" "$EP/data/shards/obj" >/dev/null
ok "a signed GET returns its bytes" cmp "$T/body" "$T/obj"
st=$(s3 "$me" -r 1000-1999 "$EP/data/shards/obj")
tail -c +1001 "$T/obj" | head -c 1000 >"$T/want"
ok "a ranged GET returns 206 and those 1000 bytes ($st)" \
	sh -c "[ $st = 206 ] && cmp '$T/body' '$T/want'"
is "$(s3 "$AWS_ACCESS_KEY_ID:wrong" "$EP/data/shards/obj")" 403 "a request signed with the wrong secret is refused"
ceph_user other ldtest1access ldtest1secret0key0for0ceph0tests
is "$(s3 ldtest1access:ldtest1secret0key0for0ceph0tests "$EP/data/shards/obj")" 403 \
	"another user cannot read the first user's object"

pids=$CEPH_PIDS
ceph_stop
left=0
for p in $pids; do kill -0 "$p" 2>/dev/null && left=$((left + 1)); done
is "$left" 0 "ceph_stop leaves none of its $(echo $pids | wc -w) daemons running"
is "$(curl -s -o /dev/null -w '%{http_code}' "$EP/")" 000 "the gateway no longer answers"
