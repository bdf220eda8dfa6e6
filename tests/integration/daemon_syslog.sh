#!/bin/sh
# loaderd run without --foreground detaches once it listens, and from
# then on logs to syslog (facility daemon, tag loaderd[PID], each line at
# its priority) rather than to a stderr that leads nowhere. A listener of
# the test's stands in for the system logger at /dev/log: needs root and
# no logger there already.
. "$top_srcdir/tests/integration/tap.sh"

[ "$(id -u)" -eq 0 ] || skip_all "needs root, to listen at /dev/log"
[ -e /dev/log ] && skip_all "/dev/log is there already (a system logger runs)"
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "python3 not installed"
need_fmnist
tmpdir
plan 6
"$LOADERCTL" pack --split test --shard-size 4M "$src" "$T/ds" >/dev/null
"$PY" -u - "$T/syslog" <<'PYEOF' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/dev/log")
with open(sys.argv[1], "ab", buffering=0) as f:
    while True:
        f.write(s.recv(65536) + b"\n")
PYEOF
lpid=$!
trap 'kill $lpid 2>/dev/null; rm -f /dev/log; for p in $DAEMONS; do kill -9 $p 2>/dev/null; done; rm -rf "$T"' EXIT
i=0
while [ ! -S /dev/log ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done

"$LOADERD" --socket "$T/d.sock" --state-dir "$T/st" --cache-dir "$T/c" >"$T/start.out" 2>&1
is "$?" 0 "loaderd without --foreground returns once it listens"
P=$(sed -n 's/.*(pid \([0-9]*\)).*/\1/p' "$T/start.out" | head -1)
DAEMONS="$DAEMONS $P"
like "$("$LDCLIENT" --batch 5000 "$T/d.sock" "$T/ds/test" 2>&1)" '^total batches 2 ' \
	"it serves a client, detached"
ok "its log lines reach the system logger" wait_for "loaderd\\[$P\\]: session 1 .*connected" "$T/syslog"
like "$(grep 'connected' "$T/syslog" | head -1)" "^<30>" \
	"... at their priority, facility daemon (info: <30>)"
kill "$P"
ok "... to the last: its stop" wait_for "loaderd\\[$P\\]: .*stopping" "$T/syslog"
i=0
while kill -0 "$P" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
ok "it stops on SIGTERM" test "$i" -lt 100
