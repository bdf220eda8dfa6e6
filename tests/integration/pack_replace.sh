#!/bin/sh
# A pack never loses the dataset it was pointed at: a refused pack and a
# failing one leave the directory byte for byte as it was, and a --force
# pack killed with SIGKILL at random moments leaves either the whole old
# dataset or the whole new one, which verify passes. Files in the
# directory that are not a dataset's stay; a directory there is refused
# before anything is written; a failed pack into a new path leaves no
# directory behind.
. "$top_srcdir/tests/integration/tap.sh"

[ -x "$TOOLS/mkjpeg" ] || skip_all "tests/tools/mkjpeg not built"
KILLS=${PACK_KILLS:-20}
tmpdir
plan $((19 + 3 * KILLS))

LC_ALL=C
export LC_ALL

# mkset DIR N SEED: an ImageFolder of N JPEGs (320x240) in 4 classes.
mkset() {
	for c in 0 1 2 3; do
		mkdir -p "$1/c$c"
		i=$c
		while [ $i -lt "$2" ]; do
			"$TOOLS/mkjpeg" "$1/c$c/$i.jpg" 320 240 $(($3 + i)) ||
				echo "# mkjpeg failed"
			i=$((i + 4))
		done
	done
}

# digest DIR: one hash of every file under DIR, by name and content.
digest() {
	(cd "$1" && find . -type f | sort | xargs sha256sum | sha256sum) |
		cut -c1-16
}

# beside DIR: what the parent of DIR holds besides the named entries.
leftovers() {
	ls -A "$T/w" | grep -v -x -e d -e dnew -e dsub -e dfail | tr '\n' ' '
}

mkset "$T/src_old" 400 1000
mkset "$T/src_new" 800 5000
# use old|new: point $T/src at that set. The manifest names its source,
# so every pack reads one path.
use() { ln -sfn "$T/src_$1" "$T/src"; }
# Shards of 1 MiB: the old and the new dataset share shard names, so a
# mix of the two would show.
pk() { "$LOADERCTL" pack --shard-size 1M "$@"; }
use old && pk "$T/src" "$T/ref_old" >/dev/null 2>&1
use new && pk "$T/src" "$T/ref_new" >/dev/null 2>&1
old=$(digest "$T/ref_old")
new=$(digest "$T/ref_new")
ok "the old and the new dataset differ, each in several shards" \
	sh -c "[ '$old' != '$new' ] && [ -f '$T/ref_old/shard-00003.lds' ] &&
		[ -f '$T/ref_new/shard-00006.lds' ]"

# --- a refused pack --------------------------------------------------------
mkdir "$T/w"
cp -a "$T/ref_old" "$T/w/d"
out=$(pk "$T/src" "$T/w/d" 2>&1)
st=$?
is "$st" 2 "a pack into a dataset without --force is refused"
like "$out" "already holds a dataset .*pass --force" "it says why and how"
is "$(digest "$T/w/d")" "$old" "the refused pack left the dataset byte for byte"
is "$(leftovers)" "" "and nothing beside it"

# --- a failing source --------------------------------------------------------
mkdir -p "$T/bad"
cp -a "$T/src_new/." "$T/bad/"
echo "not a JPEG" >"$T/bad/c1/zz_broken.jpg"
out=$(pk --force "$T/bad" "$T/w/d" 2>&1)
st=$?
is "$st" 2 "a --force pack of a source with a bad file fails"
like "$out" "zz_broken.jpg" "naming the file"
is "$(digest "$T/w/d")" "$old" "the failed pack left the old dataset byte for byte"
is "$(leftovers)" "" "and nothing beside it"
out=$(pk "$T/bad" "$T/w/dfail/a/b" 2>&1)
ok "a failed pack into a new path makes no directory" test ! -e "$T/w/dfail"

# --- files that are not the dataset's ----------------------------------------
echo "notes" >"$T/w/d/README"
pk --force "$T/src" "$T/w/d" >/dev/null 2>&1
is "$(cat "$T/w/d/README" 2>/dev/null)" "notes" "a file of the user's in the directory stays through a --force pack"
rm "$T/w/d/README"
is "$(digest "$T/w/d")" "$new" "beside the whole new dataset"
is "$(leftovers)" "" "and the replaced directory is gone"
mkdir "$T/w/d/sub"
use old
out=$(pk --force "$T/src" "$T/w/d" 2>&1)
like "$out" "d/sub: a directory inside the dataset directory" \
	"a directory inside the dataset directory is refused, named"
rmdir "$T/w/d/sub"
is "$(digest "$T/w/d")" "$new" "before anything was replaced"

# A dataset reached through a symbolic link is replaced where it points.
ln -s "$T/w/d" "$T/w/dsub"
pk --force "$T/src" "$T/w/dsub" >/dev/null 2>&1
ok "a --force pack through a symbolic link keeps the link" test -L "$T/w/dsub"
is "$(digest "$T/w/d")" "$old" "and replaces the dataset it points to"

# --- killed at random moments ------------------------------------------------
use new
# How long one --force pack of the new set takes here, to spread the
# kills over it and a little past its end.
t0=$(date +%s%N)
pk --force "$T/src" "$T/w/d" >/dev/null 2>&1
ms=$((($(date +%s%N) - t0) / 1000000 + 50))
echo "# a --force pack takes $ms ms here; killing in [0, $((ms * 5 / 4))] ms"
seed=${PACK_KILL_SEED:-$(date +%s)}
echo "# kill moments from seed $seed (PACK_KILL_SEED)"
n_old=0 n_new=0 k=0
while [ $k -lt "$KILLS" ]; do
	k=$((k + 1))
	rm -rf "$T/w/d"
	cp -a "$T/ref_old" "$T/w/d"
	at=$(awk -v s="$seed" -v k="$k" -v m="$ms" \
		'BEGIN { srand((s % 100000) * 100 + k); printf "%.3f", rand() * m * 1.25 / 1000 }')
	# Not through pk: $! must be loaderctl itself, not a subshell.
	"$LOADERCTL" pack --shard-size 1M --force "$T/src" "$T/w/d" \
		>/dev/null 2>&1 &
	pid=$!
	sleep "$at"
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	got=$(digest "$T/w/d")
	case $got in
	"$old") n_old=$((n_old + 1)) ;;
	"$new") n_new=$((n_new + 1)) ;;
	esac
	ok "kill $k at ${at} s: verify passes" "$LOADERCTL" verify "$T/w/d"
	ok "kill $k at ${at} s: the directory is the old dataset or the new one" \
		sh -c "[ '$got' = '$old' ] || [ '$got' = '$new' ]"
	# Only the temporary of this pack may be left, and the next pack
	# removes it (checked below).
	ok "kill $k: nothing but pack temporaries beside it" \
		sh -c "! ls -A '$T/w' | grep -v -x -e d -e dsub | grep -v '^\.d\.pack-'"
done
echo "# after the kills: $n_old old, $n_new new"
use old
pk --force "$T/src" "$T/w/d" >/dev/null 2>&1
is "$(leftovers)" "" "the next pack removes what killed packs left beside the dataset"
is "$(digest "$T/w/d")" "$old" "and packs"
