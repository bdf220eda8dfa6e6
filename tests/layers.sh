#!/bin/sh
# layers.sh - the include graph of the tree obeys DESIGN.md's layers
# (scripts/layers.sh), and the check itself catches a wrong arrow.
. "$top_srcdir/tests/integration/tap.sh"
check=$top_srcdir/scripts/layers.sh

plan 4
out=$(sh "$check" "$top_srcdir" 2>&1)
rc=$?
is "$rc" 0 "the tree's includes follow the layers"
[ -n "$out" ] && printf '%s\n' "$out" | sed 's/^/# /'

# A scratch tree with one arrow of each kind the check must refuse.
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/common" "$t/codecs" "$t/pipeline" "$t/trainer" "$t/client"
: >"$t/common/diag.h"
: >"$t/pipeline/shard.h"
: >"$t/client/loader.h"
: >"$t/client/msg.h"
printf '#include "diag.h"\n' >"$t/codecs/ok.c"
printf '#include "loader.h"\n' >"$t/trainer/ok.c"
sh "$check" "$t" >/dev/null 2>&1
is "$?" 0 "a scratch tree of allowed arrows passes"
printf '#include "shard.h"\n' >"$t/codecs/up.c"
out=$(sh "$check" "$t" 2>&1)
is "$?:$out" "1:codecs/up.c: #include \"shard.h\" (pipeline/): codecs may use only: common" \
	"codecs including a pipeline header is refused, naming file and arrow"
rm "$t/codecs/up.c"
printf '#include "msg.h"\n' >"$t/trainer/peek.c"
out=$(sh "$check" "$t" 2>&1)
is "$?:${out%%:*}" "1:trainer/peek.c" \
	"the trainer including more of client/ than loader.h is refused"
