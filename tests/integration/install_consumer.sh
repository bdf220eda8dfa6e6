#!/bin/sh
# What make install leaves is enough to build and run a client: a program
# outside the tree, compiled with nothing but pkg-config's flags for the
# installed loader.pc, streams an epoch from the installed loaderd, on a
# dataset packed by the installed loaderctl. Also: the installed library's
# soname, the installed headers on their own, and the man pages.
. "$top_srcdir/tests/integration/tap.sh"

need_fmnist

# mkvar NAME: NAME's value in the build tree's Makefile, as configure wrote
# it (e.g. libdir = ${exec_prefix}/lib).
mkvar() { sed -n "s/^$1 = //p" "$top_builddir/Makefile"; }

pkgconfig=$(mkvar PKG_CONFIG)
[ -n "$pkgconfig" ] || pkgconfig=$(command -v pkg-config)
[ -n "$pkgconfig" ] || skip_all "no pkg-config"
cc=$(mkvar CC)
[ -n "$cc" ] || cc=cc
command -v readelf >/dev/null || skip_all "no readelf (binutils)"
version=$(mkvar PACKAGE_VERSION)
# The sanitizer build's libloader refuses to run unless the ASan runtime
# is the first library loaded, so the consumer links with the same
# sanitizer flags, which puts it there; empty in a plain build.
san_ldflags=$(mkvar SAN_LDFLAGS)

# Configure writes the directories in terms of each other, in the order
# below; in that order the shell expands them just as make does.
for v in prefix exec_prefix bindir libdir includedir datarootdir mandir; do
	eval "$v=\"$(mkvar $v)\""
done

tmpdir
plan 14

make -s -C "$top_builddir" install DESTDIR="$T/inst" >"$T/install.log" 2>&1
ok "make install DESTDIR=... succeeds" test $? -eq 0
I=$T/inst
pcdir=$I$libdir/pkgconfig
ok "loader.pc is installed in $libdir/pkgconfig" test -f "$pcdir/loader.pc"

# The staged tree is a sysroot: every installed path is the configured
# one under $I. PKG_CONFIG_PATH finds loader.pc there (before any loader.pc
# installed on this machine) and PKG_CONFIG_SYSROOT_DIR puts $I in front
# of its -I and -L paths. That works whatever libdir is; --define-prefix
# guesses the prefix from where the .pc lies, so it would need libdir to
# be PREFIX/lib and written as ${prefix}/lib. jansson's .pc
# (Requires.private) comes from the system's search path; the sysroot
# turns its -I/usr/include into a -I$I/usr/include that does not exist,
# which is harmless: loader.h includes nothing of jansson, and the
# compiler searches /usr/include anyway.
PKG_CONFIG_PATH=$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
PKG_CONFIG_SYSROOT_DIR=$I
export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
is "$("$pkgconfig" --modversion loader 2>&1)" "$version" \
	"pkg-config --modversion loader gives the package version"

# A client as a user would write it, from libloader(3) alone: the
# example that README builds against the build tree.
cp "$top_srcdir/examples/epoch_count.c" "$T/consumer.c"
# No include or library path may come from the environment: the flags
# pkg-config gives must be enough on their own.
flags=$("$pkgconfig" --cflags --libs loader 2>&1)
like "$flags" "(^| )-I$I$includedir( .*)? -L$I$libdir -lloader( |\$)" \
	"pkg-config's flags for loader point into the staged tree"
# shellcheck disable=SC2086 # $flags and $san_ldflags are lists of words.
(cd "$T" && env -u CPATH -u C_INCLUDE_PATH -u LIBRARY_PATH \
	$cc -Wall -Wextra -Werror -o consumer consumer.c $flags $san_ldflags) \
	>"$T/cc.log" 2>&1
ok "a consumer compiles with only pkg-config's flags" test $? -eq 0
sed 's/^/# /' "$T/cc.log"

LOADERD=$I$bindir/loaderd
# loaderctl links libloader.so.1 (bench pipeline --socket): staged, it
# finds it only through LD_LIBRARY_PATH.
LD_LIBRARY_PATH="$I$libdir" "$I$bindir/loaderctl" pack --split test "$src" "$T/fm" \
	>/dev/null 2>"$T/pack.log"
ok "the installed loaderd starts" start_daemon "$T/d.sock" --threads 2
got=$(LD_LIBRARY_PATH="$I$libdir" "$T/consumer" "$T/d.sock" "$T/fm/test" 2>&1)
is "$got" "samples 10000" \
	"the consumer streams the 10000 samples of the test split from the installed daemon"

like "$(readelf -d "$I$libdir/libloader.so.1" 2>&1)" \
	'\(SONAME\) +Library soname: \[libloader\.so\.1\]' \
	"the installed libloader.so.1 has soname libloader.so.1"

# Each installed header compiles on its own, in strict ISO C.
printf '#include <loader.h>\n' >"$T/h1.c"
printf '#include <loader_error.h>\n' >"$T/h2.c"
cflags=$("$pkgconfig" --cflags loader)
# shellcheck disable=SC2086
(cd "$T" && env -u CPATH -u C_INCLUDE_PATH \
	$cc -std=c99 -pedantic-errors -Wall -Wextra -Werror $cflags -c h1.c &&
	$cc -std=c99 -pedantic-errors -Wall -Wextra -Werror $cflags -c h2.c) \
	>"$T/hdr.log" 2>&1
ok "the installed loader.h and loader_error.h compile alone" test $? -eq 0
sed 's/^/# /' "$T/hdr.log"

for page in man8/loaderd.8 man3/libloader.3 man1/loaderctl.1 man7/loader.7 \
	man5/loader-shard.5; do
	ok "man page $page is installed under $mandir" test -f "$I$mandir/$page"
done
