#!/bin/sh
# test.sh - the whole test suite: unit and integration tests in a plain
# build and in an ASan+UBSan build, then make distcheck.
#
# Installs missing Debian packages first (scripts/deps.sh --test). Ends
# with the totals alone on a line: "N passed, N failed, N skipped", the
# criterion unit tests counted on the line before. Exit status is
# non-zero if anything failed, and if the unit tests did not run although
# criterion is installed.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
"$top/scripts/deps.sh" --test || exit 1

status=0
start=$(date +%s)
run() {
	echo "== $*"
	"$@" || { echo "FAILED: $*"; status=1; }
	echo "-- $(($(date +%s) - start)) s since the start"
}

# Drop the results of earlier runs: make check runs only the tests of the
# present configuration, and a stale result (say, the "criterion not
# installed" skip of an earlier configuration) would count in the totals.
clear_results() {
	[ -d "$1" ] || return 0
	find "$1" -name '*.trs' ! -path '*/loaderd-*' | while read -r t; do
		rm -f "$t" "${t%.trs}.log"
	done
}

# The Python package's tests (their .trs files lose the .py).
pytests='*/tests/client/python/*'

# Criterion programs are the other tests not named *.sh. Where criterion is
# installed they must have run: a build configured without it reports
# them as a single skip, and the totals would still look green.
check_units() {
	n=$(find "$1" -name '*.trs' ! -name '*.sh.trs' ! -path "$pytests" \
		! -path '*/loaderd-*' | wc -l)
	echo "-- $1: $n criterion unit test programs ran"
	if [ "$n" -eq 0 ] && pkg-config --exists 'criterion >= 2.3'; then
		echo "FAILED: $1: criterion is installed, but the unit tests did not run (built without criterion)"
		status=1
	fi
	# Likewise the Python package's tests skip without NumPy and torch;
	# with them installed (deps.sh --test), a skip hides a failure.
	if /usr/bin/python3 -c 'import numpy, torch' 2>/dev/null; then
		for t in $(find "$1" -name '*.trs' ! -name '*.sh.trs' \
			-path "$pytests" ! -path '*/loaderd-*'); do
			if grep -q '^:test-result: SKIP' "$t"; then
				echo "FAILED: $1: ${t%.trs} skipped although NumPy and torch are installed:"
				grep -m1 SKIP "${t%.trs}.log"
				status=1
			fi
		done
	fi
}

for b in build build-san; do
	clear_results "$b"
	if [ "$b" = build ]; then
		run scripts/build.sh build
	else
		run scripts/build.sh build-san --enable-sanitizers
	fi
	run make -C "$b" -j"$(nproc)" check
	check_units "$b"
done
# Bounded as a whole too (each test is: tests/exit77.sh), so that a hang
# outside the tests fails this run with a log rather than outlasting CI.
dlimit=${LOADERD_DISTCHECK_TIMEOUT:-2400}
echo "== make distcheck (log: build/distcheck.log, at most $dlimit s)"
timeout -k 30 "$dlimit" make -C build -j"$(nproc)" distcheck >build/distcheck.log 2>&1
drc=$?
echo "-- $(($(date +%s) - start)) s since the start"
if [ $drc -ne 0 ]; then
	tail -50 build/distcheck.log
	if [ $drc -eq 124 ] || [ $drc -eq 137 ]; then
		echo "make distcheck ran past $dlimit s (LOADERD_DISTCHECK_TIMEOUT) and was killed"
		# The tests that were running: a log without its result.
		for l in $(find build/loaderd-*/_build -path '*/tests/*' -name '*.log' 2>/dev/null); do
			[ -e "${l%.log}.trs" ] && continue
			echo "-- unfinished in distcheck: $l (last 30 lines):"
			tail -30 "$l"
		done
	fi
	# The tail rarely names the test: show the failed ones' logs, which
	# distcheck leaves in its build tree when it fails.
	for t in $(grep -El '^:test-result: (FAIL|XPASS|ERROR)' \
		$(find build/loaderd-*/_build -name '*.trs' 2>/dev/null) \
		/dev/null 2>/dev/null); do
		echo "-- distcheck failure in ${t%.trs}.log (last 60 lines):"
		tail -60 "${t%.trs}.log"
	done
	echo "FAILED: make distcheck"
	status=1
fi

# Totals over both builds, from the per-test .trs files of automake.
pass=0 fail=0 skip=0 unit=0 py=0
for b in build build-san; do
	[ -d "$b" ] || continue
	for t in $(find "$b" -name '*.trs' ! -path '*/loaderd-*' 2>/dev/null); do
		p=$(grep -c '^:test-result: PASS' "$t")
		x=$(grep -c '^:test-result: XFAIL' "$t")
		f=$(grep -Ec '^:test-result: (FAIL|XPASS|ERROR)' "$t")
		s=$(grep -c '^:test-result: SKIP' "$t")
		pass=$((pass + p + x)) fail=$((fail + f)) skip=$((skip + s))
		case $t in
		*.sh.trs) ;;
		$pytests) py=$((py + p + x + f + s)) ;;
		*) unit=$((unit + p + x + f + s)) ;;
		esac
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
echo "of which criterion unit tests: $unit, Python package tests: $py"
echo "$pass passed, $fail failed, $skip skipped"
exit $status
