# ceph.sh - sourced by tests and benchmarks of s3:// datasets: a real
# single-node Ceph cluster with its S3 gateway, on loopback, from Debian's
# packages (ceph-mon, ceph-osd, radosgw; scripts/deps.sh --test).
#
#   ceph_missing          prints why no cluster can start here (nothing
#                         when one can): the caller skips (exit 77)
#   ceph_start DIR        one monitor, one memstore OSD and radosgw (beast
#                         frontend on 127.0.0.1, as configured by default:
#                         Nagle's algorithm on), all under DIR, and an S3
#                         user; sets and exports AWS_ENDPOINT_URL,
#                         AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
#                         AWS_REGION, and CEPH_PIDS. Returns non-zero,
#                         with the logs' tails on stderr, if one fails.
#   ceph_user UID AK SK   another S3 user with those keys
#   ceph_stop             stops the daemons by their pids, gateway first
# and, for TAP tests (tap.sh):
#   ceph_need             skip_all unless a cluster can start and curl
#                         signs requests (--aws-sigv4)
#   ceph_start_checked DIR DESC
#                         ceph_start as one check, DESC with the start's
#                         milliseconds; on failure the logs' tails, exit 1
#
# No authentication inside the cluster (it listens on loopback only, for
# one test): the S3 gateway still checks every request's signature
# against its users' keys, which is what the tests exercise. Without
# cephx, clients must ask for crc mode (ms mon client mode) or radosgw
# finds no usable connection mode. Paxos timings are shortened so the
# maps settle in tens of milliseconds rather than seconds. The OSD holds
# objects in memory (memstore): CEPH_MEMSTORE_BYTES bounds it (default
# 1 GiB).

CEPH_PIDS=

ceph_missing() {
	for b in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph-authtool ceph; do
		command -v "$b" >/dev/null 2>&1 ||
			{ echo "$b not installed (Debian packages ceph-mon, ceph-osd, radosgw)"; return 0; }
	done
}

# A free TCP port on 127.0.0.1, as the kernel picks one.
ceph_port() {
	/usr/bin/python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ceph_wait SECONDS CMD...: until CMD succeeds; non-zero on timeout.
ceph_wait() {
	_n=$(($1 * 20))
	shift
	while ! "$@" >/dev/null 2>&1; do
		_n=$((_n - 1))
		[ $_n -gt 0 ] || return 1
		sleep 0.05
	done
}

ceph_fail() {
	echo "ceph_start: $*" >&2
	for _l in "$CEPH_DIR"/*.log; do
		[ -e "$_l" ] || continue
		echo "-- $_l:" >&2
		tail -n 15 "$_l" >&2
	done
	ceph_stop
	return 1
}

ceph_start() {
	CEPH_DIR=$1
	mkdir -p "$CEPH_DIR/mon" "$CEPH_DIR/osd" "$CEPH_DIR/run" || return 1
	_mon=$(ceph_port)
	_rgw=$(ceph_port)
	_fsid=$(cat /proc/sys/kernel/random/uuid)
	CEPH_CONF=$CEPH_DIR/ceph.conf
	cat >"$CEPH_CONF" <<EOF
[global]
fsid = $_fsid
mon host = v2:127.0.0.1:$_mon
public addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
paxos propose interval = 0.05
paxos min wait = 0.01
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
osd pool default pg num = 8
osd pool default pgp num = 8
mon max pg per osd = 1000
osd objectstore = memstore
memstore device bytes = ${CEPH_MEMSTORE_BYTES:-1073741824}
osd crush chooseleaf type = 0
run dir = $CEPH_DIR/run
admin socket = $CEPH_DIR/run/\$name.asok
log file = $CEPH_DIR/\$name.log
pid file = $CEPH_DIR/run/\$name.pid
keyring = $CEPH_DIR/keyring
mon data = $CEPH_DIR/mon
osd data = $CEPH_DIR/osd
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:$_rgw
rgw dns name = localhost
rgw data = $CEPH_DIR/rgw
EOF
	export CEPH_CONF
	ceph-authtool --create-keyring "$CEPH_DIR/keyring" --gen-key -n mon. \
		--cap mon 'allow *' >/dev/null || ceph_fail "ceph-authtool" || return 1
	monmaptool --create --fsid "$_fsid" --addv a "[v2:127.0.0.1:$_mon]" \
		"$CEPH_DIR/monmap" >/dev/null || ceph_fail "monmaptool" || return 1
	ceph-mon --mkfs -i a --monmap "$CEPH_DIR/monmap" \
		--keyring "$CEPH_DIR/keyring" >"$CEPH_DIR/mkfs.log" 2>&1 ||
		ceph_fail "ceph-mon --mkfs" || return 1
	ceph-mon -i a -f >"$CEPH_DIR/mon.out" 2>&1 &
	CEPH_PIDS="$CEPH_PIDS $!"
	_osd=$(ceph osd create 2>"$CEPH_DIR/create.log") ||
		ceph_fail "ceph osd create" || return 1
	ceph-osd -i "$_osd" --mkfs >"$CEPH_DIR/osd-mkfs.log" 2>&1 ||
		ceph_fail "ceph-osd --mkfs" || return 1
	ceph-osd -i "$_osd" -f >"$CEPH_DIR/osd.out" 2>&1 &
	CEPH_PIDS="$CEPH_PIDS $!"
	# radosgw before the OSD is up may stall for seconds.
	ceph_wait 60 grep -q 'booting -> active' "$CEPH_DIR/osd.$_osd.log" ||
		ceph_fail "the OSD did not become active in 60 s" || return 1
	radosgw -n client.rgw -f >"$CEPH_DIR/rgw.out" 2>&1 &
	CEPH_PIDS="$CEPH_PIDS $!"
	AWS_ENDPOINT_URL=http://127.0.0.1:$_rgw
	AWS_ACCESS_KEY_ID=ldtest0access
	AWS_SECRET_ACCESS_KEY=ldtest0secret0key0for0ceph0tests
	AWS_REGION=us-east-1
	export AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION
	ceph_wait 60 curl -sf -o /dev/null "$AWS_ENDPOINT_URL/" ||
		ceph_fail "radosgw did not answer on $AWS_ENDPOINT_URL in 60 s" || return 1
	ceph_user ldtest0 "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" ||
		ceph_fail "radosgw-admin user create" || return 1
}

ceph_user() {
	radosgw-admin -n client.rgw user create --uid "$1" --display-name "$1" \
		--access-key "$2" --secret "$3" >"$CEPH_DIR/user-$1.json" 2>>"$CEPH_DIR/admin.log"
}

ceph_stop() {
	_rev=
	for _p in $CEPH_PIDS; do _rev="$_p $_rev"; done
	for _p in $_rev; do
		kill "$_p" 2>/dev/null
		_n=100
		while kill -0 "$_p" 2>/dev/null && [ $_n -gt 0 ]; do
			sleep 0.05
			_n=$((_n - 1))
		done
		kill -9 "$_p" 2>/dev/null
		wait "$_p" 2>/dev/null
	done
	CEPH_PIDS=
}

ceph_need() {
	_why=$(ceph_missing)
	[ -z "$_why" ] || skip_all "$_why"
	curl --help all 2>/dev/null | grep -q -- '--aws-sigv4' ||
		skip_all "curl without --aws-sigv4"
}

ceph_start_checked() {
	_t0=$(date +%s%N)
	ceph_start "$1" 2>"$1.err"
	_rc=$?
	is "$_rc" 0 "$2 ($((($(date +%s%N) - _t0) / 1000000)) ms)"
	[ "$_rc" -eq 0 ] || { sed 's/^/# /' "$1.err"; exit 1; }
}
