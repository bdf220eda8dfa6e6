#!/bin/sh
# Replay every fuzz target's committed corpus (tests/fuzz/corpus/TARGET,
# the seeds and every input a fuzzing run found worth keeping, crash
# reproducers included) through the target built without libFuzzer: no
# input may crash it, and under the sanitizer build none may make a
# report. No clang needed.
. "$top_srcdir/tests/integration/tap.sh"

targets=$(cd "$top_srcdir/tests/fuzz" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')
set -- $targets
plan $#
for t in $targets; do
	n=$(ls "$top_srcdir/tests/fuzz/corpus/$t" | wc -l | tr -d ' ')
	out=$("$top_builddir/tests/fuzz/replay_$t" "$top_srcdir/tests/fuzz/corpus/$t" 2>&1)
	rc=$?
	is "$rc: $out" "0: replayed $n inputs" "$t: the $n inputs of its corpus run clean"
done
