#!/bin/sh
# Where clients find loaderd (client/sockpath.h): $LOADERD_SOCKET, else
# the user's own daemon at $XDG_RUNTIME_DIR/loaderd.sock when it is
# there, else the system service at /run/loaderd/loaderd.sock. A login
# session (XDG_RUNTIME_DIR set, no daemon of its own) reaches the system
# service through libloader and loaderctl alike; with both there it gets
# its own; with neither, the error names both. Needs root, and no other
# daemon at the system path.
. "$top_srcdir/tests/integration/tap.sh"

[ "$(id -u)" -eq 0 ] || skip_all "needs root, to listen on /run/loaderd/loaderd.sock"
SYS=/run/loaderd/loaderd.sock
[ -e "$SYS" ] && skip_all "$SYS is there already (a loaderd runs on this machine)"
need_fmnist
tmpdir
plan 16
"$LOADERCTL" pack --split test --shard-size 4M "$src" "$T/ds" >/dev/null
D=$T/ds/test
mkdir -p "$T/xdg" /run/loaderd
XDG=$T/xdg
unset LOADERD_SOCKET

# pid SOCKDESC: the pid loaderctl status reports, reaching the daemon the
# lookup finds, with XDG_RUNTIME_DIR=$XDG.
pid_found() {
	XDG_RUNTIME_DIR=$XDG "$LOADERCTL" status 2>&1 |
		sed -n 's/^loaderd pid \([0-9]*\),.*/\1/p'
}
# libloader's lookup: ldclient given no socket ("").
stream_found() {
	XDG_RUNTIME_DIR=$XDG "$LDCLIENT" --batch 5000 "" "$D" 2>&1
}

start_daemon "$SYS" --state-dir "$T/sys.state" --cache-dir "$T/sys.cache"
SYSPID=$DAEMON_PID
is "$(pid_found)" "$SYSPID" "a login session with no daemon of its own: loaderctl finds the system service"
like "$(stream_found)" '^total batches 2 ' "... and so does libloader"
like "$(grep 'stream open' "$SYS.log")" 'stream open' "(the system daemon served it)"

start_daemon "$XDG/loaderd.sock"
USERPID=$DAEMON_PID
is "$(pid_found)" "$USERPID" "both there: the user's own daemon wins"
like "$(stream_found)" '^total batches 2 ' "... for libloader too"
like "$(grep 'stream open' "$XDG/loaderd.sock.log")" 'stream open' "(the user's daemon served it)"
is "$(LOADERD_SOCKET=$SYS pid_found)" "$SYSPID" "LOADERD_SOCKET wins over both"

stop_daemon "$SYSPID" "$SYS.log"
is "$(pid_found)" "$USERPID" "only the user's: it is found"
stop_daemon "$USERPID" "$XDG/loaderd.sock.log"

out=$(XDG_RUNTIME_DIR=$XDG "$LOADERCTL" status 2>&1)
like "$out" "connect $SYS: .*is loaderd running\\? and no socket at $XDG/loaderd.sock either" \
	"neither: loaderctl names both paths it looked at"
like "$(stream_found)" "connect $SYS: .*is loaderd running\\? and no socket at $XDG/loaderd.sock either" \
	"... and so does libloader"
rm -f "$SYS.log"
rmdir /run/loaderd 2>/dev/null || :
