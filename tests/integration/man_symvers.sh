#!/bin/sh
# libloader(3)'s VERSIONS against client/libloader.sym, the version script
# the library is linked with: every version node is documented, with each
# function the node exports, and the page names no node the library lacks.
# A new node in libloader.sym without its paragraph in the page fails here.
. "$top_srcdir/tests/integration/tap.sh"

sym=$top_srcdir/client/libloader.sym
man=$top_srcdir/man/libloader.3

# "NODE FUNCTION" for each function a node of the script makes global.
sym_pairs() {
	sed 's:/\*.*\*/::; /\/\*/,/\*\//d' "$sym" | awk '
		/^[A-Za-z_][A-Za-z0-9_.]* *\{/ { node = $1; global = 0; next }
		/^[ \t]*global:/ { global = 1; next }
		/^[ \t]*local:/ { global = 0; next }
		/^}/ { node = ""; next }
		node != "" && global && /^[ \t]*[A-Za-z_][A-Za-z0-9_]*;/ {
			f = $1; sub(/;.*/, "", f); print node, f
		}'
}

# "NODE TEXT" for each .TP entry of the page's VERSIONS section, its text
# (font requests and escapes dropped) on one line.
man_entries() {
	awk '
		/^\.SH/ { if (in_v && node != "") print node, text
			in_v = ($2 == "VERSIONS"); node = ""; next }
		!in_v { next }
		/^\.TP/ { if (node != "") print node, text
			node = ""; text = ""; want = 1; next }
		want { want = 0; node = $NF; next }
		node != "" { gsub(/\\f[BIRP]|\\-|\(\)|^\.[A-Z]+ /, ""); text = text " " $0 }
		END { if (in_v && node != "") print node, text }' "$man"
}

nodes=$(sym_pairs | awk '{ print $1 }' | uniq)
plan $(($(printf '%s\n' "$nodes" | wc -l) + 3))

like "$nodes" '^LOADER_1\.0$' "libloader.sym has a LOADER_1.0 node"
entries=$(man_entries)
like "$entries" '^LOADER_1\.0 ' "libloader.3 has a VERSIONS section of .TP entries"

for n in $nodes; do
	text=$(printf '%s\n' "$entries" | sed -n "s/^$n //p")
	missing=
	if [ -z "$text" ]; then
		missing=" (no entry)"
	else
		for f in $(sym_pairs | sed -n "s/^$n //p"); do
			printf '%s\n' "$text" | grep -Eq "(^|[^a-z_])$f([^a-z_]|\$)" ||
				missing="$missing $f"
		done
	fi
	is "$missing" "" "libloader.3 documents $n with the functions it exports"
done

extra=
for n in $(printf '%s\n' "$entries" | awk '{ print $1 }'); do
	printf '%s\n' "$nodes" | grep -qx -- "$n" || extra="$extra $n"
done
is "$extra" "" "libloader.3 documents no version node libloader.sym lacks"
