#!/usr/bin/python3
"""One side of bench/keras_flow.sh: Keras-style batches from
keras_preprocessing's flow_from_directory or from loader.keras.PyDataset,
timed.

  --side flow     Debian's keras_preprocessing 1.1.0, as a Keras user
                  calls it:
                      ImageDataGenerator(rescale=1/255, horizontal_flip=True)
                      .flow_from_directory(ROOT, target_size=(224, 224),
                                           batch_size=64)
                  fetched as keras.utils.OrderedEnqueuer does for fit()
                  with workers=N and use_multiprocessing=False (see
                  ordered_enqueuer below).
  --side loaderd  loader.keras.PyDataset over the packed corpus, the
                  pipeline SPEC below in a running loaderd, copy=True;
                  ds[i] for i in range(len(ds)), then ds.on_epoch_end(),
                  each epoch: Keras 3's calls with workers=1 (its
                  default), which call the dataset from the training
                  thread itself, without an enqueuer.

Keras is not packaged in Debian 12: loaderd's side is given a stand-in
module with what loader.keras may ask of it, keras.utils.PyDataset (the
base class, whose constructor only keeps its arguments) and
keras.backend.backend() ("tensorflow").

The first --warmup batches of the first epoch are not timed; the clock
runs from there to the end of epoch --epochs, and the rate over the
images delivered in that time is printed as

    keras_flow side=flow|loaderd img_per_s=... images=... seconds=...
               epochs=... samples=... x=64x224x224x3:float32
               range=0.000..1.000 y=...

(samples: an epoch's images; x, range and y: the first batch's shapes
and types, and the range of its x).  The consumer only takes the
batches and drops them: none of a training step's work is done.
"""

import argparse
import contextlib
import os
import queue
import sys
import threading
import time
import types
from multiprocessing.pool import ThreadPool

try:
    import numpy as np
except ImportError as e:
    print("keras_flow: %s; skipped" % e, file=sys.stderr)
    sys.exit(77)

# flow_from_directory's geometry is PIL's Image.resize((224, 224)) of the
# whole image, aspect ignored. loaderd's rrc with area fraction 1 takes
# the whole image too: no aspect ratio drawn from [1/8, 8) fits the area
# of the whole image in it (but the image's own, by rounding), so after
# its 10 tries rrc falls back to the central crop clamped to that range,
# which for any photograph is the whole image; that is resized to 224x224,
# aspect ignored. Then the same flip, the same x / 255 in f32 and Keras'
# channels_last layout.
SPEC = "decode | rrc 224 scale 1 1 ratio 1/8 8 | flip 0.5 | f32 | nhwc"
SIZE = 224


def parse_args(argv):
    """Parse the command line; return the argparse namespace."""
    p = argparse.ArgumentParser(
        description="Time Keras-style batches from keras_preprocessing's "
        "flow_from_directory or from loader.keras.PyDataset.")
    p.add_argument("data", help="--side flow: the ImageFolder corpus "
                   "(ROOT/CLASS/IMAGE.jpg); --side loaderd: the corpus "
                   "packed by loaderctl pack")
    p.add_argument("--side", required=True, choices=("flow", "loaderd"))
    p.add_argument("--socket", help="loaderd's socket (--side loaderd)")
    p.add_argument("--epochs", type=int, default=1,
                   help="epochs, all timed but for the warm-up batches "
                   "(default 1)")
    p.add_argument("--warmup", type=int, default=3,
                   help="untimed batches at the start of the first epoch "
                   "(default 3)")
    p.add_argument("--batch-size", type=int, default=64,
                   help="batch size (default 64)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="the enqueuer's threads (--side flow; default: "
                   "cores)")
    p.add_argument("--max-queue-size", type=int, default=10,
                   help="the enqueuer's queue (--side flow; default 10, "
                   "Keras' default)")
    p.add_argument("--pipeline", default=SPEC,
                   help="loaderd's pipeline (--side loaderd; default "
                   "%r)" % SPEC)
    p.add_argument("--seed", type=int, default=1,
                   help="seed of the shuffle and the flips (default 1)")
    a = p.parse_args(argv)
    if a.epochs < 1 or a.batch_size < 1 or a.workers < 1 or \
            a.max_queue_size < 1 or a.warmup < 0:
        p.error("--epochs, --batch-size, --workers and --max-queue-size "
                "must be positive, --warmup not negative")
    if a.side == "loaderd" and not a.socket:
        p.error("--side loaderd needs --socket")
    return a


def ordered_enqueuer(seq, epochs, workers, max_queue_size):
    """seq's batches, in order, for epochs epochs, as Keras 2's
    keras.utils.OrderedEnqueuer(seq, use_multiprocessing=False,
    shuffle=False) with start(workers, max_queue_size) and get() gives
    them to fit(): a thread puts seq[i] for i in order as tasks of a pool
    of workers threads (a new pool each epoch) into a queue of
    max_queue_size, whose results are taken in order; at an epoch's end it
    waits until every batch of the queue was taken, looking every 0.1 s,
    then calls seq.on_epoch_end()."""
    q = queue.Queue(max_queue_size)
    stop = threading.Event()
    failed = []

    def run():
        try:
            for _ in range(epochs):
                with contextlib.closing(ThreadPool(workers)) as pool:
                    for i in range(len(seq)):
                        if stop.is_set():
                            return
                        q.put(pool.apply_async(seq.__getitem__, (i,)))
                    # Keras sleeps first, then looks: an epoch's end
                    # costs 0.1 s at least.
                    while not stop.is_set():
                        time.sleep(0.1)
                        if q.unfinished_tasks == 0:
                            break
                seq.on_epoch_end()
        except BaseException as e:  # told to the consumer below
            failed.append(e)
        finally:
            q.put(None)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        while True:
            r = q.get()
            if r is None:
                if failed:
                    raise failed[0]
                return
            x = r.get()
            q.task_done()
            yield x
    finally:
        stop.set()


def flow_batches(a):
    """(batches, samples): flow_from_directory's, as fit() would get
    them."""
    try:
        from keras_preprocessing.image import ImageDataGenerator
    except ImportError as e:
        print("keras_flow: %s; skipped" % e, file=sys.stderr)
        sys.exit(77)
    # The user's call sets no seed=: the Iterator then shuffles and flips
    # with NumPy's global generator, seeded here once. (With a seed= it
    # would reseed that generator at every batch, which with threads
    # reseeds it under another batch's draws.)
    np.random.seed(a.seed)
    gen = ImageDataGenerator(rescale=1 / 255, horizontal_flip=True)
    # It says "Found N images belonging to K classes." on stdout, which
    # is the figures': to stderr.
    with contextlib.redirect_stdout(sys.stderr):
        it = gen.flow_from_directory(a.data, target_size=(SIZE, SIZE),
                                     batch_size=a.batch_size)
    return ordered_enqueuer(it, a.epochs, a.workers, a.max_queue_size), it.n


class _StandInPyDataset:
    """keras.utils.PyDataset's constructor, all that loader.keras asks of
    it."""

    def __init__(self, workers=1, use_multiprocessing=False,
                 max_queue_size=10):
        self.workers = workers
        self.use_multiprocessing = use_multiprocessing
        self.max_queue_size = max_queue_size


STAND_IN_KERAS = types.SimpleNamespace(
    utils=types.SimpleNamespace(PyDataset=_StandInPyDataset),
    backend=types.SimpleNamespace(backend=lambda: "tensorflow"))


def loaderd_batches(a):
    """(batches, samples): loader.keras.PyDataset's, called as Keras 3
    calls it with workers=1."""
    try:
        from loader.keras import PyDataset
    except ImportError as e:
        print("keras_flow: %s; skipped" % e, file=sys.stderr)
        sys.exit(77)
    ds = PyDataset(a.data, keras=STAND_IN_KERAS, x="image", y="label",
                   batch_size=a.batch_size, pipeline=a.pipeline,
                   outputs="image,label", copy=True, order="random",
                   seed=a.seed, socket=a.socket)
    # An epoch's samples, to check against flow_from_directory's count
    # (None where the module does not tell).
    n = getattr(getattr(ds, "stream", None), "samples", None)

    def batches():
        for _ in range(a.epochs):
            for i in range(len(ds)):
                yield ds[i]
            ds.on_epoch_end()

    return batches(), n


def describe(x, y):
    """The first batch, in words: its shapes, types and x's range."""
    return "x=%s:%s range=%.3f..%.3f y=%s:%s" % (
        "x".join(map(str, x.shape)), x.dtype, float(x.min()),
        float(x.max()), "x".join(map(str, y.shape)), y.dtype)


def main(argv):
    a = parse_args(argv)
    batches, n = (flow_batches if a.side == "flow" else loaderd_batches)(a)
    clock = time.perf_counter
    seen = images = 0
    first = None
    t0 = clock()
    for x, y in batches:
        if first is None:
            first = describe(x, y)
        seen += 1
        if seen == a.warmup:
            t0 = clock()
        elif seen > a.warmup:
            images += len(x)
        del x, y
    secs = clock() - t0
    if images == 0:
        print("keras_flow: no batch after the %d warm-up ones: more "
              "--epochs" % a.warmup, file=sys.stderr)
        return 1
    print("keras_flow side=%s img_per_s=%.1f images=%d seconds=%.2f "
          "epochs=%d samples=%s %s"
          % (a.side, images / secs, images, secs, a.epochs, n, first),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
