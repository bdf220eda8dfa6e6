#!/bin/sh
# loaderd's options from one table: loaderd.conf(5) documents exactly the
# options a file may set (those of --print-config, which are --help's but
# the command-line-only ones); the file's values, and the command line
# over them; every bad line refused with file, line and reason before the
# daemon starts; --print-config read back gives itself; the socket's
# mode; the threads' names; SIGHUP applies a new limit live, names what
# needs a restart, and keeps everything when the file is broken.
. "$top_srcdir/tests/integration/tap.sh"

src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
LD=$top_builddir/loaderd
tmpdir
plan 43

# --- the table, the help, the man pages ---------------------------------
keys=$("$LD" --print-config | sed -n 's/^#\{0,1\}\([a-z][a-z0-9-]*\) =.*/\1/p' | sort)
man5=$(sed 's/\\-/-/g' "$top_srcdir/man/loaderd.conf.5" |
	sed -n 's/^\.BI \([a-z][a-z0-9-]*\) " = .*/\1/p' | sort)
is "$man5" "$keys" "loaderd.conf.5 documents exactly the options a file may set"
help=$("$LD" --help | grep -Eo -- '--[a-z][a-z0-9-]*[a-z]' | sed 's/^--//' |
	grep -vx -e config -e print-config -e version -e foreground -e help | sort -u)
is "$keys" "$help" "a file may set every option of --help but config, print-config, version, foreground"
# The options a reload applies: the table's, loaderd(8)'s SIGHUP list,
# and loaderd.conf(5)'s "reload" marks name the same ones.
live=$("$LD" --print-config | sed -n '/(reloaded on SIGHUP)$/{n;s/^#\{0,1\}\([a-z][a-z0-9-]*\) =.*/\1/p}' | sort)
man8=$(sed -n '/^What can change live/,/applies from then on/p' "$top_srcdir/man/loaderd.8" |
	sed 's/\\-/-/g' | grep -Eo -- '--[a-z][a-z0-9-]*[a-z]' | sed 's/^--//' | sort -u)
is "$man8" "$live" "loaderd.8's SIGHUP list names exactly the options a reload applies"
conf5=$(sed 's/\\-/-/g' "$top_srcdir/man/loaderd.conf.5" | awk '
	/^\.BI [a-z][a-z0-9-]* " = / { key = $2 }
	/^\.TP/ { key = "" }
	key != "" && (/^\.IR reload \.$/ || /Applies at once on a reload/) { print key; key = "" }' | sort -u)
is "$conf5" "$live" "loaderd.conf.5 marks exactly those as applied by a reload"

# --- values: defaults, file, command line ----------------------------------
val() { "$LD" "$@" --print-config | sed -n "s/^$KEY = //p"; }
KEY=max-ring
is "$(val)" 1073741824 "max-ring defaults to 1G"
printf 'max_ring = 2G   # a comment\n\n  log-level=debug\nsocket-mode = "0600"\ndirect = yes\n' >"$T/a.conf"
is "$(val --config "$T/a.conf")" 2147483648 "the file sets it (\"_\" and \"-\" alike, comments, blanks)"
is "$(val --config "$T/a.conf" --max-ring 3G)" 3221225472 "the command line wins over the file"
KEY=socket-mode
is "$(val --config "$T/a.conf")" 0600 "a quoted value"
KEY=direct
is "$(val --config "$T/a.conf")" yes "a flag set to yes"
"$LD" --config "$T/a.conf" --print-config >"$T/b.conf"
"$LD" --config "$T/b.conf" --print-config >"$T/c.conf"
ok "--print-config read back prints itself" cmp "$T/b.conf" "$T/c.conf"

# --- a --socket path that holds a file: refused, the file kept ------------
echo "precious" >"$T/file.sock"
echo "also precious" >"$T/file2.sock.new"
out=$(timeout 10 "$LD" -f --socket "$T/file.sock" --state-dir "$T/fs.state" \
	--cache-dir "$T/fs.cache" 2>&1)
like "$?: $out" "^1: .*file.sock: exists and is not a socket" \
	"a --socket path that holds a file is refused, by name"
is "$(cat "$T/file.sock")" precious "and the file is kept"
timeout 10 "$LD" -f --socket "$T/file2.sock" --state-dir "$T/fs.state" \
	--cache-dir "$T/fs.cache" >/dev/null 2>&1
is "$?: $(cat "$T/file2.sock.new")" "1: also precious" \
	"so is a file at the socket's temporary name"

# One daemon per state directory: a second is refused, naming the lock
# file and the first's pid (both would serve one named stream's ranks).
start_daemon "$T/st1.sock" --state-dir "$T/shared.state"
first=$DAEMON_PID
timeout 10 "$LD" -f --socket "$T/st2.sock" --state-dir "$T/shared.state" \
	--cache-dir "$T/st2.cache" >"$T/st2.out" 2>&1
is "$?" 1 "a second daemon on the same state directory does not start"
like "$(cat "$T/st2.out")" "shared.state/loaderd.lock: held by loaderd pid $first: another daemon uses this state directory" \
	"... naming the lock file and the pid holding it"
kill "$first"
wait "$first" 2>/dev/null
start_daemon "$T/st2.sock" --state-dir "$T/shared.state" --cache-dir "$T/st2.cache"
ok "once the first has stopped, it starts" "$LOADERCTL" status --socket "$T/st2.sock"
kill "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null

# A daemon that stops removes its socket file only if it is still its
# own: here a second daemon's took the path meanwhile.
start_daemon "$T/own.sock" --state-dir "$T/own1.state" --cache-dir "$T/own1.cache"
first=$DAEMON_PID
mv "$T/own.sock" "$T/own.sock.moved"
start_daemon "$T/own.sock" --state-dir "$T/own2.state" --cache-dir "$T/own2.cache"
ok "the first daemon notices its socket file is gone, and says so" \
	wait_for 'own.sock: the socket file is gone' "$T/own.sock.log"
kill "$first"
wait "$first" 2>/dev/null
ok "a daemon stopping leaves the socket another daemon made at its path" \
	"$LOADERCTL" status --socket "$T/own.sock"
kill "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null

# --- bad files: refused, with file, line and reason ------------------------
bad() { # LINES WANT DESC
	printf '# a comment\n%b\n' "$1" >"$T/bad.conf"
	out=$("$LD" -f --config "$T/bad.conf" --socket "$T/never.sock" 2>&1)
	rc=$?
	like "$out" "$2" "$3"
	[ $rc -eq 2 ] && [ ! -e "$T/never.sock" ] || echo "# exit $rc, or it started"
}
bad 'max-ring = 2X' "bad.conf:2: max-ring: invalid value \"2X\"" "a bad size: file, line, option, value"
bad 'threads = 5000' 'bad.conf:2: threads: "5000" is not an integer in \[0, 1024\]' "a value out of range"
bad 'nosuch = 1' 'bad.conf:2: nosuch: no such option' "an unknown option"
bad 'foreground = yes' 'bad.conf:2: foreground: only on the command line' "a command-line-only option"
bad 'threads = 2\nthreads = 3' 'bad.conf:3: threads: set again \(first at line 2\)' "an option set twice"
bad 'log-level = loud' 'bad.conf:2: log-level: "loud" is not one of err\|warn\|info\|debug' "a choice not among the choices"
bad 'direct = maybe' 'bad.conf:2: direct: "maybe" is not yes or no' "a flag that is neither yes nor no"
bad 'just words' 'bad.conf:2: "just words": expected NAME = VALUE' "a line without ="
out=$("$LD" -f --config "$T/none.conf" 2>&1)
like "$out" "$T/none.conf: No such file or directory" "a --config file that is not there is an error"

# --- state and cache directories --------------------------------------------
# dirs ARGS...: the directories a daemon started with ARGS reports.
dirs() {
	rm -f "$T/dirs.sock" "$T/dirs.sock.log"
	start_daemon "$T/dirs.sock" "$@" || return 1
	"$LOADERCTL" status --socket "$T/dirs.sock" | sed -n 's/^state in //p'
	kill $DAEMON_PID
	wait $DAEMON_PID 2>/dev/null
}
is "$(dirs --state-dir "$T/st/a/b" --cache-dir "$T/ca")" "$T/st/a/b, cache in $T/ca" \
	"state-dir and cache-dir are used, and loaderctl status names them"
is "$(stat -c %a "$T/st/a/b")" 700 "... made with their parents, mode 0700"
is "$(STATE_DIRECTORY="$T/sd:$T/other" CACHE_DIRECTORY="$T/cd" dirs)" "$T/sd, cache in $T/cd" \
	"by default, the directories systemd made (\$STATE_DIRECTORY, \$CACHE_DIRECTORY)"
: >"$T/afile"
out=$("$LD" -f --socket "$T/never.sock" --state-dir "$T/afile" 2>&1)
like "$out" "state-dir: $T/afile: not a directory" "a state-dir that is a file: refused, named"
# (A state directory of the test's: the default, as root, is the machine's
# /var/lib/loaderd.)
out=$("$LD" -f --socket "$T/never.sock" --state-dir "$T/cst" \
	--cache-dir "$T/afile/x" 2>&1)
like "$out" "cache-dir: cannot make $T/afile: File exists|cache-dir: cannot make $T/afile/x: Not a directory" \
	"a cache-dir that cannot be made: refused, with the component"
out=$("$LD" -f --socket "$T/never.sock" --state-dir rel/dir 2>&1)
like "$out" 'state-dir: rel/dir: not an absolute path' "a relative state-dir: refused"

# --- the socket's mode, the threads' names, and SIGHUP ----------------------
if [ -r "$src/t10k-labels-idx1-ubyte.gz" ]; then
	"$LOADERCTL" pack --split test "$src" "$T/fm" >/dev/null
	printf 'max-uid-streams = 4\nthreads = 2\n' >"$T/live.conf"
	start_daemon "$T/d.sock" --config "$T/live.conf"
	is "$(stat -c %a "$T/d.sock")" 660 "the socket file gets socket-mode (0660)"
	pid=$DAEMON_PID
	"$LDCLIENT" --epochs 0 --hold-after 1 "$T/d.sock" "$T/fm/test" >"$T/hold" &
	hold=$!
	DAEMONS="$DAEMONS $hold"
	wait_for holding "$T/hold"
	# threads = 2: two decode threads, and the stream's reader and
	# assembler, each under its name (loaderd(8), NOTES).
	is "$(cat /proc/$pid/task/*/comm | grep '^ld-' | sort | tr '\n' ' ')" \
		"ld-decode/0 ld-decode/1 ld-read ld-stream " \
		"the daemon's threads carry their names: the pool of threads = 2, the stream's two"
	printf 'max-uid-streams = 1\nthreads = 3\nlog-level = debug\n' >"$T/live.conf"
	kill -HUP $pid
	wait_for 'reloaded' "$T/d.sock.log"
	like "$(cat "$T/d.sock.log")" 'changed, but applied only by a restart: threads' \
		"SIGHUP names what needs a restart"
	n=$(grep 'reloaded: ' "$T/d.sock.log" | tail -1 | grep -o '[a-z][a-z-]* [^ ,]*' | wc -l)
	is "$n" "$(printf '%s\n' "$live" | wc -l)" "the reloaded: line shows every option a reload applies"
	out=$("$LDCLIENT" --epochs 1 "$T/d.sock" "$T/fm/test" 2>&1)
	like "$out" 'uid [0-9]+ has 1 streams, the limit' \
		"SIGHUP applied max-uid-streams = 1 to the next stream"
	printf 'max-uid-streams = 1\nthreads = oops\n' >"$T/live.conf"
	kill -HUP $pid
	wait_for 'options in effect stay' "$T/d.sock.log"
	like "$(cat "$T/d.sock.log")" 'reload: .*live.conf:2: threads: "oops" is not an integer.*; the options in effect stay' \
		"a broken file on SIGHUP: the error with file and line, nothing changed"
	kill $hold
	wait $hold 2>/dev/null
	out=$("$LDCLIENT" --epochs 1 "$T/d.sock" "$T/fm/test" 2>&1)
	like "$out" '^total batches 40 samples 10000' "... and the daemon serves on"
	kill $pid
	# The memory budget: a stream of the train split (47 MB of shards)
	# takes its default prefetch (64 MiB, no more than the shards) and
	# a ring: it fits in 80 MiB once, not twice.
	"$LOADERCTL" pack --split train "$src" "$T/fmt" >/dev/null
	start_daemon "$T/m.sock" --memory-budget 80M
	"$LDCLIENT" --epochs 0 --hold-after 1 "$T/m.sock" "$T/fmt/train" >"$T/mhold" &
	DAEMONS="$DAEMONS $!"
	wait_for holding "$T/mhold"
	out=$("$LDCLIENT" --epochs 1 "$T/m.sock" "$T/fmt/train" 2>&1)
	like "$out" 'the stream would hold [0-9]+ bytes beside its ring \(prefetch [0-9]+, .*more than the [0-9]+ bytes left of loaderd.s memory budget \(the streams hold [0-9]+ of 83886080\)' \
		"memory-budget: a stream that would pass it is refused, with the figures"
	out=$("$LOADERCTL" status --socket "$T/m.sock")
	like "$out" 'memory [3-6][0-9.]+ MiB of 80 MiB' "loaderctl status shows memory against the budget, in the units --memory-budget takes"
	out=$("$LDCLIENT" --epochs 1 --prefetch 4194304 "$T/m.sock" "$T/fmt/train" 2>&1)
	like "$out" '^total batches 235 samples 60000' "... and a stream with a small prefetch budget still fits"
else
	for i in 1 2 3 4 5 6 7 8; do echo "ok # SKIP Fashion-MNIST not installed"; done
fi
