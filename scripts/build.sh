#!/bin/sh
# build.sh - configure (once) and build loaderd in a build directory.
#
#   scripts/build.sh [BUILDDIR [CONFIGURE-ARGS...]]     default BUILDDIR: build
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
builddir=${1:-build}
[ $# -gt 0 ] && shift
case $builddir in /*) ;; *) builddir=$top/$builddir ;; esac

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] ||
	[ Makefile.am -nt configure ]; then
	autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
fi
mkdir -p "$builddir"
cd "$builddir"
if [ ! -f Makefile ] || [ "$top/configure" -nt Makefile ]; then
	"$top/configure" -q "$@"
fi
make -s -j"$(nproc)" >/dev/null
