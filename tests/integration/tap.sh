# tap.sh - sourced by the shell integration tests: TAP output helpers.
#
#   plan N; ok COND-CMD... ; is GOT WANT DESC; skip_all REASON
# Every check is a real assertion: a failing one prints "not ok".

: "${top_srcdir:?run through make check}"
: "${top_builddir:?run through make check}"
LOADERCTL=$top_builddir/loaderctl
# The daemon start_daemon runs; a test of the installed tree points it
# there.
LOADERD=$top_builddir/loaderd
TOOLS=$top_builddir/tests/tools
tap_n=0

plan() { echo "1..$1"; }

skip_all() {
	echo "1..0 # SKIP $*"
	exit 77
}

# need_fmnist: src, the Fashion-MNIST IDX files ($FASHION_MNIST_DIR, else
# Debian's dataset-fashion-mnist), or skip the whole test.
need_fmnist() {
	src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
	[ -r "$src/t10k-labels-idx1-ubyte.gz" ] ||
		skip_all "Fashion-MNIST not installed (Debian package dataset-fashion-mnist)"
}

# ok DESC CMD...: pass when CMD succeeds.
ok() {
	desc=$1
	shift
	tap_n=$((tap_n + 1))
	if "$@" >/dev/null 2>&1; then
		echo "ok $tap_n - $desc"
	else
		echo "not ok $tap_n - $desc"
	fi
}

# is GOT WANT DESC: pass when the strings are equal.
is() {
	tap_n=$((tap_n + 1))
	if [ "$1" = "$2" ]; then
		echo "ok $tap_n - $3"
	else
		echo "not ok $tap_n - $3"
		echo "#   got:  '$1'"
		echo "#   want: '$2'"
	fi
}

# like TEXT PATTERN DESC: pass when TEXT matches the grep -E PATTERN.
like() {
	tap_n=$((tap_n + 1))
	if printf '%s\n' "$1" | grep -Eq -- "$2"; then
		echo "ok $tap_n - $3"
	else
		echo "not ok $tap_n - $3"
		printf '%s\n' "$1" | head -5 | sed 's/^/#   got: /'
		echo "#   want match: $2"
	fi
}

# tmpdir: a private scratch directory, removed at exit (with any daemon
# started by start_daemon).
DAEMONS=
tmpdir() {
	T=$(mktemp -d "${TMPDIR:-/tmp}/loaderd-test.XXXXXX")
	trap 'for p in $DAEMONS; do kill -9 $p 2>/dev/null; done; rm -rf "$T"' EXIT
}

# start_daemon SOCK [ARGS...]: a private $LOADERD in the foreground, its log
# in SOCK.log; DAEMON_PID is its pid. Fails if the socket does not appear.
# Its state and cache directories are SOCK.state and SOCK.cache unless
# the environment (systemd's variables) or ARGS name others: tests leave
# nothing in /var/lib or the home directory.
start_daemon() {
	sock=$1
	shift
	case " $* " in *" --state-dir "*) ;; *)
		[ -n "${STATE_DIRECTORY-}" ] || set -- --state-dir "$sock.state" "$@" ;;
	esac
	case " $* " in *" --cache-dir "*) ;; *)
		[ -n "${CACHE_DIRECTORY-}" ] || set -- --cache-dir "$sock.cache" "$@" ;;
	esac
	# LOADERD_WRAP: a command to run the daemon under, e.g.
	# "valgrind -q --error-exitcode=99" (it keeps the daemon's pid).
	# Its output goes to the log, not to the TAP driver's pipe, which a
	# daemon left behind would hold open.
	# A daemon killed with SIGKILL leaves its socket file: wait for the
	# new daemon's own (another inode or change time), or for its end.
	_old=$(stat -c '%i %z' "$sock" 2>/dev/null || :)
	${LOADERD_WRAP:-} "$LOADERD" -f --socket "$sock" "$@" \
		</dev/null >>"$sock.log" 2>&1 &
	DAEMON_PID=$!
	DAEMONS="$DAEMONS $DAEMON_PID"
	i=0
	while ! new_socket "$sock" "$_old" && [ $i -lt ${LOADERD_WRAP:+1}200 ] &&
		kill -0 "$DAEMON_PID" 2>/dev/null; do
		sleep 0.05
		i=$((i + 1))
	done
	new_socket "$sock" "$_old"
}

# new_socket PATH OLD: PATH is a socket, not the one stat described as OLD.
new_socket() {
	[ -S "$1" ] && [ "$(stat -c '%i %z' "$1" 2>/dev/null)" != "$2" ]
}

# wait_for PATTERN FILE: wait up to 10 s for a line of FILE to match the
# grep PATTERN; the status says whether one did.
wait_for() {
	_i=0
	while ! grep -q -- "$1" "$2" 2>/dev/null && [ $_i -lt 200 ]; do
		sleep 0.05
		_i=$((_i + 1))
	done
	grep -q -- "$1" "$2" 2>/dev/null
}

LDCLIENT=$top_builddir/tests/tools/ldclient

# wait_exit PID SECS: wait for the background PID to end, at most SECS s;
# the status is its own. One still running then is stopped, after its
# threads' stacks and the daemon's (DAEMON_PID, with gdb where there is
# one) and the daemon log's tail have gone to the TAP log as comments:
# a hang fails its check within SECS, saying where it waits.
wait_exit() {
	_i=0
	while kill -0 "$1" 2>/dev/null && [ $_i -lt $(($2 * 10)) ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
	if kill -0 "$1" 2>/dev/null; then
		echo "# pid $1 still running after $2 s; daemon $DAEMON_PID"
		if command -v gdb >/dev/null 2>&1; then
			for _p in "$1" "$DAEMON_PID"; do
				echo "# stacks of $_p:"
				gdb -p "$_p" -batch -ex 'thread apply all bt' 2>&1 |
					grep -E '^(#|Thread)' | head -80 | sed 's/^/#   /'
			done
		fi
		[ -n "${sock-}" ] && tail -20 "$sock.log" 2>/dev/null | sed 's/^/#   log: /'
		kill -9 "$1" 2>/dev/null
		wait "$1" 2>/dev/null
		return 124
	fi
	wait "$1"
}

# stop_daemon PID LOG: check that LOG has no sanitizer report or crash,
# that SIGTERM stops PID within 5 s and that it exits with status 0 (3
# checks).
stop_daemon() {
	if grep -Eq 'AddressSanitizer|UndefinedBehaviorSanitizer|runtime error|LeakSanitizer|Segmentation|Aborted|stack-overflow' "$2"; then
		echo "not ok $((tap_n = tap_n + 1)) - daemon log has no sanitizer report or crash"
		grep -E 'Sanitizer|runtime error|Segmentation|Aborted' "$2" |
			head -20 | sed 's/^/#   /'
	else
		echo "ok $((tap_n = tap_n + 1)) - daemon log has no sanitizer report or crash"
	fi
	kill -TERM "$1" 2>/dev/null
	_i=0
	while kill -0 "$1" 2>/dev/null && [ $_i -lt ${LOADERD_WRAP:+4}50 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
	if kill -0 "$1" 2>/dev/null; then
		echo "not ok $((tap_n = tap_n + 1)) - loaderd exits soon after SIGTERM"
		_code=timeout
	else
		echo "ok $((tap_n = tap_n + 1)) - loaderd exits soon after SIGTERM"
		wait "$1"
		_code=$?
	fi
	is "$_code" 0 "loaderd exits with status 0"
}

# same_batches SOCK NAME A B ARGS...: a stream of dataset A (read in
# place) gives the batches one of B (packed) gives: ldclient --hash's
# epoch digests equal (2 checks).
same_batches() {
	_s=$1 _name=$2 _a=$3 _b=$4
	shift 4
	_got=$("$LDCLIENT" --hash "$@" "$_s" "$_a" 2>&1 | grep -E '^(epoch|error)')
	_want=$("$LDCLIENT" --hash "$@" "$_s" "$_b" 2>&1 | grep -E '^(epoch|error)')
	like "$_got" '^epoch' "$_name: the dataset streams in place"
	is "$_got" "$_want" "$_name: the same batches as the packed one's"
}

# once_per_epoch SOCK DATASET WORLD EPOCHS N DESC ARGS...: the WORLD ranks'
# streams (ldclient --ids ARGS) deliver each of N samples once in each of
# EPOCHS epochs (1 check).
once_per_epoch() {
	_s=$1 _d=$2 _w=$3 _e=$4 _n=$5 _desc=$6
	shift 6
	: >"$T/once.ids"
	_r=0
	while [ $_r -lt "$_w" ]; do
		"$LDCLIENT" --ids --epochs "$_e" --rank $_r --world "$_w" "$@" \
			"$_s" "$_d" | awk '/^id/ { print $2, $4 }' >>"$T/once.ids"
		_r=$((_r + 1))
	done
	is "$(sort -n "$T/once.ids" | uniq | wc -l) $(wc -l <"$T/once.ids")" \
		"$((_e * _n)) $((_e * _n))" "$_desc"
}
