#!/bin/sh
# layers.sh - check the include graph of the tree against doc/design.md's
# layers ("Folders"): every quoted #include of a source file must resolve
# to its own folder or to a folder its layer may use.
#
#   scripts/layers.sh [TOP]        TOP: the source tree (default: this one)
#   scripts/layers.sh --list [TOP] each layer and what it may use, a line
#                                  each (README.md's "Layout" table shows
#                                  the same; tests/layers.sh compares)
#
# Prints one line per arrow that is not allowed, naming the file, the
# header and what the folder may use; exits 1 if there is any, else 0.
# The build enforces the same graph with per-library include paths
# (Makefile.am); this check also catches an arrow that a shared -I would
# let through, such as the daemon including client/libloader's private
# headers, or a header reached by a relative path.
set -eu
list=0
if [ "${1:-}" = --list ]; then
	list=1
	shift
fi
top=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top"

# The allowed arrows: FOLDER: what it may include besides its own headers.
# A folder name allows all of its headers and those of its subfolders;
# folder/header allows just one. pipeline/ is five subfolders, each a
# layer of its own (doc/design.md, "Folders"): base uses nothing else of
# the pipeline; format uses base; image uses base and format's dtype.h
# (the element types) alone; remote uses base and format; stream uses
# them all, and nothing of the pipeline uses stream.
# libloader resolves an s3:// dataset's credentials in the caller's
# process (common/awscfg.h, with the diag it reports in): that is why the
# client may use those two of common/ beside the public errors, and the
# monotonic clock (common/clock.h, all inline) that every layer times by;
# it finds a dataset's files by the conventions the daemon reads them by
# (common/dsfiles.h, all inline).
# loaderctl finds the daemon as libloader does: one lookup order, in
# client/sockpath.h, compiled into both. It reads a mixture file as
# libloader does: one reader of the format, client/mixfile.h, compiled
# into both.
allowed() {
	case $1 in
	common) echo "" ;;
	codecs) echo "common" ;;
	pipeline/base) echo "common" ;;
	pipeline/format) echo "pipeline/base codecs common" ;;
	pipeline/image) echo "pipeline/base pipeline/format/dtype.h codecs common" ;;
	pipeline/remote) echo "pipeline/base pipeline/format common" ;;
	pipeline/stream) echo "pipeline/base pipeline/format pipeline/image pipeline/remote codecs common" ;;
	daemon) echo "pipeline codecs common client/proto.h client/ring.h client/futex.h client/msg.h" ;;
	ctl) echo "pipeline codecs common client/proto.h client/msg.h client/loader.h client/sockpath.h client/mixfile.h" ;;
	client) echo "common/loader_error.h common/tie.h common/awscfg.h common/diag.h common/clock.h common/dsfiles.h" ;;
	trainer) echo "client/loader.h" ;;
	bench) echo "ctl pipeline codecs common" ;;
	*) echo "?" ;;
	esac
}
tops="common codecs pipeline daemon ctl client trainer bench"
layers="common codecs pipeline/base pipeline/format pipeline/image
pipeline/remote pipeline/stream daemon ctl client trainer bench"

if [ $list -eq 1 ]; then
	for l in $layers; do
		echo "$l: $(allowed "$l")"
	done
	exit 0
fi

# Every folder holding sources, subfolders included: each must have an
# entry above (a new subfolder is a decision, not an accident).
folders=
for f in $tops; do
	[ -d "$f" ] || continue
	for d in $(find "$f" -type d | sort); do
		[ -n "$(find "$d" -maxdepth 1 -name '*.[ch]' | head -1)" ] ||
			continue
		folders="$folders $d"
	done
done
bad=0
for f in $folders; do
	if [ "$(allowed "$f")" = "?" ]; then
		echo "$f/: a folder of sources with no layer in scripts/layers.sh"
		bad=1
	fi
done

# Where a header lives: the folder of the one file of that name (file
# names are unique across the tree), or nothing.
home() {
	for f in $folders; do
		[ -f "$f/$1" ] && { echo "$f"; return; }
	done
	echo ""
}

for f in $folders; do
	may=$(allowed "$f")
	[ "$may" = "?" ] && continue
	for src in "$f"/*.c "$f"/*.h; do
		[ -f "$src" ] || continue
		for h in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$src"); do
			case $h in
			config.h) continue ;;
			*/*)
				echo "$src: #include \"$h\": a path, not a header of an allowed folder"
				bad=1
				continue
				;;
			esac
			[ -f "$f/$h" ] && continue
			to=$(home "$h")
			if [ -z "$to" ]; then
				echo "$src: #include \"$h\": no such header in the tree"
				bad=1
				continue
			fi
			ok=0
			for m in $may; do
				case $to in
				"$m" | "$m"/*) ok=1 ;;
				esac
				[ "$m" = "$to/$h" ] && ok=1
			done
			if [ $ok -eq 0 ]; then
				echo "$src: #include \"$h\" ($to/): $f may use only: ${may:-nothing of ours}"
				bad=1
			fi
		done
	done
done
exit $bad
