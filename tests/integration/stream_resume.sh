#!/bin/sh
# Named streams through a real loaderd and real processes: a trainer
# killed with SIGKILL again and again (after a release, and holding a
# batch it never released) resumes at the first unreleased batch, so
# that over the run every sample of every epoch is released exactly once
# and every batch's bytes are an uninterrupted run's; a saved stream of
# other options or another dataset is refused with the reason, a fresh
# start is not; a finished one says so; one name is one stream at a time;
# a daemon killed with SIGKILL comes back with the name's position (at
# least once: never further than released); an unreadable state file is
# moved aside and the daemon serves on.
. "$top_srcdir/tests/integration/tap.sh"

need_fmnist
tmpdir
plan 56

"$LOADERCTL" pack --split test --shard-size 1M "$src" "$T/ds" >/dev/null
"$LOADERCTL" pack --split test --shard-size 1M --shuffle 1 "$src" "$T/other" >/dev/null
D=$T/ds/test
ST=$T/state
ok "daemon starts with a state directory" start_daemon "$T/d.sock" --state-dir "$ST"
main=$DAEMON_PID
ok "the state file exists" test -f "$ST/loaderd.mdb"

# The stream of every test: 100 batches an epoch, 2 epochs, random order.
ARGS="--order random --seed 3 --epochs 2 --batch 100"

# exactly_once FILE [EPOCHS]: every (epoch, id) of EPOCHS (2) epochs of
# 10000 once in "id" lines.
exactly_once() {
	awk -v want=$((${2:-2} * 10000)) '$1 == "id" { n[$2 " " $4]++ }
		END { bad = 0; c = 0
		      for (k in n) { c++; if (n[k] != 1) bad++ }
		      if (c != want) bad++
		      exit bad != 0 }' "$1"
}

# --- 1. a trainer killed 12 times, then finishing ---------------------
: >"$T/all"
seed=7 r=0 starts= fine=yes
while [ $r -lt 12 ]; do
	seed=$(( (seed * 1103515245 + 12345) % 2147483648 ))
	k=$((1 + seed % 15))
	held=
	[ $((r % 2)) -eq 1 ] && held=--kill-held
	"$LDCLIENT" --name job $ARGS --ids --batch-hash --kill-after $k $held \
		"$T/d.sock" "$D" >"$T/r$r" 2>&1
	grep -q '^killed$' "$T/r$r" || fine=no
	starts="$starts $(sed -n 's/^start \([0-9]*\) \([0-9]*\) resumed \([01]\)$/\1.\2.\3/p' "$T/r$r")"
	cat "$T/r$r" >>"$T/all"
	r=$((r + 1))
done
is "$fine" yes "12 trainers were killed with SIGKILL after a release"
"$LDCLIENT" --name job $ARGS --ids --batch-hash "$T/d.sock" "$D" >"$T/last" 2>&1
is "$?" 0 "a 13th runs to the end"
cat "$T/last" >>"$T/all"
like "$starts" '^ 0\.0\.0 0\.[0-9]+\.1( [01]\.[0-9]+\.1)+$' \
	"the first started afresh, every other resumed"
ok "over the 13 runs every sample of both epochs was released exactly once" \
	exactly_once "$T/all"
# held batches came again, as the first of the next run
held_ok=yes r=0
while [ $r -lt 12 ]; do
	h=$(sed -n 's/^held \([0-9]*\) \([0-9]*\)$/\1 \2/p' "$T/r$r")
	if [ -n "$h" ]; then
		n=$((r + 1))
		next=$T/r$n
		[ $n -eq 12 ] && next=$T/last
		s=$(sed -n 's/^start \([0-9]*\) \([0-9]*\) .*/\1 \2/p' "$next")
		[ "$h" = "$s" ] || held_ok="no (run $r held $h, run $n started at $s)"
	fi
	r=$((r + 1))
done
is "$held_ok" yes "a batch taken but not released is delivered again, first"
"$LDCLIENT" --name plain $ARGS --batch-hash "$T/d.sock" "$D" >"$T/whole" 2>&1
grep '^batch ' "$T/all" | sort >"$T/a"
grep '^batch ' "$T/whole" | sort >"$T/b"
ok "every batch's bytes equal an uninterrupted run's" cmp -s "$T/a" "$T/b"
is "$(wc -l <"$T/a" | tr -d ' ')" 200 "200 batches in all, none twice"

# --- 2. what a saved name refuses --------------------------------------
out=$("$LDCLIENT" --name job $ARGS "$T/d.sock" "$D" 2>&1)
like "$out" 'stream "job" has released every batch of its 2 epochs' \
	"a finished name says so"
out=$("$LDCLIENT" --name job --order random --seed 3 --epochs 3 --batch 100 \
	--ids "$T/d.sock" "$D" 2>&1)
like "$out" '^start 2 0 resumed 1' "asked for a third epoch, it resumes there"
is "$(printf '%s\n' "$out" | grep -c '^id 2 ')" 10000 "and delivers that epoch"
out=$("$LDCLIENT" --name job --order random --seed 4 --epochs 3 --batch 100 \
	"$T/d.sock" "$D" 2>&1)
like "$out" 'saved with other batch size, order, seed or drop_last' \
	"another seed is refused, with the reason"
out=$("$LDCLIENT" --name job --order random --seed 3 --epochs 3 --batch 100 \
	"$T/d.sock" "$T/other/test" 2>&1)
like "$out" 'saved for another dataset' "another dataset is refused"
out=$("$LDCLIENT" --name job --fresh --order random --seed 4 --epochs 1 --batch 100 \
	"$T/d.sock" "$D" 2>&1)
like "$out" '^start 0 0 resumed 0' "a fresh start begins again"
out=$("$LDCLIENT" --name 'a/b' "$T/d.sock" "$D" 2>&1)
like "$out" "no '/' or control characters" "a name with a slash is refused"

# --- 3. the saved names, as loaderctl shows them, and forget ---------------
out=$("$LOADERCTL" streams --saved --socket "$T/d.sock")
like "$out" '^job +[0-9]+ +1/1 +0 +100 +0/1 .*\(finished\)$' \
	"streams --saved lists job at its position, finished"
like "$("$LOADERCTL" streams --saved --json --socket "$T/d.sock")" '"name": "plain"' \
	"and --json has every name"
ok "forget drops a name" "$LOADERCTL" forget --socket "$T/d.sock" plain
out=$("$LOADERCTL" forget --socket "$T/d.sock" plain 2>&1)
is "$?" 1 "forgetting it again finds nothing (exit 1)"
like "$out" 'no saved stream "plain"' "and says so"
# Another user sees none of these: the names are per uid.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null 2>&1; then
	chmod 755 "$T" "$T/ds" "$D"
	chmod 644 "$D"/*
	start_daemon "$T/u.sock" --state-dir "$ST.u" --socket-mode 0666
	"$LDCLIENT" --name job $ARGS --kill-after 3 "$T/u.sock" "$D" >/dev/null 2>&1
	out=$(setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$LDCLIENT" --name job $ARGS --kill-after 0 "$T/u.sock" "$D" 2>&1)
	like "$out" '^start 0 0 resumed 0' "another uid's stream of the same name starts afresh"
	kill "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_PID=$main
else
	ok "another uid's names # SKIP needs root and setpriv" true
fi

# --- 4. one name, one stream --------------------------------------------
"$LDCLIENT" --name busy $ARGS --hold-after 1 "$T/d.sock" "$D" >"$T/hold" 2>&1 &
hp=$!
wait_for 'holding after' "$T/hold"
out=$("$LDCLIENT" --name busy $ARGS "$T/d.sock" "$D" 2>&1)
like "$out" 'stream "busy" rank 0 is open in another session' "a name open elsewhere is refused"
out=$("$LDCLIENT" --name busy $ARGS --rank 1 --world 2 "$T/d.sock" "$D" 2>&1)
like "$out" 'stream "busy" is open with world 1 \(rank 0\): it goes on with world 2 only when every rank of world 1 has closed' \
	"another world is refused while a rank of the old one is open"
kill $hp 2>/dev/null
wait $hp 2>/dev/null

# --- 4b. elastic: one job on 4 ranks, then 3, then 5 ---------------------
# 10000 samples, batches of 100: 25 batches an epoch a rank on 4. The
# ranks of each world run together and are killed a few batches apart
# (some past the end of epoch 0); the next world goes on from there.
EA="--order random --seed 5 --epochs 3 --batch 100"
# world W, kill-after base K (0: to the end): rank r stops after K + r.
run_world() {
	w=$1 k=$2 pids= r=0
	while [ $r -lt "$w" ]; do
		kill_opt=
		[ "$k" -gt 0 ] && kill_opt="--kill-after $((k + r))"
		"$LDCLIENT" --name el $EA --rank $r --world "$w" --ids --batch-hash \
			$kill_opt "$T/d.sock" "$D" >"$T/el$w.$r" 2>&1 &
		pids="$pids $!"
		r=$((r + 1))
	done
	wait $pids
}
starts_of() {
	for f in "$T"/el$1.*; do sed -n 's/^start //p' "$f"; done | sort -u | tr '\n' ';'
}
run_world 4 23
like "$(starts_of 4)" '^0 0 resumed 0;$' "world 4 starts the job, every rank at the start"
run_world 3 7
like "$(starts_of 3)" '^0 [0-9]+ resumed 1;$' "world 3 resumes, every rank at the same batch of epoch 0"
run_world 5 0
like "$(starts_of 5)" '^[01] [0-9]+ resumed 1;$' "world 5 resumes, every rank at the same batch"
fine=yes
for f in "$T"/el5.*; do grep -q '^error' "$f" && fine="no: $(grep '^error' "$f")"; done
is "$fine" yes "world 5 runs every rank to the end"
cat "$T"/el4.* "$T"/el3.* "$T"/el5.* >"$T/elall"
ok "across 4, 3 and 5 ranks every sample of 3 epochs was released exactly once" \
	exactly_once "$T/elall" 3
counts=$(for f in "$T"/el5.*; do grep -c '^batch ' "$f"; done | sort -u | wc -l | tr -d ' ')
is "$counts" 1 "the 5 ranks got the same number of batches"
tail=$(for f in "$T"/el5.*; do grep '^batch 2 ' "$f" | wc -l; done | sort -u | tr '\n' ' ')
is "$tail" "20 " "epoch 2 is whole under world 5: 20 batches a rank"
out=$("$LOADERCTL" streams --saved --socket "$T/d.sock")
is "$(printf '%s\n' "$out" | grep -c '^el ')" 5 "streams --saved lists the job's 5 ranks"
# A world whose ranks' positions are not all here is refused.
"$LDCLIENT" --name el2 $EA --rank 0 --world 2 --kill-after 3 "$T/d.sock" "$D" >/dev/null 2>&1
out=$("$LDCLIENT" --name el2 $EA --rank 0 --world 3 "$T/d.sock" "$D" 2>&1)
like "$out" 'saved with world 2 and this loaderd has no position of 1 of its ranks \(1\)' \
	"another world is refused when a rank of the old one left no position here"

# --- 5. the daemon killed with SIGKILL ----------------------------------
# (--reconnect-ms -1: this client dies with the daemon; a named stream
# would ride it out by default.)
"$LDCLIENT" --name crash $ARGS --ids --after-release --sleep-ms 10 \
	--reconnect-ms -1 "$T/d.sock" "$D" >"$T/c1" 2>&1 &
cp=$!
# Released batches first: a loaded machine may not open it within 1 s.
wait_for '^id ' "$T/c1"
sleep 1
kill -9 "$DAEMON_PID"
# Gone whole before another opens its state, as systemd has it.
wait "$DAEMON_PID" 2>/dev/null
wait "$cp" 2>/dev/null
got=$(awk '$1 == "id" { b[$2 * 100 + $3] = 1 } END { n = 0; for (k in b) n++; print n }' "$T/c1")
ok "daemon restarts on the same state" start_daemon "$T/d2.sock" --state-dir "$ST"
"$LDCLIENT" --name crash $ARGS --kill-after 0 "$T/d2.sock" "$D" >"$T/c2" 2>&1 &
wait_exit $! 120
out=$(cat "$T/c2")
at=$(printf '%s\n' "$out" | sed -n 's/^start \([0-9]*\) \([0-9]*\) resumed 1$/\1 \2/p')
set -- $at
pos=$(( ${1:-0} * 100 + ${2:-0} ))
# A release returns once it is saved: the name resumes right after the
# last release that returned (or one further, if the daemon saved a
# release it died before confirming).
ok "it resumes the name after the crash at $pos, $got releases returned" \
	test -n "$at" -a "$pos" -gt 0 -a "$pos" -ge "$got" -a "$pos" -le $((got + 1))

# ride NAME ARGS...: a client with reconnect_ms and ARGS, the daemon
# killed with SIGKILL under it and started again; the client's exit
# status, its "batch" lines sorted in $T/NAME.sorted.
ride() {
	name=$1
	shift
	"$LDCLIENT" --name "$name" $ARGS --batch-hash --sleep-ms 10 \
		--reconnect-ms 10000 "$@" "$T/d2.sock" "$D" >"$T/$name" 2>&1 &
	rp=$!
	wait_for '^batch ' "$T/$name"
	sleep 0.8
	kill -9 "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null
	sleep 0.5
	start_daemon "$T/d2.sock" --state-dir "$ST"
	wait_exit "$rp" 120
	rc=$?
	grep '^batch ' "$T/$name" | sort >"$T/$name.sorted"
	return $rc
}
# A client with reconnect_ms rides the crash out: it connects to the new
# daemon on its own and finishes; what it released equals an
# uninterrupted run, no batch twice.
ride ride --after-release
is "$?" 0 "a client with reconnect_ms finishes its stream across a daemon SIGKILL"
is "$(uniq -d "$T/ride.sorted" | wc -l | tr -d ' ') $(cmp -s "$T/ride.sorted" "$T/b" && echo same)" "0 same" \
	"its released batches are the uninterrupted run's, none twice"
# A named stream that leaves reconnect_ms 0 (the default) rides it out
# too: LOADER_RECONNECT_DEFAULT_MS, 60 s.
ride ridedef --after-release --reconnect-ms 0
is "$?" 0 "a named stream with the default reconnect_ms finishes its stream across a daemon SIGKILL"
is "$(uniq -d "$T/ridedef.sorted" | wc -l | tr -d ' ') $(cmp -s "$T/ridedef.sorted" "$T/b" && echo same)" "0 same" \
	"its released batches are the uninterrupted run's, none twice"
# Holding batches when the daemon dies: they stay valid, the daemon's
# copies of them are released in their place, and the stream goes on
# after them: every batch once, as an uninterrupted run has them.
ride ride3 --keep 3
is "$?" 0 "a client holding 2 batches rides a daemon SIGKILL out"
is "$(uniq -d "$T/ride3.sorted" | wc -l | tr -d ' ') $(cmp -s "$T/ride3.sorted" "$T/b" && echo same)" "0 same" \
	"its batches are the uninterrupted run's, none twice, none lost"
# A rank of world 2 rides it out while the other rank's saved position is
# far behind (killed after 3 releases): it goes on at its own position,
# not at the world's least, as a restarted job would.
"$LDCLIENT" --name rw $ARGS --world 2 --rank 1 --kill-after 3 "$T/d2.sock" "$D" >/dev/null 2>&1
"$LDCLIENT" $ARGS --world 2 --rank 0 --batch-hash "$T/d2.sock" "$D" 2>&1 |
	grep '^batch ' | sort >"$T/b2"
ride rw --world 2 --rank 0 --after-release
is "$?" 0 "rank 0 of world 2 finishes its stream across a daemon SIGKILL"
is "$(uniq -d "$T/rw.sorted" | wc -l | tr -d ' ') $(cmp -s "$T/rw.sorted" "$T/b2" && echo same)" "0 same" \
	"... going on at its own position: its batches are an uninterrupted rank 0's, none twice"

# --- 6. SIGKILL while checkpoints are written ------------------------------
# Six named streams checkpoint every 200 ms and at every session end
# (clients that come and go); the daemon is killed at a random moment,
# 8 times. Each time the state must open as it is (never moved aside)
# and every name resume no further than its client got.
n=0 bad= seed=5
while [ $n -lt 8 ]; do
	kids=
	for s in 1 2 3 4 5 6; do
		"$LDCLIENT" --name "k$s" --order random --seed 3 --epochs 0 --batch 10 \
			--ids --sleep-ms 1 --reconnect-ms -1 "$T/d2.sock" "$D" \
			>"$T/k$s.$n" 2>&1 &
		kids="$kids $!"
	done
	seed=$(( (seed * 1103515245 + 12345) % 2147483648 ))
	sleep "0.$((3 + seed % 7))"
	kill -9 "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null
	# Their clients end with the daemon; one slow to start must not
	# connect to the next daemon and hold its name there.
	for k in $kids; do wait "$k"; done
	start_daemon "$T/d2.sock" --state-dir "$ST" || bad="$bad start$n"
	grep -q 'unreadable' "$T/d2.sock.log" && bad="$bad aside$n"
	for s in 1 2 3 4 5 6; do
		out=$("$LDCLIENT" --name "k$s" --order random --seed 3 --epochs 0 --batch 10 \
			--kill-after 0 "$T/d2.sock" "$D" 2>&1)
		at=$(printf '%s\n' "$out" | sed -n 's/^start \([0-9]*\) \([0-9]*\) resumed 1$/\1 \2/p')
		# A client that was never told its start (killed before its
		# OPEN was answered) may have left no record: then it starts over.
		if [ -z "$at" ] && ! cat "$T"/k$s.* | grep -q '^start '; then
			continue
		fi
		[ -n "$at" ] || { bad="$bad k$s.$n:[$out]"; continue; }
		set -- $at
		got=$(cat "$T"/k$s.* | awk '$1 == "id" { b[$2 * 1000 + $3] = 1 } END { n = 0; for (k in b) n++; print n }')
		[ $(( $1 * 1000 + $2 )) -le "$got" ] || bad="$bad k$s.$n:$1.$2>$got"
	done
	n=$((n + 1))
done
is "$bad" "" "8 kills while six streams checkpoint: the state opens, every name resumes within what was taken"
positions=$(for s in 1 2 3 4 5 6; do
	"$LDCLIENT" --name "k$s" --order random --seed 3 --epochs 0 --batch 10 \
		--kill-after 0 "$T/d2.sock" "$D" 2>&1 | sed -n 's/^start \([0-9]*\) \([0-9]*\) .*/\1.\2/p'
done | paste -sd' ' -)
like "$positions" '^([0-9]+\.[0-9]+ ){5}[0-9]+\.[0-9]+$' "six positions read back ($positions)"
ok "and none of them is at the start" sh -c 'case " $1 " in *" 0.0 "*) exit 1 ;; esac' sh "$positions"

# --- 7. both killed at random points, on JPEGs with bad samples skipped ---
# 60 JPEGs and 2 damaged on disk after packing (pack refuses a damaged
# JPEG, so two good ones are packed as they are and their bytes in the
# shard overwritten: bad at read time, their checksums wrong; skipped,
# their places taken by a copy of a good sample of the batch).
# Each round starts what is not running, lets the trainer release for a
# while, and kills the daemon, the trainer or both with SIGKILL. Over all
# rounds every batch of every epoch must be released exactly once, each
# with the bytes of an uninterrupted run.
J=$T/jpg
mkdir -p "$J/a" "$J/b"
i=0
while [ $i -lt 60 ]; do
	"$TOOLS/mkjpeg" "$J/$( [ $((i % 2)) -eq 0 ] && echo a || echo b)/$i.jpg" \
		$((40 + i)) $((30 + i % 7)) $i
	i=$((i + 1))
done
"$TOOLS/mkjpeg" "$J/a/bad1.jpg" 200 150 77
"$TOOLS/mkjpeg" "$J/b/bad2.jpg" 200 150 78
"$LOADERCTL" pack --jpeg-restart off "$J" "$T/jds" >"$T/jpack.out" 2>&1
# Overwrite 64 bytes in the middle of each of the two in the shard.
/usr/bin/python3 - "$T/jds/shard-00000.lds" "$J/a/bad1.jpg" "$J/b/bad2.jpg" <<'PY' >"$T/jdamage.out" 2>&1
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
for src in sys.argv[2:]:
    b = open(src, "rb").read()
    at = data.find(b)
    assert at > 0, src
    mid = at + len(b) // 2
    data[mid:mid + 64] = bytes(64)
    print("damaged", src, "at", mid)
open(path, "wb").write(data)
PY
JP='decode | center 24 | u8'
# The JPEG stream's options (the client runs in the background directly:
# its pid must be the client's, for kill -9 to be a trainer crash).
JA="--on-bad skip --order random --seed 9 --epochs 30 --batch 4"
ST2=$T/state2
d2=$DAEMON_PID # the daemon on $ST, until section 8 damages its file
ok "daemon for the JPEG rounds starts" start_daemon "$T/j.sock" --state-dir "$ST2"
jd=$DAEMON_PID
"$LDCLIENT" --pipeline "$JP" $JA --name ref --batch-hash --after-release \
	"$T/j.sock" "$T/jds" >"$T/jref" 2>&1
: >"$T/jall"
r=0 seed=3 kills=
while [ $r -lt 20 ]; do
	if ! kill -0 "$jd" 2>/dev/null; then
		start_daemon "$T/j.sock" --state-dir "$ST2" || break
		jd=$DAEMON_PID
	fi
	"$LDCLIENT" --pipeline "$JP" $JA --name jj --batch-hash --after-release \
		--sleep-ms 5 --reconnect-ms -1 "$T/j.sock" "$T/jds" >"$T/j$r" 2>&1 &
	tp=$!
	seed=$(( (seed * 1103515245 + 12345) % 2147483648 ))
	sleep "0.$((1 + seed % 4))"
	case $((r % 3)) in
	0) kill -9 "$jd"; kills="${kills}d" ;;
	1) kill -9 "$tp"; kills="${kills}t" ;;
	2) kill -9 "$tp" "$jd"; kills="${kills}b" ;;
	esac
	wait "$tp" 2>/dev/null
	# the daemon only when it was killed: a live one never exits
	[ $((r % 3)) -eq 1 ] || wait "$jd" 2>/dev/null || :
	cat "$T/j$r" >>"$T/jall"
	r=$((r + 1))
done
kill -0 "$jd" 2>/dev/null || { start_daemon "$T/j.sock" --state-dir "$ST2"; jd=$DAEMON_PID; }
"$LDCLIENT" --pipeline "$JP" $JA --name jj --batch-hash --after-release \
	"$T/j.sock" "$T/jds" >"$T/jlast" 2>&1
cat "$T/jlast" >>"$T/jall"
grep '^batch ' "$T/jall" | sort >"$T/ja"
grep '^batch ' "$T/jref" | sort >"$T/jb"
is "$(grep -c '^damaged' "$T/jdamage.out") $("$LOADERCTL" verify --json "$T/jds" | sed -n 's/.*"bad_records":\([0-9]*\).*/\1/p')" \
	"2 2" "two of the 62 packed JPEGs are damaged in the shard, as verify finds"
is "$(wc -l <"$T/jb" | tr -d ' ')" 480 "an uninterrupted run: 30 epochs of 16 batches"
# A kill inside a release leaves that one batch undecided ("releasing"
# without its lines): released (not delivered again) or not (delivered
# again, then confirmed). So does a release that failed: with the daemon
# killed, the client still takes the batches it had published from the
# ring, and each release fails ("release failed"), so a run may end
# with several undecided. Nothing confirmed may come twice, and what
# was never confirmed must be such an undecided release.
for f in "$T"/j[0-9]* "$T/jlast"; do
	awk '$1 == "releasing" { p[$2 " " $3] = 1 }
		$1 == "batch" { delete p[$2 " " $3] }
		END { for (k in p) print k }' "$f"
done | sort >"$T/jundecided"
dups=$(uniq -d "$T/ja" | wc -l | tr -d ' ')
alien=$(comm -23 "$T/ja" "$T/jb" | wc -l | tr -d ' ')
lost=$(comm -13 "$T/ja" "$T/jb" | awk '{ print $2 " " $3 }' | sort |
	comm -23 - "$T/jundecided" | wc -l | tr -d ' ')
is "$dups $alien $lost" "0 0 0" \
	"20 rounds of kills ($kills): no batch released twice, none with other bytes than an uninterrupted run's, none lost"
ok "and most were confirmed ($(wc -l <"$T/ja" | tr -d ' ') of 480; the rest were inside a release when killed)" \
	test "$(wc -l <"$T/ja")" -ge 460
[ -n "${KEEP_RESUME:-}" ] && cp -r "$T" "$KEEP_RESUME"

# --- 8. an unreadable state file -----------------------------------------
# (Both daemons stop: the one on $ST holds the directory's lock.)
kill "$DAEMON_PID" "$d2"
wait "$DAEMON_PID" "$d2" 2>/dev/null
printf 'this is not an LMDB file, whatever it was\n%4096s\n' x >"$ST/loaderd.mdb"
ok "the daemon starts on a damaged state file" start_daemon "$T/d3.sock" --state-dir "$ST"
like "$(cat "$T/d3.sock.log")" 'loaderd.mdb is unreadable .*moved aside to .*loaderd.mdb.bad-' \
	"and says it moved the file aside"
out=$("$LDCLIENT" --name job $ARGS --kill-after 0 "$T/d3.sock" "$D" 2>&1)
like "$out" '^start 0 0 resumed 0' "named streams start over"

# --- 9. the ranks of one world resume together -----------------------------
# Rank 0 killed after 13 releases, rank 1 after 12 (one killed holding a
# batch it had not released): restarted with the same world, both go on
# at the least, 0:12, and deliver as many batches each (DDP's lockstep).
EQ="--name eq --world 2 --order random --seed 3 --epochs 1 --batch 100"
"$LDCLIENT" $EQ --rank 0 --kill-after 13 "$T/d3.sock" "$D" >/dev/null 2>&1
"$LDCLIENT" $EQ --rank 1 --kill-after 12 "$T/d3.sock" "$D" >/dev/null 2>&1
o0=$("$LDCLIENT" $EQ --rank 0 "$T/d3.sock" "$D" 2>&1)
o1=$("$LDCLIENT" $EQ --rank 1 "$T/d3.sock" "$D" 2>&1)
is "$(printf '%s\n' "$o0" "$o1" | sed -n 's/^start \([0-9]* [0-9]*\) resumed.*/\1/p' | tr '\n' ' ')" \
	"0 12 0 12 " "both ranks of the world resume at the least of their positions, 0:12"
is "$(printf '%s\n' "$o0" | sed -n 's/^total batches \([0-9]*\) .*/\1/p') $(printf '%s\n' "$o1" | sed -n 's/^total batches \([0-9]*\) .*/\1/p')" \
	"38 38" "... and deliver as many batches each (38 of 50)"
