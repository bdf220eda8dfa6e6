#!/bin/sh
# build-packages.sh - build loaderd's Debian packages from this checkout:
#
#   scripts/build-packages.sh [OUTDIR]     (default var/debs)
#
# Installs what the packages are built with (scripts/deps.sh --deb: needs
# root or sudo when something is missing), copies the tree (tracked
# files, and untracked ones git does not ignore) to a directory of its
# own in OUTDIR (a relative OUTDIR is the caller's), runs
# dpkg-buildpackage -us -uc -b there (so the checkout's own build stays
# as it is) and leaves the .deb files, with the .changes and .buildinfo,
# in OUTDIR, replacing packages of the same names; nothing else there is
# touched. Prints the .deb files' paths. Exit status: 0, or 1 if the
# build failed (the end of the log is shown, and the build's directory
# is left in OUTDIR for a look).
set -u
here=$(pwd)
top=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-} in
"") out=$top/var/debs ;;
/*) out=$1 ;;
*) out=$here/$1 ;; # as the caller names it, from where it runs
esac
cd "$top" || exit 2
"$top/scripts/deps.sh" --deb || exit 1
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || {
	echo "build-packages.sh: $top is not a git checkout: its files are those git lists" >&2
	exit 1
}
mkdir -p "$out" || exit 1
# The build's own directory: nothing of OUTDIR's is touched but the
# packages it receives at the end.
work=$(mktemp -d "$out/.build-packages.XXXXXX") || exit 1
mkdir "$work/src" || exit 1
git ls-files -z -co --exclude-standard | tar --null -T - -cf - |
	tar -xf - -C "$work/src" || { rm -rf "$work"; exit 1; }
echo "build-packages.sh: dpkg-buildpackage -us -uc -b in $work/src (log: $work/build.log)" >&2
if ! (cd "$work/src" && DEB_BUILD_OPTIONS="parallel=$(nproc) ${DEB_BUILD_OPTIONS:-}" \
	dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1; then
	tail -40 "$work/build.log" >&2
	echo "build-packages.sh: dpkg-buildpackage failed; its tree and log are left in $work" >&2
	exit 1
fi
debs=$(cd "$work" && ls *.deb)
mv "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo "$out"/ || exit 1
rm -rf "$work"
for f in $debs; do echo "$out/$f"; done
