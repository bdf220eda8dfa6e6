# common.sh - sourced by the benchmark scripts: the helpers they share.
#
# The script sets BENCH (its name, for messages) and top (the source
# tree), sources this and calls bench_init, which sets b (the build
# directory), src (Fashion-MNIST), w (a scratch directory, removed at
# exit) and pids (processes killed at exit), and builds ldclient.

bench_init() {
	b=${BUILD:-$top/build}
	src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
	make -s -C "$b" tests/tools/ldclient >/dev/null
	w=$(mktemp -d "${TMPDIR:-/var/tmp}/loaderd-bench.XXXXXX")
	pids=
	trap 'for p in $pids; do kill $p 2>/dev/null || :; done; rm -rf "$w"' EXIT
}

# posint NAME VALUE: VALUE is a positive integer, else a usage error
# (the script's own usage(), which exits).
posint() {
	case $2 in
	'' | *[!0-9]* | 0*)
		echo "$BENCH: $1=$2: a positive integer" >&2
		usage
		;;
	esac
}

# corpus_args [RUNS]: what the photo benchmarks share: runs (the
# argument, default 3), count, seed and corpus (COUNT, SEED, CORPUS: the
# ImageFolder ensure_corpus makes), ncpu and cores (CORES), each checked.
corpus_args() {
	runs=${1:-3}
	count=${COUNT:-2000}
	seed=${SEED:-0}
	corpus=${CORPUS:-/var/tmp/loaderd-corpus-n$count-s$seed}
	ncpu=$(nproc)
	cores=${CORES:-$ncpu}
	posint RUNS "$runs"
	posint COUNT "$count"
	posint CORES "$cores"
}

# skip WHY...: something the benchmark needs is absent: exit 77.
skip() {
	echo "$BENCH: $*; skipped" >&2
	exit 77
}

# say TEXT...: progress, on stderr (stdout is the figures).
say() { echo "-- $*" >&2; }

# median: the median of the numbers on stdin, one a line.
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# field KEY LINE: the value of KEY=... in LINE.
field() { echo "$2" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k { print $2 }'; }

# cpu_threads PID NAME: the CPU seconds (user + system) of PID's threads
# whose names begin with NAME (loaderd names its own: ld-decode/N, the
# decode pool; ld-fetch; ld-read; ld-stream; see loaderd(8)). Threads
# that have ended count no more.
cpu_threads() {
	cat /proc/"$1"/task/*/stat 2>/dev/null |
		awk -v t="$(getconf CLK_TCK)" -v p="($2" 'index($2, p) == 1 { n += $14 + $15 }
			END { printf "%.2f\n", n / t }'
}

# start_daemon SOCK ARGS...: $b/loaderd in the foreground on SOCK, its log
# in $w/daemon.log; returns once the socket is there. DPID is its pid,
# added to $pids. A $pin the script set (taskset) runs it on those CPUs.
start_daemon() {
	_sock=$1
	shift
	${pin:-} "$b/loaderd" -f --socket "$_sock" --state-dir "$w/state" \
		--cache-dir "$w/cache" "$@" 2>>"$w/daemon.log" &
	DPID=$!
	pids="$pids $DPID"
	while [ ! -S "$_sock" ]; do
		kill -0 $DPID 2>/dev/null || {
			cat "$w/daemon.log" >&2
			echo "$BENCH: loaderd did not start" >&2
			exit 1
		}
		sleep 0.05
	done
}

# need_python MODULE...: the build tree's Python ($b/loader-python, with
# the loader package) must import every MODULE; exit 2 when the tree is
# not built, 77 when a module is missing.
need_python() {
	[ -x "$b/loaderd" ] && [ -x "$b/loader-python" ] || {
		echo "$BENCH: no $b/loaderd or $b/loader-python: build first, or set BUILD" >&2
		exit 2
	}
	[ -x /usr/bin/python3 ] || skip "no /usr/bin/python3 (Debian's python3)"
	"$b/loader-python" -c "import $(echo "$*" | tr ' ' ',')" 2>/dev/null ||
		skip "$b/loader-python cannot import $* (scripts/deps.sh --bench)"
}

# The corpus, an ImageFolder of real photographs: made once by
# bench/mkcorpus.py (COUNT images, SEED) when $corpus is absent or empty,
# then reused. PIN: a command prefix for mkcorpus (taskset), or nothing.
# Uses the caller's py, top, cores and corpus; partial names the corpus
# being made, for the caller's EXIT trap to remove.
ensure_corpus() {
	[ -d "$corpus" ] && [ -n "$(ls -A "$corpus")" ] && return 0
	"$py" -c "import sys; sys.path.insert(0, '$top/bench')
import mkcorpus; mkcorpus.find_sources(None)" ||
		skip "no source photographs for the corpus"
	say "making the corpus: $1 images into $corpus (once; minutes)"
	rmdir "$corpus" 2>/dev/null || :
	partial=$corpus.tmp.$$
	${3:-} "$py" "$top/bench/mkcorpus.py" --count "$1" --seed "$2" \
		--jobs "$cores" "$partial" >&2
	mv "$partial" "$corpus"
	partial=
}
