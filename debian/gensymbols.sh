#!/bin/sh
# gensymbols.sh - write libloader1's dpkg symbols file from the version
# script that decides what the library exports.
#
#   sh debian/gensymbols.sh client/libloader.sym >debian/libloader1.symbols
#
# Every name in a node's global: list becomes NAME@NODE, and every node
# its own NODE@NODE (the linker exports the version names too), each
# with the package version that first shipped it: 0.1.0, the first
# package, for LOADER_1.0 to LOADER_1.7; a node added later gets the
# version that brings it by a line in the table below. The symbols file
# is made at build time and never edited by hand.
#
# The versions carry a "~" (0.1.0~ sorts just before 0.1.0): dpkg-gensymbols
# reports a symbol missing from the library only when the package being
# built is newer than the symbol's version, so with a plain 0.1.0 a
# symbol lost while the package is still 0.1.0 would pass unnoticed.
set -eu
sym=$1
first=0.1.0~

# Node minimum-version: nodes newer than the first package go here, e.g.
#   LOADER_1.8 0.2.0~
since='
'

echo "libloader.so.1 libloader1 #MINVER#"
echo "* Build-Depends-Package: libloader-dev"
sed -e 's|/\*.*\*/||' "$sym" | awk -v first="$first" -v since="$since" '
BEGIN {
	n = split(since, lines, "\n")
	for (i = 1; i <= n; i++)
		if (split(lines[i], f, " ") == 2)
			ver[f[1]] = f[2]
}
/\/\*/ { incomment = 1 }
incomment { if ($0 ~ /\*\//) incomment = 0; next }
/^[A-Za-z_][A-Za-z0-9_.]*[ \t]*\{/ {
	node = $1; sub(/\{.*/, "", node); scope = ""
	v = (node in ver) ? ver[node] : first
	printf " %s@%s %s\n", node, node, v
	next
}
/^[ \t]*global:/ { scope = "global"; next }
/^[ \t]*local:/ { scope = "local"; next }
/^\}/ { node = ""; scope = ""; next }
node != "" && scope == "global" {
	s = $0; gsub(/[ \t;]/, "", s)
	if (s != "")
		printf " %s@%s %s\n", s, node, (node in ver) ? ver[node] : first
}
' 
