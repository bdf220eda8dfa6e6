#!/usr/bin/env python3
"""Compare our box resize (pipeline/image/resize.c) with Pillow's.

usage: resize_pil.py [RESIZE_BENCH [CASES]]

For random images, boxes and output sizes, and for the pipeline's usual
crops to 224x224, resize with Pillow's Image.resize(size, BILINEAR,
box=box, reducing_gap=None) and with rsz_plan_box() through
"resize_bench --raw" (default ./bench/resize_bench: run it from the build
directory after "make bench/resize_bench"). Gray (L), RGB and CMYK; the
mirrored plan against Pillow's result flipped left to right.

Prints one line per mode and overall: cases, differing bytes, the largest
absolute difference and the PSNR (inf when identical). Exit status 0 when
every byte matches, 1 otherwise, 77 when Pillow is missing.
"""
import math
import os
import random
import subprocess
import sys

try:
    from PIL import Image
except ImportError:
    print("resize_pil.py: no Pillow (python3-pil); skipped")
    sys.exit(77)

BILINEAR = getattr(Image, "Resampling", Image).BILINEAR
FLIP = getattr(Image, "Transpose", Image).FLIP_LEFT_RIGHT
MODES = {"L": 1, "RGB": 3, "CMYK": 4}
MIRROR = 1


def ours(tool, img, box, size, flags):
    """Resize img's box to size with resize_bench --raw; returns bytes."""
    w, h = img.size
    ch = MODES[img.mode]
    args = [tool, "--raw", str(w), str(h), str(ch)]
    args += [repr(float(v)) for v in box]
    args += [str(size[0]), str(size[1]), str(flags)]
    out = subprocess.run(args, input=img.tobytes(), capture_output=True,
                         check=True).stdout
    if len(out) != size[0] * size[1] * ch:
        raise RuntimeError("short output from " + tool)
    return out


def pillow(img, box, size, mirror):
    out = img.resize(size, BILINEAR, box=box, reducing_gap=None)
    return (out.transpose(FLIP) if mirror else out).tobytes()


def random_case(rng):
    """An image size, a box inside it and an output size."""
    w, h = rng.randint(1, 640), rng.randint(1, 640)
    if rng.random() < 0.2:
        w, h = rng.randint(1, 12), rng.randint(1, 12)
    box = []
    for n in (w, h):
        a = rng.uniform(0, n)
        b = rng.uniform(0, n)
        if rng.random() < 0.2:
            a, b = float(rng.randint(0, n - 1)), float(n)
        if abs(a - b) < 0.01:
            a, b = 0.0, float(n)
        box.append((min(a, b), max(a, b)))
    size = (rng.randint(1, 300), rng.randint(1, 300))
    if rng.random() < 0.3:
        size = (224, 224)
    return (w, h), (box[0][0], box[1][0], box[0][1], box[1][1]), size


def pipeline_case(rng):
    """A random resized crop as torchvision draws one, to 224x224."""
    w, h = rng.randint(224, 600), rng.randint(224, 600)
    area = w * h * rng.uniform(0.08, 1.0)
    ratio = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
    cw = min(w, math.sqrt(area * ratio))
    ch = min(h, math.sqrt(area / ratio))
    x0, y0 = rng.uniform(0, w - cw), rng.uniform(0, h - ch)
    return (w, h), (x0, y0, x0 + cw, y0 + ch), (224, 224)


def main():
    tool = sys.argv[1] if len(sys.argv) > 1 else "./bench/resize_bench"
    cases = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    if not os.access(tool, os.X_OK):
        print("resize_pil.py: no %s (make bench/resize_bench)" % tool)
        return 1
    rng = random.Random(20240229)
    stats = {m: [0, 0, 0, 0, 0.0] for m in MODES}  # cases bytes diff max sse
    for i in range(cases):
        mode = list(MODES)[i % len(MODES)]
        size_in, box, size = (pipeline_case if i % 2 else random_case)(rng)
        data = bytes(rng.getrandbits(8) for _ in
                     range(size_in[0] * size_in[1] * MODES[mode]))
        img = Image.frombytes(mode, size_in, data)
        mirror = rng.random() < 0.5
        a = pillow(img, box, size, mirror)
        b = ours(tool, img, box, size, MIRROR if mirror else 0)
        s = stats[mode]
        s[0] += 1
        s[1] += len(a)
        for x, y in zip(a, b):
            if x != y:
                d = abs(x - y)
                s[2] += 1
                s[3] = max(s[3], d)
                s[4] += d * d
        if a != b:
            print("differs: %s %dx%d box %r -> %dx%d%s" %
                  (mode, size_in[0], size_in[1], box, size[0], size[1],
                   " mirrored" if mirror else ""))
    total = [0, 0, 0, 0, 0.0]
    print("Pillow %s against rsz_plan_box()" % Image.__version__)
    for mode, s in list(stats.items()) + [("all", None)]:
        if s is None:
            s = total
        else:
            for k in range(4):
                total[k] = max(total[k], s[k]) if k == 3 else total[k] + s[k]
            total[4] += s[4]
        mse = s[4] / s[1] if s[1] else 0.0
        psnr = "inf" if mse == 0 else "%.1f dB" % (10 * math.log10(
            255 * 255 / mse))
        print("%-5s %4d cases %9d bytes, %d differ, max |diff| %d, PSNR %s" %
              (mode, s[0], s[1], s[2], s[3], psnr))
    return 0 if total[2] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
