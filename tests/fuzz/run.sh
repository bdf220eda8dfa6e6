#!/bin/sh
# run.sh - make fuzz: build every fuzz target with clang's libFuzzer and
# ASan+UBSan in its own build directory, then run each for FUZZ_SECONDS
# over a copy of its committed corpus (new inputs go to the copy; copy
# the interesting ones, and every crash's reproducer, into
# tests/fuzz/corpus/TARGET). Prints each target's executions and edges
# covered; exits non-zero when a target crashed (its input is in
# BUILD/fuzz-crash/).
#
#   FUZZ_SECONDS=600 FUZZ_TARGETS="shard jpeg" tests/fuzz/run.sh
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
b=${FUZZ_BUILD:-$top/build-fuzz}
secs=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-$(cd "$top/tests/fuzz" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')}
if ! command -v clang >/dev/null 2>&1; then
	echo "make fuzz needs clang with libFuzzer (Debian: clang); scripts/deps.sh --fuzz installs it" >&2
	exit 2
fi
flags="-O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
"$top/scripts/build.sh" "$b" CC=clang "CFLAGS=$flags"
mkdir -p "$b/fuzz-corpus" "$b/fuzz-crash"
failed=
for t in $targets; do
	make -s -C "$b" "tests/fuzz/fuzz_$t" >/dev/null
	mkdir -p "$b/fuzz-corpus/$t"
	log=$b/fuzz-$t.log
	if ASAN_OPTIONS=detect_leaks=1 "$b/tests/fuzz/fuzz_$t" \
		-max_total_time="$secs" -print_final_stats=1 -rss_limit_mb=2048 \
		-artifact_prefix="$b/fuzz-crash/$t-" \
		"$b/fuzz-corpus/$t" "$top/tests/fuzz/corpus/$t" >"$log" 2>&1; then
		status=ok
	else
		status=CRASH
		failed="$failed $t"
	fi
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	edges=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | sed 's/cov: //')
	echo "fuzz $t: $status, ${execs:-?} executions in $secs s, ${edges:-?} edges (log $log)"
done
[ -z "$failed" ] || { echo "crashed:$failed" >&2; exit 1; }
