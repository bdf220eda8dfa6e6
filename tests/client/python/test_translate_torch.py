"""loader.torch.from_torchvision: torchvision 0.14 transforms (Debian's
python3-torchvision) as loaderd pipeline specs.

Every transform it covers, alone (the geometry ones) or after a
RandomResizedCrop(224) (the rest, since a spec needs a crop to a
square), and the ImageNet reference recipe's Compose give the expected
text; every translation is what `loaderctl pipeline` prints back as the
canonical text (so it parses, and means what it says); the reference
recipe's spec streams from a real loaderd; refusals name the transform
and the argument. On pixels, the deterministic evaluation Compose
(Resize, CenterCrop, ToTensor, Normalize) on real photographs against
torchvision's own output: max |diff| <= 2 and >= 99 % within 1 on the
8-bit scale.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture as fx  # noqa: E402

np, torch = fx.need("numpy", "torch")
T = fx.need("torchvision.transforms")
IM = T.InterpolationMode
from PIL import Image  # noqa: E402

import loader  # noqa: E402
from loader.torch import from_torchvision  # noqa: E402

photos = fx.need_photos(3)
t = fx.Tap()
T_ = fx.tmpdir()

IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
RRC = "decode | rrc 224"


def canonical(spec):
    """loaderctl pipeline's canonical text of spec (raises if it does not
    parse)."""
    out = fx.pipeline(spec)
    return out.splitlines()[0].split(None, 1)[1]


def check(transform, want, desc):
    got = from_torchvision(transform)
    t.eq(got, want, "%s: %s" % (desc, want))
    try:
        back = canonical(got)
    except Exception as e:  # noqa: B902 - reported as the failure
        t.ok(False, "%s: loaderctl pipeline parses it" % desc, e)
        return
    t.eq(back, got, "%s: loaderctl pipeline parses it and prints it back "
         "unchanged" % desc)


# The geometry transforms, alone.
alone = [
    (T.RandomResizedCrop(224), "decode | rrc 224 | u8 | nhwc"),
    (T.RandomResizedCrop((160, 160), scale=(0.25, 1), ratio=(0.5, 2),
                         interpolation=IM.BILINEAR),
     "decode | rrc 160 scale 0.25 1 ratio 1/2 2 | u8 | nhwc"),
    (T.CenterCrop(224), "decode | center 224 | u8 | nhwc"),
    (T.Compose([T.Resize(256), T.CenterCrop(224)]),
     "decode | resize 256 | center 224 | u8 | nhwc"),
]
for tr, want in alone:
    check(tr, want, repr(tr).replace("\n", " "))

# Each of the rest after RandomResizedCrop(224).
after_rrc = [
    (T.RandomHorizontalFlip(), "flip 0.5"),
    (T.RandomHorizontalFlip(0.3), "flip 0.3"),
    (T.RandomVerticalFlip(), "vflip 0.5"),
    (T.ColorJitter(0.4, 0.4, 0.4, 0.1), "jitter 0.4 0.4 0.4 0.1"),
    (T.ColorJitter(brightness=(0.6, 1.4)), "brightness 0.4"),
    (T.ColorJitter(contrast=2), "contrast 2"),
    (T.ColorJitter(saturation=0.3, hue=0.2), "jitter 0 0 0.3 0.2"),
    (T.ColorJitter(hue=(-0.25, 0.25)), "hue 0.25"),
    (T.RandomRotation(30), "rotate 30"),
    (T.RandomRotation((-10, 20), interpolation=IM.BILINEAR, fill=(10, 20, 30)),
     "rotate -10 20 interp bilinear fill 10,20,30"),
    (T.RandomAffine(15, translate=(0.1, 0.2), scale=(0.8, 1.2), shear=10),
     "affine rotate 15 translate 0.1 0.2 scale 0.8 1.2 shear 10"),
    (T.RandomAffine(0, shear=(-5, 5, -3, 3), fill=7),
     "affine shear -5 5 -3 3 fill 7,7,7"),
    (T.RandomGrayscale(), "grayscale"),
    (T.RandomGrayscale(0.2), "grayscale p 0.2"),
    (T.GaussianBlur(5, sigma=(0.5, 1.5)), "gaussian_blur 5 0.5 1.5"),
    (T.GaussianBlur(3), "gaussian_blur 3 0.1 2"),
    (T.RandomInvert(), "invert"),
    (T.RandomPosterize(4, p=0.2), "posterize 4 p 0.2"),
    (T.RandomSolarize(192), "solarize 192"),
    (T.RandomAutocontrast(p=1), "autocontrast p 1"),
    (T.RandomEqualize(), "equalize"),
    (T.RandomAdjustSharpness(2), "sharpness 2"),
    (T.TrivialAugmentWide(), "trivialaugment"),
    (T.TrivialAugmentWide(interpolation=IM.BILINEAR, fill=[128, 128, 128]),
     "trivialaugment interp bilinear fill 128,128,128"),
    (T.RandAugment(), "randaugment 2 9"),
    (T.RandAugment(num_ops=3, magnitude=15), "randaugment 3 15"),
    (T.AutoAugment(), "autoaugment imagenet"),
    (T.AutoAugment(T.AutoAugmentPolicy.IMAGENET, IM.BILINEAR),
     "autoaugment imagenet interp bilinear"),
]
for tr, want in after_rrc:
    check(T.Compose([T.RandomResizedCrop(224), tr]),
          "%s | %s | u8 | nhwc" % (RRC, want),
          "RandomResizedCrop(224), %s" % repr(tr).replace("\n", " "))

# The conversions, Normalize and RandomErasing: the output's dtype and
# scale (ToTensor: f32 in 0..1; PILToTensor: u8; ConvertImageDtype).
tensors = [
    ([T.ToTensor()], "f32 | nchw"),
    ([T.PILToTensor()], "u8 | nchw"),
    ([T.PILToTensor(), T.ConvertImageDtype(torch.float)], "f32 | nchw"),
    ([T.PILToTensor(), T.ConvertImageDtype(torch.float16)], "f16 | nchw"),
    ([T.ToTensor(), T.Normalize(*IMAGENET)], "normalize imagenet | f32 | "
     "nchw"),
    ([T.ToTensor(), T.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))],
     "normalize 0.5,0.5,0.5 0.25,0.25,0.25 | f32 | nchw"),
    ([T.ToTensor(), T.RandomErasing()], "erase | f32 | nchw"),
    ([T.ToTensor(), T.RandomErasing(0.3, (0.1, 0.2), (0.5, 2), "random")],
     "erase p 0.3 scale 0.1 0.2 ratio 0.5 2 value random | f32 | nchw"),
    # Erasing before Normalize: its value goes through Normalize too.
    ([T.ToTensor(), T.RandomErasing(value=0.5),
      T.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))],
     "normalize 0.5,0.5,0.5 0.25,0.25,0.25 | erase | f32 | nchw"),
    ([T.ToTensor(), T.RandomErasing(value=(1, 0, 0)),
      T.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))],
     "normalize 0.5,0.5,0.5 0.25,0.25,0.25 | erase value 2,-2,-2 | f32 | "
     "nchw"),
]
for trs, want in tensors:
    check(T.Compose([T.RandomResizedCrop(224)] + trs),
          "%s | %s" % (RRC, want), "RandomResizedCrop(224), %s"
          % ", ".join(type(x).__name__ for x in trs))

# The reference recipe (torchvision/references/classification/presets.py,
# ClassificationPresetTrain with auto_augment_policy="ta_wide",
# random_erase_prob=0.1).
REF = T.Compose([T.RandomResizedCrop(224, interpolation=IM.BILINEAR),
                 T.RandomHorizontalFlip(),
                 T.TrivialAugmentWide(interpolation=IM.BILINEAR),
                 T.PILToTensor(), T.ConvertImageDtype(torch.float),
                 T.Normalize(*IMAGENET), T.RandomErasing(0.1)])
REF_SPEC = ("decode | rrc 224 | flip 0.5 | trivialaugment interp bilinear | "
            "normalize imagenet | erase p 0.1 | f32 | nchw")
check(REF, REF_SPEC, "the ImageNet reference recipe")
src = open(os.path.join(fx.SRC, "examples", "recipe_reference.py")).read()
t.ok("decode | rrc 224 | flip 0.5 | trivialaugment interp bilinear" in src
     and "normalize imagenet | erase p 0.1" in src,
     "examples/recipe_reference.py's hand-written spec is the translation")
# A flip before the crop, and between colour ops, commutes: it is moved.
check(T.Compose([T.RandomHorizontalFlip(), T.Resize(256), T.CenterCrop(224),
                 T.ColorJitter(0.2), T.RandomVerticalFlip(0.1),
                 T.ToTensor()]),
      "decode | resize 256 | center 224 | flip 0.5 | vflip 0.1 | "
      "brightness 0.2 | f32 | nchw", "flips before the crop and after a "
      "colour op")

# The reference recipe's spec through a real daemon: batches of its shape.
ds = fx.pack_jpegs(T_, 12)
d = fx.Daemon(T_, "d", "--threads", "2")
with loader.Stream(ds, batch_size=4, outputs="image,label",
                   pipeline=from_torchvision(REF), seed=1, epochs=1,
                   socket=d.sock) as s:
    shapes = []
    for b in s:
        x = np.asarray(b["image"])
        shapes.append((x.shape, str(x.dtype), float(x.min()) < -1,
                       float(x.max()) > 1))
t.eq(shapes, [((4, 3, 224, 224), "float32", True, True)] * 3,
     "the reference recipe's translation streams from loaderd: 3 batches "
     "of float32 [4, 3, 224, 224], normalized")

# Refusals: each names the transform and says it cannot be expressed.
R = T.RandomResizedCrop(224)
refused = [
    (T.Compose([T.Resize((200, 300)), T.CenterCrop(100)]), "Resize",
     "size=(200, 300)"),
    (T.Compose([T.Resize((224, 224))]), "Resize", "stretches"),
    (T.Compose([T.Resize(256)]), "Resize", "without a CenterCrop"),
    (T.Compose([T.Resize(256), T.CenterCrop(224), T.Resize(200)]), "Resize",
     "after the crop"),
    (T.Compose([R, T.RandomRotation(10, interpolation=IM.BICUBIC)]),
     "RandomRotation", "interpolation=BICUBIC"),
    (T.RandomResizedCrop(224, interpolation=IM.NEAREST), "RandomResizedCrop",
     "interpolation=NEAREST"),
    (T.Compose([R, T.ColorJitter(brightness=(0.5, 1.2))]), "ColorJitter",
     "brightness=(0.5, 1.2)"),
    (T.Compose([R, T.ColorJitter(hue=(-0.1, 0.3))]), "ColorJitter", "hue="),
    (T.Compose([R, T.AutoAugment(T.AutoAugmentPolicy.CIFAR10)]),
     "AutoAugment", "CIFAR10"),
    (T.Compose([R, T.RandomRotation(10, expand=True)]), "RandomRotation",
     "expand=True"),
    (T.Compose([R, T.RandomAffine(10, center=(3, 4))]), "RandomAffine",
     "center="),
    (T.Compose([R, T.RandomRotation(10, fill=3), T.RandomAffine(5)]),
     "RandomAffine", "fill"),
    (T.Compose([R, T.GaussianBlur((3, 5))]), "GaussianBlur", "kernel_size"),
    (T.Compose([R, T.RandAugment(num_magnitude_bins=11)]), "RandAugment",
     "num_magnitude_bins=11"),
    (T.Compose([R, T.RandomCrop(200)]), "RandomCrop", "no stage"),
    (T.Compose([R, T.Lambda(lambda x: x)]), "Lambda", "no stage"),
    (T.Compose([R, T.ToTensor(), T.ColorJitter(0.2)]), "ColorJitter",
     "after the conversion to f32"),
    (T.Compose([R, T.TrivialAugmentWide(), T.RandomHorizontalFlip()]),
     "RandomHorizontalFlip", "after TrivialAugmentWide"),
    (T.Compose([R, T.RandomRotation((0, 30)), T.RandomHorizontalFlip()]),
     "RandomHorizontalFlip", "after RandomRotation"),
    (T.Compose([T.ColorJitter(0.2), R]), "ColorJitter", "before the crop"),
    (T.Compose([R, T.PILToTensor(), T.Normalize(*IMAGENET)]), "Normalize",
     "float tensor"),
    (T.Compose([R, T.ToTensor(), T.RandomErasing(value="random"),
                T.Normalize(*IMAGENET)]), "RandomErasing", "random"),
    (T.Compose([R, T.ToTensor(), T.ConvertImageDtype(torch.float64)]),
     "ConvertImageDtype", "float64"),
    (T.ColorJitter(0.4), "ColorJitter", "no RandomResizedCrop or CenterCrop"),
]
for tr, name, arg in refused:
    e = t.raises(loader.Error, lambda: from_torchvision(tr),
                 "refused, naming %s%s" % (name, " and " + arg if arg else ""),
                 match=name + " cannot be expressed")
    if e is not None and arg:
        t.ok(arg in str(e), "the refusal of %s says %r" % (name, arg), e)
t.ok(isinstance(t.raises(loader.Error, lambda: from_torchvision(
    T.Compose([R, T.Grayscale(3)])), "Grayscale (not listed) is refused",
    match="Grayscale cannot be expressed"), ValueError),
    "a refusal is a loader.UsageError, a ValueError too")


# Pixels: the deterministic evaluation Compose, torchvision's own output
# on the photographs against the spec's, on the 8-bit scale. The
# photographs are first made JPEGs of 400 pixels on the short side (PIL,
# quality 90): loaderd decodes an image twice the output's size or more
# at a reduced DCT scale (loaderd(8), PIPELINE), a departure from PIL's
# full decode that is the pipeline's and not the translation's (up to
# ~20 levels on the wallpapers at full size).
EVAL = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(),
                  T.Normalize(*IMAGENET)])
spec = from_torchvision(EVAL)
worst, frac = 0.0, 1.0
std = np.array(IMAGENET[1]).reshape(3, 1, 1)
for i, src_photo in enumerate(photos):
    im = Image.open(src_photo).convert("RGB")
    k = 400 / min(im.size)
    photo = os.path.join(T_, "p%d.jpg" % i)
    im.resize((round(im.size[0] * k), round(im.size[1] * k)),
              Image.BILINEAR).save(photo, quality=90)
    want = EVAL(Image.open(photo).convert("RGB")).numpy()
    out = os.path.join(T_, "e%d.npy" % i)
    fx.pipeline(spec, photo, out)
    got = np.load(out)
    if got.shape != want.shape:
        worst = 999
        break
    d = np.abs((got - want) * std * 255.0)
    worst, frac = max(worst, float(d.max())), min(frac, float((d <= 1).mean()))
t.ok(worst <= 2 and frac >= 0.99,
     "Resize(256), CenterCrop(224), ToTensor, Normalize(imagenet) as %r on "
     "%d photographs = torchvision's own output (max |diff| %.2f, %.2f %% "
     "within 1 on the 8-bit scale)" % (spec, len(photos), worst, 100 * frac))
