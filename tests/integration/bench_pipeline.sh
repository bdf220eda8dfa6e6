#!/bin/sh
# loaderctl bench pipeline: usage errors (exit 2, the option or file
# named); a run over whole epochs of a tiny JPEG dataset that delivers
# exactly its samples and reports every stage; the bottleneck named;
# the page cache dropped and filled; O_DIRECT; the sizing arithmetic of
# the JSON against the formula of loaderctl(1).
. "$top_srcdir/tests/integration/tap.sh"

MKJPEG=$TOOLS/mkjpeg
PY=/usr/bin/python3
tmpdir
plan 22

B="$LOADERCTL bench pipeline"

out=$($B 2>&1)
is "$?" 2 "no DATASET: exit 2"
like "$out" 'a DATASET to read' "... and says what is missing"
out=$($B "$T/none" 2>&1)
like "$out" "$T/none/manifest.json: no manifest" "a missing dataset: the file named"
out=$($B --batch 0 "$T/none" 2>&1)
like "$out" '--batch: "0" is not an integer in \[1, 65536\]' "--batch 0: the option and its range"
out=$($B --cold --warm "$T/none" 2>&1)
like "$out" '--cold or --warm, not both' "--cold with --warm: refused"

# A JPEG dataset: 24 images in two classes, two shards.
mkdir -p "$T/img/a" "$T/img/b"
i=0
while [ $i -lt 24 ]; do
	"$MKJPEG" "$T/img/$( [ $((i % 2)) -eq 0 ] && echo a || echo b)/$i.jpg" 640 480 $i
	i=$((i + 1))
done
"$LOADERCTL" pack --shard-size 600K "$T/img" "$T/jpg" >/dev/null
out=$($B --outputs nosuch "$T/jpg" 2>&1)
like "$out" 'no field "nosuch" in the dataset' "--outputs with an unknown field: named"
out=$($B --outputs image:half "$T/jpg" 2>&1)
like "$out" '"image:half": the cast is unit or f32' "--outputs with an unknown cast: named"

# get KEY...: a value of the JSON in $T/j.json.
get() {
	"$PY" -c '
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v)' "$T/j.json" "$@"
}
# skip REASON: this check cannot run here.
skip() {
	tap_n=$((tap_n + 1))
	echo "ok $tap_n # SKIP $*"
}
if ! [ -x "$PY" ]; then
	while [ $tap_n -lt 22 ]; do skip "no $PY to read the JSON"; done
	exit 0
fi

$B --json --epochs 3 --batch 5 --threads 1 --warm --outputs image,label \
	"$T/jpg" >"$T/j.json" 2>"$T/err"
is "$?" 0 "a run of 3 epochs over 24 JPEGs succeeds"
is "$(get samples)" 72 "it delivers every sample of every epoch (3 x 24), no more"
is "$(get batches)" 15 "... in 3 x 5 batches of 5 (the last one short)"
ok "every stage is reported: decode, augment and emit CPU time, read wait" \
	"$PY" -c '
import json, sys
s = json.load(open(sys.argv[1]))["stages"]
sys.exit(not (s["decode_cpu_s"] > 0 and s["augment_cpu_s"] > 0 and
              s["emit_cpu_s"] > 0 and s["read_wait_s"] >= 0 and
              s["slot_wait_s"] >= 0))' "$T/j.json"
is "$(get bottleneck resource)" decode "JPEG decoding of a cached dataset: the bottleneck is decode"
ok "the shards were all in the page cache after --warm" \
	"$PY" -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["resident_before"] < 0.99)' "$T/j.json"
ok "bytes read and reads counted (every shard's records, each epoch)" \
	"$PY" -c '
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(not (j["bytes_read"] > 0 and 0 < j["reads"] <= 72))' "$T/j.json"

out=$($B --epochs 1 --batch 8 --outputs image,label "$T/jpg" 2>&1)
like "$out" '^bottleneck: decode-bound: .* cores decoding .* in (JPEG decode \(libjpeg-turbo\)|crop and resize|normalize and cast)' \
	"the text names the bottleneck and the stage that took most"
like "$out" '^  decoding +decode [0-9.]+%, augment [0-9.]+%, emit [0-9.]+%' "... and the split between stages"

# The page cache: dropped by --cold (not on tmpfs, where the pages are the
# file), and O_DIRECT where the file system has it.
if [ "$(stat -f -c %T "$T")" = tmpfs ]; then
	skip "$T is on tmpfs: its pages cannot be dropped"
	skip "$T is on tmpfs: no O_DIRECT"
else
	$B --json --epochs 1 --cold --outputs image,label "$T/jpg" >"$T/j.json" 2>/dev/null
	ok "after --cold, at most half of the shards is cached" \
		"$PY" -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["resident_before"] > 0.5)' "$T/j.json"
	$B --json --epochs 1 --direct --outputs image,label "$T/jpg" >"$T/j.json" 2>"$T/err"
	is "$(get samples)" 24 "--direct: one epoch read with O_DIRECT, every sample"
fi

# Sizing: the figures obey the formula of loaderctl(1).
$B --json --epochs 1 --batch 4 --step-ms 40 --host-cores 0.5 --au 80 --probe-seconds 0.2 \
	--outputs image,label "$T/jpg" >"$T/j.json" 2>/dev/null
ok "sizing: a(N) = min(1, C / (N (h + r c))), N at AU >= t = floor(C / (t (h + r c))); a cached dataset: storage does not bind" \
	"$PY" -c '
import json, math, sys
j = json.load(open(sys.argv[1]))
s = j["sizing"]
c = j["cpu_seconds"] / j["samples"]
r = 4 / 0.040
need = 0.5 + r * c
close = lambda x, y: abs(x - y) <= 1e-4 * max(abs(x), abs(y), 1e-9)
ok = close(s["cpu_s_per_sample"], c) and s["limit"] == "decode CPU"
for n, a in enumerate(s["au_predicted"], 1):
    ok = ok and close(a, min(1, j["cores"] / (n * need)))
ok = ok and close(s["accelerators_cpu"], j["cores"] / (0.8 * need))
st = s["storage"]
ok = ok and ("not_probed" in st or (st["iops"] > 0 and st["bw_bytes_per_s"] > 0
                                    and not st["binds"]))
ok = ok and s["accelerators"] == math.floor(s["accelerators_max"] + 1e-9)
sys.exit(not ok)' "$T/j.json"

# Through a running loaderd, as a trainer would.
start_daemon "$T/d.sock" --threads 1
$B --json --socket "$T/d.sock" --epochs 2 --batch 5 --outputs image,label \
	"$T/jpg" >"$T/j.json" 2>"$T/err"
is "$(get mode) $(get samples)" "daemon 48" "--socket: two epochs through loaderd, every sample"
ok "--socket: the handoff measured (loader_next p50 and p99), the daemon's stage times" \
	"$PY" -c '
import json, sys
j = json.load(open(sys.argv[1]))
s = j["stages"]
sys.exit(not (0 < s["next_p50_us"] <= s["next_p99_us"] and
              s["decode_s"] > 0 and j["bytes_read"] > 0))' "$T/j.json"
out=$($B --socket "$T/none.sock" "$T/jpg" 2>&1)
like "$out" "connect $T/none.sock: .*is loaderd running" "--socket without a daemon: the socket named"
