#!/bin/sh
# test.sh - the whole test suite: unit and integration tests in a plain
# build and in an ASan+UBSan build, then make distcheck.
#
# Installs missing Debian packages first (scripts/deps.sh --test). Ends
# with the totals alone on a line: "N passed, N failed, N skipped".
# Exit status is non-zero if anything failed.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
"$top/scripts/deps.sh" --test || exit 1

status=0
run() {
	echo "== $*"
	"$@" || { echo "FAILED: $*"; status=1; }
}

run scripts/build.sh build
run make -C build -j"$(nproc)" check
run scripts/build.sh build-san --enable-sanitizers
run make -C build-san -j"$(nproc)" check
echo "== make distcheck (log: build/distcheck.log)"
if ! make -C build -j"$(nproc)" distcheck >build/distcheck.log 2>&1; then
	tail -50 build/distcheck.log
	echo "FAILED: make distcheck"
	status=1
fi

# Totals over both builds, from the per-test .trs files of automake.
pass=0 fail=0 skip=0
for b in build build-san; do
	[ -d "$b" ] || continue
	for t in $(find "$b" -name '*.trs' ! -path '*/loaderd-*' 2>/dev/null); do
		p=$(grep -c '^:test-result: PASS' "$t")
		x=$(grep -c '^:test-result: XFAIL' "$t")
		f=$(grep -Ec '^:test-result: (FAIL|XPASS|ERROR)' "$t")
		s=$(grep -c '^:test-result: SKIP' "$t")
		pass=$((pass + p + x)) fail=$((fail + f)) skip=$((skip + s))
		if [ "$f" -gt 0 ]; then
			echo "-- failures in ${t%.trs}.log:"
			grep -E '^(not ok|# )' "${t%.trs}.log" | head -20
		fi
	done
done
if [ $((pass + fail + skip)) -eq 0 ]; then
	echo "no test results found" >&2
	status=1
fi
[ "$fail" -gt 0 ] && status=1
echo "$pass passed, $fail failed, $skip skipped"
exit $status
