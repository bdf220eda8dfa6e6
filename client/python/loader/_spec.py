"""The image pipeline spec's text, as the translators of loader.torch and
loader.keras build it: stages in the spec's fixed order, numbers written
as loaderd writes them (pipeline/image/ispec.c, ispec_format()), so that
a translated spec is already the canonical text `loaderctl pipeline`
prints back.

Nothing here imports torch, torchvision or keras.
"""

import math

from . import UsageError

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
RRC_SCALE = (0.08, 1.0)
RRC_RATIO = (3.0 / 4.0, 4.0 / 3.0)
ERASE_SCALE = (0.02, 0.33)
ERASE_RATIO = (0.3, 3.3)
SIZE_MAX = 8192
MAX_OPS = 24


def real(v):
    """v as ispec_format() writes it: a whole number as one, else the
    shortest %g that reads back as the same double."""
    v = float(v)
    if v == math.floor(v) and abs(v) < 1e15:
        return "%.0f" % v
    for prec in range(1, 18):
        s = "%.*g" % (prec, v)
        if float(s) == v:
            return s
    return s


def frac(v):
    """A ratio as a small fraction when one gives back exactly v."""
    v = float(v)
    for den in range(2, 17):
        num = round(v * den)
        if 1 <= num < 1e6 and num / den == v and num % den:
            return "%d/%d" % (num, den)
    return real(v)


def triple(vs):
    return ",".join(real(v) for v in vs)


def srange(lo, hi):
    """A range as ispec_format() writes it: "D" for [-D, D]."""
    return real(hi) if lo == -hi else "%s %s" % (real(lo), real(hi))


def clean(v):
    """A value computed from the user's numbers (1 + 0.4 - 1), rounded to
    12 significant digits, so that the spec reads 0.4 and not
    0.3999999999999999; the range it gives differs by < 1e-12."""
    return float("%.12g" % v)


def refuse(what, why):
    """loader.Error (a UsageError) saying that what cannot be expressed."""
    raise UsageError("%s cannot be expressed as a loaderd pipeline: %s"
                     % (what, why))


class Spec:
    """A spec under construction, in the spec's own stage order."""

    def __init__(self, what):
        self.what = what        # the translator's name, for messages
        self.geom = None        # ("rrc", size, scale, ratio) or
                                # ("center", resize or 0, size)
        self.flip = None
        self.vflip = None
        self.ops = []           # (text, geometric, flip_symmetric)
        self.interp = None      # ("nearest"|"bilinear", who)
        self.fill = None        # (text, who)
        self.mean = None
        self.std = None
        self.erase = None
        self.dtype = "f32"
        self.layout = "nchw"

    # --- geometric modes: one interp and one fill for the whole spec
    def geo_modes(self, who, interp, fill):
        """Record a geometric stage's interp ("nearest"|"bilinear") and
        fill text ("0", "V0,V1,V2", "nearest", "reflect", "wrap"); a spec
        has one of each, so a second that differs is refused."""
        for kind, val in (("interpolation", interp), ("fill", fill)):
            have = self.interp if kind == "interpolation" else self.fill
            if have is None:
                if kind == "interpolation":
                    self.interp = (val, who)
                else:
                    self.fill = (val, who)
            elif have[0] != val:
                refuse(who, "its %s (%s) differs from %s's (%s), and the "
                       "spec's geometric stages share one pass, so one %s"
                       % (kind, val, have[1], have[0], kind))

    def add_op(self, text, geometric=False, flip_symmetric=True):
        if len(self.ops) >= MAX_OPS:
            refuse(self.what, "more than %d colour and geometric stages"
                   % MAX_OPS)
        self.ops.append((text, geometric, flip_symmetric))

    def geo_suffix(self):
        """interp and fill, written on the first geometric stage only
        (as ispec_format() does), when they are not the defaults."""
        s = ""
        if self.interp and self.interp[0] != "nearest":
            s += " interp %s" % self.interp[0]
        if self.fill and self.fill[0] not in ("0", "0,0,0"):
            s += " fill %s" % self.fill[0]
        return s

    def text(self):
        if self.geom is None:
            refuse(self.what, "it has no geometry, and every sample of a "
                   "stream has one size: the spec needs a RandomResizedCrop "
                   "or a (Resize and) CenterCrop to a square")
        st = ["decode"]
        g = self.geom
        if g[0] == "rrc":
            s = "rrc %d" % g[1]
            if tuple(g[2]) != RRC_SCALE:
                s += " scale %s %s" % (real(g[2][0]), real(g[2][1]))
            if tuple(g[3]) != RRC_RATIO:
                s += " ratio %s %s" % (frac(g[3][0]), frac(g[3][1]))
            st.append(s)
        else:
            if g[1]:
                st.append("resize %d" % g[1])
            st.append("center %d" % g[2])
        if self.flip is not None:
            st.append("flip %s" % real(self.flip))
        if self.vflip is not None:
            st.append("vflip %s" % real(self.vflip))
        first = True
        for text, geometric, _ in self.ops:
            if geometric and first:
                # The pass's modes go before the stage's own p.
                head, sep, p = text.partition(" p ")
                text = head + self.geo_suffix() + (sep + p if sep else "")
                first = False
            st.append(text)
        if self.mean is not None:
            if (tuple(self.mean) == IMAGENET_MEAN and
                    tuple(self.std) == IMAGENET_STD):
                st.append("normalize imagenet")
            else:
                st.append("normalize %s %s" % (triple(self.mean),
                                               triple(self.std)))
        if self.erase is not None:
            p, scale, ratio, value = self.erase
            s = "erase"
            if p != 0.5:
                s += " p %s" % real(p)
            if tuple(scale) != ERASE_SCALE:
                s += " scale %s %s" % (real(scale[0]), real(scale[1]))
            if tuple(ratio) != ERASE_RATIO:
                s += " ratio %s %s" % (real(ratio[0]), real(ratio[1]))
            if value == "random":
                s += " value random"
            elif any(value):
                s += " value %s" % triple(value)
            st.append(s)
        st.append(self.dtype)
        st.append(self.layout)
        return " | ".join(st)


def prob(who, name, p):
    p = float(p)
    if not 0 <= p <= 1:
        refuse(who, "%s=%r is not a probability in 0..1" % (name, p))
    return p


def side(who, name, v):
    v = int(v)
    if not 1 <= v <= SIZE_MAX:
        refuse(who, "%s=%r is not a side in 1..%d" % (name, v, SIZE_MAX))
    return v


def fill_text(who, fill, tensor_scale=1.0):
    """A constant fill (a number or one per channel, 0..255 on the
    8-bit scale) as the spec's fill word."""
    if fill is None:
        return "0"
    vals = list(fill) if isinstance(fill, (list, tuple)) else [fill]
    if len(vals) == 1:
        vals = vals * 3
    if len(vals) != 3:
        refuse(who, "fill=%r: the spec's fill is one value or three"
               % (fill,))
    out = []
    for v in vals:
        v = float(v) * tensor_scale
        if not (0 <= v <= 255 and v == math.floor(v)):
            refuse(who, "fill=%r: the spec's fill is whole 8-bit values "
                   "(0..255)" % (fill,))
        out.append(v)
    if not any(out):
        return "0"
    return triple(out)
