#!/bin/sh
# demo.sh - the main job: pack the bundled Fashion-MNIST into shards, start
# loaderd, train the reference MLP (loader-train) on batches streamed from
# the daemon, print the accuracy line, stop the daemon.
#
# Installs missing Debian packages first (scripts/deps.sh), then builds.
# Data goes to $LOADERD_DEMO_DIR (default: ./var/fashion-mnist). Extra
# arguments go to loader-train (e.g. --epochs 5). Exit status: that of
# loader-train (0: the target test accuracy, 0.8833, was reached).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh"
"$top/scripts/build.sh" build
b=$top/build
src=/usr/share/datasets/fashion-mnist
out=${LOADERD_DEMO_DIR:-$top/var/fashion-mnist}
sock=$out/loaderd.sock
classes='T-shirt/top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Ankle boot'

if ! "$b/loaderctl" verify --quick "$out/train" "$out/test" >/dev/null 2>&1; then
	echo "== pack $src -> $out (zstd with a trained dictionary)"
	"$b/loaderctl" pack --force --compress zstd --dict --classes "$classes" \
		"$src" "$out"
fi
"$b/loaderctl" inspect "$out/train" | head -4

echo "== start loaderd on $sock"
"$b/loaderd" -f --socket "$sock" --state-dir "$out/state" \
	--cache-dir "$out/cache" --log-level warn &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null' EXIT
i=0
while [ ! -S "$sock" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done

echo "== train loader-train (MLP 784-256-128-10, cblas_sgemm) on batches from the daemon"
rc=0
"$b/loader-train" --data "$out" --socket "$sock" --early-stop "$@" || rc=$?
echo "== stop loaderd"
kill $daemon
wait $daemon || true
trap - EXIT
exit $rc
