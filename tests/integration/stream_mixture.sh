#!/bin/sh
# Mixtures through a real loaderd and real processes (the members'
# counts, ranks and files are tests/client/python/test_mixture.py's): a
# named mixture whose trainer and daemon are both killed with SIGKILL
# mid-epoch resumes where its trainer stopped, so that over the run each
# epoch's samples of each member are released exactly as an
# uninterrupted stream delivers them; a job of 4 ranks goes on with 3,
# the same; a named job's proportions change at an epoch's start, or,
# changed part-way through one, at the next epoch no rank has begun (and
# a third change while ranks stand on both sides of one is refused,
# saying why, as is another world then; a new world with a change
# pending deals each epoch with its counts); members whose pipelines
# give other shapes are refused at
# OPEN, naming the member, the output and both shapes, while members
# whose own pipelines agree are mixed; loaderctl streams shows each
# member's samples an epoch, delivered, bad and read.
. "$top_srcdir/tests/integration/tap.sh"

need_fmnist
tmpdir
plan 39

"$LOADERCTL" pack --split test --shard-size 1M "$src" "$T/a" >/dev/null
"$LOADERCTL" pack --split test --shard-size 1M --shuffle 1 "$src" "$T/b" >/dev/null
# 0.6 / 0.4 of 20000 places an epoch: member 0 (10000 samples) gives
# 12000 (each sample once, 2000 of them twice), member 1 gives 8000.
M="--member proportion:0.6:$T/a/test --member proportion:0.4:$T/b/test"
ST=$T/state
ok "daemon starts with a state directory" start_daemon "$T/d.sock" --state-dir "$ST"

# multiset FILE...: the "id EPOCH BATCH ID MEMBER" lines as a sorted list
# of "EPOCH MEMBER ID COUNT".
multiset() {
	cat "$@" | awk '$1 == "id" { n[$2 " " $5 " " $4]++ }
		END { for (k in n) print k, n[k] }' | sort
}
# planned FILE: each member's samples of each epoch as the plan says:
# 2 epochs, member 0 10000 samples once or twice (12000 in all), member
# 1 8000 distinct.
planned() {
	awk '{ s[$1 " " $2] += $4; d[$1 " " $2]++; if ($4 > 2) bad = 1 }
		END { exit bad || s["0 0"] != 12000 || d["0 0"] != 10000 ||
		      s["1 0"] != 12000 || d["1 0"] != 10000 ||
		      s["0 1"] != 8000 || d["0 1"] != 8000 ||
		      s["1 1"] != 8000 || d["1 1"] != 8000 }' "$1"
}

# --- the uninterrupted stream --------------------------------------------
ARGS="--order random --seed 3 --epochs 2 --batch 100"
"$LDCLIENT" $ARGS $M --ids "$T/d.sock" mix >"$T/ref" 2>&1
multiset "$T/ref" >"$T/ref.set"
ok "an uninterrupted mixture gives each member's samples as planned" planned "$T/ref.set"

# --- 1. trainer and daemon killed with SIGKILL mid-epoch, then resumed ----
"$LDCLIENT" --name mk $ARGS $M --ids --after-release --kill-after 37 \
	"$T/d.sock" mix >"$T/k1" 2>&1
is "$?" 137 "the trainer is killed (SIGKILL) after 37 batches"
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
ok "the daemon, killed with SIGKILL, starts again on its state" \
	start_daemon "$T/d.sock" --state-dir "$ST"
"$LDCLIENT" --name mk $ARGS $M --ids --after-release "$T/d.sock" mix >"$T/k2" 2>&1
is "$?" 0 "the resumed trainer runs to the end"
like "$(grep '^start' "$T/k2")" '^start 0 37 resumed 1$' "it resumes at batch 37 of epoch 0"
multiset "$T/k1" "$T/k2" >"$T/k.set"
ok "across the kills each member's samples of each epoch came exactly as uninterrupted" \
	cmp -s "$T/k.set" "$T/ref.set"

# --- 2. a job of 4 ranks goes on with 3 -----------------------------------
# 20000 places, batches of 100: 50 batches an epoch a rank on 4.
# run_world W K: W ranks, rank r killed after K + r batches (0: to the end).
run_world() {
	w=$1 k=$2 pids= r=0
	while [ $r -lt "$w" ]; do
		kill_opt=
		[ "$k" -gt 0 ] && kill_opt="--kill-after $((k + r))"
		"$LDCLIENT" --name el $ARGS $M --rank $r --world "$w" --ids \
			--after-release $kill_opt "$T/d.sock" mix >"$T/el$w.$r" 2>&1 &
		pids="$pids $!"
		r=$((r + 1))
	done
	wait $pids
}
run_world 4 31
like "$(for f in "$T"/el4.*; do sed -n 's/^start //p' "$f"; done | sort -u | tr '\n' ';')" \
	'^0 0 resumed 0;$' "world 4 starts the job"
run_world 3 0
like "$(for f in "$T"/el3.*; do sed -n 's/^start //p' "$f"; done | sort -u | tr '\n' ';')" \
	'^0 [0-9]+ resumed 1;$' "world 3 resumes it, every rank at the same batch"
fine=yes
for f in "$T"/el3.*; do grep -q '^error' "$f" && fine="no: $(grep '^error' "$f")"; done
is "$fine" yes "world 3 runs every rank to the end"
multiset "$T"/el4.* "$T"/el3.* >"$T/el.set"
ok "across 4 and 3 ranks each member's samples of each epoch came exactly as uninterrupted" \
	cmp -s "$T/el.set" "$T/ref.set"

# --- 2b. memory: a member's share of the prefetch, and a plan's size -------
# Batches of 3000 (2.4 MB of records) within 4 MiB of prefetch: member 0,
# 0.9 of the epoch, must hold a whole batch, not half of the budget.
out=$("$LDCLIENT" --prefetch 4194304 --batch 3000 --hash \
	--member proportion:0.9:"$T/a/test" --member proportion:0.1:"$T/b/test" \
	"$T/d.sock" mix 2>&1)
like "$out" '^epoch 0 batches 7 samples 20000 ' \
	"a member of a large share gets room for whole batches of its records"
# 2 x 10^6 whole copies of a dataset of one shard are 2 x 10^6 blocks a
# plan: counted in the stream's memory, and refused past the user's.
"$LOADERCTL" pack --split test --shard-size 64M "$src" "$T/one" >/dev/null
start_daemon "$T/small.sock" --max-uid-memory 64M
out=$("$LDCLIENT" --member repeat:1000000:"$T/one/test" \
	--member repeat:1000000:"$T/one/test" "$T/small.sock" mix 2>&1)
like "$out" 'the mixture would hold [0-9]+ bytes beside its ring \(its 2 members. prefetch, decode scratch and shard indexes [0-9]+, its plan and orders over 2000000 blocks [0-9]+\), more than the' \
	"a plan too large for the user's memory is refused, its parts named"

# --- 3. a named job changes its proportions between epochs ----------------
M55="--member proportion:0.5:$T/a/test --member proportion:0.5:$T/b/test"
"$LDCLIENT" --name mw --order random --seed 3 --batch 100 --epochs 1 $M --ids \
	"$T/d.sock" mix >"$T/w0" 2>&1
"$LDCLIENT" --name mw --order random --seed 3 --batch 100 --epochs 2 $M55 --ids \
	"$T/d.sock" mix >"$T/w1" 2>&1
like "$(grep '^start' "$T/w1")" '^start 1 0 resumed 1$' \
	"a named mixture reopened with other proportions after epoch 0 goes on at epoch 1"
is "$(cat "$T/w0" "$T/w1" | awk '$1 == "id" { n[$2 " " $5]++; d[$2 " " $5 " " $4] = 1 }
	END { for (k in d) { split(k, a, " "); u[a[1] " " a[2]]++ }
	      print n["0 0"], n["0 1"], u["0 0"], n["1 0"], n["1 1"], u["1 0"], u["1 1"] }')" \
	"12000 8000 10000 10000 10000 10000 10000" \
	"epoch 0 as 0.6 / 0.4 (12000 and 8000), epoch 1 as 0.5 / 0.5, each sample once"
# Other counts part-way through an epoch take effect at the next one:
# 0.6 / 0.4 (200 batches an epoch) until then, then member 0 once and
# 5000 of member 1 (150 batches); the rank killed in epoch 1 goes on
# there with them.
M2="--member repeat:1:$T/a/test --member choose:5000:$T/b/test"
W="--order random --seed 3 --batch 100 --epochs 3 --ids --after-release"
"$LDCLIENT" --name mw2 $W $M --kill-after 5 "$T/d.sock" mix >"$T/c1" 2>&1
"$LDCLIENT" --name mw2 $W $M2 --kill-after 215 "$T/d.sock" mix >"$T/c2" 2>&1
like "$(grep '^start' "$T/c2")" '^start 0 5 resumed 1$' \
	"other proportions part-way through epoch 0 are taken, the job going on at batch 5"
"$LDCLIENT" --name mw2 $W $M2 "$T/d.sock" mix >"$T/c3" 2>&1
is "$(grep '^start' "$T/c3") errors $(grep -c '^error' "$T/c3")" 'start 1 20 resumed 1 errors 0' \
	"killed at batch 20 of epoch 1 (195 + 20 batches on), it goes on there to the end"
# counts FILE...: epoch by epoch, each member's samples and distinct ones.
counts() {
	cat "$@" | awk '$1 == "id" { n[$2 " " $5]++; d[$2 " " $5 " " $4] = 1 }
		END { for (k in d) { split(k, a, " "); u[a[1] " " a[2]]++ }
		      for (e = 0; e < 3; e++)
			printf "%d %d %d %d; ", n[e " 0"], u[e " 0"], n[e " 1"], u[e " 1"] }'
}
is "$(counts "$T/c1" "$T/c2" "$T/c3")" \
	"12000 10000 8000 8000; 10000 10000 5000 5000; 10000 10000 5000 5000; " \
	"epoch 0 as 0.6 / 0.4, epochs 1 and 2 with the new counts, each sample as planned"

# The same from positions given (a trainer's checkpoint): the change
# holds from the first epoch none of them has begun.
"$LDCLIENT" --name mg $W $M --kill-after 5 "$T/d.sock" mix >"$T/g1" 2>&1
"$LDCLIENT" --name mg $W $M2 --from 0:5 "$T/d.sock" mix >"$T/g2" 2>&1
is "$(grep '^start' "$T/g2") errors $(grep -c '^error' "$T/g2")" 'start 0 5 resumed 1 errors 0' \
	"other proportions with positions given go on from those positions"
is "$(counts "$T/g1" "$T/g2")" \
	"12000 10000 8000 8000; 10000 10000 5000 5000; 10000 10000 5000 5000; " \
	"with positions given, epoch 0 as 0.6 / 0.4 and then the new counts"

# Positions given on another node: a change that waits for epoch 1 is
# part of the plan the trainer keeps (as an elastic resume's plan is), so
# a loaderd without the job's record refuses to guess the epoch's
# counts, and the node that has it goes on.
"$LDCLIENT" --name mn $W $M --kill-after 5 "$T/d.sock" mix >/dev/null 2>&1
"$LDCLIENT" --name mn $W $M2 --kill-after 10 "$T/d.sock" mix >"$T/n1" 2>&1
plan=$(sed -n 's/^plan \([0-9a-f]*\) \([0-9]*\)$/\1:\2/p' "$T/n1")
like "$plan" '^[0-9a-f]{16}:1$' "a change that waits for epoch 1 is in the stream's plan, which ends there"
start_daemon "$T/other.sock"
out=$("$LDCLIENT" --name mn $W $M2 --from 0:15 --from-plan "$plan" "$T/other.sock" mix 2>&1)
like "$out" 'changed its mixture.s weights, part-way through an epoch before 1 \(plan [0-9a-f]+\), and this loaderd has no record of that world' \
	"a node without the job's record refuses positions given inside that plan"
out=$("$LDCLIENT" --name mn $W $M2 --from 0:15 --from-plan "$plan" "$T/d.sock" mix 2>&1)
like "$(echo "$out" | grep -c '^error') $(echo "$out" | grep '^start')" '^0 start 0 15 resumed 1$' \
	"the node that ran the job goes on from the positions given"

# Two ranks: rank 1 had begun epoch 1 (100 batches an epoch a rank) when
# the counts changed, so they change from epoch 2 (75 batches). A third
# change while rank 0 is in epoch 0 and rank 1 in epoch 2 is refused.
W2="$W --world 2"
"$LDCLIENT" --name mr $W2 $M --rank 0 --kill-after 5 "$T/d.sock" mix >"$T/r0a" 2>&1
"$LDCLIENT" --name mr $W2 $M --rank 1 --kill-after 105 "$T/d.sock" mix >"$T/r1a" 2>&1
"$LDCLIENT" --name mr $W2 $M2 --rank 1 --kill-after 200 "$T/d.sock" mix >"$T/r1b" 2>&1
like "$(grep '^start' "$T/r1b")" '^start 0 5 resumed 1$' \
	"a rank reopened with other counts goes on from the job's least position"
out=$("$LDCLIENT" --name mr $W2 $M55 --rank 0 "$T/d.sock" mix 2>&1)
like "$out" 'stream "mr": what its members give an epoch changed at epoch 2 already, and a rank is still in epoch 0 while another has begun epoch 2: open it with the proportions of its last open until every rank has finished epoch 1' \
	"a third count while ranks stand on both sides of the change is refused, saying why"
out=$("$LDCLIENT" --name mr $W $M2 --rank 0 --world 3 "$T/d.sock" mix 2>&1)
like "$out" 'the counts change at epoch 2, and rank 1 of world 2 stopped in epoch 2 while another stopped before it: go on with world 2 until every rank has begun epoch 2' \
	"another world is refused while the old one's ranks stand on both sides of the change"
"$LDCLIENT" --name mr $W2 $M2 --rank 0 "$T/d.sock" mix >"$T/r0b" 2>&1
"$LDCLIENT" --name mr $W2 $M2 --rank 1 "$T/d.sock" mix >"$T/r1c" 2>&1
is "$(cat "$T/r0b" "$T/r1c" | grep -c '^error')" 0 "both ranks run to the end with the counts of their last open"
# Each rank's batches once (a rank that resumes at the job's least
# position gives again those it had passed), then the epochs' counts.
once() {
	awk 'FNR == 1 { for (k in cur) seen[k] = 1; delete cur }
		$1 == "id" { k = $2 " " $3; if (k in seen) next; cur[k] = 1; print }' "$@"
}
once "$T/r0a" "$T/r0b" >"$T/r0"
once "$T/r1a" "$T/r1b" "$T/r1c" >"$T/r1"
is "$(counts "$T/r0" "$T/r1")" \
	"12000 10000 8000 8000; 12000 10000 8000 8000; 10000 10000 5000 5000; " \
	"epochs 0 and 1 as 0.6 / 0.4 over both ranks, epoch 2 with the new counts"

# A change pending (from epoch 2) when the job goes on with another
# world in epoch 1: the rest of epoch 1 is dealt to the 3 new ranks with
# the counts it began with, epoch 2 with the new ones.
"$LDCLIENT" --name me $W2 $M --rank 0 --kill-after 105 "$T/d.sock" mix >"$T/e0a" 2>&1
"$LDCLIENT" --name me $W2 $M --rank 1 --kill-after 110 "$T/d.sock" mix >"$T/e1a" 2>&1
"$LDCLIENT" --name me $W2 $M2 --rank 0 --kill-after 1 "$T/d.sock" mix >"$T/e0b" 2>&1
pids= r=0
while [ $r -lt 3 ]; do
	"$LDCLIENT" --name me $W $M2 --rank $r --world 3 "$T/d.sock" mix >"$T/e3.$r" 2>&1 &
	pids="$pids $!"
	r=$((r + 1))
done
wait $pids
like "$(cat "$T"/e3.* | grep -c '^error') $(sed -n 's/^start //p' "$T"/e3.* | sort -u | tr '\n' ';')" \
	'^0 1 [0-9]+ resumed 1;$' "a new world goes on in epoch 1 with a change of counts pending"
is "$(counts "$T"/e0a "$T"/e1a "$T"/e0b "$T"/e3.*)" \
	"12000 10000 8000 8000; 12000 10000 8000 8000; 10000 10000 5000 5000; " \
	"across the worlds, epochs 0 and 1 as 0.6 / 0.4 and epoch 2 with the new counts"

# --- 4. members' outputs must agree ----------------------------------------
F=$T/img
mkdir -p "$F/a" "$F/b"
n=0
for wh in 64x48 50x50 80x60 48x64 100x40 40x40; do
	"$TOOLS/mkjpeg" "$F/a/0$n.jpg" ${wh%x*} ${wh#*x} $n
	"$TOOLS/mkjpeg" "$F/b/0$n.jpg" ${wh#*x} ${wh%x*} $((n + 10))
	n=$((n + 1))
done
"$LOADERCTL" pack "$F" "$T/jpg" >/dev/null
cat >"$T/bad.json" <<EOF
{"format": "loaderd-mixture", "version": 1, "members": [
 {"path": "jpg", "repeat": 1, "pipeline": "decode | resize 40 | center 32 | u8 | nhwc"},
 {"path": "jpg", "repeat": 1, "pipeline": "decode | resize 40 | center 24 | u8 | nhwc"}]}
EOF
out=$("$LDCLIENT" --outputs image,label --batch 4 "$T/d.sock" "$T/bad.json" 2>&1)
like "$out" 'member 1 \(.*jpg\): output 0 is image u8 \[24, 24, 3\], but member 0 \(.*jpg\) gives image u8 \[32, 32, 3\]' \
	"members of other shapes are refused at OPEN, naming the member, the output and both shapes"
cat >"$T/good.json" <<EOF
{"format": "loaderd-mixture", "version": 1, "members": [
 {"path": "jpg", "choose": 8, "pipeline": "decode | resize 40 | center 32 | u8 | nhwc"},
 {"path": "jpg", "repeat": 1, "pipeline": "decode | rrc 32 | flip 0.5 | u8 | nhwc"}]}
EOF
out=$("$LDCLIENT" --outputs image,label --batch 4 --epochs 2 --ids --hash \
	"$T/d.sock" "$T/good.json" 2>&1)
like "$out" '^epoch 1 batches 5 samples 20 ' \
	"members with their own pipelines of one shape are mixed: 8 + 12 images an epoch"
# The same bytes whatever the decode threads: daemons of 1 and 3.
start_daemon "$T/t1.sock" --threads 1
start_daemon "$T/t3.sock" --threads 3
hashes() {
	"$LDCLIENT" --outputs image,label --batch 4 --epochs 2 --order random \
		--seed 9 --batch-hash "$1" "$T/good.json" 2>&1 | grep '^batch '
}
h1=$(hashes "$T/t1.sock")
h3=$(hashes "$T/t3.sock")
ok "a mixture's batches are the same bytes with 1 and 3 decode threads" \
	test -n "$h1" -a "$h1" = "$h3"

# --- 5. members of other formats: a tar read in place, shards packed from it
mkdir "$T/w"
: >"$T/w.list"
i=0
while [ $i -lt 12 ]; do
	k=s$(printf '%04d' $i)
	"$TOOLS/mkjpeg" "$T/w/$k.jpg" $((40 + i * 3)) $((32 + i)) $((i + 1)) >/dev/null
	echo $((i % 3)) >"$T/w/$k.cls"
	printf '%s\n' "$k.cls" "$k.jpg" >>"$T/w.list"
	i=$((i + 1))
done
(cd "$T/w" && tar --format=gnu --no-recursion -cf "$T/w.tar" -T "$T/w.list")
"$LOADERCTL" pack "$T/w.tar" "$T/wp" >/dev/null
cat >"$T/fmt.json" <<EOF
{"format": "loaderd-mixture", "version": 1, "members": [
 {"path": "w.tar", "repeat": 1},
 {"path": "wp", "choose": 5}]}
EOF
out=$("$LDCLIENT" --pipeline 'decode | resize 40 | center 32 | u8 | nhwc' \
	--outputs jpg,cls --batch 4 --epochs 2 --ids --hash "$T/d.sock" "$T/fmt.json" 2>&1)
like "$out" '^epoch 1 batches 5 samples 17 ' \
	"a tar read in place mixes with shards packed from it: 12 + 5 samples an epoch"
is "$(echo "$out" | awk '$1 == "id" && $2 == 1 { n[$5]++ } END { print n[0] + 0, n[1] + 0 }')" \
	"12 5" "... each member's samples as planned"

# --- 6. loaderctl streams: each member's counts ----------------------------
"$LDCLIENT" $M --order random --batch 100 --epochs 1 --sleep-ms 50 \
	"$T/d.sock" mix >"$T/slow" 2>&1 &
slow=$!
# Its stdout is a file, written at the end: ask the daemon until it shows.
i=0
while [ $i -lt 100 ]; do
	out=$("$LOADERCTL" streams --socket "$T/d.sock" 2>&1)
	case $out in *"member 1: "*) break ;; esac
	sleep 0.1
	i=$((i + 1))
done
like "$out" "member 0: 12000 samples an epoch, [0-9]+ delivered, 0 bad, [0-9.]+ MB read: $T/a/test" \
	"loaderctl streams shows member 0: its samples an epoch, delivered, bad, read"
like "$out" "member 1: 8000 samples an epoch, [0-9]+ delivered, 0 bad, [0-9.]+ MB read: $T/b/test" \
	"... and member 1"
js=$("$LOADERCTL" streams --json --socket "$T/d.sock" 2>&1)
like "$js" '"members": ?\[\{"dataset": ?"[^"]*a/test", ?"per_epoch": ?12000' \
	"loaderctl streams --json lists the members"
prom=$("$LOADERCTL" stats --prometheus --socket "$T/d.sock" 2>&1)
like "$prom" '^loaderd_member_samples_total\{session="[0-9]+",member="1"\} [0-9]+$' \
	"loaderctl stats --prometheus counts each member's samples"
kill "$slow" 2>/dev/null
wait "$slow" 2>/dev/null || :
