#!/bin/sh
# exit77.sh - runs one test for automake's TAP driver. A test that lacks
# something prints "1..0 # SKIP why" and exits 77, as liburing's tests do;
# the driver would call any non-zero status an error, so 77 becomes 0 and
# the plan reports the skip. Every other status passes through: a test
# that crashes or exits non-zero after its last "ok" still fails.
#
# No test may hang the suite: one that runs longer than
# LOADERD_TEST_TIMEOUT seconds (default 900) is sent SIGTERM with its
# whole process group (the daemons it started in the foreground), then
# SIGKILL 10 s later, and fails with a "Bail out!" that names the limit.
limit=${LOADERD_TEST_TIMEOUT:-900}
if command -v timeout >/dev/null 2>&1 && [ "$limit" -gt 0 ]; then
	timeout -k 10 "$limit" "$@"
	rc=$?
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		eval "name=\${$#}"
		echo "Bail out! $name ran past LOADERD_TEST_TIMEOUT=${limit}s and was killed"
		exit 1
	fi
else
	"$@"
	rc=$?
fi
[ $rc -eq 77 ] && exit 0
exit $rc
