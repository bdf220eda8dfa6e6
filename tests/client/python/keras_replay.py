"""A replay of how Keras drives a data source, for the tests of
loader.keras: Keras, TensorFlow and JAX are not in Debian 12.

Written from their source, read at keras-team/keras 3422977a (3.16.0.dev;
3.15.1 differs only where noted), keras-team/tf-keras dd0a7237 (2.21.0,
whose data adapter is byte-identical to keras v2.15.0's) and TensorFlow's
from_generator. Each step cites the file and function it replays.

Keras 3, fit() (keras/src/backend/{tensorflow,jax,torch}/trainer.py,
Trainer.fit; keras/src/trainers/epoch_iterator.py; keras/src/trainers/
data_adapters/py_dataset_adapter.py):
1. EpochIterator.__init__ reads len() (adapter.num_batches).
2. TensorFlow: PyDatasetAdapter.get_tf_dataset reads ds[0] and ds[1]
   (NUM_BATCHES_FOR_TENSOR_SPEC) on the calling thread for the spec
   (data_adapter_utils.get_keras_tensor_spec: every leaf of rank >= 1, a
   dtype in ALLOWED_DTYPES), and drops them. JAX and torch, model not
   built: Trainer._symbolic_build calls on_epoch_begin and reads one
   batch (JAX on an accelerator: two, _one_batch_ahead_iterator), then
   drops it.
3. EpochIterator.reset: len() again, then adapter.on_epoch_end() (always).
4. Each epoch (EpochIterator._enumerate_iterator): on_epoch_begin; a new
   generator unless steps_per_epoch keeps the last one; indices
   range(len) shuffled by random.Random(adapter epoch) (3.15.1: the
   global random.shuffle); TensorFlow fetches on a tf.data prefetch
   thread into a bounded buffer ahead of the step; JAX and torch on the
   main thread; an epoch ends early when the kept generator ran out;
   then adapter.on_epoch_end(), before validation.
5. Validation (Trainer.fit's _eval_epoch_iterator, made once): per run,
   reset (on_epoch_end), on_epoch_begin, indices in order, on_epoch_end.

Keras 2, fit() with a Sequence (tf_keras/engine/data_adapter.py,
KerasSequenceAdapter and DataHandler.enumerate_epochs):
1. The adapter reads x[0] on the main thread (GeneratorDataAdapter.
   __init__, _peek_and_restore) for the spec, and drops it.
2. Each epoch: a new iterator, whose generator_fn shuffles range(len(x))
   with the global random and yields x[i], on tf.data threads
   (prefetch), ahead of the steps; steps = steps_per_epoch or len(x),
   read again each epoch; after callbacks.on_epoch_end,
   adapter.on_epoch_end() calls x.on_epoch_end().

A consumer converts each batch as the framework does (np.asarray: a view
for NumPy arrays, as TF_NewTensor wraps aligned memory) and lets it go
one step late, as a training step that holds its inputs until the next.
"""

import queue
import random
import threading

import numpy as np

ALLOWED_DTYPES = ("float16", "float32", "float64", "uint8", "uint16",
                  "uint32", "uint64", "int8", "int16", "int32", "int64",
                  "bfloat16", "bool", "string")


class StringTensor:
    """tf.constant(list of bytes, dtype=tf.string) as far as Keras looks:
    shape and dtype.name "string"."""

    class _D:
        name = "string"

    dtype = _D()

    def __init__(self, values):
        self.values = list(values)
        self.shape = (len(self.values),)


def spec_of(batch):
    """get_keras_tensor_spec (data_adapter_utils.py): each leaf of rank
    >= 1 with an allowed dtype, else ValueError as Keras raises."""
    out = []
    for x in (batch if isinstance(batch, tuple) else (batch,)):
        if not hasattr(x, "shape"):
            x = np.array(x)
        if len(x.shape) < 1:
            raise ValueError("When passing a dataset to a Keras model, the "
                             "arrays must be at least rank 1")
        name = x.dtype.name
        if name not in ALLOWED_DTYPES:
            raise ValueError("Invalid dtype: %s" % name)
        out.append((tuple(x.shape[1:]), name))
    return out


# --- stand-in modules -----------------------------------------------------------

class PyDataset3:
    """keras.utils.PyDataset of Keras 3 (py_dataset_adapter.py)."""

    def __init__(self, workers=1, use_multiprocessing=False,
                 max_queue_size=10):
        self._workers = workers
        self._use_multiprocessing = use_multiprocessing
        self._max_queue_size = max_queue_size

    @property
    def workers(self):
        return self._workers

    @property
    def use_multiprocessing(self):
        return self._use_multiprocessing

    @property
    def max_queue_size(self):
        return self._max_queue_size

    @property
    def num_batches(self):
        return len(self)

    def on_epoch_begin(self):
        pass

    def on_epoch_end(self):
        pass


class Sequence2:
    """keras.utils.Sequence of Keras 2 (tf_keras/utils/data_utils.py): no
    __init__, no on_epoch_begin."""

    def on_epoch_end(self):
        pass


class _NS:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def keras3(backend):
    return _NS(utils=_NS(PyDataset=PyDataset3, Sequence=PyDataset3),
               backend=_NS(backend=lambda: backend))


def keras2():
    return _NS(utils=_NS(Sequence=Sequence2),
               backend=_NS(backend=lambda: "tensorflow"))


class FakeTF:
    """What loader.keras uses of tensorflow: constant(string), TensorSpec,
    as_dtype, data.Dataset.from_generator (lazy, one generator call per
    iterator, fetched ahead on a thread), apply(assert_cardinality),
    cache(), prefetch()."""

    string = "string"

    class TensorSpec:
        def __init__(self, shape, dtype):
            self.shape, self.dtype = shape, dtype

    @staticmethod
    def as_dtype(dt):
        return np.dtype(dt).name

    @staticmethod
    def constant(values, dtype=None):
        return StringTensor(values)

    def __init__(self, depth=2):
        tf = self

        class Dataset:
            def __init__(self, gen, spec, n=None, cached=None):
                self._gen, self.element_spec = gen, spec
                self._n, self._cached = n, cached

            @staticmethod
            def from_generator(generator, output_signature):
                return Dataset(generator, output_signature)

            def apply(self, fn):
                return fn(self)

            def cache(self):
                return Dataset(self._gen, self.element_spec, self._n, [])

            def __iter__(self):
                return Iterator(self, depth)

        self.data = _NS(Dataset=Dataset, experimental=_NS(
            assert_cardinality=lambda n: lambda ds: Dataset(
                ds._gen, ds.element_spec, n, ds._cached)))
        self.cardinality_errors = []


class CardinalityError(Exception):
    """tf.errors.FailedPreconditionError of assert_cardinality."""


class Iterator:
    """A tf.data iterator over from_generator: the generator is called at
    the first element asked for (_GeneratorState.get_iterator), on a
    prefetch thread that runs `depth` elements ahead; dropping it
    (close(), or the last reference) finishes the generator
    (iterator_completed)."""

    def __init__(self, ds, depth):
        self._ds, self._depth = ds, depth
        self._q = None
        self._stop = threading.Event()
        self._count = 0
        self._done = False
        self._replay = None
        if ds._cached is not None and getattr(ds, "_complete", False):
            self._replay = iter(list(ds._cached))

    def _run(self):
        gen = None
        try:
            gen = self._ds._gen()
            for item in gen:
                while not self._stop.is_set():
                    try:
                        self._q.put(("item", item), timeout=0.05)
                        break
                    except queue.Full:
                        continue
                del item
                if self._stop.is_set():
                    break
            self._q.put(("end", None))
        except BaseException as e:  # noqa: B902 - to the consumer
            self._q.put(("error", e))
        finally:
            if gen is not None:
                gen.close()

    def __iter__(self):
        return self

    def __next__(self):
        if self._replay is not None:
            return next(self._replay)
        if self._done:
            raise StopIteration
        if self._q is None:
            self._q = queue.Queue(self._depth)
            self._t = threading.Thread(target=self._run, daemon=True)
            self._t.start()
        kind, v = self._q.get()
        if kind == "item":
            self._count += 1
            if self._ds._cached is not None:
                self._ds._cached.append(v)
            return v
        self._done = True
        self._t.join()
        if kind == "error":
            raise v
        if self._ds._n is not None and self._count != self._ds._n:
            raise CardinalityError("Input dataset was expected to contain "
                                   "%d elements but contained %d"
                                   % (self._ds._n, self._count))
        if self._ds._cached is not None:
            self._ds._complete = True
        raise StopIteration

    def close(self):
        self._stop.set()
        if self._q is not None and not self._done:
            while self._t.is_alive():
                try:
                    self._q.get(timeout=0.05)
                except queue.Empty:
                    pass
            self._done = True


# --- the consumer -------------------------------------------------------------

class Trainer:
    """Takes batches as a training step does: np.asarray of each leaf (a
    view), the previous batch let go only when the next arrives. Records
    every batch's ids (y) per Keras epoch and checks that a batch's data
    is unchanged when it is let go (a slot reused under it is not).
    on_batch may raise to interrupt."""

    def __init__(self, digest):
        self.digest = digest
        self.epochs = []
        self.prev = None
        self.changed = 0

    def begin_epoch(self):
        self.epochs.append([])

    def step(self, batch):
        leaves = tuple(v if isinstance(v, StringTensor) else np.asarray(v)
                       for v in batch)
        sig = self._sig(leaves)
        self._let_go()
        self.prev = (leaves, sig)
        last = leaves[-1]
        self.epochs[-1].append(list(last.values) if isinstance(
            last, StringTensor) else last.tolist())

    def _sig(self, leaves):
        return [v.values if isinstance(v, StringTensor) else self.digest(v)
                for v in leaves]

    def _let_go(self):
        if self.prev is not None:
            leaves, sig = self.prev
            if self._sig(leaves) != sig:
                self.changed += 1
            self.prev = None

    def end(self):
        self._let_go()


def _shuffled(n, seed, shuffle):
    order = list(range(n))
    if shuffle:
        random.Random(seed).shuffle(order)
    return order


def fit3(ds, trainer, backend, epochs, shuffle=True, steps_per_epoch=None,
         built=False, accelerator=False, depth=4, validation=None,
         val_trainer=None):
    """Keras 3's fit(ds, epochs=, shuffle=, steps_per_epoch=,
    validation_data=) on `backend`; see the module's docstring."""
    state = {"epoch": 0}  # PyDatasetAdapter._epoch

    if ds.workers > 1 or (ds.workers > 0 and ds.use_multiprocessing):
        raise AssertionError("the enqueuer path is not replayed")

    def generator(order_seed):
        # PyDatasetAdapter._finite_generator: len() read at its start.
        n = ds.num_batches
        for i in _shuffled(n, order_seed, shuffle):
            yield ds[i]

    num_batches = ds.num_batches                    # EpochIterator.__init__
    if backend == "tensorflow":                     # get_tf_dataset
        for i in range(min(2, num_batches)):
            spec_of(ds[i])
    elif not built:                                 # _symbolic_build
        _symbolic_build(ds, generator(state["epoch"]), accelerator)
    num_batches = ds.num_batches                    # EpochIterator.reset
    ds.on_epoch_end()
    state["epoch"] += 1
    try:
        _epochs3(ds, trainer, backend, epochs, steps_per_epoch, depth,
                 validation, val_trainer, state, generator, num_batches)
    finally:
        _close(state.get("current"))


def _symbolic_build(ds, gen, accelerator):
    """Trainer._symbolic_build: on_epoch_begin, one batch read (two with
    JAX's read-ahead on an accelerator), its shapes taken, then dropped
    as the function returns."""
    ds.on_epoch_begin()
    for _ in range(2 if accelerator else 1):
        spec_of(next(gen))
    gen.close()


def _epochs3(ds, trainer, backend, epochs, steps_per_epoch, depth,
             validation, val_trainer, state, generator, num_batches):
    current, seen = None, 0
    eval_made = False
    for _ in range(epochs):
        ds.on_epoch_begin()                         # _enumerate_iterator
        trainer.begin_epoch()
        steps = steps_per_epoch or num_batches
        if current is None or steps_per_epoch is None:
            current = _source(backend, generator(state["epoch"]), depth)
            state["current"] = current
        for _ in range(steps):
            if seen >= num_batches:                  # "ran out of data"
                break
            seen += 1
            trainer.step(next(current))
        if seen >= num_batches:
            _close(current)
            current = _source(backend, generator(state["epoch"] + 1), depth)
            state["current"] = current
            seen = 0
        trainer.end()
        ds.on_epoch_end()
        state["epoch"] += 1
        if validation is not None:
            if not eval_made and backend == "tensorflow":
                for i in range(min(2, validation.num_batches)):
                    spec_of(validation[i])
            eval_made = True
            validation.on_epoch_end()               # reset
            validation.on_epoch_begin()
            val_trainer.begin_epoch()
            for i in range(validation.num_batches):
                val_trainer.step(validation[i])
            val_trainer.end()
            validation.on_epoch_end()


def _source(backend, gen, depth):
    """Where a step's batch comes from: the generator itself (JAX, torch:
    the main thread), or a tf.data prefetch thread running ahead."""
    if backend != "tensorflow":
        return gen
    holder = _NS(_gen=lambda: gen, _n=None, _cached=None)
    return Iterator(holder, depth)


def _close(src):
    if src is not None:
        src.close()  # an Iterator, or a generator


def fit2(seq, trainer, epochs, shuffle=True, steps_per_epoch=None, depth=4,
         rng=None):
    """tf_keras' fit(seq, epochs=, shuffle=, steps_per_epoch=) with
    workers=1; see the module's docstring."""
    rng = rng or random.Random(0)
    peek = seq[0]                                   # _peek_and_restore
    if isinstance(peek, list):
        peek = tuple(peek)
    first = peek[0] if isinstance(peek, tuple) else peek
    int(first.shape[0])                             # _first_batch_size
    del peek, first

    def generator_fn():
        order = list(range(len(seq)))
        if shuffle:
            rng.shuffle(order)
        for i in order:
            yield seq[i]

    for _ in range(epochs):
        it = _source("tensorflow", generator_fn(), depth)
        steps = steps_per_epoch or len(seq)         # _infer_steps
        trainer.begin_epoch()
        for _ in range(steps):
            try:
                trainer.step(next(it))
            except StopIteration:
                break
        it.close()
        trainer.end()
        seq.on_epoch_end()                          # after callbacks
