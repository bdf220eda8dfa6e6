#!/usr/bin/python3
"""pipeline_geometry.py - the image pipeline's geometric stages (rotate,
affine, the policies) against torchvision 0.14, op by op, and the fused
pass against the two-pass chain, on real photographs (the wallpapers of
Debian's lomiri-wallpapers-16.04).

For each stage and several seeds: `loaderctl pipeline --explain` says what
the sample drew and the composed map ("warp fused M0..M5": output point
to crop-grid point, area coordinates); torchvision applies those
parameters to the pipeline's own crop without the stage (u8, the same
bytes: the two-pass chain's first pass), and on the pixels whose grid
point lies >= 2 px inside the crop, max |diff| <= 2 and >= 99 % of
values within 1. The policies' magnitudes are checked against
torchvision's own bins. A fused chain (rrc + affine + colour) against
torchvision's functions one after another: mean |diff| <= 1.5, PSNR >= 35
dB over the whole image.

TAP on stdout; exit 77 without NumPy, torch and torchvision, or without
the photographs.
"""
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."),
                                "tests", "client", "python"))
import fixture as fx  # noqa: E402

np, torch = fx.need("numpy", "torch")
F, AA = fx.need("torchvision.transforms.functional",
                "torchvision.transforms.autoaugment")
IM = fx.need("torchvision.transforms").InterpolationMode
apply_affine_transform = fx.need(
    "keras_preprocessing.image").apply_affine_transform

photos = fx.need_photos(3)

t = fx.Tap()
T = fx.tmpdir()
CTL = os.path.join(fx.TOP, "loaderctl")
S = 224
GEOM = "decode | resize 256 | center 224"
RRC = "decode | rrc 224"


ctl = fx.pipeline


def image(spec, photo, seed):
    return fx.pipeline_image(spec, photo, seed, T)


def explain(spec, photo, seed):
    """--explain's lines, split into words."""
    return [ln.split() for ln in
            ctl("--explain", "--seed", str(seed), "%s | u8 | nhwc" % spec,
                photo).splitlines()]


def warp_of(lines):
    """The first pass's kind and map, and (as a third item) every pass's
    map in the order they run."""
    passes = [[float(v) for v in w[2:8]] for w in lines if w[0] == "warp"]
    for w in lines:
        if w[0] == "warp":
            return w[1], passes[0], passes
    raise AssertionError("no warp line")


def interior(m, margin=2.0, passes=None):
    """Output pixels whose grid point lies >= margin inside the crop (for
    chained passes: every pass's point, last pass first)."""
    u, v = np.meshgrid(np.arange(S) + 0.5, np.arange(S) + 0.5)
    ok = np.ones((S, S), bool)
    for p in reversed(passes or [m]):
        u, v = p[0] * u + p[1] * v + p[2], p[3] * u + p[4] * v + p[5]
        ok &= (u >= margin) & (u <= S - margin) & (v >= margin) & \
            (v <= S - margin)
    return ok


def chw(a):
    return torch.from_numpy(np.ascontiguousarray(a)).permute(2, 0, 1)


def hwc(x):
    return x.permute(1, 2, 0).numpy()


MODES = {"nearest": IM.NEAREST, "bilinear": IM.BILINEAR}


def tv_step(w, x, interp):
    """torchvision for one line of --explain (a geometric or policy op)."""
    mode = MODES[interp]
    if w[0] == "rotate":
        return F.rotate(x, float(w[2]), interpolation=mode)
    if w[0] == "affine":
        k = {w[i]: i for i in range(2, len(w)) if w[i].isalpha()}
        a = float(w[k["angle"] + 1])
        tr = [int(float(w[k["translate"] + 1])),
              int(float(w[k["translate"] + 2]))]
        sc = float(w[k["scale"] + 1])
        sh = [float(w[k["shear"] + 1]), float(w[k["shear"] + 2])]
        return F.affine(x, a, tr, sc, sh, interpolation=mode)
    if w[0] in ("trivialaugment", "randaugment", "autoaugment"):
        return AA._apply_op(x, w[1], float(w[3]), interpolation=mode,
                            fill=None)
    raise AssertionError(w)


def ties(m):
    """Output pixels whose grid point is within 1e-3 px of a nearest-
    neighbour tie: there torch's float32 grid and our double one may pick
    either neighbour, both right."""
    u, v = np.meshgrid(np.arange(S) + 0.5, np.arange(S) + 0.5)
    x = m[0] * u + m[1] * v + m[2]
    y = m[3] * u + m[4] * v + m[5]
    fx, fy = x % 1.0, y % 1.0
    return (np.minimum(fx, 1 - fx) < 1e-3) | (np.minimum(fy, 1 - fy) < 1e-3)


def diffs(got, want, mask):
    d = np.abs(got.astype(np.int16) - want.astype(np.int16))[mask]
    return int(d.max()) if d.size else 0, \
        float((d <= 1).mean()) if d.size else 1.0


# Op by op: each geometric stage on the crop it warps.
CASES = [
    ("rotate 30 interp bilinear", 6),
    ("rotate 30", 6),
    ("affine rotate 25 translate 0.1 0.2 scale 0.8 1.2 shear 10 "
     "interp bilinear", 6),
    ("affine rotate 25 translate 0.1 0.2 scale 0.8 1.2 shear -5 5 -8 8", 6),
    ("flip 0.5 | vflip 0.5 | rotate 45 interp bilinear", 6),
]
for stage, nseeds in CASES:
    worst, frac, warped = 0, 1.0, 0
    interp = "bilinear" if "bilinear" in stage else "nearest"
    for photo in photos:
        for seed in range(1, nseeds + 1):
            lines = explain("%s | %s" % (GEOM, stage), photo, seed)
            kind, m, _ = warp_of(lines)
            if kind == "none":
                continue
            warped += 1
            x = chw(image(GEOM, photo, seed))
            for w in lines:
                if w[0] == "flip" and w[1] == "1":
                    x = F.hflip(x)
                elif w[0] == "vflip" and w[1] == "1":
                    x = F.vflip(x)
                elif w[0] in ("rotate", "affine") and w[1] == "1":
                    x = tv_step(w, x, interp)
            got = image("%s | %s" % (GEOM, stage), photo, seed)
            mask = interior(m)
            if interp == "nearest":
                mask &= ~ties(m)
            mx, f = diffs(got, hwc(x), mask)
            worst, frac = max(worst, mx), min(frac, f)
    t.ok(worst <= 2 and frac >= 0.99 and warped == 3 * nseeds,
         "%s: as torchvision's, given the drawn parameters (max |diff| %d, "
         "%.2f %% within 1, inside the crop)" % (stage, worst, 100 * frac),
         "warped %d" % warped)

# The policies: every op of TrivialAugmentWide, over enough seeds to
# draw each; colour ops on every pixel, geometric ones inside.
for interp in ("bilinear", "nearest"):
    seen, worst, frac = set(), 0, 1.0
    for seed in range(1, 90):
        photo = photos[seed % 3]
        spec = "%s | trivialaugment interp %s" % (GEOM, interp)
        lines = explain(spec, photo, seed)
        step = [w for w in lines if w[0] == "trivialaugment"][0]
        kind, m, _ = warp_of(lines)
        seen.add(step[1])
        want = tv_step(step, chw(image(GEOM, photo, seed)), interp)
        got = image(spec, photo, seed)
        mask = interior(m) if kind != "none" else np.ones((S, S), bool)
        if kind != "none" and interp == "nearest":
            mask &= ~ties(m)
        mx, f = diffs(got, hwc(want), mask)
        worst, frac = max(worst, mx), min(frac, f)
    t.ok(len(seen) == 14 and worst <= 2 and frac >= 0.99,
         "trivialaugment interp %s: each op as torchvision's _apply_op "
         "(max |diff| %d, %.2f %% within 1; %d of 14 ops drawn)"
         % (interp, worst, 100 * frac, len(seen)), sorted(seen))


# randaugment and autoaugment: the ops in the order drawn, a colour op
# before a geometric one included (the crop is coloured, then warped), and
# a second geometric op resampling the first's output. Where a colour op
# follows a warp, a value that the one rounding of the fused pass (ours)
# and the two of the chain (torchvision's) leave 1 apart can land on
# either side of a threshold (solarize) or a histogram step (equalize):
# those samples are held to the fused chain's bounds, the rest to the
# op-by-op ones.
def psnr(a, b):
    mse = ((a.astype(np.float64) - b.astype(np.float64)) ** 2).mean()
    return 10 * math.log10(255.0 ** 2 / mse) if mse else float("inf")


GEO_OPS = ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate")
for spec in ("randaugment 2 14 interp bilinear",
             "autoaugment imagenet interp bilinear"):
    worst, frac, kinds, chained = 0, 1.0, set(), 0
    worst_mean, worst_psnr, after = 0.0, float("inf"), 0
    for seed in range(1, 40):
        photo = photos[seed % 3]
        lines = explain("%s | %s" % (GEOM, spec), photo, seed)
        kind, m, passes = warp_of(lines)
        kinds.add(kind)
        x = chw(image(GEOM, photo, seed))
        ops = [w for w in lines if w[0] == spec.split()[0] and w[2] == "1"]
        for w in ops:
            x = tv_step(w, x, "bilinear")
        got, want = image("%s | %s" % (GEOM, spec), photo, seed), hwc(x)
        chained += len(passes) > 1
        names = [w[1] for w in ops]
        warped = [n in GEO_OPS for n in names]
        if any(warped) and not all(warped[warped.index(True):]):
            after += 1
            worst_mean = max(worst_mean, float(
                np.abs(got.astype(np.int16) - want).mean()))
            worst_psnr = min(worst_psnr, psnr(got, want))
            continue
        mask = interior(m, passes=passes) if kind != "none" else \
            np.ones((S, S), bool)
        mx, f = diffs(got, want, mask)
        worst, frac = max(worst, mx), min(frac, f)
    t.ok(worst <= 2 and frac >= 0.99 and worst_mean <= 1.5 and
         worst_psnr >= 35 and kinds >= {"none", "fused", "after-colour"} and
         (chained or spec.startswith("auto")) and after,
         "%s: the drawn ops one after another as torchvision's _apply_op "
         "(max |diff| %d, %.2f %% within 1; %d samples with a colour op "
         "after a warp: worst mean |diff| %.3f, PSNR %.1f dB; warps %s; "
         "%d with a second pass)"
         % (spec, worst, 100 * frac, after, worst_mean, worst_psnr,
            ", ".join(sorted(kinds)), chained))


# The magnitudes are torchvision's bins, signed where it signs them.
def bins(space, op):
    mags, signed = space[op]
    return {float(v) for v in mags.reshape(-1)}, signed


ta = AA.TrivialAugmentWide()._augmentation_space(31)
ra = AA.RandAugment()._augmentation_space(31, (S, S))
aa = AA.AutoAugment()._augmentation_space(10, (S, S))
bad = []
for policy, spec, space in (
        ("trivialaugment", "trivialaugment", ta),
        ("randaugment", "randaugment 2 9", ra),
        ("randaugment", "randaugment 1 30", ra),
        ("autoaugment", "autoaugment imagenet", aa)):
    for seed in range(40):
        for w in explain("%s | %s" % (GEOM, spec), photos[0], seed):
            if w[0] != policy:
                continue
            vals, signed = bins(space, w[1])
            mag = float(w[3])
            if w[1] == "Posterize":
                vals = {float(int(v)) for v in vals}
            near = min(abs(abs(mag) - v) for v in vals) <= 2e-7 * abs(mag)
            if not (near and (signed or mag >= 0) or
                    mag == 0 and not space[w[1]][0].ndim):
                bad.append((spec, w))
t.ok(not bad, "every policy magnitude drawn is one of torchvision's bins "
     "(float32 linspace, to its last bit), signed only where torchvision "
     "signs", bad[:3])
mags = {float(w[3]) for s in range(30)
        for w in explain("%s | randaugment 2 9" % GEOM, photos[0], s)
        if w[0] == "randaugment" and w[1] == "Rotate"}
t.ok(mags and all(abs(abs(v) - 9.0) < 1e-6 for v in mags),
     "randaugment 2 9: Rotate's magnitude is bin 9 of 31 over 0..30 "
     "degrees, 9, either sign", sorted(mags))
ops = {w[1] for s in range(60)
       for w in explain("%s | autoaugment imagenet" % GEOM, photos[0], s)
       if w[0] == "autoaugment"}
t.ok(ops <= {"Posterize", "Rotate", "Solarize", "AutoContrast", "Equalize",
             "Color", "Contrast", "Sharpness", "ShearX", "Invert"} and
     len(ops) >= 8, "autoaugment imagenet draws the ImageNet policy's ops",
     sorted(ops))

# Translate is whole pixels (0..32 for TrivialAugmentWide), shear about
# the top-left corner: the map says so.
found = {}
for seed in range(200):
    lines = explain("%s | trivialaugment" % GEOM, photos[0], seed)
    step = [w for w in lines if w[0] == "trivialaugment"][0]
    if step[1] in ("TranslateX", "ShearY") and step[1] not in found:
        found[step[1]] = (float(step[3]), warp_of(lines)[1])
tx, m = found["TranslateX"]
t.ok(m[2] == -math.trunc(tx) and m[0] == 1 and m[1] == 0,
     "TranslateX moves by int(magnitude) pixels (%g -> %d)" % (tx, -m[2]))
sy, m = found["ShearY"]
t.ok(m[2] == 0 and m[5] == 0 and abs(m[3] - sy) < 1e-9,
     "ShearY is about the top-left corner (the grid's origin stays put)",
     m)


# The fused chain against the two-pass one: rrc + affine + colour.
chain = "affine rotate 30 translate 0.1 0.1 scale 0.8 1.2 shear 10 " \
    "interp bilinear | jitter 0.3 0.3 0.3 0"
worst_mean, worst_psnr, n = 0.0, float("inf"), 0
for photo in photos:
    for seed in range(1, 7):
        lines = explain("%s | %s" % (RRC, chain), photo, seed)
        if warp_of(lines)[0] != "fused":
            continue
        n += 1
        x = chw(image(RRC, photo, seed))
        for w in lines:
            if w[0] == "affine" and w[1] == "1":
                x = tv_step(w, x, "bilinear")
            elif w[0] == "jitter" and w[1] == "1":
                order = [int(i) for i in w[3].split(",")]
                f = {w[k]: float(w[k + 1]) for k in range(4, len(w), 2)}
                fns = {0: ("b", F.adjust_brightness),
                       1: ("c", F.adjust_contrast),
                       2: ("s", F.adjust_saturation)}
                for i in order:
                    key, fn = fns[i]
                    x = fn(x, f[key])
        got = image("%s | %s" % (RRC, chain), photo, seed)
        want = hwc(x)
        mean = float(np.abs(got.astype(np.int16) - want).mean())
        worst_mean = max(worst_mean, mean)
        worst_psnr = min(worst_psnr, psnr(got, want))
t.ok(n >= 12 and worst_mean <= 1.5 and worst_psnr >= 35,
     "rrc + affine + jitter in one pass against the two-pass chain: "
     "worst mean |diff| %.3f, worst PSNR %.1f dB over %d samples"
     % (worst_mean, worst_psnr, n))

# fill: a constant colour where the map leaves the crop; context shows
# the photograph around it instead.
spec = "%s | affine translate 0.3 0.3 fill 10,200,30" % GEOM
for seed in range(1, 40):
    lines = explain(spec, photos[0], seed)
    m = warp_of(lines)[1]
    out = ~interior(m, -1.0)
    if out.sum() > 2000:
        break
got = image(spec, photos[0], seed)
t.ok((got[out] == [10, 200, 30]).all(),
     "fill 10,200,30: that colour wherever the grid point is > 1 px "
     "outside the crop (%d pixels)" % out.sum())
ctx = image("%s | affine translate 0.3 0.3 fill context" % GEOM, photos[0],
            seed)
same = diffs(ctx, got, interior(m, 2.0))
t.ok(same[0] <= 2 and same[1] >= 0.99 and ctx[out].std() > 5,
     "fill context: the same inside the crop, the photograph's own "
     "pixels outside it (std %.1f)" % ctx[out].std())


# Keras' own apply_affine_transform (python3-keras-preprocessing, through
# scipy.ndimage) for the fill modes torchvision lacks: the drawn rotation
# and zoom go to it through its axis swap (its zx scales rows, its tx
# shifts rows), and its shift absorbs the one place we depart from it on
# purpose: it turns about (h/2 + 0.5, w/2 + 0.5) in index coordinates, a
# pixel off the centre, where we (and torchvision) turn about the centre.
# Its "wrap" is scipy's, whose period is n - 1 pixels; ours repeats the
# crop, which is scipy's "grid-wrap", so that is what it gets.


def keras_of(base, lines, mode):
    m = warp_of(lines)[1]
    a = [w for w in lines if w[0] == "affine"][0]
    k = {a[i]: i for i in range(2, len(a)) if a[i].isalpha()}
    theta = float(a[k["angle"] + 1])
    zx, zy = float(a[k["zoom"] + 1]), float(a[k["zoom"] + 2])
    # ours, output index -> input index, in (row, col)
    lin = np.array([[m[4], m[3]], [m[1], m[0]]])
    off = np.array([0.5 * (m[3] + m[4]) + m[5] - 0.5,
                    0.5 * (m[0] + m[1]) + m[2] - 0.5])
    r = math.radians(theta)
    rot = np.array([[math.cos(r), -math.sin(r)], [math.sin(r), math.cos(r)]])
    o = np.array([S / 2 + 0.5, S / 2 + 0.5])
    t = rot.T @ (off - o + lin @ o)
    kx = apply_affine_transform(base.astype(np.float64), theta, t[0], t[1],
                                0, zy, zx, fill_mode=mode, cval=0.0, order=1)
    return np.clip(np.round(kx), 0, 255).astype(np.uint8), \
        np.allclose(rot @ np.diag([zy, zx]), lin, atol=1e-9)


def seams(m):
    """Output pixels whose grid point is within 1 px of the crop's edge
    or, for the modes that repeat it, of an edge of a repeat."""
    u, v = np.meshgrid(np.arange(S) + 0.5, np.arange(S) + 0.5)
    x = m[0] * u + m[1] * v + m[2]
    y = m[3] * u + m[4] * v + m[5]
    fx, fy = x % S, y % S
    return (np.minimum(fx, S - fx) < 1.0) | (np.minimum(fy, S - fy) < 1.0)


for ours, theirs in (("nearest", "nearest"), ("reflect", "reflect"),
                     ("wrap", "grid-wrap"), ("0", "constant")):
    spec = "%s | affine rotate 30 translate 0.2 0.2 zoom 0.7 1.3 " \
        "interp bilinear fill %s" % (GEOM, ours)
    worst, frac, same_lin, filled = 0, 1.0, True, 0
    for seed in range(1, 7):
        photo = photos[seed % 3]
        lines = explain(spec, photo, seed)
        m = warp_of(lines)[1]
        want, lin_ok = keras_of(image(GEOM, photo, seed), lines, theirs)
        same_lin = same_lin and lin_ok
        got = image(spec, photo, seed)
        mask = ~seams(m)
        filled += int((~interior(m, 0.0) & mask).sum())
        mx, f = diffs(got, want, mask)
        worst, frac = max(worst, mx), min(frac, f)
    t.ok(same_lin and worst <= 2 and frac >= 0.99 and filled > 1000,
         "fill %s: as Keras' apply_affine_transform (fill_mode %s) "
         "given the drawn rotation, zoom and shift, fill included "
         "(max |diff| %d, %.2f %% within 1; %d filled pixels)"
         % (ours, theirs, worst, 100 * frac, filled))

r = subprocess.run([CTL, "pipeline", GEOM + " | rotate 30 fill wrap | "
                    "affine shear 5 fill reflect"],
                   capture_output=True, text=True)
t.ok(r.returncode != 0 and "differs from the fill given at column" in
     r.stderr, "two geometric stages with different fills are refused "
     "(a spec has one fill)", r.stderr)
r = subprocess.run([CTL, "pipeline", GEOM + " | affine shear 95"],
                   capture_output=True, text=True)
t.ok(r.returncode != 0 and '"95" is not an angle in -89..89' in r.stderr,
     "a shear out of range is refused, naming it and the range", r.stderr)
r = subprocess.run([CTL, "pipeline", GEOM + " | randaugment 2 31"],
                   capture_output=True, text=True)
t.ok(r.returncode != 0 and '"31" is not a magnitude in 0..30' in r.stderr,
     "randaugment's magnitude is one of its 31 bins", r.stderr)
