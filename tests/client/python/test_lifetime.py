"""How long a batch lives, against a real loaderd: a released batch
refuses access instead of reading reused memory; an Output, array or
tensor keeps its batch's slot (and bytes) while the stream moves on;
holding ring_slots - 1 batches works and one more is refused with the
remedy; dropping them lets the stream go on; in-place writes to a
delivered tensor neither crash nor reach another stream; closing a
stream never pulls memory from under a live tensor.
"""

import errno
import gc
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture as fx  # noqa: E402

np, torch = fx.need("numpy", "torch")
import loader  # noqa: E402

t = fx.Tap()
T = fx.tmpdir()
D = fx.pack_fmnist(T)
d = fx.Daemon(T, "d", "--threads", "2")
S = d.sock
KW = dict(socket=S, batch_size=50, outputs="image:unit,label",
          order="random", seed=4, epochs=1, ring_slots=4)
want = fx.c_batch_hashes(S, D, "--batch", "50", "--outputs",
                         "image:unit,label", "--order", "random", "--seed",
                         "4", "--epochs", "1")

# --- a released batch -------------------------------------------------------
with loader.Stream(D, **KW) as s:
    b0 = next(s)
    img0 = b0["image"]          # taken before the release: stays valid
    h0 = fx.batch_hash(b0)
    next(s)                     # releases b0
    t.ok(b0.released, "the next iteration releases the batch before")
    t.raises(loader.Error, lambda: b0["image"],
             "b[name] after the release raises loader.Error", "released")
    t.raises(loader.Error, lambda: b0.ids,
             "b.ids after the release raises too", "released")
    b1 = s.next()
    b1.release()
    t.raises(loader.Error, lambda: b1["label"],
             "b.release() ends access as well", "released")
    b1.release()
    t.ok(True, "release() twice is harmless")
    # img0 still holds slot 0, and slots go back in order: b1's waits
    # behind it although nothing views b1 any more.
    a0 = np.asarray(img0).copy()
    t.eq(s.stats()["held"], 3,
         "an Output of a released batch keeps its slot, and the two "
         "released after it wait behind it (slots go back in order)")
    e = t.raises(loader.Error, lambda: next(s),
                 "... so a 4-slot ring has no batch to give",
                 "batch 0:0 (epoch:index) is still viewed")
    t.ok(e is not None and "2 finished batches wait behind" in str(e),
         "... and the error names the batch that blocks and counts those "
         "waiting behind it", str(e))
    t.ok(np.array_equal(np.asarray(img0), a0) and fx.in_ring(img0.data_ptr),
         "... its bytes unchanged, a view of the ring all along")
    del img0, a0, b0
    t.eq(s.stats()["held"], 0,
         "dropping the Output gives back its slot and those behind it")
    b = next(s)
    t.eq((b.index, fx.batch_hash(b)), (3, want[3][3]),
         "the stream goes on with batch 3, the right one")
    del b, b1

# --- holding ring_slots - 1 batches, then one more ------------------------
with loader.Stream(D, **KW) as s:
    kept, got = [], []
    for _ in range(3):
        b = next(s)
        kept.append(torch.from_dlpack(b["image"]))
        got.append((b.epoch, b.index, b.count, fx.batch_hash(b)))
    t.eq(got, want[:3], "3 batches held at once (4 slots): the right bytes")
    e = t.raises(loader.Error, lambda: next(s),
                 "a 4th with 3 tensors alive: loader.Error", "clone")
    t.eq(getattr(e, "code", None), -errno.EBUSY, "... with code -EBUSY")
    t.ok(all(fx.in_ring(x.data_ptr()) for x in kept),
         "the held tensors are views of the ring")
    kept.pop(0)
    b = next(s)
    t.eq((b.index, fx.batch_hash(b)), (want[3][1], want[3][3]),
         "dropping the oldest tensor lets batch 3 come, the right one")
    kept.clear()
    rest = [(b.epoch, b.index, b.count, fx.batch_hash(b))]
    rest += [(b.epoch, b.index, b.count, fx.batch_hash(b)) for b in s]
    t.eq(rest, want[3:], "the rest of the epoch, byte for byte")

# --- a cycle keeps a tensor: collected before giving up ----------------------
with loader.Stream(D, **KW) as s:
    for _ in range(3):
        b = next(s)
        cyc = [torch.from_dlpack(b["label"])]
        cyc.append(cyc)         # a reference cycle only the GC frees
        del cyc
    gc.disable()
    try:
        b = next(s)
        t.ok(b.index == 3, "tensors kept only by reference cycles are "
             "collected instead of failing the 4th batch")
    except loader.Error as e:
        t.ok(False, "tensors kept only by cycles block the ring", str(e))
    finally:
        gc.enable()

# --- in-place writes ----------------------------------------------------------
# Another stream of the same daemon runs alongside; nothing written here
# may reach it, and the writer's own later batches come as the C client's.
with loader.Stream(D, **KW) as s, loader.Stream(D, **KW) as other:
    mine, theirs = [], []
    for b, c in zip(s, other):
        x = torch.from_dlpack(b["image"])
        x.sub_(1).mul_(-3)                   # in place, in the ring
        np.asarray(b["label"])[:] = 99       # through NumPy too
        torch.from_dlpack(b["label"]).add_(1)
        mine.append((b.epoch, b.index, b.count, int(np.asarray(b["label"])[0])))
        theirs.append((c.epoch, c.index, c.count, fx.batch_hash(c)))
        del x
    t.ok(all(m[3] == 100 for m in mine) and len(mine) == len(want),
         "in-place writes through torch and NumPy: no crash, and they land "
         "(%d batches)" % len(mine))
    t.eq(theirs, want, "a stream read alongside is untouched, byte for byte")
with loader.Stream(D, **KW) as s:
    t.eq([(b.epoch, b.index, b.count, fx.batch_hash(b)) for b in s], want,
         "a new stream after the writes: the daemon's bytes, unharmed")

# --- closing under a live tensor -------------------------------------------
s = loader.Stream(D, **KW)
b = next(s)
x = torch.from_dlpack(b["image"])
ref = x.clone()
s.close()
t.ok(torch.equal(x, ref), "close() keeps the memory of a live tensor mapped")
t.raises(loader.Error, lambda: next(s), "next() after close() raises",
         "closed")
del x, b, s
gc.collect()
t.eq(fx.ring_ranges(), [], "the ring is unmapped once the last tensor is gone")

# --- dropped without close() ------------------------------------------------
gc.disable()
try:
    s = loader.Stream(D, **KW)
    for b in s:
        if b.index == 2:
            break
    del s, b
    t.eq(fx.ring_ranges(), [], "a stream dropped mid-epoch without close() "
         "is freed at once (no reference cycle waits for the GC)")
finally:
    gc.enable()
