#!/bin/sh
# deps-bench.sh - install the Debian packages the image benchmarks need,
# only those missing.
#
#   scripts/deps-bench.sh
#
# On top of scripts/deps.sh (run first: the build needs libturbojpeg for
# bench/jpeg_decode), this brings:
#   python3-torch python3-torchvision   the peer, bench/peer_torch.py
#   python3-pil python3-numpy           bench/mkcorpus.py and the peer
#   lomiri-wallpapers-16.04 mate-backgrounds plasma-workspace-wallpapers
#                                       real photographs (JPEG, 1280x1024 to
#                                       5312x2988) that bench/mkcorpus.py
#                                       crops into an ImageNet-like corpus
#
# Idempotent: with everything present it changes nothing and needs no root.
set -eu

case "${1:-}" in
"") ;;
*) echo "usage: $0" >&2; exit 2 ;;
esac

"$(dirname "$0")/deps.sh"

pkgs="python3-torch python3-torchvision python3-pil python3-numpy
lomiri-wallpapers-16.04 mate-backgrounds plasma-workspace-wallpapers"

missing=
for p in $pkgs; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "deps-bench.sh: installing:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then
	sudo=
elif command -v sudo >/dev/null 2>&1; then
	sudo=sudo
else
	echo "deps-bench.sh: need root or sudo to install:$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
