"""loader.torch: loaderd batches as torch tensors; each for loop is an epoch.

    from loader.torch import DataLoader
    dl = DataLoader("var/fashion-mnist/train", batch_size=256,
                    outputs="image:unit,label", seed=1, epochs=10)
    for epoch in range(10):
        dl.set_epoch(epoch)
        for batch in dl:                      # {"image": tensor, "label": tensor}
            loss = step(batch["image"], batch["label"])
    torch.save(dl.state_dict(), "loader.pt") # (seed, epoch, next batch)

A job on several nodes that may come back with another world gathers
every rank's state at its checkpoint and gives the list to each new
rank of a named stream (DataLoader(..., name="job")):

    states = [None] * dist.get_world_size()
    dist.all_gather_object(states, dl.state_dict())   # saved by rank 0
    ...
    dl.load_state_dict(states)    # any world, any nodes: each sample once

The tensors view the daemon's shared memory (torch.from_dlpack, no
copy), except bytes fields, which stay loader.Ragged objects; each
keeps its batch's slot of the ring until it is freed, so a
loop may hold a few batches (up to ring_slots - 1) but must copy what it
keeps for longer (x.clone()). In-place operations on them are allowed.
Options are those of loader.Stream; order defaults to "random",
epochs to 0 (endless; set_epoch() moves on) and pad to True: as with
DistributedSampler, when the world does not divide the dataset the
ranks short of a sample take one of the epoch again, so that every
rank's last batch has the same size (an empty or uneven last batch
gives DDP a NaN loss or a BatchNorm error). with_mask=True adds a
bool "mask", False at such a repeat, to leave it out of a loss;
pad=False delivers each sample exactly once instead.
"""

import torch as _torch

from . import Ragged, _spec
from ._epochs import Epochs, key_tuple

__all__ = ["DataLoader", "from_torchvision"]


def _tensor(o, from_dlpack):
    """An Output as a tensor; a Ragged (a bytes field) stays one: torch
    has no ragged tensor to view it as (torch.frombuffer(r[i],
    dtype=torch.uint8) views one value)."""
    return o if isinstance(o, Ragged) else from_dlpack(o)


class DataLoader:
    """An iterable of dicts (or tuples, with keys=) of torch tensors.

    keys: output names to yield as a tuple in that order (e.g.
    ("image", "label")); None yields a dict of every output. Each must
    be an output of the stream: one that is not is refused, with the
    outputs there are: here when outputs= names them, else at the first
    use, from the stream's first batch (kept for the first iteration).

    The stream opens at the first use (iteration, len(), state_dict(),
    .stream), not here: a load_state_dict() before it decides where.
    pin_memory: copy each batch into pinned memory (for asynchronous
    transfers to an accelerator); the copy frees the slot at once.
    with_ids: add the samples' global indices (int64) as "ids"; for a
    mixture (dataset a list or a mixture file, as loader.Stream takes),
    "ids" are indices within members and "member" (int64) follows.
    with_mask: add "mask", a bool tensor, False for the samples that
    padding repeats (the last of a rank's last batch, at most), so that
    loss = (per_sample_loss * mask).sum() / mask.sum() counts each
    sample of the epoch once. pad (default True here) as loader.Stream.
    """

    def __init__(self, dataset, *, keys=None, pin_memory=False,
                 with_ids=False, with_mask=False, **stream_kwargs):
        self.keys = key_tuple(keys)
        self.pin_memory = pin_memory
        self.with_ids = with_ids
        self.with_mask = with_mask
        stream_kwargs.setdefault("pad", True)
        self._ep = Epochs(dataset, self._convert, stream_kwargs, self.keys)

    def _convert(self, b):
        from_dlpack = _torch.from_dlpack
        names = self.keys if self.keys is not None else tuple(b)
        t = [_tensor(b[n], from_dlpack) for n in names]
        if self.with_ids:
            names = names + ("ids",)
            # torch has no uint64 (DLPack import refuses it): the ids,
            # all below 2^63, as int64 through a NumPy view.
            t.append(from_dlpack(b.ids.numpy().view("int64")))
            member = b.member
            if member is not None:
                # Nor uint32: a mixture's members as int64 (a copy of 4
                # bytes a sample, which frees nothing of the ring).
                names = names + ("member",)
                t.append(_torch.from_numpy(member.astype("int64")))
        if self.with_mask:
            names = names + ("mask",)
            t.append(_torch.from_numpy(b.mask()))
        if self.pin_memory:
            t = [x if isinstance(x, Ragged) else x.pin_memory() for x in t]
        if self.keys is not None:
            return tuple(t)
        return dict(zip(names, t))

    def __iter__(self):
        return iter(self._ep)

    def __len__(self):
        """The batches the next (or current) epoch's iteration yields: a
        whole epoch's, or those left of an epoch a checkpoint resumes."""
        return len(self._ep)

    @property
    def stream(self):
        """The loader.Stream underneath (stats(), samples, ...)."""
        return self._ep.stream

    @property
    def epoch(self):
        return self._ep.epoch

    def set_epoch(self, epoch):
        """The next iteration yields epoch `epoch` (as DistributedSampler's
        set_epoch); a no-op when that is the epoch that comes next and
        none of it has been yielded, from its first batch or from where
        load_state_dict() put it."""
        self._ep.set_epoch(epoch)

    def state_dict(self):
        return self._ep.state_dict()

    def load_state_dict(self, state):
        self._ep.load_state_dict(state)

    def close(self):
        self._ep.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --- torchvision transforms as a loaderd pipeline spec ----------------------

def _tv_name(t):
    return type(t).__name__


def _tv_interp(who, mode, allowed=("nearest", "bilinear")):
    """An InterpolationMode (or a legacy PIL integer) as the spec's word."""
    from torchvision.transforms import InterpolationMode
    if isinstance(mode, int):
        from torchvision.transforms.functional import \
            _interpolation_modes_from_int
        mode = _interpolation_modes_from_int(mode)
    name = mode.value if isinstance(mode, InterpolationMode) else str(mode)
    if name not in allowed:
        _spec.refuse(who, "interpolation=%s: the spec resamples with %s only"
                     % (name.upper(), " or ".join(a.upper()
                                                  for a in allowed)))
    return name


def _tv_square(who, name, size):
    """A size torchvision takes (an int, or [h, w]) as one square side."""
    if isinstance(size, int):
        return _spec.side(who, name, size)
    size = list(size)
    if len(size) == 1 or (len(size) == 2 and size[0] == size[1]):
        return _spec.side(who, name, size[0])
    _spec.refuse(who, "%s=%r is not square, and the spec's output is SIZE x "
                 "SIZE" % (name, tuple(size)))


def _tv_factor(who, name, r):
    """ColorJitter's range (as torchvision stores it) as the spec's X,
    whose range is [max(0, 1 - X), 1 + X]; None when it is off."""
    if r is None:
        return None
    lo, hi = float(r[0]), float(r[1])
    x = _spec.clean(hi - 1)
    if x < 0 or abs(lo - max(0.0, 1 - x)) > 1e-9:
        _spec.refuse(who, "%s=(%r, %r): the spec draws a factor in "
                     "[max(0, 1 - X), 1 + X], a range symmetric about 1"
                     % (name, lo, hi))
    if x > 1000:
        _spec.refuse(who, "%s: X=%r is above the spec's 1000" % (name, x))
    return x


def _tv_range(who, name, r, most):
    """A [lo, hi] range of degrees within -most..most."""
    lo, hi = float(r[0]), float(r[1])
    if not -most <= lo <= hi <= most:
        _spec.refuse(who, "%s=(%r, %r): the spec's range is within "
                     "-%s..%s" % (name, lo, hi, most, most))
    return lo, hi


# What each kind of transform is to the translation: the spec's stage
# order is fixed (geometry, flips, colour and geometric stages, the
# conversion, normalize, erase), so each also says where it may stand.
_GEOMETRY = ("RandomResizedCrop", "Resize", "CenterCrop")
_FLIPS = ("RandomHorizontalFlip", "RandomVerticalFlip")


class _TvState:
    """Where the Compose stands: the image's type (None: a PIL image;
    "u8", "f32" or "f16": a tensor of that type, after the conversion),
    the geometry seen, and whether a geometric op whose flip does not
    commute with it came before."""

    def __init__(self):
        self.sp = _spec.Spec("loader.torch.from_torchvision")
        self.dtype = None
        self.resize = None      # a Resize's short side, before CenterCrop
        self.after_geom = False  # a colour or geometric op seen
        self.asym = None        # the first op a later flip cannot precede
        self.erase = None       # (p, scale, ratio, value, dtype, normalized)


def _no_crop(ts):
    _spec.refuse(" + ".join(_tv_name(t) for t in ts) or "Compose([])",
                 "no RandomResizedCrop or CenterCrop: the samples of a "
                 "batch have one size, so the spec needs a crop to a "
                 "square (rrc SIZE, or [resize SHORT |] center SIZE)")


def _tv_pixels(st, who):
    """A colour or geometric op: on the 8-bit image, after the geometry."""
    if not st.has_crop:
        _no_crop([st.current])
    if st.dtype not in (None, "u8"):
        _spec.refuse(who, "it comes after the conversion to %s: the spec "
                     "applies colour and geometric stages to the 8-bit "
                     "image, where torchvision's results on floats are not "
                     "rounded to bytes; move it before ToTensor or "
                     "ConvertImageDtype" % st.dtype)
    if st.sp.geom is None or st.resize is not None:
        _spec.refuse(who, "it comes before the crop (RandomResizedCrop or "
                     "Resize and CenterCrop), which the spec applies first; "
                     "an op before the crop sees the whole image (its mean, "
                     "its histogram, its edges), so moving it would change "
                     "the result")
    st.after_geom = True


def _tv_geo(st, who, t, text, symmetric):
    """A geometric op (rotate, affine, a policy): its interp and fill."""
    _tv_pixels(st, who)
    interp = _tv_interp(who, t.interpolation)
    fill = _spec.fill_text(who, t.fill)
    st.sp.geo_modes(who, interp, fill)
    st.sp.add_op(text, geometric=True, flip_symmetric=symmetric)
    if not symmetric and st.asym is None:
        st.asym = who


def _tv_one(st, t):
    import torch
    from torchvision.transforms import autoaugment as AA
    name = _tv_name(t)
    who = name
    sp = st.sp
    if name in _GEOMETRY:
        if st.dtype not in (None, "u8"):
            _spec.refuse(who, "it comes after the conversion to %s: the "
                         "spec crops and resizes the 8-bit image" % st.dtype)
        if st.dtype is not None and name != "CenterCrop" and \
                getattr(t, "antialias", None) is not True:
            _spec.refuse(who, "it resizes a tensor (after the conversion) "
                         "without antialias=True, which torchvision 0.14 "
                         "does not antialias; the spec always does, as PIL")
        if st.after_geom:
            _spec.refuse(who, "it comes after a colour or geometric op, and "
                         "the spec crops first")
    if name == "RandomResizedCrop":
        if sp.geom is not None or st.resize is not None:
            _spec.refuse(who, "a second geometry: the spec has one "
                         "RandomResizedCrop or one (Resize and) CenterCrop")
        size = _tv_square(who, "size", t.size)
        _tv_interp(who, t.interpolation, ("bilinear",))
        scale = tuple(float(v) for v in t.scale)
        ratio = tuple(float(v) for v in t.ratio)
        if not 0 < scale[0] <= scale[1] <= 1:
            _spec.refuse(who, "scale=%r: the spec's is within (0, 1]"
                         % (scale,))
        if not 0 < ratio[0] <= ratio[1]:
            _spec.refuse(who, "ratio=%r: the spec's is positive, LO <= HI"
                         % (ratio,))
        sp.geom = ("rrc", size, scale, ratio)
        return
    if name == "Resize":
        if sp.geom is not None or st.resize is not None:
            _spec.refuse(who, "it comes after the crop: the spec resizes "
                         "once, before its centre crop")
        if not isinstance(t.size, int) and len(t.size) != 1:
            _spec.refuse(who, "size=%r: a Resize to (h, w) stretches the "
                         "image, and the spec keeps its aspect ratio (give "
                         "Resize an int, the shorter side, then CenterCrop)"
                         % (tuple(t.size),))
        if t.max_size is not None:
            _spec.refuse(who, "max_size=%r: the spec has no bound on the "
                         "longer side" % (t.max_size,))
        _tv_interp(who, t.interpolation, ("bilinear",))
        st.resize = _tv_square(who, "size", t.size)
        return
    if name == "CenterCrop":
        if sp.geom is not None:
            _spec.refuse(who, "a second geometry: the spec has one "
                         "RandomResizedCrop or one (Resize and) CenterCrop")
        size = _tv_square(who, "size", t.size)
        if st.resize is not None and size > st.resize:
            _spec.refuse(who, "size=%d is larger than the Resize before it "
                         "(%d): torchvision pads the image with 0, the "
                         "spec does not" % (size, st.resize))
        sp.geom = ("center", st.resize or 0, size)
        st.resize = None
        return
    if name in _FLIPS:
        p = _spec.prob(who, "p", t.p)
        attr = "flip" if name == "RandomHorizontalFlip" else "vflip"
        if getattr(sp, attr) is not None:
            _spec.refuse(who, "a second %s: the spec has one" % name)
        if st.asym is not None:
            _spec.refuse(who, "it comes after %s, and the spec flips first: "
                         "moving the flip before that op changes what it "
                         "does (a range not symmetric about 0, or an op "
                         "about the top-left corner)" % st.asym)
        # A flip commutes with the resize and the crop (about the centre,
        # or at a uniformly drawn place), with every colour op (pointwise,
        # or of a symmetric kernel), with normalize, with erase's uniform
        # rectangle and, in distribution, with rotations and affines of
        # ranges symmetric about 0: the spec may flip first.
        setattr(sp, attr, p)
        return
    if name == "ColorJitter":
        _tv_pixels(st, who)
        b = _tv_factor(who, "brightness", t.brightness)
        c = _tv_factor(who, "contrast", t.contrast)
        s = _tv_factor(who, "saturation", t.saturation)
        h = None
        if t.hue is not None:
            lo, hi = float(t.hue[0]), float(t.hue[1])
            if lo != -hi or not 0 <= hi <= 0.5:
                _spec.refuse(who, "hue=(%r, %r): the spec draws a shift in "
                             "[-H, H], 0 <= H <= 0.5" % (lo, hi))
            h = hi
        on = [(k, v) for k, v in (("brightness", b), ("contrast", c),
                                  ("saturation", s), ("hue", h))
              if v is not None]
        if len(on) == 1:
            # One factor: the order ColorJitter draws does not matter.
            sp.add_op("%s %s" % (on[0][0], _spec.real(on[0][1])))
        elif on:
            sp.add_op("jitter %s" % " ".join(_spec.real(v or 0)
                                             for v in (b, c, s, h)))
        return
    if name == "RandomRotation":
        if t.expand:
            _spec.refuse(who, "expand=True: the spec's output keeps its size")
        if t.center is not None:
            _spec.refuse(who, "center=%r: the spec turns about the centre"
                         % (t.center,))
        lo, hi = _tv_range(who, "degrees", t.degrees, 180)
        _tv_geo(st, who, t, "rotate %s" % _spec.srange(lo, hi), lo == -hi)
        return
    if name == "RandomAffine":
        if t.center is not None:
            _spec.refuse(who, "center=%r: the spec turns about the centre"
                         % (t.center,))
        lo, hi = _tv_range(who, "degrees", t.degrees, 180)
        words, sym = [], lo == -hi
        if lo or hi:
            words.append("rotate %s" % _spec.srange(lo, hi))
        if t.translate is not None and any(t.translate):
            fx, fy = (float(v) for v in t.translate)
            words.append("translate %s %s" % (_spec.real(fx), _spec.real(fy)))
        if t.scale is not None and tuple(t.scale) != (1, 1):
            slo, shi = (float(v) for v in t.scale)
            if not 0 < slo <= shi < 10:
                _spec.refuse(who, "scale=%r: the spec's is within (0, 10)"
                             % (tuple(t.scale),))
            words.append("scale %s %s" % (_spec.real(slo), _spec.real(shi)))
        if t.shear is not None and any(t.shear):
            sh = [float(v) for v in t.shear] + [0.0, 0.0][len(t.shear) - 2:]
            if not all(-89 <= v <= 89 for v in sh):
                _spec.refuse(who, "shear=%r: the spec's angles are within "
                             "-89..89" % (tuple(t.shear),))
            sym = sym and sh[0] == -sh[1] and sh[2] == -sh[3]
            if sh[2] or sh[3]:
                words.append("shear %s" % " ".join(_spec.real(v)
                                                   for v in sh))
            else:
                words.append("shear %s" % _spec.srange(sh[0], sh[1]))
        if not words:
            words.append("rotate 0")
        _tv_geo(st, who, t, "affine %s" % " ".join(words), sym)
        return
    if name == "RandomGrayscale":
        _tv_pixels(st, who)
        p = _spec.prob(who, "p", t.p)
        sp.add_op("grayscale" + ("" if p == 0.1 else " p %s" % _spec.real(p)))
        return
    if name == "GaussianBlur":
        _tv_pixels(st, who)
        kx, ky = t.kernel_size
        if kx != ky:
            _spec.refuse(who, "kernel_size=%r: the spec's kernel is square"
                         % (tuple(t.kernel_size),))
        if not (kx % 2 == 1 and 1 <= kx <= 31):
            _spec.refuse(who, "kernel_size=%d: the spec's is odd, 1..31"
                         % kx)
        lo, hi = (float(v) for v in t.sigma)
        if not 0 < lo <= hi <= 100:
            _spec.refuse(who, "sigma=(%r, %r): the spec's is within "
                         "0 < LO <= HI <= 100" % (lo, hi))
        sp.add_op("gaussian_blur %d %s %s" % (kx, _spec.real(lo),
                                              _spec.real(hi)))
        return
    simple = {"RandomInvert": "invert", "RandomAutocontrast": "autocontrast",
              "RandomEqualize": "equalize"}
    if name in simple or name in ("RandomPosterize", "RandomSolarize",
                                  "RandomAdjustSharpness"):
        _tv_pixels(st, who)
        p = _spec.prob(who, "p", t.p)
        if name == "RandomPosterize":
            if not 1 <= t.bits <= 8:
                _spec.refuse(who, "bits=%r: the spec keeps 1..8" % t.bits)
            text = "posterize %d" % t.bits
        elif name == "RandomSolarize":
            if not 0 <= t.threshold <= 255:
                _spec.refuse(who, "threshold=%r: the spec's is 0..255 (the "
                             "8-bit scale)" % (t.threshold,))
            text = "solarize %s" % _spec.real(t.threshold)
        elif name == "RandomAdjustSharpness":
            f = float(t.sharpness_factor)
            if not 0 <= f <= 1000:
                _spec.refuse(who, "sharpness_factor=%r: the spec's is "
                             "0..1000" % f)
            text = "sharpness %s" % _spec.real(f)
        else:
            text = simple[name]
        sp.add_op(text + ("" if p == 0.5 else " p %s" % _spec.real(p)))
        return
    if name in ("TrivialAugmentWide", "RandAugment", "AutoAugment"):
        if name == "AutoAugment":
            if t.policy != AA.AutoAugmentPolicy.IMAGENET:
                _spec.refuse(who, "policy=%s: the spec has AutoAugment's "
                             "ImageNet policy only" % t.policy)
            text = "autoaugment imagenet"
        else:
            if t.num_magnitude_bins != 31:
                _spec.refuse(who, "num_magnitude_bins=%r: the spec's "
                             "policies use torchvision's 31 bins"
                             % t.num_magnitude_bins)
            if name == "TrivialAugmentWide":
                text = "trivialaugment"
            else:
                if not 1 <= t.num_ops <= 24:
                    _spec.refuse(who, "num_ops=%r: the spec's is 1..24"
                                 % t.num_ops)
                if not 0 <= t.magnitude <= 30:
                    _spec.refuse(who, "magnitude=%r: the spec's is one of "
                                 "the 31 bins, 0..30" % t.magnitude)
                text = "randaugment %d %d" % (t.num_ops, t.magnitude)
        # Their shears turn about the top-left corner: a flip does not
        # commute with them.
        _tv_geo(st, who, t, text, False)
        return
    if name in ("ToTensor", "PILToTensor"):
        if st.dtype is not None:
            _spec.refuse(who, "the image is already a tensor")
        if sp.geom is None or st.resize is not None:
            _spec.refuse(who, "it comes before the crop, which the spec "
                         "applies to the decoded image")
        st.dtype = "f32" if name == "ToTensor" else "u8"
        return
    if name == "ConvertImageDtype":
        names = {torch.float32: "f32", torch.float16: "f16",
                 torch.uint8: "u8"}
        want = names.get(t.dtype)
        if want is None:
            _spec.refuse(who, "dtype=%s: the spec's element types are "
                         "uint8, float16 and float32" % t.dtype)
        if st.dtype is None:
            _spec.refuse(who, "it comes before ToTensor or PILToTensor "
                         "(torchvision refuses a PIL image)")
        if st.erase is not None:
            _spec.refuse(who, "it comes after RandomErasing, which the spec "
                         "applies to the finished sample")
        if want == "u8" and st.dtype != "u8":
            _spec.refuse(who, "a float image back to uint8: the spec "
                         "converts once, from the 8-bit image")
        if sp.mean is not None and want != st.dtype:
            _spec.refuse(who, "it comes after Normalize")
        st.dtype = want
        return
    if name == "Normalize":
        if st.dtype not in ("f32", "f16"):
            _spec.refuse(who, "it needs a float tensor (ToTensor, or "
                         "ConvertImageDtype(torch.float) after PILToTensor)")
        if sp.mean is not None:
            _spec.refuse(who, "a second Normalize: the spec has one")
        mean = [float(v) for v in t.mean]
        std = [float(v) for v in t.std]
        mean = mean * 3 if len(mean) == 1 else mean
        std = std * 3 if len(std) == 1 else std
        if len(mean) != 3 or len(std) != 3:
            _spec.refuse(who, "mean and std have one value or three (RGB)")
        if not all(0 <= m <= 1 for m in mean) or \
                not all(s > 0 for s in std):
            _spec.refuse(who, "mean=%r, std=%r: the spec's means are 0..1, "
                         "its stds > 0" % (tuple(mean), tuple(std)))
        sp.mean, sp.std = tuple(mean), tuple(std)
        if st.erase is not None:
            e = st.erase
            if e[3] == "random":
                _spec.refuse("RandomErasing", "value='random' before "
                             "Normalize: the spec draws the normal values "
                             "after it, and Normalize would scale them")
            st.erase = e[:3] + (tuple((v - m) / s for v, m, s in
                                      zip(e[3], mean, std)),)
        return
    if name == "RandomErasing":
        if st.dtype is None:
            _spec.refuse(who, "it comes before ToTensor (torchvision "
                         "refuses a PIL image)")
        if st.erase is not None:
            _spec.refuse(who, "a second RandomErasing: the spec has one")
        p = _spec.prob(who, "p", t.p)
        scale = tuple(float(v) for v in t.scale)
        ratio = tuple(float(v) for v in t.ratio)
        if not 0 < scale[0] <= scale[1] <= 1:
            _spec.refuse(who, "scale=%r: the spec's is within (0, 1]"
                         % (scale,))
        if not 0 < ratio[0] <= ratio[1] <= 100:
            _spec.refuse(who, "ratio=%r: the spec's is within (0, 100]"
                         % (ratio,))
        v = t.value
        if isinstance(v, str):
            if v != "random":
                _spec.refuse(who, "value=%r" % v)
            if st.dtype == "u8":
                _spec.refuse(who, "value='random' on a uint8 tensor")
            value = "random"
        else:
            vals = list(v) if isinstance(v, (list, tuple)) else [v]
            vals = [float(x) for x in (vals * 3 if len(vals) == 1 else vals)]
            if len(vals) != 3:
                _spec.refuse(who, "value=%r: one value or three" % (v,))
            if st.dtype == "u8" and not all(0 <= x <= 255 and x == int(x)
                                            for x in vals):
                _spec.refuse(who, "value=%r on a uint8 tensor: the spec "
                             "writes whole values 0..255 there" % (v,))
            # In the tensor's scale as it stands: after Normalize that is
            # the spec's own (it erases after normalize); before it,
            # Normalize maps the value as it maps the image (below).
            value = tuple(vals)
        st.erase = (p, scale, ratio, value)
        return
    _spec.refuse(who, "loaderd's pipeline has no stage for torchvision's %s "
                 "(see loader(7) for the transforms it translates)" % name)


def _tv_flatten(transform, out):
    from torchvision.transforms import Compose
    if isinstance(transform, Compose):
        for t in transform.transforms:
            _tv_flatten(t, out)
    else:
        out.append(transform)
    return out


def from_torchvision(transform):
    """The loaderd pipeline spec that does what transform (a
    torchvision.transforms.Compose, or one transform) does to a decoded
    image, with torchvision 0.14's meaning for every parameter. A
    transform, or an argument of one, that the spec cannot express (or
    an order its fixed stage order cannot reproduce without changing the
    result) raises loader.Error (a loader.UsageError) naming it.

    The output is what the Compose returns: float32 in 0..1 after
    ToTensor (f32), uint8 after PILToTensor (u8), their
    ConvertImageDtype, Normalize's mean and std; CHW (nchw). Without a
    conversion (a PIL image), u8 | nhwc: what numpy.asarray() of it is.
    """
    st = _TvState()
    ts = _tv_flatten(transform, [])
    st.has_crop = any(_tv_name(t) in ("RandomResizedCrop", "CenterCrop")
                      for t in ts)
    for t in ts:
        if type(t).__module__.split(".")[0] != "torchvision":
            _spec.refuse(_tv_name(t), "not a torchvision transform "
                         "(loaderd's pipeline cannot run Python code)")
        st.current = t
        _tv_one(st, t)
    sp = st.sp
    if st.resize is not None:
        _spec.refuse("Resize", "size=%d without a CenterCrop after it: the "
                     "images keep their aspect ratio and differ in shape, "
                     "and a batch's samples are SIZE x SIZE" % st.resize)
    if sp.geom is None:
        _no_crop(ts)
    if st.erase is not None:
        sp.erase = st.erase
    if st.dtype is None:
        sp.dtype, sp.layout = "u8", "nhwc"
    else:
        sp.dtype = st.dtype
    return sp.text()
