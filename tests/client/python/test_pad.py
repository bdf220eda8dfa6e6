"""Padding the epoch's end (issue 41, reproduction 6): world 3, batches
of 101, the test split's 10,000 samples. The ranks' shares are 3334,
3333 and 3333, so without padding the last batches hold 1, 0 and 0
samples: an empty batch, a NaN loss in DDP. Padded (loader.Stream's
pad=True, loader.torch.DataLoader's default), each rank's last batch
holds 1, ranks 1 and 2 repeating a sample of the epoch, flagged by
batch.repeats and batch.mask() (the torch adapter's "mask"), so that
outside the repeats every sample still comes once. Batch counts and
every other sample are those of an unpadded stream, so a named stream
resumes padded or not, with another world too.
"""

import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture as fx  # noqa: E402

np, torch = fx.need("numpy", "torch")
import loader  # noqa: E402
import loader._lib as L  # noqa: E402
import loader.torch  # noqa: E402

t = fx.Tap()
T = fx.tmpdir()
D = fx.pack_fmnist(T)
d = fx.Daemon(T, "d", "--threads", "1")
N, W, B, BPE = 10000, 3, 101, 34  # ceil(ceil(10000 / 3) / 101) = 34
KW = dict(socket=d.sock, batch_size=B, outputs="label", order="random",
          seed=3, epochs=1, world=W)


def stream_batches(**kw):
    """Every rank's batches: [(count, repeats, ids, labels, mask)]."""
    out = []
    for r in range(W):
        with loader.Stream(D, rank=r, **dict(KW, **kw)) as s:
            out.append([(b.count, b.repeats, b.ids.numpy().tolist(),
                         b["label"].numpy().tolist(), b.mask().tolist())
                        for b in s])
    return out


plain = stream_batches()
t.eq([len(r) for r in plain], [BPE] * W, "unpadded: 34 batches a rank")
t.eq([r[-1][0] for r in plain], [1, 0, 0], "unpadded: the last batches "
     "hold 1, 0 and 0 samples (the uneven end padding mends)")

padded = stream_batches(pad=True)
t.eq([len(r) for r in padded], [BPE] * W, "padded: the same 34 batches a "
     "rank")
t.eq([r[-1][0] for r in padded], [1, 1, 1], "padded: every rank's last "
     "batch holds 1 sample")
t.eq([[b[1] for b in r] for r in padded],
     [[0] * BPE, [0] * (BPE - 1) + [1], [0] * (BPE - 1) + [1]],
     "batch.repeats: 1 in the last batch of ranks 1 and 2 only")
t.eq([r[-1][4] for r in padded], [[True], [False], [False]],
     "batch.mask() leaves the repeats out")
t.ok(all(p[:-1] == q[:-1] for p, q in zip(padded, plain))
     and padded[0][-1] == plain[0][-1],
     "every other batch is the unpadded stream's, ids and labels")
own = [i for r in padded for b in r for i, m in zip(b[2], b[4]) if m]
t.eq((len(own), len(set(own))), (N, N), "outside the repeats, every "
     "sample of the epoch once")
label_of = {i: y for r in plain for b in r for i, y in zip(b[2], b[3])}
reps = [(b[2][-1], b[3][-1]) for r in padded for b in r[-1:] if b[1]]
t.ok(len(reps) == 2 and all(label_of[i] == y for i, y in reps),
     "each repeat is a real sample of the epoch, with its own label",
     "repeats %s" % reps)
with loader.Stream(D, rank=2, pad=True, **KW) as s:
    last = None
    for b in s:
        if b.index == BPE - 1:
            last = repr(b)
t.ok(last and "(1 repeated)" in last, "a Batch's repr names its repeats",
     last)

dropped = stream_batches(pad=True, drop_last=True)
t.eq(([len(r) for r in dropped],
      sorted({b[0] for r in dropped for b in r}),
      sum(b[1] for r in dropped for b in r)), ([33] * W, [B], 0),
     "drop_last: full batches only, padding has no effect")

# The torch adapter pads by default and gives the mask on request.
got = []
for r in range(W):
    dl = loader.torch.DataLoader(D, keys=("label",), with_ids=True,
                                 with_mask=True, rank=r,
                                 **dict(KW, epochs=0))
    dl.set_epoch(0)
    rows = [(len(y), ids.tolist(), m.tolist()) for y, ids, m in dl]
    got.append(rows)
    dl.close()
t.eq([[len(rows), rows[-1][0]] for rows in got], [[BPE, 1]] * W,
     "loader.torch.DataLoader pads by default: 34 batches a rank, each "
     "last one of 1 sample")
t.eq([rows[-1][2] for rows in got], [[True], [False], [False]],
     "... with a bool mask, False at the repeats")
own = [i for rows in got for _, ids, m in rows for i, k in zip(ids, m) if k]
t.eq(sorted(own), sorted(range(N)), "... that leaves every sample once")
losses = []
for rows in got:
    y = torch.zeros(rows[-1][0], dtype=torch.long)
    logits = torch.zeros(rows[-1][0], 10)
    losses.append(torch.nn.functional.cross_entropy(logits, y).item())
t.ok(all(np.isfinite(losses)), "every rank's last batch gives a finite "
     "mean loss", "losses %s" % losses)
dl = loader.torch.DataLoader(D, keys=("label",), rank=1, pad=False,
                             **dict(KW, epochs=0))
t.eq([len(y) for (y,) in dl][-1], 0, "pad=False: the unpadded stream, "
     "rank 1's last batch empty")
dl.close()

# A named stream resumed with another world pads the rest it deals: the
# ranks of world 3 stop 10 batches in (rank 2 at 9), world 2 goes on.
pos = []
for r in range(W):
    s = loader.Stream(D, rank=r, name="padjob", fresh=True, pad=True,
                      **dict(KW, outputs=None))
    seen = []
    for k, b in enumerate(s):
        seen.append(b.ids.numpy().tolist())
        b.release()
        if k + 1 == (9 if r == 2 else 10):
            break
    pos.append(((0, k + 1), seen))
    plan = s.plan
    s.close()
first = [i for _, seen in pos for b in seen for i in b]
rest, sizes = [], []
for r in range(2):
    with loader.Stream(D, rank=r, name="padjob", pad=True,
                       resume_from=[p for p, _ in pos], resume_plan=plan,
                       **dict(KW, world=2)) as s:
        bs = [(b.count, b.repeats, b.ids.numpy().tolist(),
               b.mask().tolist()) for b in s]
    sizes.append((len(bs), bs[-1][0]))
    rest += [i for c, _, ids, m in bs for i, k in zip(ids, m) if k]
t.ok(sizes[0] == sizes[1], "padded 3 -> 2: both new ranks get as many "
     "batches, the last of the same size", "batches, last sizes %s" % sizes)
t.eq(sorted(first + rest), list(range(N)), "padded 3 -> 2: every sample "
     "of the epoch once outside the repeats")

# loader_repeats() refuses a batch that is not held.
with loader.Stream(D, rank=0, pad=True, **KW) as s:
    v = L.BatchView()
    t.eq(L.lib.loader_repeats(s._ring.h, ctypes.byref(v)), -22,
         "loader_repeats() of a batch not held: -EINVAL")
