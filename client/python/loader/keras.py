"""loader.keras: loaderd batches for Keras and tf.data.

    from loader.keras import PyDataset, tf_dataset
    ds = PyDataset("var/fashion-mnist/train", x="image", y="label",
                   batch_size=256, outputs="image:unit,label", seed=1)
    model.fit(ds, epochs=10)                 # Keras 3 (and tf.keras >= 2.13)

    tds = tf_dataset("var/fashion-mnist/train", keys=("image", "label"),
                     batch_size=256, outputs="image:unit,label", seed=1)
    for x, y in tds: ...                     # each for loop: one epoch

Batches come as NumPy arrays that view the daemon's shared memory (no
copy), and bytes fields (captions, JSON) as lists of bytes objects
(copies; a string tensor in tf.data); TensorFlow copies them into its own tensors as it takes them, and
each array keeps its batch's slot of the ring until it is freed.
TensorFlow, Keras and JAX are not packaged in Debian 12: this module was
tested against stand-in classes with their interfaces (keras.utils.
PyDataset; tf.data.Dataset.from_generator, tf.TensorSpec, tf.as_dtype),
not against the frameworks themselves. JAX takes the outputs directly:
jax.dlpack.from_dlpack(batch["image"]).
"""

from . import Ragged, _int
from ._epochs import Epochs, key_tuple

__all__ = ["PyDataset", "tf_dataset"]


def _arrays(keys, copy):
    def convert(b):
        out = []
        for k in keys:
            v = b.ids if k == "ids" else b[k]
            if isinstance(v, Ragged):
                # A bytes field: its values as bytes objects (copies),
                # which tf.data takes as a string tensor.
                out.append(v.tolist())
                continue
            a = v.numpy()
            out.append(a.copy() if copy else a)
        return tuple(out)
    return convert


_classes = {}


def _pydataset_class(keras):
    """The PyDataset subclass for this keras module (made once)."""
    cls = _classes.get(id(keras))
    if cls is not None:
        return cls

    class LoaderPyDataset(keras.utils.PyDataset):
        """A keras.utils.PyDataset over a loaderd stream.

        Keras asks for batches by index; a stream delivers them in its
        order, so indices must come in order, 0..len-1 each epoch (as
        Keras does with workers=1, which is all that is needed: the
        daemon prefetches and decodes on its own threads). Each epoch
        is the stream's next.
        """

        def __init__(self, dataset, *, x="image", y="label", copy=False,
                     workers=1, use_multiprocessing=False, max_queue_size=10,
                     **stream_kwargs):
            workers = _int("workers", workers) or 1
            max_queue_size = _int("max_queue_size", max_queue_size) or 10
            super().__init__(workers=workers,
                             use_multiprocessing=use_multiprocessing,
                             max_queue_size=max_queue_size)
            keys = (x,) if y is None else (x, y)
            self._keys = keys
            self._ep = Epochs(dataset, _arrays(keys, copy), stream_kwargs,
                              keys, ("ids",))
            self._it = None
            self._next = 0

        def __len__(self):
            return len(self._ep)

        @property
        def num_batches(self):
            return len(self._ep)

        def __getitem__(self, idx):
            if idx != self._next:
                raise IndexError(
                    "loader.keras.PyDataset: batch %d asked for, %d comes "
                    "next: a stream delivers its batches in order (use "
                    "workers=1 and no shuffle in fit(); loaderd shuffles)"
                    % (idx, self._next))
            if self._it is None:
                self._it = iter(self._ep)
            try:
                item = next(self._it)
            except StopIteration:
                raise IndexError("loader.keras.PyDataset: batch %d is past "
                                 "the end of the epoch" % idx)
            self._next += 1
            return item if len(item) > 1 else item[0]

        def on_epoch_end(self):
            # The rest of an epoch Keras stopped early is skipped.
            self._it = None
            self._next = 0
            self._ep.set_epoch(self._ep.epoch if self._ep.batch == 0
                               else self._ep.epoch + 1)

        @property
        def stream(self):
            return self._ep.stream

        def state_dict(self):
            return self._ep.state_dict()

        def load_state_dict(self, state):
            self._it = None
            self._next = 0
            self._ep.load_state_dict(state)

    _classes[id(keras)] = LoaderPyDataset
    return LoaderPyDataset


def PyDataset(dataset, *, keras=None, **kwargs):
    """A keras.utils.PyDataset yielding (x, y) batches of a loaderd
    stream; keras= the module to use (default: import keras)."""
    if keras is None:
        import keras
    return _pydataset_class(keras)(dataset, **kwargs)


def tf_dataset(dataset, *, keys=("image", "label"), copy=False, tf=None,
               **stream_kwargs):
    """A tf.data.Dataset (from_generator) yielding tuples of the outputs
    in keys; each pass over it (a for loop, or an epoch of model.fit)
    is one epoch. Its element spec comes from the stream's first batch
    (kept, not lost); tf= the module to use (default: import tensorflow)."""
    keys = key_tuple(keys)
    if tf is None:
        import tensorflow as tf
    ep = Epochs(dataset, _arrays(keys, copy), stream_kwargs, keys,
                ("ids",))
    first = iter(ep)
    try:
        head = next(first)
    except StopIteration:
        raise ValueError("loader.keras.tf_dataset: %s has no batch"
                         % dataset)
    # A bytes field (a list of bytes objects) is a string tensor.
    spec = tuple(tf.TensorSpec(shape=(None,), dtype=tf.string)
                 if isinstance(a, list) else
                 tf.TensorSpec(shape=(None,) + a.shape[1:],
                               dtype=tf.as_dtype(a.dtype))
                 for a in head)
    pending = [head, first]

    def generator():
        # The first call goes on with the epoch whose first batch gave
        # the spec; every later call is the next epoch.
        if pending:
            h, it = pending
            pending.clear()
            yield h
            del h
            yield from it
        else:
            yield from ep

    ds = tf.data.Dataset.from_generator(generator, output_signature=spec)
    ds.loader_epochs = ep  # set_epoch(), state_dict(), stream
    return ds
