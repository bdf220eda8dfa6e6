#!/bin/sh
# loaderctl status, streams and stats: each one's --help lists its own
# options and no other's, and another command's option is refused as
# unknown (ctl/ctl_status.c, one table of the three commands' options).
. "$top_srcdir/tests/integration/tap.sh"
tmpdir
plan 9

# opts CMD: the long options CMD's --help lists, on one line.
opts() {
	"$LOADERCTL" "$1" --help | grep -Eo -- '^ +(-[a-z], )?--[a-z-]+' |
		sed 's/.*--/--/' | tr '\n' ' ' | sed 's/ $//'
}

is "$(opts status)" "--socket --json --help" \
	"status --help lists --socket and --json"
is "$(opts streams)" "--socket --json --saved --help" \
	"streams --help lists --socket, --json and --saved"
is "$(opts stats)" \
	"--socket --interval --watch --count --json --prometheus --help" \
	"stats --help lists --socket, --interval, --watch, --count, --json and --prometheus"
like "$("$LOADERCTL" stats --help)" '^      --json +print JSON, one object per reading' \
	"stats --help says what its --json prints"

# An option of another command is named as unknown before any connect.
for c in "status --saved" "status --watch" "streams --interval 2" \
	"stats --saved"; do
	# shellcheck disable=SC2086 # $c is a command and its arguments.
	set -- $c
	out=$("$LOADERCTL" "$@" --socket "$T/none.sock" 2>&1)
	like "$? $out" "^2 loaderctl $1: unknown option $2\$" \
		"loaderctl $c is refused: unknown option"
done
like "$("$LOADERCTL" status --saved --socket "$T/none.sock" 2>&1)" \
	'^usage: loaderctl status ' "and the command's usage follows"
