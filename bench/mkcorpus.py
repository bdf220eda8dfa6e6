#!/usr/bin/python3
"""Generate an ImageNet-like JPEG corpus in ImageFolder layout.

Each image is a random crop of a real photograph (from the Debian packages
that scripts/deps.sh --bench installs), resized to an ImageNet-like size
(mostly 500x375, sometimes portrait, 3:2 or square, each side jittered a
few pixels) and saved as baseline JPEG, quality 90, 4:2:0.  The result,
OUT/class_XX/img_NNNNN.jpg, feeds both torchvision's ImageFolder and
`loaderctl pack`.

The output is a pure function of the arguments (for one Pillow, libjpeg
and NumPy): every image draws its random numbers from its own generator,
seeded from (--seed, index), so the bytes do not depend on --jobs.

The crop size is set by the downscale factor (source pixels per output
pixel, --zoom).  Photographs at full camera resolution carry little detail
per pixel; downscaling them concentrates it, so a larger factor gives
larger files.  But wallpapers are chosen for calm: sky, bokeh, soft
focus.  Even the whole photograph downscaled gives only ~45 KB on average
at quality 90, against ImageNet's ~110 KB of busy consumer snapshots.  So
each image is sharpened (unsharp mask, radius 1, as cameras and photo
sites do) and given luma grain (Gaussian, like a high-ISO sensor), each of
random strength.  Huffman decoding, most of a JPEG's decode time, scales
with the coded bytes, so matching the mean file size matters more for the
benchmarks than where the entropy comes from (grain does cost roughly a
tenth more decode time per byte than the photographs' own detail).  The
defaults give 2000 images of mean 102 KB (73-157 KB).
"""

import argparse
import glob
import multiprocessing
import os
import sys

import numpy as np
from PIL import Image, ImageFilter

# Photographs only (the illustrations these packages also ship are left
# out), at the largest size each package ships.
DEFAULT_SOURCES = (
    # lomiri-wallpapers-16.04: Ubuntu wallpaper contest photographs.
    "/usr/share/backgrounds/Bridge_by_Sander_Klootwijk.jpg",
    "/usr/share/backgrounds/Dragonfly_by_Bolly.jpg",
    "/usr/share/backgrounds/Picture_0B_by_freespace.jpg",
    "/usr/share/backgrounds/Picture_1A_by_freespace.jpg",
    "/usr/share/backgrounds/Wine_by_Jakkub_Mede.jpg",
    "/usr/share/backgrounds/aitzgorri_by_Aitzol_Berasategi.jpg",
    "/usr/share/backgrounds/analogpattern_by_Peter_Nerlich.jpg",
    "/usr/share/backgrounds/free_by_Peter_Nerlich.jpg",
    "/usr/share/backgrounds/friends_by_Aitzol_Berasategi.jpg",
    "/usr/share/backgrounds/greentock_by_Peter_Nerlich.jpg",
    "/usr/share/backgrounds/life_by_Aitzol_Berasategi.jpg",
    "/usr/share/backgrounds/picosdeeuropa_by_Aitzol_Berasategi.jpg",
    "/usr/share/backgrounds/seeding_by_Clements_Engelhardt.jpg",
    "/usr/share/backgrounds/sunset_by_Aitzol_Berasategi.jpg",
    # mate-backgrounds: the "nature" set.
    "/usr/share/backgrounds/mate/nature/Aqua.jpg",
    "/usr/share/backgrounds/mate/nature/Blinds.jpg",
    "/usr/share/backgrounds/mate/nature/Dune.jpg",
    "/usr/share/backgrounds/mate/nature/FreshFlower.jpg",
    "/usr/share/backgrounds/mate/nature/Garden.jpg",
    "/usr/share/backgrounds/mate/nature/GreenMeadow.jpg",
    "/usr/share/backgrounds/mate/nature/LadyBird.jpg",
    "/usr/share/backgrounds/mate/nature/RainDrops.jpg",
    "/usr/share/backgrounds/mate/nature/Storm.jpg",
    "/usr/share/backgrounds/mate/nature/TwoWings.jpg",
    "/usr/share/backgrounds/mate/nature/Wood.jpg",
    "/usr/share/backgrounds/mate/nature/YellowFlower.jpg",
    # plasma-workspace-wallpapers: the photographs among them.
    "/usr/share/wallpapers/BytheWater/contents/images/2560x1600.jpg",
    "/usr/share/wallpapers/ColdRipple/contents/images/2560x1600.jpg",
    "/usr/share/wallpapers/ColorfulCups/contents/images/2560x1600.jpg",
    "/usr/share/wallpapers/DarkestHour/contents/images/2560x1600.jpg",
    "/usr/share/wallpapers/EveningGlow/contents/images/2560x1600.jpg",
    "/usr/share/wallpapers/FallenLeaf/contents/images/2560x1600.jpg",
    "/usr/share/wallpapers/Grey/contents/images/2560x1600.jpg",
    "/usr/share/wallpapers/Kite/contents/images/2560x1600.jpg",
    "/usr/share/wallpapers/OneStandsOut/contents/images/2560x1600.jpg",
    "/usr/share/wallpapers/Path/contents/images/2560x1600.jpg",
    "/usr/share/wallpapers/summer_1am/contents/images/2560x1600.jpg",
)

# ImageNet's common sizes (width, height) and roughly how often they occur:
# most photos are 4:3 landscape at 500 pixels wide.
SIZES = ((500, 375), (375, 500), (500, 333), (333, 500), (400, 400))
SIZE_WEIGHTS = (0.55, 0.15, 0.18, 0.05, 0.07)


def parse_args(argv):
    """Parse the command line; return the argparse namespace."""
    p = argparse.ArgumentParser(
        description="Generate an ImageNet-like JPEG corpus "
        "(OUT/class_XX/img_NNNNN.jpg) from real photographs.")
    p.add_argument("out", help="output directory (created; must be empty "
                   "or absent)")
    p.add_argument("--count", type=int, default=2000,
                   help="number of images (default 2000)")
    p.add_argument("--classes", type=int, default=10,
                   help="number of class folders (default 10)")
    p.add_argument("--seed", type=int, default=0,
                   help="random seed (default 0)")
    p.add_argument("--src", action="append", metavar="PATH",
                   help="source photograph, or a directory searched for "
                   "*.jpg/*.jpeg/*.png; repeatable (default: the "
                   "photographs of the packages scripts/deps.sh --bench installs)")
    p.add_argument("--zoom", type=float, nargs=2, default=(3.0, 5.0),
                   metavar=("MIN", "MAX"),
                   help="range of the downscale factor, source pixels per "
                   "output pixel, capped by the source size (default 3 5)")
    p.add_argument("--sharpen", type=float, nargs=2, default=(200, 350),
                   metavar=("MIN", "MAX"),
                   help="range of the unsharp mask strength in percent, "
                   "radius 1; 0 0 turns it off (default 200 350)")
    p.add_argument("--grain", type=float, nargs=2, default=(15, 21),
                   metavar=("MIN", "MAX"),
                   help="range of the luma grain's standard deviation, in "
                   "8-bit levels; 0 0 turns it off (default 15 21)")
    p.add_argument("--quality", type=int, default=90,
                   help="JPEG quality (default 90)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="worker processes (default: all cores)")
    a = p.parse_args(argv)
    if a.count < 1 or a.classes < 1 or a.jobs < 1:
        p.error("--count, --classes and --jobs must be positive")
    if not 1.0 <= a.zoom[0] <= a.zoom[1]:
        p.error("--zoom needs 1 <= MIN <= MAX")
    for name in ("sharpen", "grain"):
        lo, hi = getattr(a, name)
        if not 0 <= lo <= hi:
            p.error("--%s needs 0 <= MIN <= MAX" % name)
    return a


def find_sources(srcs):
    """Expand the --src list (or the defaults) into sorted image paths."""
    if not srcs:
        missing = [s for s in DEFAULT_SOURCES if not os.path.isfile(s)]
        if missing:
            sys.exit("mkcorpus: %d source photographs missing (e.g. %s); "
                     "run scripts/deps.sh --bench" % (len(missing), missing[0]))
        return list(DEFAULT_SOURCES)
    paths = []
    for s in srcs:
        if os.path.isdir(s):
            for ext in ("jpg", "jpeg", "png", "JPG", "JPEG", "PNG"):
                paths += glob.glob(os.path.join(s, "**", "*." + ext),
                                   recursive=True)
        elif os.path.isfile(s):
            paths.append(s)
        else:
            sys.exit("mkcorpus: no such file or directory: %s" % s)
    paths = sorted(set(p for p in paths if os.path.getsize(p) > 0))
    if not paths:
        sys.exit("mkcorpus: no source images found")
    return paths


def plan(args, nsrc):
    """Draw every image's parameters; return one list of plans per source.

    A plan is (index, class, width, height, zoom, fx, fy, flip, sharpen,
    grain, seed): fx and fy place the crop within the room the source
    leaves, in [0, 1); seed drives the grain.
    """
    per_src = [[] for _ in range(nsrc)]
    for i in range(args.count):
        rng = np.random.default_rng([args.seed, i])
        src = int(rng.integers(nsrc))
        w, h = SIZES[rng.choice(len(SIZES), p=SIZE_WEIGHTS)]
        # Small jitter of each side, as ImageNet's sizes scatter around
        # the common ones (500x374, 500x357, ...).
        w = int(w + rng.integers(-6, 7))
        h = int(h + rng.integers(-6, 7))
        zoom = float(rng.uniform(args.zoom[0], args.zoom[1]))
        fx, fy = float(rng.random()), float(rng.random())
        flip = bool(rng.random() < 0.5)
        sharpen = float(rng.uniform(args.sharpen[0], args.sharpen[1]))
        grain = float(rng.uniform(args.grain[0], args.grain[1]))
        seed = int(rng.integers(2**63))
        per_src[src].append((i, i % args.classes, w, h, zoom, fx, fy, flip,
                             sharpen, grain, seed))
    return per_src


def render(im, p):
    """Crop and resize source image im according to plan p."""
    _, _, w, h, zoom, fx, fy, flip, sharpen, grain, seed = p
    sw, sh = im.size
    # The crop has the output's aspect; shrink the zoom when the source
    # is too small for it.
    zoom = min(zoom, sw / w, sh / h)
    cw, ch = min(w * zoom, sw), min(h * zoom, sh)
    x0 = fx * max(sw - cw, 0.0)
    y0 = fy * max(sh - ch, 0.0)
    out = im.resize((w, h), Image.LANCZOS, box=(x0, y0, x0 + cw, y0 + ch))
    if flip:
        out = out.transpose(Image.FLIP_LEFT_RIGHT)
    if sharpen > 0:
        out = out.filter(ImageFilter.UnsharpMask(radius=1,
                                                 percent=int(sharpen),
                                                 threshold=0))
    if grain > 0:
        # One value per pixel for all three channels: grain in luma only,
        # which 4:2:0 would otherwise mostly average away.
        rng = np.random.default_rng(seed)
        a = np.asarray(out, dtype=np.float32)
        a = a + rng.normal(0.0, grain, (h, w, 1)).astype(np.float32)
        out = Image.fromarray(np.clip(a + 0.5, 0, 255).astype(np.uint8))
    return out


def work(job):
    """Render all the images planned from one source; return their sizes."""
    path, plans, out, width, quality = job
    with Image.open(path) as f:
        im = f.convert("RGB")
    sizes = []
    for p in plans:
        name = os.path.join(out, "class_%0*d" % (width, p[1]),
                            "img_%05d.jpg" % p[0])
        render(im, p).save(name, "JPEG", quality=quality, subsampling=2,
                           optimize=False)
        sizes.append(os.path.getsize(name))
    return sizes


def main(argv):
    """Generate the corpus and print its statistics."""
    args = parse_args(argv)
    srcs = find_sources(args.src)
    if os.path.exists(args.out) and os.listdir(args.out):
        sys.exit("mkcorpus: %s exists and is not empty" % args.out)
    width = max(2, len(str(args.classes - 1)))
    for c in range(args.classes):
        os.makedirs(os.path.join(args.out, "class_%0*d" % (width, c)),
                    exist_ok=True)

    per_src = plan(args, len(srcs))
    jobs = [(srcs[s], per_src[s], args.out, width, args.quality)
            for s in range(len(srcs)) if per_src[s]]
    # Biggest jobs first, so that no worker is left with a long tail.
    jobs.sort(key=lambda j: -len(j[1]))
    with multiprocessing.Pool(min(args.jobs, len(jobs))) as pool:
        sizes = np.array([s for r in pool.imap_unordered(work, jobs)
                          for s in r])

    print("mkcorpus images=%d classes=%d sources=%d seed=%d "
          "mean_bytes=%.0f min_bytes=%d max_bytes=%d median_bytes=%.0f "
          "total_mb=%.1f out=%s"
          % (len(sizes), args.classes, len(srcs), args.seed, sizes.mean(),
             sizes.min(), sizes.max(), np.median(sizes), sizes.sum() / 1e6,
             args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
