"""loader.keras against a replay of Keras' real call order
(keras_replay.py, written from Keras', tf_keras' and TensorFlow's source:
Keras, TensorFlow and JAX are not in Debian 12), with a real loaderd.

Keras 3's fit() on the tensorflow, jax (CPU and accelerator) and torch
backends with its defaults (shuffle=True, workers=1): the batches Keras
reads before training (two for the TF spec, one or two for a model
build) come again as the epoch's first, so each Keras epoch is exactly a
stream epoch, every sample once; a second fit() goes on with the next
epochs; validation_data with a second stream; steps_per_epoch below
len() and workers=2 or use_multiprocessing refused with the reason;
bytes fields as string tensors under TensorFlow, refused by name on jax
and torch. Keras 2's Sequence (tf_keras' order: x[0] read first, no
on_epoch_end after it), checked against keras_preprocessing's Iterator,
a real Keras 2 Sequence. tf_dataset: one epoch per iterator from its
first batch, an early stop, a second live iterator refused, the
cardinality asserted, .cache() with copies and refused without. Every
batch's data is unchanged when the step lets it go, and nothing runs out
of ring slots at the default ring_slots.
"""

import io
import os
import sys
import tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture as fx  # noqa: E402

np = fx.need("numpy")
fx.need("keras_preprocessing")
from keras_preprocessing.image import ImageDataGenerator  # noqa: E402
import keras_replay as kr  # noqa: E402
import loader  # noqa: E402
import loader.keras  # noqa: E402

t = fx.Tap()
T = fx.tmpdir()
D = fx.pack_fmnist(T)
d = fx.Daemon(T, "d", "--threads", "2")
KW = dict(socket=d.sock, batch_size=500, outputs="image:unit,label",
          seed=21)
N, BPE = 10000, 20


def digest(a):
    a = np.ascontiguousarray(a)
    return fx.digest([(a.ctypes.data, a.nbytes)])


_epochs = {}


def stream_epoch(e):
    """A plain Stream's epoch e, batch by batch, as id lists."""
    if e not in _epochs:
        with loader.Stream(D, order="random", epochs=1, start_epoch=e,
                           **KW) as s:
            _epochs[e] = [b.ids.numpy().tolist() for b in s]
    return _epochs[e]


def whole(epoch):
    return sorted(i for b in epoch for i in b) == list(range(N))


def check_epochs(desc, tr, first):
    """Each Keras epoch of trainer tr is stream epoch first + k, batch by
    batch in its order; no batch changed under the step."""
    want = [stream_epoch(first + k) for k in range(len(tr.epochs))]
    t.ok(all(whole(e) for e in tr.epochs) and tr.epochs == want and
         not tr.changed,
         "%s: %d Keras epochs, each stream epoch %d.. in order, every "
         "sample once, no batch changed under the step" % (
             desc, len(tr.epochs), first),
         "epochs whole %s, equal %s, changed %d" % (
             [whole(e) for e in tr.epochs],
             [a == b for a, b in zip(tr.epochs, want)], tr.changed))


# --- Keras 3 fit(), each backend --------------------------------------------
for backend, acc in (("tensorflow", False), ("jax", False), ("jax", True),
                     ("torch", False)):
    name = backend + (" (accelerator)" if acc else "")
    keras = kr.keras3(backend)
    ds = loader.keras.PyDataset(D, keras=keras, x="image", y="ids", **KW)
    t.ok(isinstance(ds, kr.PyDataset3) and len(ds) == BPE,
         "%s: a keras.utils.PyDataset of len() %d" % (name, BPE))
    tr = kr.Trainer(digest)
    kr.fit3(ds, tr, backend, epochs=3, accelerator=acc, depth=8)
    check_epochs("%s fit(epochs=3)" % name, tr, 0)
    tr2 = kr.Trainer(digest)
    kr.fit3(ds, tr2, backend, epochs=2, built=True, accelerator=acc,
            depth=8)
    check_epochs("%s: a second fit() on the built model" % name, tr2, 3)
    ds.close()

# loader(7)'s example, as written (y="label", validation_data), on every
# backend's call order with fit()'s defaults.
for backend in ("tensorflow", "jax", "torch"):
    keras = kr.keras3(backend)
    ds = loader.keras.PyDataset(D, keras=keras, x="image", y="label",
                                batch_size=256, outputs="image:unit,label",
                                seed=1, socket=d.sock)
    val = loader.keras.PyDataset(D, keras=keras, x="image", y="label",
                                 batch_size=256, outputs="image:unit,label",
                                 order="sequential", socket=d.sock)
    tr, vt = kr.Trainer(digest), kr.Trainer(digest)
    kr.fit3(ds, tr, backend, epochs=2, depth=8, validation=val,
            val_trainer=vt)
    t.eq([sum(len(b) for b in e) for e in tr.epochs + vt.epochs], [N] * 4,
         "%s: the documented example runs fit(epochs=2, validation_data=)"
         % backend)
    ds.close()
    val.close()

# Copies under TensorFlow (its default there), views on jax and torch.
x, _ = loader.keras.PyDataset(D, keras=kr.keras3("tensorflow"), x="image",
                              y="ids", epochs=1, **KW)[0]
t.ok(not fx.in_ring(x.ctypes.data), "tensorflow: batches are copies")
del x
x, _ = loader.keras.PyDataset(D, keras=kr.keras3("torch"), x="image",
                              y="ids", epochs=1, **KW)[0]
t.ok(fx.in_ring(x.ctypes.data), "torch: batches view the ring")
del x

# validation_data: a second stream, each validation run whole.
tr, vt = kr.Trainer(digest), kr.Trainer(digest)
for backend in ("tensorflow", "torch"):
    tr, vt = kr.Trainer(digest), kr.Trainer(digest)
    ds = loader.keras.PyDataset(D, keras=kr.keras3(backend), x="image",
                                y="ids", **KW)
    val = loader.keras.PyDataset(D, keras=kr.keras3(backend), x="image",
                                 y="ids", **dict(KW, order="sequential"))
    kr.fit3(ds, tr, backend, epochs=3, validation=val, val_trainer=vt)
    check_epochs("%s with validation_data" % backend, tr, 0)
    t.ok(len(vt.epochs) == 3 and all(whole(e) for e in vt.epochs),
         "%s: each of the 3 validation runs gets every sample once"
         % backend, [len(e) for e in vt.epochs])
    ds.close()
    val.close()

# steps_per_epoch below len(): refused at the short epoch's end, saying so.
for backend in ("tensorflow", "torch"):
    ds = loader.keras.PyDataset(D, keras=kr.keras3(backend), x="image",
                                y="ids", **KW)
    t.raises(loader.Error, lambda: kr.fit3(
        ds, kr.Trainer(digest), backend, epochs=2, steps_per_epoch=5),
        "%s: fit(steps_per_epoch=5) of a 20-batch dataset is refused"
        % backend, "steps_per_epoch=None")
    ds.close()

# workers and use_multiprocessing: refused with the reason.
t.raises(loader.UsageError, lambda: loader.keras.PyDataset(
    D, keras=kr.keras3("jax"), workers=2, **KW),
    "workers=2 is refused, saying why", "out of loaderd's order")
t.raises(loader.UsageError, lambda: loader.keras.PyDataset(
    D, keras=kr.keras3("jax"), use_multiprocessing=True, **KW),
    "use_multiprocessing=True is refused, saying why", "cannot share")

# Bytes fields: string tensors under TensorFlow, refused elsewhere.
TXT = [b"caption %d " % i + b"x" * (i % 37) for i in range(300)]
with tarfile.open(os.path.join(T, "t.tar"), "w") as tf:
    for i, v in enumerate(TXT):
        for ext, data in (("cls", b"%d" % (i % 10)), ("txt", v)):
            ti = tarfile.TarInfo("s%06d.%s" % (i, ext))
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
fx.run(os.path.join(fx.TOP, "loaderctl"), "pack", os.path.join(T, "t.tar"),
       os.path.join(T, "txt"))
TX = dict(socket=d.sock, batch_size=64, seed=3)
ds = loader.keras.PyDataset(os.path.join(T, "txt"), x="txt", y="ids",
                            keras=kr.keras3("tensorflow"), tf=kr.FakeTF(),
                            **TX)
tr = kr.Trainer(digest)
kr.fit3(ds, tr, "tensorflow", epochs=2)
got = [sorted(i for b in e for i in b) for e in tr.epochs]
t.eq(got, [list(range(300))] * 2, "tensorflow: a bytes field goes as a "
     "string tensor (the spec takes it), every sample once an epoch")
ds.close()
ds = loader.keras.PyDataset(os.path.join(T, "txt"), x="txt", y="ids",
                            keras=kr.keras3("torch"), **TX)
t.raises(loader.UsageError, lambda: ds[0], "torch: a bytes field is "
         "refused by name", "'txt' is a bytes field")
ds.close()

# --- Keras 2: Sequence, as tf_keras' fit() drives it -------------------------
# First the replay itself against a real Keras 2 Sequence:
# keras_preprocessing's Iterator (its flow()), each sample once an epoch.
flow = ImageDataGenerator().flow(np.zeros((1000, 2, 2, 1), "float32"),
                                 np.arange(1000), batch_size=64,
                                 shuffle=True, seed=1)
tr = kr.Trainer(digest)
kr.fit2(flow, tr, epochs=2)
t.ok([sorted(i for b in e for i in b) for e in tr.epochs] ==
     [list(range(1000))] * 2, "the Keras 2 replay drives keras_"
     "preprocessing's Iterator (a real Sequence): each sample once an "
     "epoch")
seq = loader.keras.Sequence(D, keras=kr.keras2(), x="image", y="ids", **KW)
t.ok(isinstance(seq, kr.Sequence2) and len(seq) == BPE,
     "Sequence subclasses Keras 2's keras.utils.Sequence")
tr = kr.Trainer(digest)
kr.fit2(seq, tr, epochs=3)
want = [stream_epoch(e) for e in range(3)]
t.ok(all(whole(e) for e in tr.epochs) and not tr.changed and
     tr.epochs[0] == want[0][1:] + want[0][:1] and tr.epochs[1:] == want[1:],
     "Keras 2 fit(epochs=3): each epoch a stream epoch, every sample once "
     "(the batch read first for the spec comes last in epoch 0)")
t.raises(loader.Error, lambda: kr.fit2(seq, kr.Trainer(digest), epochs=2,
                                       steps_per_epoch=5),
         "Keras 2 fit(steps_per_epoch=5): refused at the short epoch's end",
         "steps_per_epoch=None")
seq.close()
seq = loader.keras.Sequence(D, keras=kr.keras3("tensorflow"), x="image",
                            y="ids", **KW)
tr = kr.Trainer(digest)
kr.fit3(seq, tr, "tensorflow", epochs=2, depth=8)
check_epochs("Sequence under Keras 3 (its Sequence is PyDataset)", tr, 0)
seq.close()

# --- tf_dataset ---------------------------------------------------------------
tf = kr.FakeTF(depth=4)
tds = loader.keras.tf_dataset(D, keys=("image", "ids"), tf=tf, **KW)
t.eq(tds._n, BPE, "tf_dataset asserts its cardinality: %d batches" % BPE)
it = iter(tds)                 # lazy: the generator runs at the first next
e0 = [ids.tolist() for _, ids in it]
e1 = [ids.tolist() for _, ids in tds]
t.ok(e0 == stream_epoch(0) and e1 == stream_epoch(1),
     "one epoch per iterator: 0 (the batch read for the spec first), 1")
it = iter(tds)
head = [next(it)[1].tolist() for _ in range(3)]
it.close()                     # an early stop
e3 = [ids.tolist() for _, ids in tds]
t.ok(head == stream_epoch(2)[:3] and e3 == stream_epoch(3),
     "an iteration stopped after 3 batches: the next is epoch 3 whole")
a = iter(tds)
next(a)
t.raises(loader.Error, lambda: next(iter(tds)), "a second live iterator "
         "is refused", "a second iterator")
a.close()
t.eq(len([1 for _ in tds]), BPE, "... and works once the first is done")
cached = tds.cache()
p1 = [(digest(x), ids.tolist()) for x, ids in cached]
p2 = [(digest(x), ids.tolist()) for x, ids in cached]
t.ok(len(p1) == BPE and p1 == p2, "copy=True: .cache() keeps a pass, the "
     "same data when read again")
ndc = loader.keras.tf_dataset(D, keys=("image", "ids"), tf=tf, copy=False,
                              **KW)
t.raises(loader.UsageError, ndc.cache, "copy=False: .cache() is refused",
         "copy=True")
