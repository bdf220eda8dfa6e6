#!/bin/sh
# Start a private loaderd, abuse it with protoabuse (malformed messages,
# out-of-range OPENs, wrong files, a hostile consumer index), then check
# that every case passed, that the daemon is still alive, that its log
# shows no crash, and that SIGTERM stops it cleanly.
. "$top_srcdir/tests/integration/tap.sh"

src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
[ -r "$src/t10k-labels-idx1-ubyte.gz" ] ||
	skip_all "Fashion-MNIST not installed (Debian package dataset-fashion-mnist)"
LOADERD=$top_builddir/loaderd
tmpdir
pid=
# Whatever happens, the daemon does not outlive the test.
cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM
plan 8

ok "pack the test split" "$LOADERCTL" pack --split test "$src" "$T/fm"

sock=$T/d.sock
"$LOADERD" -f --socket "$sock" --state-dir "$T/state" --cache-dir "$T/cache" --max-ring 64M --max-uid-files 1000 --log-level debug \
	2>"$T/d.log" &
pid=$!
i=0
while [ ! -S "$sock" ] && [ $i -lt 100 ] && kill -0 "$pid" 2>/dev/null; do
	sleep 0.1
	i=$((i + 1))
done
ok "loaderd listens on a private socket" test -S "$sock"

# Each case of protoabuse's own TAP becomes a comment line here.
out=$(TMPDIR=$T timeout 120 "$TOOLS/protoabuse" "$sock" "$T/fm/test" 2>&1)
rc=$?
printf '%s\n' "$out" | sed 's/^/# /'
total=$(printf '%s\n' "$out" | sed -n 's/^1\.\.\([0-9]*\)$/\1/p')
passed=$(printf '%s\n' "$out" | grep -c '^ok ')
failed=$(printf '%s\n' "$out" | grep -c '^not ok ')
is "$rc:$failed:$passed" "0:0:${total:-?}" \
	"protoabuse: all ${total:-?} cases pass ($failed failed, exit $rc)"
ok "daemon still alive" kill -0 "$pid"
if grep -Eq 'AddressSanitizer|UndefinedBehaviorSanitizer|runtime error|LeakSanitizer|Segmentation|Aborted|stack-overflow' "$T/d.log"; then
	echo "not ok $((tap_n = tap_n + 1)) - daemon log has no sanitizer report or crash"
	grep -E 'Sanitizer|runtime error|Segmentation|Aborted' "$T/d.log" |
		head -20 | sed 's/^/#   /'
else
	echo "ok $((tap_n = tap_n + 1)) - daemon log has no sanitizer report or crash"
fi

kill -TERM "$pid" 2>/dev/null
i=0
while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
if kill -0 "$pid" 2>/dev/null; then
	echo "not ok $((tap_n = tap_n + 1)) - loaderd exits within 5 s of SIGTERM"
	code=timeout
else
	wait "$pid"
	code=$?
	pid=
	echo "ok $((tap_n = tap_n + 1)) - loaderd exits within 5 s of SIGTERM"
fi
is "$code" 0 "loaderd exits with status 0"
ok "loaderd removed its socket" test ! -e "$sock"
if [ "$code" != 0 ] || [ "$failed" != 0 ] || [ "$rc" != 0 ]; then
	tail -40 "$T/d.log" | sed 's/^/# log: /'
fi
