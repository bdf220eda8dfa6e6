#!/bin/sh
# build-packages.sh - build loaderd's Debian packages from this checkout:
#
#   scripts/build-packages.sh [OUTDIR]     (default var/debs)
#
# Installs what the packages are built with (scripts/deps.sh --deb: needs
# root or sudo when something is missing), copies the tree (tracked
# files, and untracked ones git does not ignore) to OUTDIR/src, runs
# dpkg-buildpackage -us -uc -b there (so the checkout's own build stays
# as it is) and leaves the .deb files, with the .changes and .buildinfo,
# in OUTDIR; the build's output goes to OUTDIR/build.log. Prints the
# .deb files' paths. Exit status: 0, or 1 if the build failed (the end
# of the log is shown).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2
out=${1:-var/debs}
"$top/scripts/deps.sh" --deb || exit 1
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || {
	echo "build-packages.sh: $top is not a git checkout: its files are those git lists" >&2
	exit 1
}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1
rm -rf "$out/src" "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo
mkdir "$out/src" || exit 1
git ls-files -z -co --exclude-standard | tar --null -T - -cf - |
	tar -xf - -C "$out/src" || exit 1
echo "build-packages.sh: dpkg-buildpackage -us -uc -b in $out/src (log: $out/build.log)" >&2
if ! (cd "$out/src" && DEB_BUILD_OPTIONS="parallel=$(nproc) ${DEB_BUILD_OPTIONS:-}" \
	dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1; then
	tail -40 "$out/build.log" >&2
	echo "build-packages.sh: dpkg-buildpackage failed (log: $out/build.log)" >&2
	exit 1
fi
rm -rf "$out/src"
ls "$out"/*.deb
