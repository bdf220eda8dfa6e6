#!/bin/sh
# The loader package as make install leaves it: every module of
# client/python/loader installed (a module missing from Makefile.am fails
# here), beside Debian's Python packages, told where libloader.so.1 went,
# and importable by the python3 configure found, with the installed
# library, in a DESTDIR staging tree.
. "$top_srcdir/tests/integration/tap.sh"

py=$(sed -n 's/^PYTHON3 = //p' "$top_builddir/Makefile")
[ -n "$py" ] && [ -x "$py" ] || skip_all "no python3 configured"
tmpdir
plan 5

make -s -C "$top_builddir" install DESTDIR="$T/inst" >"$T/install.log" 2>&1
ok "make install DESTDIR=... succeeds" test $? -eq 0
pydir=$(sed -n 's/^pythondir = //p' "$top_builddir/Makefile")
prefix=$(sed -n 's/^prefix = //p' "$top_builddir/Makefile")
libdir=$(sed -n 's/^libdir = //p' "$top_builddir/Makefile" | sed "s|\${exec_prefix}|$prefix|")
pydir=$(echo "$pydir" | sed "s|\${prefix}|$prefix|")
pkg=$T/inst$pydir/loader
want=$(cd "$top_srcdir/client/python/loader" && ls *.py | sort | tr '\n' ' ')
got=$(cd "$pkg" 2>/dev/null && ls *.py | grep -v '^_installed.py$' | sort | tr '\n' ' ')
is "$got" "$want" "every module of client/python/loader is installed in $pydir"
like "$(cat "$pkg/_installed.py" 2>/dev/null)" "^LIBDIR = '$libdir'\$" \
	"_installed.py names the configured libdir"
case $pydir in
*/dist-packages | */site-packages) r=0 ;;
*) r=1 ;;
esac
ok "installed under a Python package directory ($pydir)" test $r -eq 0
# A sanitizer build's python3 needs the runtimes preloaded, as
# loader-python does it.
eval "$(grep -E '^(LD_PRELOAD|ASAN_OPTIONS)=' "$top_builddir/loader-python")"
export LD_PRELOAD ASAN_OPTIONS
got=$(cd "$T" && env -u LOADER_LIBRARY PYTHONPATH="$T/inst$pydir" \
	LD_LIBRARY_PATH="$T/inst$libdir" "$py" -c \
	'import loader, loader.torch, loader.keras; print(loader.library_version, loader.__file__)' 2>&1)
is "$got" "(1, 7) $pkg/__init__.py" "the installed package imports, with the installed library"
