#!/bin/sh
# png_libs.sh - why pngd decodes with libpng: Debian 12's libpng against
# its libspng, on the same photographs saved as PNG (20 of the wallpapers
# bench/mkcorpus.py takes, at 500 and at 1600 pixels wide, by Pillow),
# each library decoding them to RGB on one thread. Prints, per width,
# the seconds of each (median of 7 interleaved rounds) and libpng's
# time over libspng's (below 1: libpng is faster).
#
#   sh bench/png_libs.sh            (scripts/deps.sh --bench installs
#                                    libspng-dev, Pillow, the wallpapers)
set -eu
BENCH=png_libs
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/common.sh"
for m in spng libpng; do
	pkg-config --exists $m || skip "$m not installed (scripts/deps.sh --bench)"
done
/usr/bin/python3 -c 'import PIL' 2>/dev/null || skip "Pillow not installed"
ls /usr/share/backgrounds/*.jpg >/dev/null 2>&1 || skip "no wallpapers in /usr/share/backgrounds"
w=$(mktemp -d "${TMPDIR:-/var/tmp}/loaderd-bench.XXXXXX")
trap 'rm -rf "$w"' EXIT
cc -O2 -o "$w/png_libs" "$top/bench/png_libs.c" \
	$(pkg-config --cflags --libs spng libpng)
/usr/bin/python3 - "$w" <<'PY'
import glob, sys
from PIL import Image
for i, f in enumerate(sorted(glob.glob("/usr/share/backgrounds/*.jpg"))[:20]):
    im = Image.open(f).convert("RGB")
    for wd in (500, 1600):
        im.resize((wd, im.height * wd // im.width), Image.BILINEAR).save(
            "%s/w%d_%02d.png" % (sys.argv[1], wd, i))
PY
echo "width 500, 5 passes:  $("$w/png_libs" 5 "$w"/w500_*.png)"
echo "width 1600, 1 pass:   $("$w/png_libs" 1 "$w"/w1600_*.png)"
