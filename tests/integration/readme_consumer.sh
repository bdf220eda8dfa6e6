#!/bin/sh
# README.md's one compile line for a C program on the build tree, as the
# README writes it: run where build/ is this build tree, it compiles
# examples/epoch_count.c with pkg-config's flags from
# loader-uninstalled.pc alone (the headers from BUILDDIR/include), and
# the program runs without LD_LIBRARY_PATH: it names the error of a
# socket no daemon listens on, and streams an epoch from a real daemon.
. "$top_srcdir/tests/integration/tap.sh"

command -v pkg-config >/dev/null || skip_all "no pkg-config"
command -v cc >/dev/null || skip_all "no cc"
command -v readelf >/dev/null || skip_all "no readelf (binutils)"
src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
data=
[ -r "$src/t10k-labels-idx1-ubyte.gz" ] && data=yes

tmpdir
plan $((6 + ${data:+5}))

# The README's compile line: the one line that compiles with pkg-config's
# flags for loader.
lines=$(grep -E '^cc .*pkg-config --cflags --libs loader' \
	"$top_srcdir/README.md")
is "$(printf '%s\n' "$lines" | grep -c .)" 1 \
	"README.md has one compile line with pkg-config's flags for loader"
line=$(printf '%s\n' "$lines" | head -1)
prog=$(printf '%s\n' "$line" | sed -n 's/.* -o \([^ ]*\) .*/\1/p')
echo "# $line"

# A directory laid out as the README's reader has it: build/ and the
# sources' examples/.
mkdir "$T/w"
ln -s "$top_builddir" "$T/w/build"
ln -s "$top_srcdir/examples" "$T/w/examples"
(cd "$T/w" && PKG_CONFIG_PATH=build pkg-config --uninstalled loader)
ok "pkg-config takes loader-uninstalled.pc from the build directory" \
	test $? -eq 0

# No include, library or pkg-config path comes from the environment.
(cd "$T/w" && env -u CPATH -u C_INCLUDE_PATH -u LIBRARY_PATH \
	-u PKG_CONFIG_PATH -u LD_LIBRARY_PATH sh -c "$line") >"$T/cc.log" 2>&1
ok "README.md's compile line builds $prog" test $? -eq 0 -a -x "$T/w/$prog"
sed 's/^/# /' "$T/cc.log"

like "$(readelf -d "$T/w/$prog" 2>&1)" "R(UN)?PATH.*\\[$top_builddir/\\.libs\\]" \
	"$prog has an rpath to the build tree's libloader"

out=$(cd "$T/w" && env -u LD_LIBRARY_PATH "./$prog" "$T/none.sock" "$T/fm/test" 2>&1)
is "$?" 1 "$prog runs without LD_LIBRARY_PATH and fails without a daemon"
like "$out" "^$prog: .*connect $T/none.sock: No such file or directory" \
	"it says why, with loader_strerror() and the reason"

if [ -n "$data" ]; then
	"$LOADERCTL" pack --split test "$src" "$T/fm" >/dev/null 2>"$T/pack.log"
	ok "the daemon starts" start_daemon "$T/d.sock" --threads 2
	out=$(cd "$T/w" && env -u LD_LIBRARY_PATH "./$prog" "$T/d.sock" "$T/fm/test" 2>&1)
	is "$out" "samples 10000" \
		"$prog streams the 10000 samples of the test split"
	stop_daemon "$DAEMON_PID" "$T/d.sock.log"
fi
