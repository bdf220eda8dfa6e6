#!/bin/sh
# loaderd under systemd's protocols, without systemd as PID 1:
# systemd-socket-activate passes a listening SOCK_SEQPACKET socket (as
# loaderd.socket would), with NOTIFY_SOCKET pointing at a listener of the
# test's. The daemon must take the passed socket (and make none of its
# own), say READY=1 with a status line and its pid once it listens, serve
# a client through that socket, say RELOADING=1/READY=1 around a SIGHUP,
# ping the watchdog when WATCHDOG_USEC asks for it, and say STOPPING=1
# on SIGTERM, leaving the socket to whoever made it.
. "$top_srcdir/tests/integration/tap.sh"

command -v systemd-socket-activate >/dev/null 2>&1 ||
	skip_all "no systemd-socket-activate (Debian package systemd)"
[ -x /usr/bin/python3 ] || skip_all "no /usr/bin/python3 for the notify listener"
need_fmnist
tmpdir
plan 16

"$LOADERCTL" pack --split test "$src" "$T/fm" >/dev/null
D=$T/fm/test

# The notify listener: each datagram's lines, in order, into $T/notify.log.
cat >"$T/listen.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as log:
    while True:
        msg = s.recv(4096).decode("utf-8", "replace")
        for line in msg.splitlines():
            log.write(line + "\n")
PY
/usr/bin/python3 "$T/listen.py" "$T/notify" "$T/notify.log" &
DAEMONS="$DAEMONS $!"
i=0
while [ ! -S "$T/notify" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done

systemd-socket-activate --seqpacket -l "$T/act.sock" \
	-E NOTIFY_SOCKET="$T/notify" -E WATCHDOG_USEC=200000 \
	-E STATE_DIRECTORY="$T/state" -E CACHE_DIRECTORY="$T/cache" \
	"$top_builddir/loaderd" -f --socket "$T/own.sock" --socket-mode 0600 \
	2>"$T/daemon.log" &
apid=$!
DAEMONS="$DAEMONS $apid"
i=0
while [ ! -S "$T/act.sock" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done

# The first connection starts the daemon, which takes the socket.
"$LDCLIENT" --hash --epochs 1 "$T/act.sock" "$D" >"$T/client" 2>&1
like "$(cat "$T/client")" '^epoch 0 batches 40 samples 10000' \
	"a client streams through the socket systemd passed"
ok "READY=1 reached NOTIFY_SOCKET" wait_for '^READY=1$' "$T/notify.log"
like "$(cat "$T/notify.log")" "^STATUS=listening on $T/act.sock" \
	"with a status line naming the passed socket"
mainpid=$(sed -n 's/^MAINPID=//p' "$T/notify.log" | head -1)
is "$mainpid" "$apid" "MAINPID= is the daemon's pid"
like "$(cat "$T/daemon.log")" "listening on $T/act.sock \\(from systemd\\)" \
	"the log says the socket came from systemd"
first_session=$(grep -n 'session 1 ' "$T/daemon.log" | head -1 | cut -d: -f1)
listening=$(grep -n 'listening on' "$T/daemon.log" | head -1 | cut -d: -f1)
ok "it listened (and said READY=1) before it served the first client" \
	test "${listening:-99999}" -lt "${first_session:-0}"
ok "the daemon made no socket of its own" test ! -e "$T/own.sock"
like "$(cat "$T/daemon.log")" "warning: socket, socket-mode set, but systemd passed the socket \\($T/act.sock\\): they have no effect; set ListenSequentialPacket=, SocketMode= and SocketGroup= in loaderd.socket" \
	"it warns that --socket and --socket-mode set beside the passed socket do nothing"
ok "it pings the watchdog at half of WATCHDOG_USEC (200 ms)" \
	wait_for '^WATCHDOG=1$' "$T/notify.log"
sleep 0.5
n=$(grep -c '^WATCHDOG=1$' "$T/notify.log")
ok "... again and again ($n pings so far)" test "$n" -ge 3

kill -HUP "$apid"
ok "SIGHUP: RELOADING=1" wait_for '^RELOADING=1$' "$T/notify.log"
# ready_again: a READY=1 after the RELOADING=1.
ready_again() {
	i=0
	while ! sed -n '/^RELOADING=1$/,$p' "$T/notify.log" | grep -q '^READY=1$' &&
		[ $i -lt 200 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	sed -n '/^RELOADING=1$/,$p' "$T/notify.log" | grep -q '^READY=1$'
}
ok "... then READY=1 again" ready_again

# A client streaming when SIGTERM comes is told why its stream ends.
"$LDCLIENT" --epochs 0 --sleep-ms 20 "$T/act.sock" "$D" >"$T/drained" 2>&1 &
cpid=$!
DAEMONS="$DAEMONS $cpid"
sleep 0.5
kill -TERM "$apid"
wait $cpid
like "$(cat "$T/drained")" '^error: .*loaderd is stopping' \
	"SIGTERM: a streaming client is told the daemon is stopping"
i=0
while kill -0 "$apid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
wait "$apid"
is "$?" 0 "SIGTERM: the daemon exits with status 0"
ok "SIGTERM: STOPPING=1 reached NOTIFY_SOCKET" wait_for '^STOPPING=1$' "$T/notify.log"
ok "the passed socket is left to whoever made it" test -S "$T/act.sock"
