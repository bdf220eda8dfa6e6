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

from . import Error, Ragged, UsageError, _int
from ._epochs import Epochs, key_tuple

__all__ = ["PyDataset", "Sequence", "tf_dataset"]

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
                         % dataset)
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
