#!/bin/sh
# loaderctl mix create and mix inspect (ctl/ctl_mix.c) on two packed
# Fashion-MNIST splits (10000 and 60000 samples) and tars read in place:
# a file for each kind of member, paths stored relative to the file or
# absolute, the counts inspect prints (a stream's, pipeline/stream/
# mixture.h), --json, s3:// members not read, refusals that name the
# argument, or the file's member and key, and an existing file left intact.
. "$top_srcdir/tests/integration/tap.sh"
need_fmnist
tmpdir
plan 57

"$LOADERCTL" pack --split test "$src" "$T/fm" >/dev/null &&
	"$LOADERCTL" pack --split train "$src" "$T/fm" >/dev/null ||
	skip_all "packing Fashion-MNIST failed"
cd "$T" || exit 99

# member LINES N: the line of member N in inspect's table, its fields
# squeezed to single spaces.
member() { printf '%s\n' "$1" | sed -n "s/^ *$2  //p" | tr -s ' '; }

# Proportions, the epoch the members' sizes added up: 70000.
ok "create with proportions" \
	"$LOADERCTL" mix create mix.json fm/test=0.7 \
	"fm/train:proportion=0.3:pipeline=decode | center 224 | f32"
f=$(tr -d ' \n' <mix.json)
like "$f" '^\{"format":"loaderd-mixture","version":1,"epoch_size":0,"members":\[' \
	"the file's format, version and epoch_size"
like "$f" '\{"path":"fm/test","proportion":0.7\},\{"path":"fm/train","proportion":0.3,"pipeline":"decode\|center224\|f32"\}' \
	"members: paths under the file's directory stored relative, the pipeline kept"
out=$("$LOADERCTL" mix inspect mix.json)
is "$(member "$out" 0)" "proportion 0.7 10000 49000 70.00% fm/test (dataset)" \
	"inspect: member 0 gives 49000 of 70000"
is "$(member "$out" 1)" "proportion 0.3 60000 21000 30.00% fm/train (dataset)" \
	"inspect: member 1 gives 21000"
like "$out" 'pipeline: decode \| center 224 \| f32' "inspect shows member 1's pipeline"
like "$out" '^epoch: +70000 samples \(the members' "inspect: E is the members' samples added up"
out=$("$LOADERCTL" mix inspect --json mix.json | tr -d ' \n')
like "$out" '"samples":70000,' "--json: the epoch's samples"
like "$out" '"path":"fm/test","resolved":"fm/test","format":"dataset","kind":"proportion","value":0.7,"pipeline":null,"samples":10000,"count":49000,"share":0.7,"copies":4,"remainder":9000' \
	"--json: member 0's counts, whole copies and remainder"

# An epoch size given: 12345 split evenly, the odd sample to member 0.
ok "create with --epoch-size" \
	"$LOADERCTL" mix create --epoch-size 12345 even.json fm/test=1 fm/train=1
out=$("$LOADERCTL" mix inspect even.json)
is "$(member "$out" 0 | cut -d' ' -f4) $(member "$out" 1 | cut -d' ' -f4)" \
	"6173 6172" "an epoch of 12345: 6173 and 6172"
like "$out" '^epoch: +12345 samples' "inspect: E is the epoch size"

# repeat (fractional and whole), choose, and a bare path (repeat 1).
ok "create with repeat and choose" \
	"$LOADERCTL" mix create rc.json fm/test:repeat=2.5 fm/train:choose=1000
f=$(tr -d ' \n' <rc.json)
like "$f" '"version":1,"members":\[\{"path":"fm/test","repeat":2.5\},\{"path":"fm/train","choose":1000\}\]' \
	"repeat and choose stored, no epoch_size without proportions"
out=$("$LOADERCTL" mix inspect rc.json)
is "$(member "$out" 0)" "repeat 2.5 10000 25000 96.15% fm/test (dataset)" \
	"repeat 2.5 of 10000 gives 25000"
is "$(member "$out" 1)" "choose 1000 60000 1000 3.85% fm/train (dataset)" \
	"choose 1000 gives 1000"
like "$out" '^epoch: +26000 samples' "E is what they give"
ok "create with a bare path (repeat 1) and repeat 0.5" \
	"$LOADERCTL" mix create bare.json fm/test fm/train:repeat=0.5
out=$("$LOADERCTL" mix inspect bare.json)
is "$(member "$out" 0 | cut -d' ' -f1-4) $(member "$out" 1 | cut -d' ' -f4)" \
	"repeat 1 10000 10000 30000" "repeat 1 and 0.5: 10000 and 30000"

# Tars read in place: a directory of them and a glob, 30 samples.
mkdir tsrc tars
i=0
while [ $i -lt 30 ]; do
	k=$(printf 's%04d' $i)
	echo $((i % 5)) >"tsrc/$k.cls"
	echo "text $i" >"tsrc/$k.txt"
	i=$((i + 1))
done
(cd tsrc && ls | sort | head -40 | tar -cf ../tars/a-000.tar -T - &&
	ls | sort | tail -20 | tar -cf ../tars/a-001.tar -T -)
ok "create with tars: a directory, a file and a glob" \
	"$LOADERCTL" mix create tars.json tars:choose=7 \
	tars/a-000.tar:repeat=2 'tars/a-*.tar'
like "$(tr -d ' \n' <tars.json)" '"path":"tars/a-\*.tar","repeat":1' \
	"the glob is stored as a pattern"
out=$("$LOADERCTL" mix inspect tars.json)
is "$(member "$out" 1 | cut -d' ' -f3-4) $(member "$out" 2 | cut -d' ' -f3-4)" \
	"20 40 30 30" "inspect scans the tars: 20 samples twice, 30 once"

# Paths outside the file's directory are absolute; relative ones are read
# from the file's directory wherever inspect runs.
mkdir sub
ok "create a file in another directory" \
	"$LOADERCTL" mix create sub/abs.json fm/test:choose=5 s3://bucket/prefix:choose=3
like "$(tr -d ' \n' <sub/abs.json)" "\"path\":\"$(cd "$T" && pwd -P)/fm/test\"" \
	"a path outside the file's directory is stored absolute"
like "$(tr -d ' \n' <sub/abs.json)" '"path":"s3://bucket/prefix","choose":3' \
	"an s3:// member is stored as given"
out=$("$LOADERCTL" mix inspect sub/abs.json)
is "$(member "$out" 1 | cut -d' ' -f1-7)" "choose 3 not read ? ? s3://bucket/prefix" \
	"an s3:// member's samples are not read"
like "$out" '^epoch: +not computed: member 1 is in an object store' \
	"and the epoch is not computed"
out=$(cd / && "$LOADERCTL" mix inspect "$T/mix.json")
like "$out" '10000 +49000 +70.00% +fm/test' "relative paths are read from the file's directory"
out=$(cd / && "$LOADERCTL" mix inspect --json "$T/mix.json" | tr -d ' \n')
like "$out" "\"path\":\"fm/test\",\"resolved\":\"$T/fm/test\"," \
	"--json: the path as stored, and where it was read"

# Refusals: each names the argument, exits 2, and writes nothing.
refused() {
	desc=$1
	want=$2
	shift 2
	out=$("$LOADERCTL" mix create "$@" 2>&1)
	like "$? $out" "^2 loaderctl mix create: $want" "$desc"
}
refused "a bad proportion is named" \
	'"fm/test=abc": proportion "abc" is not a number above 0' new.json fm/test=abc
refused "a proportion of 0 is refused" \
	'"fm/test=0": proportion "0" is not a number above 0' new.json fm/test=0
refused "a negative repeat is refused" \
	'"fm/test:repeat=-1": repeat "-1" is not a number above 0' new.json fm/test:repeat=-1
refused "a choose that is not whole is refused" \
	'"fm/test:choose=2.5": choose "2.5" is not a whole number' new.json fm/test:choose=2.5
refused "a bare path beside a proportion is refused" \
	'"fm/train": repeat 1 \(a bare path\) beside "fm/test=0.5"' new.json fm/test=0.5 fm/train
refused "a proportion beside choose is refused" \
	'"fm/train=0.5": proportion 0.5 beside "fm/test:choose=9"' new.json fm/test:choose=9 fm/train=0.5
refused "--epoch-size without proportions is refused" \
	'--epoch-size goes with proportions' --epoch-size 10 new.json fm/test
refused "a missing dataset is named" \
	'"nothere=1": nothere: No such file or directory' new.json fm/test=1 nothere=1
refused "a directory that is no dataset is named" \
	'"sub:choose=3": sub: not a dataset' new.json sub:choose=3
refused "a bad pipeline is named" \
	'"fm/test:pipeline=decode \| bogus": pipeline: column 10' new.json 'fm/test:pipeline=decode | bogus'
refused "an epoch of no samples is refused" \
	'mixture: an epoch of no samples' new.json fm/test:repeat=0.00001
is "$(find . -maxdepth 1 -name 'new.json*')" "" "no refused create leaves a file"

# An existing file is kept without --force, replaced with it.
sum=$(md5sum <mix.json)
refused "an existing file is refused without --force" \
	'mix.json exists; pass --force to replace it' mix.json fm/test
is "$(md5sum <mix.json)" "$sum" "and left as it was"
refused "a refused member leaves an existing file with --force as it was" \
	'"nothere": nothere' --force mix.json nothere
is "$(md5sum <mix.json)" "$sum" "and left as it was"
ok "--force replaces it" "$LOADERCTL" mix create --force mix.json fm/test:choose=3
like "$(tr -d ' \n' <mix.json)" '"members":\[\{"path":"fm/test","choose":3\}\]' \
	"with the new members"
is "$(find . -maxdepth 1 -name 'mix.json.*')" "" "no temporary file is left"

# inspect reads the file as libloader does (client/mixfile.c): its errors
# name the file, the member and the key.
bad() {
	printf '%s\n' "$1" >bad.json
	out=$("$LOADERCTL" mix inspect bad.json 2>&1)
	like "$? $out" "^2 loaderctl mix inspect: bad.json: $2" "$3"
}
hdr='"format": "loaderd-mixture", "version": 1'
bad "{$hdr, \"members\": [{\"path\": \"fm/test\", \"proportion\": 1}, {\"path\": \"fm/train\", \"repeat\": 2}]}" \
	'member 1: "repeat" beside member 0.s "proportion": either every member' "inspect: mixed kinds name the member"
bad "{$hdr, \"members\": [{\"path\": \"fm/test\", \"repeat\": 0}]}" \
	'member 0: "repeat" is not a number > 0' "inspect: a bad value names the key"
bad "{$hdr, \"members\": [{\"path\": \"fm/test\", \"choose\": 2, \"repeat\": 1}]}" \
	'member 0: "repeat" and "choose": give one of' "inspect: two kinds are refused"
bad "{$hdr, \"members\": [{\"path\": \"nothere\", \"choose\": 2}]}" \
	'member 0: "path": nothere: No such file' "inspect: a missing member is named"
bad "{$hdr, \"epoch_size\": 5, \"members\": [{\"path\": \"fm/test\", \"choose\": 2}]}" \
	'"epoch_size": 5 goes with proportions' "inspect: epoch_size without proportions"
bad '{"format": "loaderd-mixture", "version": 2, "members": []}' \
	'"version" is not 1' "inspect: another version is refused"
bad "{$hdr, \"members\": [{\"path\": \"fm/test\", \"choose\": 281474976710657}]}" \
	'member 0: "choose" is not a whole number from 1 to 2\^48' "inspect: a choose past 2^48 is refused"
bad "{$hdr, \"members\": [{\"path\": \"fm/test\", \"choose\": 2, \"pipeline\": \"decode | bogus\"}]}" \
	'member 0: "pipeline": column 10' "inspect: a bad pipeline names the member"
bad "{$hdr, \"members\": [{\"path\": \"fm/test\", \"choose\": 2,}]}" \
	'line 1 column [0-9]+: ' "inspect: a JSON error names the line and column"
