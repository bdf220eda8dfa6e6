#!/bin/sh
# loaderctl bench storage: option and input errors (named, exit 2); a
# created test file read by bytes, seq and rand, with two threads,
# registered buffers and files, SQPOLL; the JSON report; the page cache
# sampled cold after --drop-cache and warm after a buffered pass.
# Nothing here depends on how fast the disk is.
. "$top_srcdir/tests/integration/tap.sh"
tmpdir
plan 50

[ -x /usr/bin/python3 ] || skip_all "no /usr/bin/python3 to read the JSON"
B() { "$LOADERCTL" bench storage "$@"; }
# j FILE KEY[.KEY]: a value of the JSON report in FILE ("" if none).
j() {
	/usr/bin/python3 -c '
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v[k]
print(str(v).lower() if isinstance(v, bool) else v)' "$1" "$2" 2>/dev/null
}
# fails DESC PATTERN ARGS...: B exits 2 with a message matching PATTERN.
fails() {
	desc=$1 pat=$2
	shift 2
	out=$(B "$@" 2>&1)
	is "$?" 2 "$desc: exit 2"
	like "$out" "$pat" "$desc: the message names it"
}

out=$("$LOADERCTL" bench --help)
like "$out" '^  storage ' "bench --help lists storage"
"$LOADERCTL" bench >/dev/null 2>&1
is "$?" 2 "bench without a subcommand exits 2"
out=$(B --help)
like "$out" '--fixed-files' "bench storage --help shows the options"

# The test file: 16 MiB, random, never all zero.
F=$T/data
B --create 16M --buffered --bytes 1M "$F" >/dev/null 2>&1
is "$(wc -c <"$F" | tr -d ' ')" 16777216 "--create writes the size asked"
ok "... of data that is nearly all non-zero bytes" \
	test "$(tr -d '\000' <"$F" | wc -c)" -gt 16000000
fails "--create over an existing file" "$F: File exists" \
	--create 1M "$F"
is "$(wc -c <"$F" | tr -d ' ')" 16777216 "... which it leaves alone"

fails "a bad size" '--bs: invalid value "12Q"' --bs 12Q "$F"
fails "a queue depth of 0" '--qd: "0" is not an integer in \[1, 4096\]' \
	--qd 0 "$F"
fails "a missing file" "$T/nothing-here: No such file" "$T/nothing-here"
mkdir "$T/empty" "$T/empty/sub"
: >"$T/empty/.hidden"
fails "a directory without regular files" \
	"$T/empty: a directory without regular files" "$T/empty"
fails "a file smaller than --bs" "$F: 16777216 bytes, smaller than --bs 33554432" \
	--bs 32M "$F"
fails "--bs not a multiple of 512 under O_DIRECT" \
	'--bs 1000: not a multiple of 512' --bs 1000 "$F"
fails "--seconds with --bytes" '--seconds or --bytes, not both' \
	--seconds 1 --bytes 1M "$F"
fails "--remove without --create" '--remove removes only what --create wrote' \
	--remove "$F"

# O_DIRECT where the scratch file system has it; else what can run
# buffered runs buffered, and the O_DIRECT case is skipped.
MODE=
out=$(B --json --bytes 8M "$F" 2>&1 >"$T/seq.json")
rc=$?
if [ $rc -eq 2 ] && printf '%s' "$out" | grep -q 'refuses O_DIRECT'; then
	MODE=--buffered
	tap_n=$((tap_n + 1))
	echo "ok $tap_n # SKIP ${TMPDIR:-/tmp} refuses O_DIRECT"
	B --json --bytes 8M $MODE "$F" >"$T/seq.json"
else
	is "$rc" 0 "a seq O_DIRECT run of --bytes 8M exits 0"
fi
is "$(j "$T/seq.json" bytes)" 8388608 "seq: the bytes read are the bytes asked"
is "$(j "$T/seq.json" ios)" 8 "seq: in 8 reads of the 1M default block"
is "$(j "$T/seq.json" pattern)/$(j "$T/seq.json" bs)/$(j "$T/seq.json" qd)" \
	seq/1048576/32 "seq: the defaults reported (seq, bs 1M, qd 32)"
ok "seq: the latencies are ordered (0 < p50 <= p99 <= p999 <= max)" \
	awk -v a="$(j "$T/seq.json" lat_us.p50)" -v b="$(j "$T/seq.json" lat_us.p99)" \
	-v c="$(j "$T/seq.json" lat_us.p999)" -v d="$(j "$T/seq.json" lat_us.max)" \
	'BEGIN { exit !(a > 0 && a <= b && b <= c && c <= d) }'
ok "seq: bw_bytes_per_s is bytes over seconds" \
	awk -v b="$(j "$T/seq.json" bytes)" -v s="$(j "$T/seq.json" seconds)" \
	-v r="$(j "$T/seq.json" bw_bytes_per_s)" \
	'BEGIN { exit !(s > 0 && r > 0 && (r * s - b) ^ 2 < (b / 1000) ^ 2) }'
is "$(j "$T/seq.json" files)/$(j "$T/seq.json" span_bytes)" 1/16777216 \
	"seq: one file of 16 MiB read from"

B --json --pattern rand --bytes 8M $MODE "$F" >"$T/rand.json"
is "$(j "$T/rand.json" bytes)/$(j "$T/rand.json" ios)" 8388608/2048 \
	"rand: 8M in 2048 reads of the 4K default block"

B --json --pattern rand --bs 64K --threads 2 --bytes 8M $MODE "$F" >"$T/t2.json"
is "$(j "$T/t2.json" bytes)/$(j "$T/t2.json" threads)" 8388608/2 \
	"--threads 2: the bytes asked, two threads"

B --json --fixed-bufs --fixed-files --bytes 8M $MODE "$F" >"$T/fixed.json" 2>"$T/fixed.err"
is "$(j "$T/fixed.json" bytes)/$(j "$T/fixed.json" fixed_files)" 8388608/true \
	"--fixed-bufs --fixed-files: the bytes asked, files registered"
if [ "$(j "$T/fixed.json" fixed_bufs)" = true ]; then
	is "$(cat "$T/fixed.err")" "" "... buffers registered, no warning"
else
	like "$(cat "$T/fixed.err")" 'fixed-bufs: io_uring refused' \
		"... buffers refused (RLIMIT_MEMLOCK): a warning says so"
fi

out=$(B --json --sqpoll --bytes 8M $MODE "$F" 2>&1 >"$T/sq.json")
if printf '%s' "$out" | grep -q 'refused SQPOLL'; then
	tap_n=$((tap_n + 1))
	echo "ok $tap_n # SKIP the kernel refuses SQPOLL here: $out"
	tap_n=$((tap_n + 1))
	echo "ok $tap_n # SKIP no SQPOLL"
else
	is "$(j "$T/sq.json" bytes)" 8388608 "--sqpoll: the bytes asked"
	is "$(j "$T/sq.json" sqpoll)" true "--sqpoll: reported used"
fi

# A directory: its regular files of a block or more; hidden and short
# ones, and subdirectories, left out.
mkdir "$T/ds" "$T/ds/sub"
printf 'short' >"$T/ds/sub/a"
ln "$F" "$T/ds/shard-0"
ln "$F" "$T/ds/.hidden"
printf '{}' >"$T/ds/manifest.json"
B --json --bytes 4M $MODE "$T/ds" >"$T/dir.json"
is "$(j "$T/dir.json" files)" 1 "a directory: its one shard read, the rest left out"
fails "a directory of files shorter than a block" \
	"$T/ds/sub: no file in it holds a block" "$T/ds/sub" --buffered
fails "a path that is no file or directory" "/dev/null: not a regular file" \
	/dev/null

# The page cache: cold after --drop-cache, warm after a buffered pass.
B --json --buffered --drop-cache --bytes 4M "$F" >"$T/cold.json" 2>"$T/cold.err"
is "$(j "$T/cold.json" cache.dropped)" true "--drop-cache: reported done"
ok "--drop-cache: under 10 % of the file resident before the run" \
	awk -v v="$(j "$T/cold.json" cache.resident_before)" 'BEGIN { exit !(v < 0.1) }'
is "$(cat "$T/cold.err")" "" "... and no warning"
B --buffered --bytes 16M "$F" >/dev/null 2>&1
B --json --buffered --bytes 16M "$F" >"$T/warm.json" 2>"$T/warm.err"
ok "after a buffered pass: over half of it resident" \
	awk -v v="$(j "$T/warm.json" cache.resident_before)" 'BEGIN { exit !(v > 0.5) }'
like "$(cat "$T/warm.err")" 'were in the page cache before the run' \
	"... and a warning says the run read memory"
B --json --buffered --drop-cache --bytes 32M "$F" >/dev/null 2>"$T/twice.err"
like "$(cat "$T/twice.err")" 'read the files 2.0 times over' \
	"a buffered run of twice the file: a warning says the cache served the rest"

# --create --remove: nothing left behind.
B --create 2M --remove --bytes 1M $MODE --json "$T/tmpfile" >"$T/cr.json"
is "$(j "$T/cr.json" bytes)" 1048576 "--create --remove: the run read"
ok "... and the file is gone" test ! -e "$T/tmpfile"
