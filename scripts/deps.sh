#!/bin/sh
# deps.sh - install the Debian packages loaderd needs, only those missing.
#
#   scripts/deps.sh          build and run dependencies, and the bundled data
#   scripts/deps.sh --test   the same plus what the test suite and CI use:
#                            criterion, valgrind, Python 3 with NumPy and
#                            torch (the loader package's tests and its
#                            PyTorch example), venv, pip, setuptools
#                            and wheel (make wheel and the wheel's test
#                            in a fresh venv), keras_preprocessing with
#                            SciPy (its transforms need it), real
#                            photographs (lomiri-wallpapers-16.04: the
#                            colour stages against torchvision), mdb_load
#                            (lmdb-utils: the LMDB pack test's
#                            databases), clang-format
#                            and cppcheck for make lint, and a Ceph
#                            cluster's daemons (ceph-mon, ceph-osd,
#                            radosgw) and curl: the S3 store of the
#                            s3:// tests, started on loopback
#                            (tests/integration/ceph.sh)
#   scripts/deps.sh --bench  the same plus what the image benchmarks use:
#                            torch, torchvision, PIL and NumPy (the peer and
#                            bench/mkcorpus.py), keras_preprocessing with
#                            SciPy (the Keras peers of bench/keras_flow.sh
#                            and bench/augment.sh) and three wallpaper
#                            packages of real photographs (the corpus's
#                            sources)
#   scripts/deps.sh --fuzz   the --test set plus clang, whose libFuzzer
#                            make fuzz builds the fuzz targets with
#   scripts/deps.sh --deb    the same as with no option plus what the
#                            Debian packages are built and checked with
#                            (dpkg-buildpackage -us -uc -b, debian/, and
#                            scripts/test-packages.sh): dpkg-dev,
#                            debhelper, dh-python, python3, lintian
#
# Idempotent: with everything present it changes nothing and needs no root.
set -eu

pkgs="gcc make libc6-dev autoconf automake libtool pkg-config git
liburing-dev libuv1-dev libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev libzstd-dev liblmdb-dev
libxxhash-dev libjansson-dev zlib1g-dev libsystemd-dev libopenblas-dev
libcurl4-openssl-dev libssl-dev
dataset-fashion-mnist tar gzip"
test_pkgs="libcriterion-dev clang-format cppcheck valgrind
python3 python3-numpy python3-torch python3-torchvision python3-pil lmdb-utils
python3-venv python3-pip python3-setuptools python3-wheel
python3-keras-preprocessing python3-scipy lomiri-wallpapers-16.04
ceph-mon ceph-osd radosgw curl"
bench_pkgs="fio python3-torch python3-torchvision python3-pil python3-numpy libspng-dev
python3-keras-preprocessing python3-scipy
lomiri-wallpapers-16.04 mate-backgrounds plasma-workspace-wallpapers"
fuzz_pkgs="clang"
deb_pkgs="dpkg-dev debhelper dh-python python3 lintian"

case "${1:-}" in
--test) pkgs="$pkgs $test_pkgs" ;;
--bench) pkgs="$pkgs $bench_pkgs" ;;
--fuzz) pkgs="$pkgs $test_pkgs $fuzz_pkgs" ;;
--deb) pkgs="$pkgs $deb_pkgs" ;;
"") ;;
*) echo "usage: $0 [--test|--bench|--fuzz|--deb]" >&2; exit 2 ;;
esac

missing=
for p in $pkgs; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "deps.sh: installing:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then
	sudo=
elif command -v sudo >/dev/null 2>&1; then
	sudo=sudo
else
	echo "deps.sh: need root or sudo to install:$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
