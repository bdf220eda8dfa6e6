"""loader.keras.from_image_data_generator and loader.keras.from_layers:
Keras augmentation as loaderd pipeline specs.

ImageDataGenerator is checked against the real one (Debian's
python3-keras-preprocessing 1.1.0, which runs without TensorFlow):
thousands of its get_random_transform() draws lie in the translated
spec's ranges and reach their ends, and so do the draws of loaderd
(`loaderctl pipeline --explain`) in Keras' ranges; then, for the
parameters a sample drew, Keras' own apply_transform() and standardize()
on the pipeline's crop against the pipeline's output: max |diff| <= 2,
>= 99 % within 1 on the 8-bit scale, on the pixels whose source lies
>= 2 px inside the crop. As pipeline_geometry.py does, the drawn map is
given to Keras through its own parameters (its zx scales rows, its tx
shifts rows; it turns about a point a pixel off the centre, which its
shift absorbs), and those parameters must lie in the generator's ranges:
that is what pins each argument's axis and sign.

Keras' preprocessing layers cannot be installed here (no TensorFlow or
Keras 3 in Debian 12): from_layers is tested against the layers'
documented semantics (Keras 2.x and 3 docs: factor conventions, fill
"reflect", bilinear, zoom's sign) in their serialised forms, with
loaderd's draws checked against those documented ranges.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture as fx  # noqa: E402

np = fx.need("numpy")
ImageDataGenerator = fx.need("keras_preprocessing.image").ImageDataGenerator

import loader  # noqa: E402
from loader.keras import from_image_data_generator, from_layers  # noqa: E402

photos = fx.need_photos(3)
t = fx.Tap()
T = fx.tmpdir()
S = 224
GEOM = "decode | resize 256 | center 224"


def canonical(spec):
    return fx.pipeline(spec).splitlines()[0].split(None, 1)[1]


def parses(spec, desc):
    try:
        back = canonical(spec)
    except Exception as e:  # noqa: B902 - reported as the failure
        return t.ok(False, "%s: loaderctl pipeline parses it" % desc, e)
    return t.eq(back, spec, "%s: loaderctl pipeline prints it back "
                "unchanged" % desc)


def explain(spec, photo, seed):
    """{stage: [words]} of what the sample of seed draws."""
    out = fx.pipeline("--explain", "--seed", str(seed), spec, photo)
    return {w[0]: w[1:] for w in (ln.split() for ln in out.splitlines())}


def kv(words):
    """--explain's 'affine 1 angle A translate TX TY ...' as a dict."""
    d, key = {}, None
    for w in words[1:]:
        if w.isalpha():
            key = w
            d[key] = []
        else:
            d[key].append(float(w))
    return d


# --- ImageDataGenerator: the text ---------------------------------------
KW = dict(rotation_range=20, width_shift_range=0.1, height_shift_range=0.15,
          shear_range=8, zoom_range=0.2, channel_shift_range=30,
          brightness_range=(0.7, 1.3), horizontal_flip=True,
          vertical_flip=True, fill_mode="nearest", rescale=1 / 255)
SPEC = from_image_data_generator(224, resize=256, **KW)
want = ("decode | resize 256 | center 224 | flip 0.5 | vflip 0.5 | affine "
        "rotate 20 translate 0.1 0.15 zoom 0.8 1.2 shear 0 0 -8 8 interp "
        "bilinear fill nearest | channel_shift 30 | brightness 0.3 | f32 | "
        "nhwc")
t.eq(SPEC, want, "ImageDataGenerator(%s) translates in its order" %
     ", ".join("%s=%r" % kv_ for kv_ in sorted(KW.items())))
parses(SPEC, "the generator's spec")
for kw, text in (
        (dict(), "decode | resize 224 | center 224 | normalize 0,0,0 "
         "0.00392156862745098,0.00392156862745098,0.00392156862745098 | "
         "f32 | nhwc"),
        (dict(rescale=1 / 127.5), "decode | resize 224 | center 224 | "
         "normalize 0,0,0 0.5,0.5,0.5 | f32 | nhwc"),
        (dict(rotation_range=10, fill_mode="constant", cval=9,
              interpolation_order=0, rescale=1 / 255),
         "decode | resize 224 | center 224 | affine rotate 10 fill 9,9,9 | "
         "f32 | nhwc"),
        (dict(width_shift_range=22.4, fill_mode="reflect", rescale=1 / 255,
              dtype="float16"),
         "decode | resize 224 | center 224 | affine translate 0.1 0 interp "
         "bilinear fill reflect | f16 | nhwc"),
        (dict(rotation_range=360, fill_mode="wrap", rescale=1 / 255),
         "decode | resize 224 | center 224 | affine rotate 180 interp "
         "bilinear fill wrap | f32 | nhwc")):
    got = from_image_data_generator((224, 224), **kw)
    desc = "ImageDataGenerator(%s)" % ", ".join("%s=%r" % a
                                                for a in sorted(kw.items()))
    t.eq(got, text, desc)
    parses(got, desc)
t.eq(from_image_data_generator(224, resize=False, rescale=1 / 255),
     "decode | center 224 | f32 | nhwc", "resize=False: a plain centre crop")

# --- ImageDataGenerator: Keras' draws in the spec's ranges, and back -----
gen = ImageDataGenerator(**KW)
np.random.seed(1)
draws = [gen.get_random_transform((S, S, 3)) for _ in range(4000)]


def span(key):
    v = np.array([float(d[key]) for d in draws])
    return v.min(), v.max()


# The spec's ranges, in Keras' units: tx is the height shift (rows), ty
# the width shift, in pixels of the 224 crop.
ranges = {"theta": (-20, 20), "tx": (-0.15 * S, 0.15 * S),
          "ty": (-0.1 * S, 0.1 * S), "shear": (-8, 8), "zx": (0.8, 1.2),
          "zy": (0.8, 1.2), "channel_shift_intensity": (-30, 30),
          "brightness": (0.7, 1.3)}
for key, (lo, hi) in sorted(ranges.items()):
    a, b = span(key)
    t.ok(lo <= a and b <= hi and a - lo < 0.03 * (hi - lo) and
         hi - b < 0.03 * (hi - lo),
         "Keras' %s over 4000 draws spans %.3f..%.3f: within the spec's "
         "%g..%g and reaching both ends" % (key, a, b, lo, hi))
for key in ("flip_horizontal", "flip_vertical"):
    f = np.mean([bool(d[key]) for d in draws])
    t.ok(0.45 < f < 0.55, "Keras' %s: %.3f of the draws, the spec's 0.5"
         % (key, f))

small = os.path.join(T, "small.jpg")
fx.pipeline(GEOM + " | u8 | nhwc", photos[0], os.path.join(T, "b.npy"))
from PIL import Image  # noqa: E402
Image.fromarray(np.load(os.path.join(T, "b.npy"))).save(small, quality=90)
ours = {"angle": [], "tx": [], "ty": [], "zx": [], "zy": [], "shear": [],
        "channel_shift": [], "brightness": [], "flip": [], "vflip": []}
N = 150
for seed in range(N):
    e = explain(SPEC, small, seed)
    a = kv(e["affine"])
    ours["angle"].append(a["angle"][0])
    ours["ty"].append(a["translate"][0])  # x: Keras' width shift, ty
    ours["tx"].append(a["translate"][1])
    ours["zy"].append(a["zoom"][0])
    ours["zx"].append(a["zoom"][1])
    ours["shear"].append(a["shear"][1])
    ours["channel_shift"].append(float(e["channel_shift"][1]))
    ours["brightness"].append(float(e["brightness"][1]))
    ours["flip"].append(int(e["flip"][0]))
    ours["vflip"].append(int(e["vflip"][0]))
keras_range = dict(angle=(-20, 20), tx=(-0.15 * S, 0.15 * S),
                   ty=(-0.1 * S, 0.1 * S), zx=(0.8, 1.2), zy=(0.8, 1.2),
                   shear=(-8, 8), channel_shift=(-30, 30),
                   brightness=(0.7, 1.3))
for key, (lo, hi) in sorted(keras_range.items()):
    v = np.array(ours[key])
    # translations are whole pixels: the ends are within a pixel
    slack = 1.0 if key in ("tx", "ty") else 0.0
    cover = 0.1 * (hi - lo) + slack
    t.ok(v.min() >= lo - slack and v.max() <= hi + slack and
         v.min() - lo < cover and hi - v.max() < cover,
         "loaderd's %s over %d samples spans %.3f..%.3f: within Keras' "
         "%g..%g and near both ends" % (key, N, v.min(), v.max(), lo, hi))
for key in ("flip", "vflip"):
    f = np.mean(ours[key])
    t.ok(0.35 < f < 0.65, "loaderd's %s: %.2f of %d samples (Keras: 0.5)"
         % (key, f, N))


# --- ImageDataGenerator: pixels, for the parameters a sample drew --------
def keras_params(m, angle_known):
    """Keras' theta, tx, ty, shear, zx, zy that reproduce the warp map m
    (output point -> crop point, x then y, centres at .5): in Keras'
    (row, col) index coordinates, in = o + L (out - o) + R t with
    L = R(theta) [[1, -sin s], [0, cos s]] diag(zx, zy) and o the point
    it turns about, (h/2 + 0.5, w/2 + 0.5)."""
    lin = np.array([[m[4], m[3]], [m[1], m[0]]])
    off = np.array([0.5 * (m[3] + m[4]) + m[5] - 0.5,
                    0.5 * (m[0] + m[1]) + m[2] - 0.5])
    th = math.atan2(lin[1, 0], lin[0, 0])
    rot = np.array([[math.cos(th), -math.sin(th)],
                    [math.sin(th), math.cos(th)]])
    u = rot.T @ lin
    zx, zy = u[0, 0], math.hypot(u[0, 1], u[1, 1])
    s = math.atan2(-u[0, 1], u[1, 1])
    o = np.array([S / 2 + 0.5, S / 2 + 0.5])
    tr = rot.T @ (off - o + lin @ o)
    return dict(theta=math.degrees(th), tx=tr[0], ty=tr[1],
                shear=math.degrees(s), zx=zx, zy=zy)


def interior(m, margin=2.0):
    u, v = np.meshgrid(np.arange(S) + 0.5, np.arange(S) + 0.5)
    x = m[0] * u + m[1] * v + m[2]
    y = m[3] * u + m[4] * v + m[5]
    return (x >= margin) & (x <= S - margin) & (y >= margin) & \
        (y <= S - margin)


CASES = [
    (dict(rotation_range=25, fill_mode="nearest"),
     dict(theta=(-25, 25))),
    (dict(width_shift_range=0.15, fill_mode="reflect"),
     dict(ty=(-0.15 * S - 1, 0.15 * S + 1))),
    (dict(height_shift_range=0.15, fill_mode="constant"),
     dict(tx=(-0.15 * S - 1, 0.15 * S + 1))),
    (dict(zoom_range=(0.7, 1.3), fill_mode="nearest"),
     dict(zx=(0.7, 1.3), zy=(0.7, 1.3))),
    (dict(shear_range=10, fill_mode="nearest"), dict(shear=(-10, 10))),
    (dict(rotation_range=15, width_shift_range=0.1, height_shift_range=0.1,
          zoom_range=0.1, fill_mode="nearest"),
     dict(theta=(-15, 15), tx=(-0.1 * S - 2, 0.1 * S + 2),
          ty=(-0.1 * S - 2, 0.1 * S + 2), zx=(0.9, 1.1), zy=(0.9, 1.1))),
    (dict(channel_shift_range=40), {}),
]
for kw, allowed in CASES:
    kw = dict(kw, rescale=1 / 255)
    g = ImageDataGenerator(**kw)
    spec = from_image_data_generator(224, resize=256, **kw)
    worst, frac, bad = 0, 1.0, []
    for seed in range(1, 4):
        photo = photos[seed % 3]
        e = explain(spec, photo, seed)
        params = dict(theta=0, tx=0, ty=0, shear=0, zx=1, zy=1)
        mask = np.ones((S, S), bool)
        if "warp" in e:
            m = [float(v) for v in e["warp"][1:7]]
            params = keras_params(m, True)
            mask = interior(m)
        if "shear" in allowed:
            # Keras' shear matrix stretches the width by cos(shear); the
            # spec's is a pure shear: the zoom Keras needs is its 1/cos.
            c = math.cos(math.radians(params["shear"]))
            if abs(params["zy"] * c - 1) > 1e-6 or abs(params["zx"] - 1) > \
                    1e-6:
                bad.append("shear's zoom %r" % params)
        for key, val in params.items():
            # Keras turns and zooms about a point a pixel off the centre
            # (h/2 + 0.5): the shift that absorbs it is below a pixel.
            lo, hi = allowed.get(key, (1, 1) if key in ("zx", "zy") else
                                 (-1, 1) if key in ("tx", "ty") else (0, 0))
            if key == "zy" and "shear" in allowed:
                continue
            if not lo - 1e-6 <= val <= hi + 1e-6:
                bad.append("%s=%.4f outside %g..%g" % (key, val, lo, hi))
        if "channel_shift" in e:
            params["channel_shift_intensity"] = float(e["channel_shift"][1])
        base = fx.pipeline_image(GEOM, photo, 0, T).astype(np.float32)
        want = g.standardize(g.apply_transform(base, params)[None].copy())[0]
        out = os.path.join(T, "k.npy")
        fx.pipeline("--seed", str(seed), spec, photo, out)
        got = np.load(out)
        d = np.abs(got - want)[mask] * 255
        worst, frac = max(worst, float(d.max())), min(frac,
                                                       float((d <= 1).mean()))
    t.ok(not bad and worst <= 2 and frac >= 0.99,
         "ImageDataGenerator(%s): Keras' apply_transform with the drawn "
         "parameters (in its ranges) = loaderd's %r (max |diff| %.2f, "
         "%.2f %% within 1)" % (", ".join("%s=%r" % a for a in
                                          sorted(kw.items())), spec, worst,
                                100 * frac), *bad)

# --- ImageDataGenerator: refusals, by name ------------------------------
for kw, name in ((dict(featurewise_center=True), "featurewise_center"),
                 (dict(featurewise_std_normalization=True),
                  "featurewise_std_normalization"),
                 (dict(samplewise_center=True), "samplewise_center"),
                 (dict(samplewise_std_normalization=True),
                  "samplewise_std_normalization"),
                 (dict(zca_whitening=True), "zca_whitening"),
                 (dict(preprocessing_function=abs), "preprocessing_function"),
                 (dict(data_format="channels_first"), "data_format"),
                 (dict(width_shift_range=5), "width_shift_range"),
                 (dict(height_shift_range=[0.1, 0.2]), "height_shift_range"),
                 (dict(brightness_range=(0.2, 1.0)), "brightness_range"),
                 (dict(rotation_range=200), "rotation_range"),
                 (dict(rotation_range=5, interpolation_order=3),
                  "interpolation_order"),
                 (dict(zoom_range=1.5), "zoom_range"),
                 (dict(validation_split=0.2), "validation_split"),
                 (dict(dtype="float64"), "dtype"),
                 (dict(no_such_argument=1), "no_such_argument")):
    t.raises(loader.Error, lambda: from_image_data_generator(224, **kw),
             "ImageDataGenerator(%s=...) is refused by name" % name,
             match="ImageDataGenerator(%s=" % name)
t.raises(loader.Error, lambda: from_image_data_generator((224, 200)),
         "a non-square target_size is refused", match="target_size=")


# --- from_layers: the documented semantics, serialised forms ------------
def k2(name, **config):
    """A layer as Keras 2 serialises it."""
    return {"class_name": name, "config": dict(config, name=name.lower(),
                                               trainable=True,
                                               dtype="float32")}


def k3(name, **config):
    """A layer as Keras 3 serialises it."""
    return {"module": "keras.layers", "class_name": name,
            "config": dict(config, name=name.lower(), trainable=True,
                           dtype={"module": "keras",
                                  "class_name": "DTypePolicy",
                                  "config": {"name": "float32"},
                                  "registered_name": None},
                           data_format="channels_last"),
            "registered_name": None}


HEAD = [k2("Resizing", height=256, width=256, interpolation="bilinear",
           crop_to_aspect_ratio=True),
        k2("CenterCrop", height=224, width=224)]
LAYERS = [
    # RandomFlip's default mode flips both ways, each with p 1/2.
    ([k2("RandomFlip")], "flip 0.5 | vflip 0.5"),
    ([k3("RandomFlip", mode="horizontal", seed=None)], "flip 0.5"),
    ([k2("RandomFlip", mode="vertical")], "vflip 0.5"),
    # factor: a fraction of 2 pi, [-f, f], counter-clockwise when
    # positive; fill "reflect" and bilinear by default.
    ([k2("RandomRotation", factor=0.1)],
     "rotate 36 interp bilinear fill reflect"),
    ([k3("RandomRotation", factor=[-0.05, 0.1], fill_mode="constant",
         fill_value=0.0, interpolation="nearest", seed=None)],
     "rotate -18 36"),
    # A positive zoom factor zooms out, one factor for both axes when
    # width_factor is None: the image is scaled by 1 / (1 + z).
    ([k2("RandomZoom", height_factor=(0.2, 0.3), width_factor=None)],
     "affine scale 0.7692307692307692 0.8333333333333334 interp bilinear "
     "fill reflect"),
    # Negative factors zoom in: per axis (width_factor given), the
    # spec's zoom, whose factors below 1 enlarge.
    ([k3("RandomZoom", height_factor=[-0.3, -0.2],
         width_factor=[-0.3, -0.2], fill_mode="nearest",
         interpolation="bilinear", fill_value=0.0, seed=None)],
     "affine zoom 0.7 0.8 interp bilinear fill nearest"),
    ([k2("RandomTranslation", height_factor=0.2, width_factor=(-0.1, 0.1),
         fill_mode="wrap")],
     "affine translate 0.1 0.2 interp bilinear fill wrap"),
    ([k2("RandomContrast", factor=0.3)], "contrast 0.3"),
    ([k3("RandomContrast", factor=[0.2, 0.2], value_range=[0, 255],
         seed=None)], "contrast 0.2"),
    # A delta of up to factor * 255, added.
    ([k3("RandomBrightness", factor=0.1, value_range=[0, 255], seed=None)],
     "channel_shift 25.5"),
]
for body, text in LAYERS:
    for rescale, norm in ((None, " | normalize 0,0,0 0.00392156862745098,"
                           "0.00392156862745098,0.00392156862745098"),
                          (k2("Rescaling", scale=1 / 255, offset=0.0), ""),
                          (k3("Rescaling", scale=1 / 127.5, offset=-1.0),
                           " | normalize 0.5,0.5,0.5 0.5,0.5,0.5")):
        layers = HEAD + body + ([rescale] if rescale else [])
        got = from_layers(layers)
        want = "%s | %s%s | f32 | nhwc" % (GEOM, text, norm)
        desc = "layers %s" % ", ".join(
            "%s%s" % (lay["class_name"], "(Keras 3)" if "module" in lay
                      else "") for lay in layers)
        t.eq(got, want, desc)
        if rescale is None or rescale["config"]["scale"] == 1 / 127.5:
            parses(got, desc)
t.eq(from_layers([k2("Resizing", height=160, width=160,
                     crop_to_aspect_ratio=True)]),
     "decode | resize 160 | center 160 | normalize 0,0,0 "
     "0.00392156862745098,0.00392156862745098,0.00392156862745098 | f32 | "
     "nhwc", "Resizing(crop_to_aspect_ratio=True) alone: resize and the "
     "central square")
t.eq(from_layers([k2("CenterCrop", height=96, width=96,
                     data_format="channels_first"),
                  k2("Rescaling", scale=1 / 255)]),
     "decode | center 96 | f32 | nchw", "channels_first: nchw")

# Rescaling's x * scale + offset is what the spec's normalize gives.
spec = from_layers(HEAD + [k3("Rescaling", scale=1 / 127.5, offset=-1.0)])
fx.pipeline(spec, photos[1], os.path.join(T, "r.npy"))
x8 = fx.pipeline_image(GEOM, photos[1], 0, T).astype(np.float64)
d = np.abs(np.load(os.path.join(T, "r.npy")) - (x8 / 127.5 - 1.0))
t.ok(d.max() < 1e-5, "Rescaling(1/127.5, offset=-1): loaderd's output is "
     "x / 127.5 - 1 of its 8-bit crop (max |diff| %.2g)" % d.max())

# loaderd's draws against the documented ranges.
lay = HEAD + [k2("RandomRotation", factor=0.1),
              k2("RandomZoom", height_factor=(0.2, 0.3)),
              k2("RandomTranslation", height_factor=0.2, width_factor=0.1),
              k2("RandomContrast", factor=0.3),
              k2("RandomBrightness", factor=0.1)]
spec = from_layers(lay)
got = {"rotate": [], "zoom_out": [], "tx": [], "ty": [], "contrast": [],
       "delta": []}
for seed in range(60):
    e = explain(spec, small, seed)
    got["rotate"].append(float(e["rotate"][1]))
    af = [ln for ln in fx.pipeline("--explain", "--seed", str(seed), spec,
                                   small).splitlines()
          if ln.startswith("affine")]
    z, tr = kv(af[0].split()[1:]), kv(af[1].split()[1:])
    got["zoom_out"].append(1 / z["scale"][0] - 1)
    got["tx"].append(tr["translate"][0])
    got["ty"].append(tr["translate"][1])
    got["contrast"].append(float(e["contrast"][1]))
    got["delta"].append(float(e["channel_shift"][1]))
doc = {"rotate": (-36, 36, "factor 0.1 of 360 degrees"),
       "zoom_out": (0.2, 0.3, "height_factor (0.2, 0.3): zoomed out by "
                    "20 to 30 %"),
       "tx": (-0.1 * S - 0.5, 0.1 * S + 0.5, "width_factor 0.1 of 224 px"),
       "ty": (-0.2 * S - 0.5, 0.2 * S + 0.5, "height_factor 0.2 of 224 px"),
       "contrast": (0.7, 1.3, "factor 0.3: [1 - 0.3, 1 + 0.3]"),
       "delta": (-25.5, 25.5, "factor 0.1: a delta within 0.1 * 255")}
for key, (lo, hi, why) in sorted(doc.items()):
    v = np.array(got[key])
    t.ok(v.min() >= lo - 1e-9 and v.max() <= hi + 1e-9 and
         v.min() < lo + 0.25 * (hi - lo) and v.max() > hi - 0.25 * (hi - lo),
         "loaderd's draws for %s span %.3f..%.3f over 60 samples: %s"
         % (key, v.min(), v.max(), why))

# Refusals, by layer name and argument.
for layers, name, arg in (
        ([k2("RandomCrop", height=10, width=10)], "RandomCrop", "no stage"),
        (HEAD + [k2("RandomHeight", factor=0.2)], "RandomHeight",
         "no stage"),
        ([k2("Resizing", height=224, width=224)], "Resizing",
         "crop_to_aspect_ratio=False"),
        ([k2("Resizing", height=224, width=200, crop_to_aspect_ratio=True)],
         "Resizing", "height=224, width=200"),
        ([k2("CenterCrop", height=224, width=100)], "CenterCrop", "square"),
        (HEAD + [k2("RandomTranslation", height_factor=(0, 0.2),
                    width_factor=0.1)], "RandomTranslation",
         "height_factor"),
        (HEAD + [k2("RandomZoom", height_factor=0.2, width_factor=0.1)],
         "RandomZoom", "width_factor"),
        (HEAD + [k2("RandomRotation", factor=0.1, interpolation="bicubic")],
         "RandomRotation", "interpolation"),
        (HEAD + [k2("RandomRotation", factor=0.1),
                 k2("RandomZoom", height_factor=0.1, fill_mode="constant")],
         "RandomZoom", "fill"),
        (HEAD + [k2("RandomContrast", factor=(0.1, 0.5))], "RandomContrast",
         "factor"),
        (HEAD + [k2("RandomBrightness", factor=(-0.1, 0.3))],
         "RandomBrightness", "factor"),
        (HEAD + [k3("RandomBrightness", factor=0.1, value_range=[0, 1])],
         "RandomBrightness", "value_range"),
        (HEAD + [k2("Rescaling", scale=1 / 255), k2("RandomFlip")],
         "RandomFlip", "after Rescaling"),
        (HEAD + [k2("RandomRotation", factor=(0, 0.1)), k2("RandomFlip")],
         "RandomFlip", "symmetric"),
        ([k2("RandomRotation", factor=0.1)] + HEAD, "RandomRotation",
         "before the Resizing"),
        (HEAD + [k2("RandomFlip", mode="horizontal", bogus=3)], "RandomFlip",
         "bogus=3"),
        ([k2("RandomFlip")], "RandomFlip", "no Resizing")):
    e = t.raises(loader.Error, lambda: from_layers(layers),
                 "layers refused, naming %s and %s" % (name, arg),
                 match=name)
    if e is not None:
        t.ok(arg in str(e),
             "the refusal of %s says %r" % (name, arg), e)
