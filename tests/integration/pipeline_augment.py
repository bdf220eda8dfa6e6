#!/usr/bin/python3
"""pipeline_augment.py - the image pipeline's colour stages against
torchvision 0.14, op by op, on real photographs (the wallpapers of
Debian's lomiri-wallpapers-16.04); channel_shift against Keras' own
apply_channel_shift (python3-keras-preprocessing).

For each stage and several seeds: `loaderctl pipeline --explain` says
what the sample drew; torchvision.transforms.functional applies those
parameters to the pipeline's own image without the stage (decode |
resize 256 | center 224, u8, the same bytes), and the result must match
the pipeline's with the stage: max |diff| <= 2, >= 99 % of values within
1 (the float32 round trips of adjust_hue, and a mean summed in another
order, may move a value across a truncation). A chain of stages is
checked against the same functions one after another, and a probability
p is seen to apply to some samples and not others. A spec refused names
the word and the allowed range.

TAP on stdout; exit 77 without NumPy, torch and torchvision, or without
the photographs.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("top_srcdir", "."),
                                "tests", "client", "python"))
import fixture as fx  # noqa: E402

np, torch = fx.need("numpy", "torch")
F = fx.need("torchvision.transforms.functional")
apply_channel_shift = fx.need("keras_preprocessing.image").apply_channel_shift

photos = fx.need_photos(3)

t = fx.Tap()
T = fx.tmpdir()
CTL = os.path.join(fx.TOP, "loaderctl")
GEOM = "decode | resize 256 | center 224"


ctl = fx.pipeline


def image(spec, photo, seed):
    return fx.pipeline_image(spec, photo, seed, T)


def drawn(spec, photo, seed):
    """The stages' lines of --explain: [(name, applied, [words])]."""
    lines = ctl("--explain", "--seed", str(seed), "%s | u8 | nhwc" % spec,
                photo).splitlines()
    out = []
    for ln in lines:
        w = ln.split()
        if w[0] in ("crop", "flip", "vflip", "erase", "cutout"):
            continue
        out.append((w[0], w[1] == "1", w[2:]))
    return out


def explained(spec, photo, seed):
    """Every line of --explain, by its first word."""
    out = {}
    for ln in ctl("--explain", "--seed", str(seed), spec,
                  photo).splitlines():
        w = ln.split()
        out[w[0]] = w[1:]
    return out


def apply(name, words, x):
    """torchvision's function for a stage, on a uint8 CHW tensor."""
    if name == "brightness":
        return F.adjust_brightness(x, float(words[0]))
    if name == "contrast":
        return F.adjust_contrast(x, float(words[0]))
    if name == "saturation":
        return F.adjust_saturation(x, float(words[0]))
    if name == "hue":
        return F.adjust_hue(x, float(words[0]))
    if name == "grayscale":
        return F.rgb_to_grayscale(x, num_output_channels=3)
    if name == "invert":
        return F.invert(x)
    if name == "posterize":
        return F.posterize(x, int(float(words[0])))
    if name == "solarize":
        return F.solarize(x, float(words[0]))
    if name == "autocontrast":
        return F.autocontrast(x)
    if name == "equalize":
        return F.equalize(x)
    if name == "sharpness":
        return F.adjust_sharpness(x, float(words[0]))
    if name == "gaussian_blur":
        k, sigma = int(float(words[0])), float(words[1])
        return F.gaussian_blur(x, [k, k], [sigma, sigma])
    if name == "channel_shift":
        # Keras' own function (keras_preprocessing, as ImageDataGenerator
        # calls it), on the float image it works on; rounded to bytes.
        hwc = x.permute(1, 2, 0).numpy().astype(np.float32)
        out = apply_channel_shift(hwc, float(words[0]), channel_axis=2)
        return torch.from_numpy(np.round(out).astype(np.uint8)).permute(
            2, 0, 1)
    if name == "jitter":
        # "order 2,0,3,1 b 1.1 c 0.9 s 1.2 h -0.02", as ColorJitter.
        order = [int(i) for i in words[1].split(",")] if words[1] else []
        f = {words[k]: float(words[k + 1]) for k in range(2, len(words), 2)}
        fns = {0: ("b", F.adjust_brightness), 1: ("c", F.adjust_contrast),
               2: ("s", F.adjust_saturation), 3: ("h", F.adjust_hue)}
        for i in order:
            key, fn = fns[i]
            x = fn(x, f[key])
        return x
    raise AssertionError(name)


def close(got, want):
    d = np.abs(got.astype(np.int16) - want.astype(np.int16))
    return int(d.max()), float((d <= 1).mean())


def reference(spec_stages, photo, seed):
    """What torchvision makes of the stageless image with the drawn
    parameters, and how many stages applied."""
    base = image(GEOM, photo, seed)
    x = torch.from_numpy(base).permute(2, 0, 1).contiguous()
    applied = 0
    for name, on, words in drawn("%s | %s" % (GEOM, spec_stages), photo,
                                 seed):
        if on:
            x = apply(name, words, x)
            applied += 1
    return x.permute(1, 2, 0).numpy(), applied


STAGES = ["brightness 0.6", "contrast 0.6", "saturation 0.8", "hue 0.4",
          "jitter 0.4 0.4 0.4 0.1", "grayscale p 1", "invert p 1",
          "posterize 3 p 1", "solarize 100 p 1", "autocontrast p 1",
          "equalize p 1", "sharpness 3 p 1", "sharpness 0.2 p 1",
          "gaussian_blur 5 0.1 2", "gaussian_blur 9 2 3",
          "channel_shift 60"]
for stage in STAGES:
    worst, frac, runs = 0, 1.0, 0
    for photo in photos:
        for seed in (1, 2, 3):
            want, applied = reference(stage, photo, seed)
            got = image("%s | %s" % (GEOM, stage), photo, seed)
            m, f = close(got, want)
            worst, frac = max(worst, m), min(frac, f)
            runs += applied
    t.ok(worst <= 2 and frac >= 0.99 and runs == 9,
         "%s: as torchvision's, given the drawn parameters (max |diff| "
         "%d, %.2f %% within 1)" % (stage, worst, 100 * frac),
         "applied %d of 9" % runs)

chain = "jitter 0.3 0.3 0.3 0.05 | grayscale p 0.5 | posterize 5 | " \
    "solarize 200 p 0.5"
worst, frac = 0, 1.0
for photo in photos:
    for seed in range(1, 5):
        want, _ = reference(chain, photo, seed)
        m, f = close(image("%s | %s" % (GEOM, chain), photo, seed), want)
        worst, frac = max(worst, m), min(frac, f)
t.ok(worst <= 2 and frac >= 0.99, "a chain of stages: torchvision's "
     "functions one after another (max |diff| %d, %.2f %% within 1)"
     % (worst, 100 * frac))

ons = [drawn("%s | invert" % GEOM, photos[0], s)[0][1] for s in range(40)]
t.ok(0 < sum(ons) < 40, "invert's default p 0.5 applies to some samples "
     "and not others (%d of 40)" % sum(ons))
facs = {drawn("%s | brightness 0.5" % GEOM, photos[0], s)[0][2][0]
        for s in range(10)}
t.ok(len(facs) == 10 and all(0.5 <= float(v) <= 1.5 for v in facs),
     "brightness 0.5 draws factors in [0.5, 1.5], another per sample")

r = subprocess.run([CTL, "pipeline", GEOM + " | hue 0.7"],
                   capture_output=True, text=True)
t.ok(r.returncode != 0 and '"0.7" is not a hue range in 0..0.5' in r.stderr,
     "a value out of range is refused, naming it and the range", r.stderr)

# vflip, erase and cutout: against torchvision's vflip and erase.
vflipped = 0
for seed in range(1, 7):
    base = image(GEOM, photos[1], seed)
    e = explained("%s | vflip 0.5 | u8 | nhwc" % GEOM, photos[1], seed)
    got = image("%s | vflip 0.5" % GEOM, photos[1], seed)
    x = torch.from_numpy(base).permute(2, 0, 1)
    want = (F.vflip(x) if e["vflip"][0] == "1" else x).permute(1, 2, 0)
    vflipped += e["vflip"][0] == "1"
    if not np.array_equal(got, want.numpy()):
        break
t.ok(np.array_equal(got, want.numpy()) and 0 < vflipped < 6,
     "vflip 0.5: torchvision's vflip when drawn (%d of 6)" % vflipped)


def f32(spec, photo, seed):
    out = os.path.join(T, "f.npy")
    ctl("--seed", str(seed), "%s | f32 | nchw" % spec, photo, out)
    return np.load(out)


NORM = GEOM + " | normalize imagenet"
for value, v in (("0", [0.0, 0.0, 0.0]), ("0.5,-1,2", [0.5, -1.0, 2.0])):
    same, erased = True, 0
    for seed in range(1, 9):
        spec = "%s | erase p 0.75 value %s" % (NORM, value)
        e = explained(spec + " | f32", photos[2], seed)["erase"]
        base = torch.from_numpy(f32(NORM, photos[2], seed))
        got = f32(spec, photos[2], seed)
        if e[0] == "1":
            i, j, h, w = (int(k) for k in e[1:])
            want = F.erase(base, i, j, h, w, torch.tensor(v)[:, None, None])
            erased += 1
        else:
            want = base
        same = same and np.array_equal(got, want.numpy())
    t.ok(same and 0 < erased < 8, "erase value %s, after normalize: "
         "torchvision's erase of the drawn rectangle (%d of 8 erased)"
         % (value, erased))

spec = "%s | erase p 1 scale 0.2 0.2 ratio 1 1 value random" % NORM
e = explained(spec + " | f32", photos[0], 4)["erase"]
i, j, h, w = (int(k) for k in e[1:])
got = f32(spec, photos[0], 4)
base = f32(NORM, photos[0], 4)
inside = got[:, i:i + h, j:j + w]
outside = got.copy()
outside[:, i:i + h, j:j + w] = base[:, i:i + h, j:j + w]
t.ok(e[0] == "1" and h == w == 100 and abs(inside.mean()) < 0.05 and
     abs(inside.std() - 1) < 0.05 and np.array_equal(outside, base) and
     np.array_equal(got, f32(spec, photos[0], 4)),
     "erase value random: standard normal in the rectangle (scale 0.2 "
     "of 224^2, ratio 1: 100 x 100), the rest untouched, the same again",
     "h %d w %d mean %.3f std %.3f" % (h, w, inside.mean(), inside.std()))

spec = "%s | cutout 50" % NORM
c = explained(spec + " | f32", photos[0], 5)["cutout"]
y0, x0, y1, x1 = (int(k) for k in c[1:])
got = f32(spec, photos[0], 5)
want = f32(NORM, photos[0], 5)
want[:, y0:y1, x0:x1] = 0
t.ok(c[0] == "1" and 0 < (y1 - y0) <= 50 and 0 < (x1 - x0) <= 50 and
     np.array_equal(got, want), "cutout 50: the drawn square (clipped at "
     "the edges) is 0, the rest untouched")

# --grid: a contact sheet of a photo's samples, each tile the sample.
from PIL import Image  # noqa: E402

spec = GEOM + " | jitter 0.4 0.4 0.4 0.1 | grayscale p 0.3"
sheet = os.path.join(T, "grid.png")
ctl("--grid", "5", "--seed", "9", "--index", "3", spec + " | u8 | nhwc",
    photos[0], sheet)
g = np.asarray(Image.open(sheet).convert("RGB"))
tiles_ok = g.shape == (2 * 224 + 4, 3 * 224 + 8, 3)
for i in range(5):
    out = os.path.join(T, "t.npy")
    ctl("--seed", "9", "--index", str(3 + i), spec + " | u8 | nhwc",
        photos[0], out)
    y0, x0 = (i // 3) * 228, (i % 3) * 228
    tiles_ok = tiles_ok and np.array_equal(g[y0:y0 + 224, x0:x0 + 224],
                                           np.load(out))
t.ok(tiles_ok and (g[:, 224:228] == 255).all() and
     (g[224 + 4:, 2 * 228:] == 255).all(),
     "--grid 5: a 3 x 2 PNG sheet, each tile the sample of its index, "
     "white between and after", "shape %s" % (g.shape,))
jpg = os.path.join(T, "grid.jpg")
ctl("--grid", "4", GEOM + " | normalize imagenet | f16", photos[0], jpg)
j = np.asarray(Image.open(jpg).convert("RGB")).astype(int)
base = image(GEOM, photos[0], 0).astype(int)
t.ok(j.shape == (452, 452, 3) and np.abs(j[:224, :224] - base).mean() < 3,
     "--grid as JPEG, normalize undone: each tile close to the image",
     "shape %s, mean |diff| %.2f"
     % (j.shape, np.abs(j[:224, :224] - base).mean()))
r = subprocess.run([CTL, "pipeline", "--grid", "2", GEOM, photos[0],
                    os.path.join(T, "g.bmp")], capture_output=True, text=True)
t.ok(r.returncode != 0 and "write a .png or a .jpg" in r.stderr and
     not os.path.exists(os.path.join(T, "g.bmp")),
     "--grid to another extension is refused, saying what to write",
     r.stderr)

# A --grid that fails leaves what was at OUT, and nothing of its own.
keep = os.path.join(T, "keep", "sheet.png")
os.makedirs(os.path.dirname(keep))
with open(keep, "wb") as f:
    f.write(b"the user's own file")
notjpeg = os.path.join(T, "keep", "not.jpg")
with open(notjpeg, "wb") as f:
    f.write(b"not a JPEG at all")
r = subprocess.run([CTL, "pipeline", "--grid", "3", GEOM, notjpeg, keep],
                   capture_output=True, text=True)
t.ok(r.returncode != 0 and "not.jpg" in r.stderr and
     open(keep, "rb").read() == b"the user's own file" and
     sorted(os.listdir(os.path.dirname(keep))) == ["not.jpg", "sheet.png"],
     "--grid of a file that does not decode: refused naming it, OUT as "
     "it was, no file of its own left", r.stderr)
