#!/bin/sh
# loaderctl's command line: help, usage errors, errors on bad input, and
# that the man page documents every option the code accepts.
. "$top_srcdir/tests/integration/tap.sh"
tmpdir
plan 30

out=$("$LOADERCTL" --help)
is "$?" 0 "--help exits 0"
for c in pack inspect verify pipeline status streams stats forget mix bench; do
	like "$out" "^  $c " "--help lists $c"
done
# bench's subcommands, as its --help lists them: each has its own options.
benchcmds=$("$LOADERCTL" bench --help | sed -n 's/^  \([a-z][a-z]*\) .*/\1/p')
like "$benchcmds" '^storage$' "bench --help lists storage"
# mix's subcommands likewise.
mixcmds=$("$LOADERCTL" mix --help | sed -n 's/^  \([a-z][a-z]*\) .*/\1/p')
is "$(echo $mixcmds)" "create inspect" "mix --help lists create and inspect"
out=$("$LOADERCTL" frobnicate 2>&1)
is "$?" 2 "an unknown command exits 2"
like "$out" 'unknown command "frobnicate"' "and names it"
out=$("$LOADERCTL" pack 2>&1)
is "$?" 2 "pack without arguments exits 2"
out=$("$LOADERCTL" pack --shard-size 12Q a b 2>&1)
like "$out" '--shard-size: invalid value "12Q"' "a bad option value is named"
out=$("$LOADERCTL" pack --no-such-option a b 2>&1)
like "$out" 'unknown option --no-such-option' "an unknown option is named"
out=$("$LOADERCTL" pack "$T/nothing-here" "$T/out" 2>&1)
is "$?" 2 "packing a missing source exits 2"
like "$out" 'nothing-here' "and names it"
out=$("$LOADERCTL" inspect "$T/nothing-here" 2>&1)
like "$out" 'nothing-here: No such file' "inspect names a missing path"
mkdir "$T/empty"
out=$("$LOADERCTL" verify "$T/empty" 2>&1)
is "$?" 1 "verify of a directory without a manifest exits 1"
like "$out" 'no manifest' "and says so"
head -c 4096 /dev/urandom >"$T/junk.lds"
out=$("$LOADERCTL" verify "$T/junk.lds" 2>&1)
like "$out" 'junk.lds: offset 0: bad magic' "verify of a non-shard names file, offset and problem"
out=$("$LOADERCTL" inspect "$T/junk.lds" 2>&1)
is "$?" 2 "inspect of a non-shard exits 2"

# Every option in --help appears in the man page, and the reverse.
manopts=$(sed 's/\\-/-/g' "$top_srcdir/man/loaderctl.1" |
	grep -Eo -- '--[a-z][a-z-]*[a-z]' | sort -u)
helpopts=$({ for c in pack inspect verify pipeline status streams stats forget; do "$LOADERCTL" $c --help; done
	for c in $benchcmds; do "$LOADERCTL" bench $c --help; done
	for c in $mixcmds; do "$LOADERCTL" mix $c --help; done; } |
	grep -Eo -- '--[a-z][a-z-]*[a-z]' | sort -u)
missing=$(printf '%s\n' "$helpopts" | while read -r o; do
	printf '%s\n' "$manopts" | grep -qx -- "$o" || printf ' %s' "$o"; done)
is "$missing" "" "loaderctl.1 documents every option of every command"
extra=$(printf '%s\n' "$manopts" | while read -r o; do
	[ "$o" = --version ] && continue
	printf '%s\n' "$helpopts" | grep -qx -- "$o" || printf ' %s' "$o"; done)
is "$extra" "" "loaderctl.1 documents no option the code lacks"

# The same for loaderd and loaderd(8). Where loaderd.8 quotes another
# command's option it writes \-\&\- so that it is not counted here.
manopts=$(sed 's/\\-/-/g' "$top_srcdir/man/loaderd.8" |
	grep -Eo -- '--[a-z][a-z0-9-]*[a-z]' | sort -u)
helpopts=$("$top_builddir/loaderd" --help | grep -Eo -- '--[a-z][a-z0-9-]*[a-z]' | sort -u)
is "$manopts" "$helpopts" "loaderd.8 documents exactly the options of loaderd --help"
out=$("$top_builddir/loaderd" --threads x 2>&1)
like "$out" '--threads: "x" is not an integer in \[0, 1024\]' "loaderd names a bad option value"
v=$("$top_builddir/loaderctl" --version | sed 's/^loaderctl //')
is "$("$top_builddir/loaderd" --version)" "loaderd $v" "loaderd --version names the version loaderctl does"
