"""loader.keras: loaderd batches for Keras and tf.data.

    from loader.keras import PyDataset, tf_dataset
    ds = PyDataset("var/fashion-mnist/train", x="image", y="label",
                   batch_size=256, outputs="image:unit,label", seed=1)
    model.fit(ds, epochs=10)                 # Keras 3, any backend

    seq = Sequence("var/fashion-mnist/train", x="image", y="label",
                   batch_size=256, outputs="image:unit,label", seed=1,
                   keras=tf.keras)           # Keras 2: tf.keras <= 2.15
    model.fit(seq, epochs=10)

    tds = tf_dataset("var/fashion-mnist/train", keys=("image", "label"),
                     batch_size=256, outputs="image:unit,label", seed=1)
    for x, y in tds: ...                     # each pass: one epoch

Keras asks a PyDataset or Sequence for batches by index, in a shuffled
order (fit(shuffle=True) is its default), from another thread on the
TensorFlow backend, and it reads a batch or two before training starts
(to build the model or the tf.data spec) that it then asks for again.
A stream delivers its batches in its own order, which loaderd shuffles
reproducibly: so whatever index Keras asks for, it gets the epoch's next
batch (under a lock), and the batches read before training are handed
out again as the epoch's first. An epoch moves on at on_epoch_end() once
Keras took all of it; a shorter one (steps_per_epoch below len()) is an
error that says so.

TensorFlow, Keras and JAX are not packaged in Debian 12: this module is
tested against a replay of Keras' own call order, written from its
source (tests/client/python/keras_replay.py), not against the
frameworks themselves.
"""

import errno as _errno
import operator
import threading

from . import Error, Ragged, UsageError, _int, _spec
from ._epochs import Epochs, key_tuple

__all__ = ["PyDataset", "Sequence", "tf_dataset", "from_image_data_generator",
           "from_layers"]

# Batches Keras 3 reads before an epoch's training and asks for again:
# the TensorFlow backend's spec (ds[0], ds[1]), JAX's symbolic build
# with its read-ahead on an accelerator (two).
PEEK = 2


def _backend(keras):
    """keras.backend.backend() ("tensorflow", "jax", "torch", ...), or
    None when the module does not say."""
    try:
        return keras.backend.backend()
    except AttributeError:
        return None


def _convert(keys, copy, strings, what):
    """Batch -> tuple of arrays, in keys' order. A bytes field becomes
    strings(list of bytes), or is refused when strings is None."""
    def convert(b):
        out = []
        for k in keys:
            v = b.ids if k == "ids" else b[k]
            if isinstance(v, Ragged):
                if strings is None:
                    raise UsageError(
                        "%s: %r is a bytes field, and this Keras backend "
                        "takes no strings (Keras 3 refuses them as 'Invalid "
                        "dtype' on jax and torch): leave it out of x and y, "
                        "or use the tensorflow backend" % (what, k))
                out.append(strings(v.tolist()))
                continue
            a = v.numpy()
            out.append(a.copy() if copy else a)
        return tuple(out)
    return convert


def _own(item):
    """A batch whose arrays are copies (views of the ring are not)."""
    return tuple(a.copy() if hasattr(a, "copy") else a for a in item)


class _Feed:
    """An epoch's batches handed out as Keras asks for them.

    Any index gets the epoch's next batch. The first batches taken are
    kept while they may be ones Keras read before training: Keras 3
    then calls on_epoch_end() after at most PEEK of them and asks for
    them again in the epoch (handed out from the kept ones first); Keras
    2 reads x[0] with no on_epoch_end() after it and then asks for the
    whole epoch, so in that mode (tail=True) the first batch is kept
    through the epoch and handed out again as its last.
    """

    def __init__(self, ep, what, tail):
        self.ep = ep
        self.what = what
        self.tail = tail
        self.lock = threading.Lock()
        self._clear()

    def _clear(self):
        self.it = None       # the epoch's iterator over ep
        self.n = None        # its batches, fixed when it began
        self.taken = 0       # from the stream
        self.served = 0      # to Keras, again-handed ones included
        self.kept = []
        self.again = []      # kept batches to hand out first
        self.replayed = False
        self.extra = 0       # tail mode: kept batches handed out last

    def reset(self):
        with self.lock:
            self._clear()

    def length(self):
        with self.lock:
            return self.n if self.n is not None else len(self.ep)

    def get(self, idx):
        try:
            i = operator.index(idx)
        except TypeError:
            raise TypeError("%s: index %r: an integer" % (self.what, idx))
        with self.lock:
            n = self.n if self.n is not None else len(self.ep)
            if not 0 <= i < n:
                raise IndexError("%s: index %d of an epoch of %d batches"
                                 % (self.what, i, n))
            if self.again:
                self.served += 1
                return self.again.pop(0)
            if self.taken < n:
                if self.it is None:
                    self.n = n
                    self.it = iter(self.ep)
                try:
                    item = next(self.it)
                except StopIteration:
                    raise IndexError(
                        "%s: the stream ended after %d of the epoch's %d "
                        "batches: the epochs= it was opened with are all "
                        "delivered" % (self.what, self.taken, n))
                self.taken += 1
                self.served += 1
                keep = 1 if self.tail else PEEK
                if self.taken <= keep and not self.replayed:
                    # Kept through the epoch (tail), a view would hold
                    # its slot, and the ring gives slots back in order.
                    self.kept.append(_own(item) if self.tail else item)
                elif not self.tail:
                    self.kept = []  # past a peek: the slots go back
                return item
            if self.tail and self.extra < len(self.kept):
                item = self.kept[self.extra]
                self.extra += 1
                self.served += 1
                return item
            raise IndexError(
                "%s: a batch asked for after the epoch's %d were handed "
                "out, before on_epoch_end()" % (self.what, n))

    def epoch_end(self):
        with self.lock:
            if self.served == 0 and not self.again:
                return  # nothing read since (Keras' reset, a second call)
            n = self.n if self.n is not None else len(self.ep)
            if self.taken >= n and not self.again:
                self._clear()  # whole: the stream stands at the next
                return
            if (not self.tail and not self.replayed and
                    self.served == self.taken == len(self.kept) <= PEEK):
                # Read before training (a spec, a model build): the
                # epoch hands them out first.
                self.again, self.kept = self.kept, []
                self.served = 0
                self.replayed = True
                return
            got, total = self.served, n
        raise Error(
            -_errno.EINVAL,
            "%s: on_epoch_end() after %d of the epoch's %d batches: Keras "
            "ended an epoch early (fit(steps_per_epoch=) below len(), or an "
            "interrupted fit()), and the batches it did not take would be "
            "lost. Give fit() steps_per_epoch=None (or len() of the "
            "dataset); after an interruption call set_epoch(epoch + 1) to "
            "go on with the next epoch" % (self.what, got, total))


def _check_workers(what, workers, use_multiprocessing):
    """Keras fetches with a thread pool when workers > 1, so batches
    would come out of order (loaderd's order, and exact resume, depend on
    it), and in processes with use_multiprocessing, which cannot share a
    stream. The daemon decodes on its own threads: one is enough."""
    if use_multiprocessing:
        raise UsageError(
            "%s: use_multiprocessing=True: the dataset holds a loaderd "
            "stream, which child processes cannot share; loaderd decodes "
            "on its own threads, so keep the default (False)" % what)
    if workers != 1:
        raise UsageError(
            "%s: workers=%r: Keras would fetch batches on %r threads and "
            "take them as they finish, out of loaderd's order (which makes "
            "runs reproducible and resumable); loaderd decodes on its own "
            "threads, so keep the default, workers=1" % (what, workers,
                                                         workers))


def _methods(cls_name, tail, keras3):
    """The methods a PyDataset or Sequence shares."""

    def setup(self, dataset, x, y, copy, strings, stream_kwargs):
        keys = (x,) if y is None else (x, y)
        self._keys = keys
        self._copy = copy
        ep = Epochs(dataset, _convert(keys, copy, strings, cls_name),
                    stream_kwargs, keys, ("ids",))
        self._ep = ep
        self._feed = _Feed(ep, cls_name, tail)

    def __len__(self):
        return self._feed.length()

    def __getitem__(self, idx):
        item = self._feed.get(idx)
        return item if len(item) > 1 else item[0]

    def on_epoch_begin(self):
        pass

    def on_epoch_end(self):
        self._feed.epoch_end()

    def set_epoch(self, epoch):
        """The next batch Keras asks for is epoch `epoch`'s first (as
        loader.torch.DataLoader.set_epoch)."""
        self._feed.reset()
        self._ep.set_epoch(epoch)

    @property
    def epoch(self):
        return self._ep.epoch

    @property
    def stream(self):
        return self._ep.stream

    def state_dict(self):
        return self._ep.state_dict()

    def load_state_dict(self, state):
        self._feed.reset()
        self._ep.load_state_dict(state)

    def close(self):
        self._feed.reset()
        self._ep.close()

    ns = dict(_setup=setup, __len__=__len__, __getitem__=__getitem__,
              on_epoch_end=on_epoch_end, set_epoch=set_epoch, epoch=epoch,
              stream=stream, state_dict=state_dict,
              load_state_dict=load_state_dict, close=close)
    if keras3:
        ns["on_epoch_begin"] = on_epoch_begin
        ns["num_batches"] = property(__len__)
    return ns


def _strings_for(keras, tf, backend):
    """How a bytes field goes to this backend: a tf.string tensor under
    TensorFlow (Keras' spec takes dtype "string" only: a NumPy bytes or
    object array is an 'Invalid dtype'), else refused."""
    if backend != "tensorflow":
        return None

    def strings(values):
        t = tf
        if t is None:
            import tensorflow as t
        return t.constant(values, dtype=t.string)
    return strings


_classes = {}


def _class(keras, kind, name, base, init, ns, doc):
    """The class `name` over base, with the shared methods ns, its own
    __init__ and doc, made once per keras module."""
    ns["__init__"] = init
    ns["__doc__"] = doc
    cls = type(name, (base,), ns)
    _classes[(kind, id(keras))] = cls
    return cls


def _pydataset_class(keras):
    """The PyDataset subclass for this keras module (made once)."""
    cls = _classes.get(("py", id(keras)))
    if cls is not None:
        return cls
    base = keras.utils.PyDataset

    def __init__(self, dataset, *, x="image", y="label", copy=None,
                 workers=1, use_multiprocessing=False, max_queue_size=10,
                 tf=None, **stream_kwargs):
        """x, y: output names (y None: x alone); copy: give Keras copies
        (None: under TensorFlow, which wraps aligned NumPy memory
        without copying and prefetches, so views would hold the ring's
        slots; on jax and torch Keras takes one batch at a time, and
        views are safe)."""
        workers = _int("workers", workers)
        max_queue_size = _int("max_queue_size", max_queue_size)
        _check_workers("loader.keras.PyDataset", workers,
                       use_multiprocessing)
        super(cls, self).__init__(workers=workers,
                                  use_multiprocessing=use_multiprocessing,
                                  max_queue_size=max_queue_size)
        backend = _backend(keras)
        if copy is None:
            copy = backend not in ("jax", "torch")
        self._setup(dataset, x, y, copy, _strings_for(keras, tf, backend),
                    stream_kwargs)

    cls = _class(keras, "py", "LoaderPyDataset", base, __init__,
                 _methods("loader.keras.PyDataset", tail=False, keras3=True),
                 "A keras.utils.PyDataset over a loaderd stream: Keras 3's "
                 "fit(), evaluate() and predict() on every backend, with "
                 "their defaults (shuffle=True; workers=1, the only value "
                 "taken).")
    return cls


def _sequence_class(keras):
    """The keras.utils.Sequence subclass for this keras module."""
    cls = _classes.get(("seq", id(keras)))
    if cls is not None:
        return cls
    base = keras.utils.Sequence
    # Keras 3's Sequence is its PyDataset, driven as one.
    keras3 = hasattr(base, "num_batches")

    def __init__(self, dataset, *, x="image", y="label", copy=True, tf=None,
                 **stream_kwargs):
        if keras3:
            super(cls, self).__init__()
        strings = _strings_for(keras, tf, "tensorflow")
        self._setup(dataset, x, y, copy, strings, stream_kwargs)

    cls = _class(keras, "seq", "LoaderSequence", base, __init__,
                 _methods("loader.keras.Sequence", tail=not keras3,
                          keras3=keras3),
                 "A keras.utils.Sequence over a loaderd stream, for Keras 2 "
                 "(tf.keras up to 2.15, tf_keras): fit() with its defaults "
                 "(shuffle=True, workers=1).")
    return cls


def _make(class_for, keras, dataset, kwargs):
    if keras is None:
        import keras
    return class_for(keras)(dataset, **kwargs)


def PyDataset(dataset, *, keras=None, **kwargs):
    """A keras.utils.PyDataset yielding (x, y) batches of a loaderd
    stream, for Keras 3; keras= the module to use (default: import
    keras)."""
    return _make(_pydataset_class, keras, dataset, kwargs)


def Sequence(dataset, *, keras=None, **kwargs):
    """A keras.utils.Sequence yielding (x, y) batches of a loaderd
    stream, for Keras 2 (keras= tf.keras of TensorFlow <= 2.15, or
    tf_keras; default: import keras)."""
    return _make(_sequence_class, keras, dataset, kwargs)


def tf_dataset(dataset, *, keys=("image", "label"), copy=True, tf=None,
               **stream_kwargs):
    """A tf.data.Dataset (from_generator) yielding tuples of the outputs
    in keys. Each iterator over it (a for loop, or an epoch of fit())
    is one epoch from its first batch: the loader's current one when
    nothing of it was yielded yet, else the next. One iterator at a time:
    a second while one is live is refused. Its cardinality is asserted
    (the batches of an epoch), its element spec comes from the stream's
    first batch (kept, not lost).

    copy=True (the default): TensorFlow gets copies. copy=False gives it
    views of the ring, which keep their slots while TensorFlow holds
    them: at most ring_slots - 3 batches may be buffered (prefetch(),
    shuffle(), a queue), and .cache() is refused. tf= the module to use
    (default: import tensorflow)."""
    keys = key_tuple(keys)
    if tf is None:
        import tensorflow as tf
    ep = Epochs(dataset, _convert(keys, copy, list, "tf_dataset"),
                stream_kwargs, keys, ("ids",))
    first = iter(ep)
    try:
        head = next(first)
    except StopIteration:
        raise ValueError("loader.keras.tf_dataset: %s has no batch"
                         % (dataset,))
    whole = ep.batch == 1  # the first epoch starts at its first batch
    # A pipeline with schedules (an '@' in a number) may change the
    # images' shape between epochs: their dimensions are left open.
    varies = "@" in (stream_kwargs.get("pipeline") or "")
    # A bytes field (a list of bytes objects) is a string tensor.
    spec = tuple(tf.TensorSpec(shape=(None,), dtype=tf.string)
                 if isinstance(a, list) else
                 tf.TensorSpec(shape=(None,) + ((None,) * (a.ndim - 1)
                                                if varies else a.shape[1:]),
                               dtype=tf.as_dtype(a.dtype))
                 for a in head)
    pending = [head, first]
    del head, first
    lock = threading.Lock()
    live = []

    def generator():
        with lock:
            if live:
                raise Error(-_errno.EBUSY,
                            "loader.keras.tf_dataset: a second iterator "
                            "while one is live: one stream feeds one pass "
                            "at a time (finish or drop the other; make a "
                            "tf_dataset per concurrent pass)")
            live.append(True)
        try:
            if pending:
                h, it = pending
                pending.clear()
                yield h
                del h
                yield from it
                return
            # A new pass is a new epoch from its first batch.
            if ep.batch != 0:
                ep.set_epoch(ep.epoch + 1)
            yield from ep
        finally:
            with lock:
                live.clear()

    ds = tf.data.Dataset.from_generator(generator, output_signature=spec)
    if whole:
        ds = ds.apply(tf.data.experimental.assert_cardinality(
            len(ep.stream)))
    if not copy:
        def cache(*args, **kwargs):
            raise UsageError(
                "loader.keras.tf_dataset(copy=False): .cache() would keep "
                "views of the ring, whose slots the stream needs back; "
                "make it with copy=True")
        try:
            ds.cache = cache
        except AttributeError:
            pass  # not where it can be told: documented
    ds.loader_epochs = ep  # set_epoch(), state_dict(), stream
    return ds


# --- Keras augmentation as a loaderd pipeline spec ---------------------------

_IDG = "loader.keras.from_image_data_generator"
_FILLS = {"constant": None, "nearest": "nearest", "reflect": "reflect",
          "wrap": "wrap"}


def _target(who, target_size, resize):
    """flow_from_directory's target_size as the spec's geometry: the
    shorter side to resize (default: the target), then the central
    target x target square."""
    if isinstance(target_size, (tuple, list)):
        if len(target_size) != 2 or target_size[0] != target_size[1]:
            _spec.refuse(who, "target_size=%r: the spec's output is square"
                         % (tuple(target_size),))
        target_size = target_size[0]
    size = _spec.side(who, "target_size", target_size)
    if resize is None:
        resize = size
    elif resize is not False and resize != 0:
        resize = _spec.side(who, "resize", resize)
        if resize < size:
            _spec.refuse(who, "resize=%d is below target_size=%d: the "
                         "centre crop would need pixels the image has not"
                         % (resize, size))
    return ("center", resize or 0, size)


def _shift(who, name, v, size):
    """A width or height shift range (a fraction of the side below 1,
    else pixels) as the spec's translate fraction."""
    if isinstance(v, bool) or isinstance(v, int) and v != 0:
        _spec.refuse(who, "%s=%r: an int draws whole pixels from "
                     "range(%r) (with a random sign), which the spec's "
                     "uniform fraction cannot give; pass a float" %
                     (name, v, v))
    if isinstance(v, (list, tuple)) or hasattr(v, "__len__"):
        _spec.refuse(who, "%s=%r: a list of shifts to choose from; the "
                     "spec draws a uniform fraction: pass a float"
                     % (name, v))
    v = float(v)
    if v < 0:
        _spec.refuse(who, "%s=%r is negative" % (name, v))
    frac = v if v < 1 else v / size
    if frac > 1:
        _spec.refuse(who, "%s=%r pixels is more than the image's side (%d)"
                     % (name, v, size))
    return _spec.clean(frac)


def from_image_data_generator(target_size, resize=None, **kwargs):
    """The loaderd pipeline spec that does what
    keras_preprocessing's ImageDataGenerator(**kwargs) does to each image
    of flow_from_directory(target_size=(S, S)): random_transform() (its
    affine, channel shift, flips and brightness, in its order) and
    standardize()'s rescale, channels-last (nhwc) float32 out.

    target_size: the output side (an int, or a square (S, S)). The image
    reaches it as loaderd's evaluation path does: its shorter side is
    resized to resize (default target_size), antialiased bilinear, and
    the central target_size square is taken (resize=False: no resize).
    flow_from_directory instead stretches the whole image to target_size
    (load_img, nearest). Arguments the spec cannot express
    (featurewise_*, samplewise_*, zca_whitening, preprocessing_function,
    channels_first, a shift given as an int or a list, ...) raise
    loader.Error (a loader.UsageError) naming them.
    """
    who = _IDG
    sp = _spec.Spec(who)
    sp.geom = _target(who, target_size, resize)
    size = sp.geom[2]
    kw = dict(kwargs)
    for name in ("featurewise_center", "samplewise_center",
                 "featurewise_std_normalization",
                 "samplewise_std_normalization", "zca_whitening",
                 "preprocessing_function", "validation_split"):
        if kw.pop(name, None):
            why = {"preprocessing_function": "a Python function, which the "
                   "daemon cannot run",
                   "validation_split": "a split of the dataset, not of a "
                   "sample: pack or name the validation split instead"
                   }.get(name, "statistics over the dataset or the "
                         "sample, which the spec's per-pixel normalize "
                         "cannot compute")
            _spec.refuse("ImageDataGenerator(%s=...)" % name, why)
    kw.pop("zca_epsilon", None)
    fmt = kw.pop("data_format", None)
    if fmt not in (None, "channels_last"):
        _spec.refuse("ImageDataGenerator(data_format=%r)" % (fmt,),
                     "the translation is of channels_last images")
    sp.layout = "nhwc"

    def arg(name, default):
        return kw.pop(name, default)

    rotation = float(arg("rotation_range", 0) or 0)
    wshift = arg("width_shift_range", 0.0)
    hshift = arg("height_shift_range", 0.0)
    brightness = arg("brightness_range", None)
    shear = float(arg("shear_range", 0.0) or 0)
    zoom = arg("zoom_range", 0.0)
    cshift = float(arg("channel_shift_range", 0.0) or 0)
    fill_mode = arg("fill_mode", "nearest")
    cval = arg("cval", 0.0)
    hflip = arg("horizontal_flip", False)
    vflip = arg("vertical_flip", False)
    rescale = arg("rescale", None)
    order = arg("interpolation_order", 1)
    dtype = arg("dtype", "float32")
    if kw:
        _spec.refuse("ImageDataGenerator(%s=...)" % sorted(kw)[0],
                     "not an argument loaderd translates")

    # get_random_transform(): theta, the shifts, shear and zoom go to one
    # apply_affine_transform() about the centre (the spec's affine).
    words = []
    if rotation:
        if rotation < 0:
            _spec.refuse("ImageDataGenerator(rotation_range=%r)" % rotation,
                         "negative")
        if rotation > 180:
            # uniform(-r, r) modulo 360 is uniform on the circle only
            # when 2r is whole turns.
            if (2 * rotation) % 360:
                _spec.refuse("ImageDataGenerator(rotation_range=%r)"
                             % rotation, "above 180 degrees, and not a "
                             "multiple of 180 (which would be the whole "
                             "circle)")
            rotation = 180.0
        words.append("rotate %s" % _spec.real(rotation))
    fx = _shift("ImageDataGenerator(width_shift_range=...)",
                "width_shift_range", wshift or 0.0, size)
    fy = _shift("ImageDataGenerator(height_shift_range=...)",
                "height_shift_range", hshift or 0.0, size)
    if fx or fy:
        # get_random_transform() draws tx from height_shift_range and
        # apply_affine_transform() moves rows with it: the height shift
        # is vertical, as its name says (only apply_affine_transform's
        # docstring calls tx the width shift, keras-team/keras #17398).
        words.append("translate %s %s" % (_spec.real(fx), _spec.real(fy)))
    if isinstance(zoom, (int, float)):
        zlo, zhi = 1 - float(zoom), 1 + float(zoom)
    else:
        if len(zoom) != 2:
            _spec.refuse("ImageDataGenerator(zoom_range=%r)" % (zoom,),
                         "a float or two floats")
        zlo, zhi = float(zoom[0]), float(zoom[1])
    zlo, zhi = _spec.clean(zlo), _spec.clean(zhi)
    if (zlo, zhi) != (1, 1):
        if not 0 < zlo <= zhi < 10:
            _spec.refuse("ImageDataGenerator(zoom_range=%r)" % (zoom,),
                         "the spec's zoom is within (0, 10)")
        # zx and zy are drawn on their own from the same range, as the
        # spec's zoom draws its two factors.
        words.append("zoom %s %s" % (_spec.real(zlo), _spec.real(zhi)))
    if shear:
        if not 0 < shear <= 89:
            _spec.refuse("ImageDataGenerator(shear_range=%r)" % shear,
                         "the spec's shear is within -89..89 degrees")
        # Its matrix [[1, -sin s], [0, cos s]] on (row, col) moves each
        # row in proportion to the column: a shear parallel to y. The
        # spec's is torchvision's pure shear (tan s, without Keras'
        # cos s stretch of the width).
        s = _spec.real(shear)
        words.append("shear 0 0 -%s %s" % (s, s))
    if words:
        if order not in (0, 1):
            _spec.refuse("ImageDataGenerator(interpolation_order=%r)"
                         % (order,), "the spec interpolates nearest (0) "
                         "or bilinear (1)")
        if fill_mode not in _FILLS:
            _spec.refuse("ImageDataGenerator(fill_mode=%r)" % (fill_mode,),
                         "one of constant, nearest, reflect, wrap")
        fill = _FILLS[fill_mode] or _spec.fill_text(
            "ImageDataGenerator(cval=%r)" % (cval,), cval)
        sp.geo_modes("ImageDataGenerator", ("nearest", "bilinear")[order],
                     fill)
        sp.add_op("affine %s" % " ".join(words), geometric=True)
    # apply_transform() flips after the affine; the spec flips first.
    # Every range above is symmetric about 0 (zoom's factors are drawn
    # alike for both axes), so the flipped samples have the same law.
    if hflip:
        sp.flip = 0.5
    if vflip:
        sp.vflip = 0.5
    if cshift:
        if not 0 < cshift <= 255:
            _spec.refuse("ImageDataGenerator(channel_shift_range=%r)"
                         % cshift, "the spec's is 0..255")
        sp.add_op("channel_shift %s" % _spec.real(cshift))
    if brightness is not None:
        lo, hi = (float(v) for v in brightness)
        x = _spec.clean(hi - 1)
        if x < 0 or abs(lo - max(0.0, 1 - x)) > 1e-9:
            _spec.refuse("ImageDataGenerator(brightness_range=(%r, %r))"
                         % (lo, hi), "the spec draws a brightness factor in "
                         "[max(0, 1 - X), 1 + X], symmetric about 1")
        sp.add_op("brightness %s" % _spec.real(x))
    # standardize(): x *= rescale on 0..255 values; the spec's normalize
    # is (x / 255 - mean) / std, so std = 1 / (255 rescale).
    r = float(rescale) if rescale else 1.0
    if r <= 0:
        _spec.refuse("ImageDataGenerator(rescale=%r)" % (rescale,),
                     "the spec's scale is positive")
    if r != 1 / 255:
        std = 1 / (255 * r)
        sp.mean, sp.std = (0.0,) * 3, (std,) * 3
    if dtype not in ("float32", "float16"):
        _spec.refuse("ImageDataGenerator(dtype=%r)" % (dtype,),
                     "the spec's floats are float32 and float16")
    sp.dtype = "f32" if dtype == "float32" else "f16"
    return sp.text()


_LAYERS = "loader.keras.from_layers"
# Keys of a layer's config that say nothing about what it does to pixels.
_LAYER_COMMON = {"name", "trainable", "dtype", "seed", "force_generator",
                 "batch_input_shape", "batch_shape", "autocast",
                 "input_dtype", "dtype_policy", "data_format"}


def _layer_range(who, name, v, single):
    """A Keras factor: a float f is (-f, f) (single == "sym"), or (lo, hi)
    as given."""
    if isinstance(v, (list, tuple)):
        if len(v) != 2:
            _spec.refuse(who, "%s=%r: a float or two" % (name, v))
        lo, hi = float(v[0]), float(v[1])
    else:
        lo, hi = -float(v), float(v)
    if lo > hi:
        _spec.refuse(who, "%s=%r: its lower bound is above its upper (Keras "
                     "refuses it too)" % (name, v))
    return lo, hi


def _layer_geo(sp, who, cfg):
    interp = cfg.get("interpolation", "bilinear")
    if interp not in ("nearest", "bilinear"):
        _spec.refuse(who, "interpolation=%r: the spec's are nearest and "
                     "bilinear" % (interp,))
    mode = cfg.get("fill_mode", "reflect")
    if mode not in _FILLS:
        _spec.refuse(who, "fill_mode=%r: constant, nearest, reflect or wrap"
                     % (mode,))
    fill = _FILLS[mode] or _spec.fill_text(who, cfg.get("fill_value", 0.0))
    sp.geo_modes(who, interp, fill)


def from_layers(configs):
    """The loaderd pipeline spec of a list of Keras preprocessing layers,
    each as Keras serialises it ({"class_name": "RandomRotation",
    "config": {...}}, e.g. [keras.layers.serialize(l) for l in layers]),
    applied in that order to 0..255 images, with the layers' documented
    semantics (Keras 2.x and 3): RandomFlip, RandomRotation, RandomZoom,
    RandomTranslation, RandomContrast, RandomBrightness, Rescaling,
    Resizing, CenterCrop. The output is float32 (the layers' dtype),
    channels-last (nhwc; channels_first: nchw), on the scale Rescaling
    gives (0..255 without one). The spec needs a square output: a
    Resizing(S, S, crop_to_aspect_ratio=True) and/or CenterCrop(S, S).
    A layer the spec cannot express raises loader.Error (a
    loader.UsageError) naming it and the argument.
    """
    sp = _spec.Spec(_LAYERS)
    sp.layout = "nhwc"
    resize = None
    rescaled = False
    asym = None
    for i, item in enumerate(configs):
        if not isinstance(item, dict) or "class_name" not in item:
            _spec.refuse("%s: item %d" % (_LAYERS, i), "not a serialised "
                         "layer ({'class_name': ..., 'config': {...}})")
        name = item["class_name"]
        cfg = dict(item.get("config") or {})
        who = "%s (layer %d)" % (name, i)
        fmt = cfg.get("data_format")
        if fmt not in (None, "channels_last", "channels_first"):
            _spec.refuse(who, "data_format=%r" % (fmt,))
        if fmt == "channels_first":
            sp.layout = "nchw"
        known = {
            "RandomFlip": {"mode"},
            "RandomRotation": {"factor", "fill_mode", "interpolation",
                               "fill_value", "value_range"},
            "RandomZoom": {"height_factor", "width_factor", "fill_mode",
                           "interpolation", "fill_value"},
            "RandomTranslation": {"height_factor", "width_factor",
                                  "fill_mode", "interpolation",
                                  "fill_value"},
            "RandomContrast": {"factor", "value_range"},
            "RandomBrightness": {"factor", "value_range"},
            "Rescaling": {"scale", "offset"},
            "Resizing": {"height", "width", "interpolation",
                         "crop_to_aspect_ratio", "pad_to_aspect_ratio",
                         "fill_mode", "fill_value", "antialias"},
            "CenterCrop": {"height", "width"},
        }
        if name not in known:
            _spec.refuse(who, "loaderd's pipeline has no stage for Keras' "
                         "%s (see loader(7) for the layers it translates)"
                         % name)
        extra = sorted(set(cfg) - known[name] - _LAYER_COMMON)
        if extra:
            _spec.refuse(who, "%s=%r: not an argument loaderd translates"
                         % (extra[0], cfg[extra[0]]))
        vr = cfg.get("value_range")
        if vr is not None and [float(v) for v in vr] != [0.0, 255.0]:
            _spec.refuse(who, "value_range=%r: the spec's images are 0..255"
                         % (vr,))
        pixels = name not in ("Rescaling",)
        if pixels and rescaled:
            _spec.refuse(who, "it comes after Rescaling, and the spec "
                         "rescales (normalize) after every pixel stage")
        if name in ("Resizing", "CenterCrop"):
            h, w = int(cfg["height"]), int(cfg["width"])
            if h != w:
                _spec.refuse(who, "height=%d, width=%d: the spec's output "
                             "is square" % (h, w))
            if sp.ops:
                _spec.refuse(who, "it comes after %s, and the spec crops "
                             "first" % sp.ops[0][0].split()[0])
            if sp.geom is not None:
                _spec.refuse(who, "after CenterCrop: the spec has one "
                             "(Resizing and) CenterCrop")
        if name == "Resizing":
            if resize is not None:
                _spec.refuse(who, "a second Resizing")
            if not cfg.get("crop_to_aspect_ratio", False):
                _spec.refuse(who, "crop_to_aspect_ratio=False stretches "
                             "the image to %dx%d, and the spec keeps its "
                             "aspect ratio: crop_to_aspect_ratio=True takes "
                             "the central square, as the spec does" % (h, h))
            if cfg.get("pad_to_aspect_ratio", False):
                _spec.refuse(who, "pad_to_aspect_ratio=True")
            if cfg.get("interpolation", "bilinear") != "bilinear":
                _spec.refuse(who, "interpolation=%r: the spec resizes "
                             "bilinear" % (cfg["interpolation"],))
            resize = _spec.side(who, "height", h)
            continue
        if name == "CenterCrop":
            size = _spec.side(who, "height", h)
            if resize is not None and size > resize:
                _spec.refuse(who, "larger than the Resizing before it")
            sp.geom = ("center", resize or 0, size)
            resize = None
            continue
        if resize is not None and name != "RandomFlip":
            # Resizing(crop_to_aspect_ratio=True) alone is the spec's
            # resize S | center S.
            sp.geom = ("center", resize, resize)
            resize = None
        if name == "RandomFlip":
            mode = cfg.get("mode", "horizontal_and_vertical")
            if mode not in ("horizontal", "vertical",
                            "horizontal_and_vertical"):
                _spec.refuse(who, "mode=%r" % (mode,))
            if asym is not None:
                _spec.refuse(who, "it comes after %s, whose range is not "
                             "symmetric about 0, and the spec flips first"
                             % asym)
            # Each direction flips with probability 1/2 on its own; a
            # flip commutes with the crop and the colour layers and, in
            # law, with the symmetric geometric ones before it.
            for d, attr in (("horizontal", "flip"), ("vertical", "vflip")):
                if d in mode:
                    if getattr(sp, attr) is not None:
                        _spec.refuse(who, "a second %s flip" % d)
                    setattr(sp, attr, 0.5)
            continue
        if sp.geom is None:
            _spec.refuse(who, "it comes before the Resizing or CenterCrop, "
                         "which the spec applies first")
        if name == "RandomRotation":
            lo, hi = _layer_range(who, "factor", cfg["factor"], "sym")
            # A fraction of a full turn; positive: counter-clockwise, as
            # the spec's rotate.
            lo, hi = _spec.clean(lo * 360), _spec.clean(hi * 360)
            if not -180 <= lo <= hi <= 180:
                _spec.refuse(who, "factor=%r: %r..%r degrees, and the "
                             "spec's range is within -180..180"
                             % (cfg["factor"], lo, hi))
            _layer_geo(sp, who, cfg)
            sp.add_op("rotate %s" % _spec.srange(lo, hi), geometric=True)
            if lo != -hi and asym is None:
                asym = name
        elif name == "RandomZoom":
            hlo, hhi = _layer_range(who, "height_factor",
                                    cfg["height_factor"], "sym")
            if not -1 < hlo <= hhi:
                _spec.refuse(who, "height_factor=%r: the factors are above "
                             "-1" % (cfg["height_factor"],))
            wf = cfg.get("width_factor")
            _layer_geo(sp, who, cfg)
            if wf is None:
                # One factor for both axes (the aspect kept): the spec's
                # isotropic scale, the inverse of Keras' (a zoom factor z
                # shows 1 + z of the image). Its bounds are Keras'; the
                # scale is drawn uniformly, where Keras draws 1 + z so.
                slo, shi = 1 / (1 + hhi), 1 / (1 + hlo)
                if not 0 < slo <= shi < 10:
                    _spec.refuse(who, "height_factor=%r: a scale of %r..%r, "
                                 "and the spec's is within (0, 10)"
                                 % (cfg["height_factor"], slo, shi))
                sp.add_op("affine scale %s %s" % (_spec.real(slo),
                                                  _spec.real(shi)),
                          geometric=True)
            else:
                wlo, whi = _layer_range(who, "width_factor", wf, "sym")
                if (wlo, whi) != (hlo, hhi):
                    _spec.refuse(who, "width_factor=%r differs from "
                                 "height_factor=%r: the spec draws both "
                                 "axes' zoom from one range"
                                 % (wf, cfg["height_factor"]))
                zlo, zhi = _spec.clean(1 + hlo), _spec.clean(1 + hhi)
                if not 0 < zlo <= zhi < 10:
                    _spec.refuse(who, "height_factor=%r: the spec's zoom is "
                                 "within (0, 10)" % (cfg["height_factor"],))
                # Per axis, on its own: the spec's zoom, Keras' factor
                # 1 + z (below 1 enlarging).
                sp.add_op("affine zoom %s %s" % (_spec.real(zlo),
                                                 _spec.real(zhi)),
                          geometric=True)
        elif name == "RandomTranslation":
            frs = []
            for key in ("width_factor", "height_factor"):
                lo, hi = _layer_range(who, key, cfg[key], "sym")
                if lo != -hi or not 0 <= hi <= 1:
                    _spec.refuse(who, "%s=%r: the spec shifts by up to a "
                                 "fraction F of the side either way, "
                                 "[-F, F], 0..1" % (key, cfg[key]))
                frs.append(hi)
            _layer_geo(sp, who, cfg)
            sp.add_op("affine translate %s %s" % (_spec.real(frs[0]),
                                                  _spec.real(frs[1])),
                      geometric=True)
        elif name == "RandomContrast":
            lo, hi = _layer_range(who, "factor", cfg["factor"], "sym")
            lo = -lo if isinstance(cfg["factor"], (int, float)) else lo
            # Keras draws in [1 - lower, 1 + upper].
            if lo != hi or not 0 <= hi <= 1:
                _spec.refuse(who, "factor=%r: the spec's contrast factor "
                             "is in [1 - C, 1 + C], 0 <= C <= 1"
                             % (cfg["factor"],))
            sp.add_op("contrast %s" % _spec.real(hi))
        elif name == "RandomBrightness":
            lo, hi = _layer_range(who, "factor", cfg["factor"], "sym")
            if lo != -hi or not 0 <= hi <= 1:
                _spec.refuse(who, "factor=%r: the spec adds one shift in "
                             "[-X, X] (channel_shift), symmetric"
                             % (cfg["factor"],))
            # A shift of up to factor * 255 added to every channel.
            sp.add_op("channel_shift %s" % _spec.real(_spec.clean(hi * 255)))
        elif name == "Rescaling":
            if rescaled:
                _spec.refuse(who, "a second Rescaling")
            scale, offset = cfg.get("scale", 1.0), cfg.get("offset", 0.0)
            if isinstance(scale, (list, tuple)) or \
                    isinstance(offset, (list, tuple)):
                _spec.refuse(who, "a scale or offset per channel")
            scale, offset = float(scale), float(offset)
            if scale <= 0:
                _spec.refuse(who, "scale=%r: the spec's is positive" % scale)
            # x * scale + offset = (x / 255 - mean) / std
            std = 1 / (255 * scale)
            mean = -offset * std
            if not 0 <= mean <= 1:
                _spec.refuse(who, "offset=%r: the spec's mean is 0..1 "
                             "(an offset in -1/scale..0 of 255's scale)"
                             % offset)
            rescaled = (mean, std)
    if resize is not None:
        sp.geom = ("center", resize, resize)
    if sp.geom is None:
        _spec.refuse(" + ".join(str(c.get("class_name")) for c in configs)
                     or "[]", "no Resizing(crop_to_aspect_ratio=True) or "
                     "CenterCrop: the samples of a batch have one size, so "
                     "the spec needs a square (resize SHORT | center SIZE)")
    if rescaled is False:
        rescaled = (0.0, 1 / 255)
    mean, std = rescaled
    if (mean, std) != (0.0, 1.0):
        sp.mean, sp.std = (mean,) * 3, (std,) * 3
    sp.dtype = "f32"
    return sp.text()
