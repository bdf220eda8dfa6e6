#!/bin/sh
# Start a private loaderd, abuse it with protoabuse (malformed messages,
# out-of-range OPENs, wrong files, a hostile consumer index), then check
# that every case passed, that the daemon is still alive, that its log
# shows no crash, and that SIGTERM stops it cleanly.
. "$top_srcdir/tests/integration/tap.sh"

need_fmnist
tmpdir
plan 8

ok "pack the test split" "$LOADERCTL" pack --split test "$src" "$T/fm"

sock=$T/d.sock
start_daemon "$sock" --max-ring 64M --max-uid-files 1000 --log-level debug
pid=$DAEMON_PID
ok "loaderd listens on a private socket" test -S "$sock"

# Each case of protoabuse's own TAP becomes a comment line here.
out=$(TMPDIR=$T timeout 120 "$TOOLS/protoabuse" "$sock" "$T/fm/test" 2>&1)
rc=$?
printf '%s\n' "$out" | sed 's/^/# /'
total=$(printf '%s\n' "$out" | sed -n 's/^1\.\.\([0-9]*\)$/\1/p')
passed=$(printf '%s\n' "$out" | grep -c '^ok ')
failed=$(printf '%s\n' "$out" | grep -c '^not ok ')
is "$rc:$failed:$passed" "0:0:${total:-?}" \
	"protoabuse: all ${total:-?} cases pass ($failed failed, exit $rc)"
ok "daemon still alive" kill -0 "$pid"
stop_daemon "$pid" "$sock.log"
ok "loaderd removed its socket" test ! -e "$sock"
if [ "$_code" != 0 ] || [ "$failed" != 0 ] || [ "$rc" != 0 ]; then
	tail -40 "$sock.log" | sed 's/^/# log: /'
fi
