#!/bin/sh
# One user's s3:// OPENs against a store that never answers cannot take
# the daemon from the others. As uid 65534 (nobody), 24 OPENs at once of
# s3:// datasets at a tarpit (a TCP server that accepts and never sends a
# byte) stage at most max-uid-stages at a time, the rest waiting off
# libuv's thread pool; meanwhile root's OPEN of a local dataset streams,
# its stream is freed, and "loaderctl streams --saved" answers. Every
# one of nobody's OPENs is refused by its s3-stage-timeout, with a reason
# naming the bound and, for those that staged, the endpoint. With
# s3-endpoints set, an OPEN naming another endpoint is refused before
# anything connects; a reload that lets the tarpit in lets it through.
. "$top_srcdir/tests/integration/tap.sh"

[ "$(id -u)" -eq 0 ] || skip_all "needs root, to run a client as another user"
command -v setpriv >/dev/null 2>&1 || skip_all "setpriv not installed (util-linux)"
PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "python3 not installed"
need_fmnist
tmpdir
TPID=
trap 'for p in $DAEMONS $TPID; do kill -9 $p 2>/dev/null; done; [ -n "${KEEP-}" ] || rm -rf "$T"' EXIT
plan 21
as_nobody() { setpriv --reuid 65534 --regid 65534 --clear-groups "$@"; }
N=24      # nobody's OPENs at once: more than libuv's 16 threads
BOUND=10  # s3-stage-timeout
STAGES=4  # max-uid-stages (its default)

# The tarpit: accepts, reads, never answers. Its state file says how
# many connections it accepted and how many are open now.
"$PY" - "$T/tp.port" "$T/tp.state" <<'EOF' 2>"$T/tp.err" &
import os, socket, sys, threading
port_file, state_file = sys.argv[1], sys.argv[2]
lock = threading.Lock()
n = {"accepted": 0, "open": 0}

def note():
    tmp = state_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d %d\n" % (n["accepted"], n["open"]))
    os.replace(tmp, state_file)

def hold(c):
    try:
        while c.recv(65536):
            pass
    except OSError:
        pass
    c.close()
    with lock:
        n["open"] -= 1
        note()

s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(128)
with lock:
    note()
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % s.getsockname()[1])
os.replace(port_file + ".tmp", port_file)
while True:
    c, _ = s.accept()
    with lock:
        n["accepted"] += 1
        n["open"] += 1
        note()
    threading.Thread(target=hold, args=(c,), daemon=True).start()
EOF
TPID=$!
i=0
while [ ! -s "$T/tp.port" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
PORT=$(cat "$T/tp.port")
accepted() { cut -d' ' -f1 "$T/tp.state"; }
open_now() { cut -d' ' -f2 "$T/tp.state"; }

chmod 755 "$T" # the socket, for nobody
"$LOADERCTL" pack --split test --shard-size 2M "$src" "$T/fm" >/dev/null
ok "a tarpit listens, and root's Fashion-MNIST test set is packed" \
	test -n "$PORT" -a -s "$T/fm/test/manifest.json"

# No proxy between the daemon and the tarpit; nothing of ~/.aws.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy
printf 's3-stage-timeout = %s\n' "$BOUND" >"$T/ld.conf"
start_daemon "$T/d.sock" --config "$T/ld.conf" --socket-mode 0666 --threads 1
P=$DAEMON_PID
LOG=$T/d.sock.log

# s3open I: nobody's OPEN of s3://tarpit/dsI, its output in $T/o.I.
s3open() {
	as_nobody env AWS_ACCESS_KEY_ID=AKIDTARPIT AWS_SECRET_ACCESS_KEY=tarpitsecret \
		AWS_REGION=us-east-1 AWS_ENDPOINT_URL="http://127.0.0.1:$PORT" \
		AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
		"$LDCLIENT" --open-time --batch 100 "$T/d.sock" "s3://tarpit/ds$1" \
		>"$T/o.$1" 2>&1
}
pids=
i=0
while [ $i -lt $N ]; do
	s3open $i &
	pids="$pids $!"
	i=$((i + 1))
done
# Every OPEN has come once the daemon holds all their sessions; the
# stages have connected once the tarpit holds their connections.
i=0
while { [ "$(open_now)" -lt $STAGES ] ||
	[ "$(grep -c ': connected' "$LOG")" -lt $N ]; } && [ $i -lt 200 ]; do
	sleep 0.05
	i=$((i + 1))
done
sleep 1
is "$(open_now)" "$STAGES" "nobody's $N OPENs at once stage $STAGES at a time (max-uid-stages)"

# Root's local dataset, while they wait.
out=$(timeout 60 "$LDCLIENT" --open-time --batch 100 "$T/d.sock" "$T/fm/test" 2>&1)
like "$out" '^total batches 100 ' "root's OPEN of a local dataset streams meanwhile"
like "$(printf '%s\n' "$out" | sed -n 's/^open_s //p')" '^[0-4]\.' \
	"... opened in seconds, not after nobody's stages"
ok "... its stream was freed (a teardown found a thread)" \
	wait_for 'stream freed after' "$LOG"
out=$(timeout 60 "$LOADERCTL" streams --saved --socket "$T/d.sock" 2>&1)
ok "loaderctl streams --saved answers meanwhile" test $? -eq 0
left=0
for p in $pids; do kill -0 "$p" 2>/dev/null && left=$((left + 1)); done
is "$left" "$N" "(all of nobody's OPENs were still waiting then)"

# Each of nobody's OPENs is refused by its bound, naming it.
for p in $pids; do wait_exit "$p" $((BOUND * 3)) >/dev/null; done
refused=0 staged=0 waited=0 late=0
i=0
while [ $i -lt $N ]; do
	o=$(cat "$T/o.$i")
	case $o in *"error: open: "*"not staged within $BOUND s (s3-stage-timeout)"*)
		refused=$((refused + 1)) ;;
	esac
	case $o in *"endpoint http://127.0.0.1:$PORT did not answer in time"*)
		staged=$((staged + 1)) ;;
	esac
	case $o in *"no turn came to stage it: uid 65534's earlier ones took its $STAGES at once (max-uid-stages)"*)
		waited=$((waited + 1)) ;;
	esac
	s=$(sed -n 's/^open_s \([0-9]*\)\..*/\1/p' "$T/o.$i")
	[ -n "$s" ] && [ "$s" -lt $((BOUND + 3)) ] || late=$((late + 1))
	i=$((i + 1))
done
[ "$refused" -eq "$N" ] || sed 's/^/# /' "$T/o.0"
is "$refused" "$N" "every one of nobody's OPENs is refused with the bound and its option named"
ok "those that staged name the endpoint that did not answer ($staged)" \
	test "$staged" -ge "$STAGES"
ok "those that never had a turn say so, with max-uid-stages ($waited)" \
	test "$waited" -ge 1 -a $((staged + waited)) -eq "$N"
is "$late" 0 "each was answered within its bound of $BOUND s"
i=0
while [ "$(open_now)" -ne 0 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
is "$(open_now)" 0 "the stages' connections are closed"

# s3-endpoints: another endpoint only. Refused before any connection.
printf 's3-stage-timeout = 3\ns3-endpoints = store.example.com:443, [fd00::1]:9000 *.s3.amazonaws.com\n' \
	>"$T/ld.conf"
kill -HUP "$P"
ok "SIGHUP applies s3-endpoints" \
	wait_for 'reloaded: .*s3-stage-timeout 3, s3-endpoints store.example.com' "$LOG"
a0=$(accepted)
s3open x
like "$(cat "$T/o.x")" "error: open: .*endpoint 127\\.0\\.0\\.1:$PORT is not one loaderd may connect to \\(s3-endpoints" \
	"an OPEN naming an endpoint not in s3-endpoints is refused, naming both"
is "$(accepted)" "$a0" "... and the daemon never connected to it"
printf 's3-stage-timeout = 3\ns3-endpoints = store.example.com, 127.0.0.*:%s\n' "$PORT" >"$T/ld.conf"
kill -HUP "$P"
wait_for "reloaded: .*s3-endpoints store.example.com, 127.0.0.\*:$PORT" "$LOG"
s3open y
like "$(cat "$T/o.y")" "error: open: .*not staged within 3 s \\(s3-stage-timeout\\): endpoint http://127\\.0\\.0\\.1:$PORT" \
	"once reloaded to allow it, the OPEN goes through to the tarpit (and its new bound)"
ok "... which it connected to" test "$(accepted)" -gt "$a0"
printf 's3-endpoints = store:80:90\n' >"$T/ld.conf"
ok "loaderd refuses an s3-endpoints entry that is not HOST[:PORT]" \
	sh -c '! "$1" --config "$2" --print-config' _ "$LOADERD" "$T/ld.conf"
stop_daemon "$P" "$LOG"
