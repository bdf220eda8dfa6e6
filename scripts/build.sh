#!/bin/sh
# build.sh - configure (when needed) and build loaderd in a build directory.
#
#   scripts/build.sh [BUILDDIR [CONFIGURE-ARGS...]]     default BUILDDIR: build
#
# configure runs when BUILDDIR has no Makefile, when configure is newer
# than it, or when the build's fingerprint has changed: the configure
# arguments and compiler variables, and what pkg-config reports for every
# module configure.ac checks (criterion included). So a build directory
# configured before the test dependencies were installed (or with other
# arguments) is configured again instead of silently building without
# them. A change of arguments or variables also cleans the build, since
# make would not rebuild objects for it.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
builddir=${1:-build}
[ $# -gt 0 ] && shift
case $builddir in /*) ;; *) builddir=$top/$builddir ;; esac
stamp=$builddir/.build-fingerprint

# The fingerprint, one "key value" line each: first the arguments and the
# variables configure reads, then every pkg-config module of configure.ac.
fingerprint() {
	printf 'args'
	for a in "$@"; do printf ' [%s]' "$a"; done
	printf '\n'
	for v in CC CFLAGS CPPFLAGS LDFLAGS LIBS PKG_CONFIG_PATH; do
		eval "printf 'env %s=[%s]\\n' $v \"\${$v-}\""
	done
	sed -n 's/^[[:space:]]*PKG_CHECK_MODULES(\[[A-Za-z0-9_]*\],[[:space:]]*\[\([^] ]*\).*/\1/p' \
		"$top/configure.ac" | while read -r m; do
		printf 'pkg %s %s\n' "$m" \
			"$(${PKG_CONFIG:-pkg-config} --modversion "$m" 2>/dev/null ||
				echo absent)"
	done
}

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] ||
	[ Makefile.am -nt configure ]; then
	autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
fi
mkdir -p "$builddir"
cd "$builddir"
now=$(fingerprint "$@")
clean=
if [ ! -f Makefile ] || [ "$top/configure" -nt Makefile ]; then
	configure=yes
elif [ ! -f "$stamp" ]; then
	echo "build.sh: $builddir: no record of its configuration; configuring again" >&2
	configure=yes clean=yes
elif [ "$now" != "$(cat "$stamp")" ]; then
	echo "build.sh: $builddir: configured for something else; configuring again:" >&2
	printf '%s\n' "$now" | diff "$stamp" - |
		sed -n 's/^< /  was: /p; s/^> /  now: /p' >&2 || true
	configure=yes
	[ "$(grep -v '^pkg ' "$stamp")" = "$(printf '%s\n' "$now" | grep -v '^pkg ')" ] ||
		clean=yes
else
	configure=
fi
if [ -n "$configure" ]; then
	rm -f "$stamp"
	"$top/configure" -q "$@"
	[ -z "$clean" ] || make -s clean >/dev/null
	printf '%s\n' "$now" >"$stamp"
fi
make -s -j"$(nproc)" >/dev/null
