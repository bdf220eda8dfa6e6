#!/bin/sh
# demo.sh - the main job: pack the bundled Fashion-MNIST into sharded
# datasets, show them, and verify every record.
#
# Installs missing Debian packages first (scripts/deps.sh), then builds.
# Output goes to $LOADERD_DEMO_DIR (default: ./var/fashion-mnist).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh"
"$top/scripts/build.sh" build
ctl=$top/build/loaderctl
src=/usr/share/datasets/fashion-mnist
out=${LOADERD_DEMO_DIR:-$top/var/fashion-mnist}
classes='T-shirt/top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Ankle boot'

echo "== pack $src -> $out (zstd with a trained dictionary)"
"$ctl" pack --force --compress zstd --dict --classes "$classes" "$src" "$out"
echo "== inspect $out/train"
"$ctl" inspect "$out/train"
echo "== verify $out/train $out/test"
"$ctl" verify "$out/train" "$out/test"
