#!/bin/sh
# layers.sh - the include graph of the tree obeys the layers of
# doc/design.md, "Folders" (scripts/layers.sh), and the check itself
# catches a wrong arrow: one injected across each boundary of pipeline/'s
# subfolders, one between top-level folders, a path, and a folder of
# sources that has no layer.
. "$top_srcdir/tests/integration/tap.sh"
check=$top_srcdir/scripts/layers.sh

plan 14
out=$(sh "$check" "$top_srcdir" 2>&1)
rc=$?
is "$rc" 0 "the tree's includes follow the layers"
[ -n "$out" ] && printf '%s\n' "$out" | sed 's/^/# /'

# README.md's "Layout" table says what each layer may include: the
# same as scripts/layers.sh --list, layer by layer.
readme=$(sed -n '/^## Layout/,/^## /p' "$top_srcdir/README.md")
diff=
while IFS= read -r line; do
	l=${line%%:*}
	want=${line#*: }
	[ -z "$want" ] && want="nothing of ours"
	row=$(printf '%s\n' "$readme" | grep -F "| \`$l/\` |" || true)
	got=$(printf '%s\n' "$row" | awk -F' [|] ' '{ print $NF }' |
		sed 's/ *|$//; s/`//g')
	[ "$got" = "$want" ] || diff="$diff $l(README: '$got', layers.sh: '$want')"
done <<EOF_LIST
$(sh "$check" --list "$top_srcdir")
EOF_LIST
is "${diff:-same}" same "README's Layout table lists each layer's arrows as scripts/layers.sh does"

# A scratch tree with a header in each folder, and allowed arrows only.
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
for d in common codecs pipeline/base pipeline/format pipeline/image \
	pipeline/remote pipeline/stream daemon client trainer; do
	mkdir -p "$t/$d"
done
: >"$t/common/diag.h"
: >"$t/codecs/codec.h"
: >"$t/pipeline/base/fdio.h"
: >"$t/pipeline/format/dtype.h"
: >"$t/pipeline/format/shard.h"
: >"$t/pipeline/image/ispec.h"
: >"$t/pipeline/remote/s3.h"
: >"$t/pipeline/stream/stream.h"
: >"$t/client/loader.h"
: >"$t/client/msg.h"
printf '#include "diag.h"\n' >"$t/codecs/ok.c"
printf '#include "diag.h"\n' >"$t/pipeline/base/ok.c"
printf '#include "fdio.h"\n#include "codec.h"\n' >"$t/pipeline/format/ok.c"
printf '#include "dtype.h"\n#include "fdio.h"\n' >"$t/pipeline/image/ok.c"
printf '#include "shard.h"\n#include "fdio.h"\n' >"$t/pipeline/remote/ok.c"
printf '#include "ispec.h"\n#include "s3.h"\n#include "shard.h"\n' \
	>"$t/pipeline/stream/ok.c"
printf '#include "stream.h"\n#include "shard.h"\n' >"$t/daemon/ok.c"
printf '#include "loader.h"\n' >"$t/trainer/ok.c"
sh "$check" "$t" >/dev/null 2>&1
is "$?" 0 "a scratch tree of allowed arrows passes"

# refused FILE HEADER WHAT: FILE including HEADER is refused, naming them.
refused() {
	printf '#include "%s"\n' "$2" >"$t/$1"
	out=$(sh "$check" "$t" 2>&1)
	rc=$?
	rm "$t/$1"
	case $out in
	"$1: #include \"$2\""*) named=yes ;;
	*) named="no: $out" ;;
	esac
	is "$rc:$named" "1:yes" "$3"
}
refused codecs/up.c shard.h "codecs including a pipeline header is refused"
refused pipeline/base/up.c shard.h "base including format is refused"
refused pipeline/format/up.c stream.h "format including stream is refused"
refused pipeline/format/side.c ispec.h "format including image is refused"
refused pipeline/image/side.c shard.h \
	"image including a format header other than dtype.h is refused"
refused pipeline/image/up.c stream.h "image including stream is refused"
refused pipeline/remote/side.c ispec.h "remote including image is refused"
refused pipeline/remote/up.c stream.h "remote including stream is refused"
refused trainer/peek.c msg.h \
	"the trainer including more of client/ than loader.h is refused"

printf '#include "../common/diag.h"\n' >"$t/codecs/path.c"
out=$(sh "$check" "$t" 2>&1)
is "$?:${out%%:*}" "1:codecs/path.c" "a header reached by a path is refused"
rm "$t/codecs/path.c"

mkdir "$t/pipeline/extra"
: >"$t/pipeline/extra/new.c"
out=$(sh "$check" "$t" 2>&1)
is "$?:$out" "1:pipeline/extra/: a folder of sources with no layer in scripts/layers.sh" \
	"a new subfolder of sources without a layer is refused"
