#!/bin/sh
# Text a client chooses reaches the daemon's log and loaderctl's tables
# escaped: a shard name in the client's manifest holding a newline and
# "<3>error: ..." makes one log line, never a forged error line of
# loaderd's; a dataset path with
# an escape sequence and a newline is one row of `loaderctl streams`, and
# no escape byte reaches the terminal.
. "$top_srcdir/tests/integration/tap.sh"

PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "python3 not installed"
need_fmnist
tmpdir
plan 9
nl='
'
esc=$(printf '\033')
# A manifest naming a damaged shard "shard\n<3>error: forged.lds": the
# daemon's refusal, which it logs, names it.
"$LOADERCTL" pack --split test --shard-size 4M "$src" "$T/bad" >/dev/null
"$PY" - "$T/bad/test" <<'PYEOF'
import json, os, sys
d = sys.argv[1]
m = json.load(open(d + "/manifest.json"))
new = "shard\n<3>error: forged by a client.lds"
os.rename(d + "/" + m["shards"][1]["file"], d + "/" + new)
m["shards"][1]["file"] = new
json.dump(m, open(d + "/manifest.json", "w"))
with open(d + "/" + new, "r+b") as f:
    f.truncate(os.path.getsize(d + "/" + new) - 100)
PYEOF
start_daemon "$T/d.sock"
P=$DAEMON_PID
like "$("$LDCLIENT" --batch 100 "$T/d.sock" "$T/bad/test" 2>&1)" 'no trailer magic' \
	"a damaged shard whose name holds a newline is refused"
is "$(grep -c '^<3>error: forged' "$T/d.sock.log")" 0 "no line of the log is the client's forged error"
like "$(grep 'refused' "$T/d.sock.log")" 'refused: shard\\x0a<3>error: forged by a client.lds: offset' \
	"the name is in one line, its newline escaped"

"$LOADERCTL" pack --split test --shard-size 4M "$src" "$T/ds" >/dev/null
D="$T/ds/${esc}[2J${esc}]0;owned${esc}\\${nl}99999 0 0 FAKE"
mv "$T/ds/test" "$D"
"$LDCLIENT" --batch 100 --hold-after 1 "$T/d.sock" "$D" >"$T/held" 2>&1 &
held=$!
wait_for 'holding after' "$T/held"
out=$("$LOADERCTL" streams --socket "$T/d.sock" 2>&1)
printf '%s\n' "$out" | sed 's/^/# /' | tr -d '\033'
ok "no escape byte of the path reaches the terminal" \
	sh -c "! printf '%s' \"\$1\" | grep -q \"\$2\"" _ "$out" "$esc"
is "$(printf '%s\n' "$out" | grep -c 'FAKE')" 1 "the path is one row, its newline no row of its own"
like "$out" '\\x1b\[2J\\x1b\]0;owned\\x1b\\\\\\x0a99999 0 0 FAKE' \
	"the path is shown with its control bytes escaped"
kill "$held" 2>/dev/null
wait "$held" 2>/dev/null
stop_daemon "$P" "$T/d.sock.log"
