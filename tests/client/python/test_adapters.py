"""The framework adapters against a real loaderd.

loader.torch.DataLoader: one epoch per iteration, each sample once per
epoch, the same batches as a plain Stream of that (seed, epoch);
set_epoch() to any epoch; state_dict()/load_state_dict() resume mid-epoch
with exactly the batches an uninterrupted run delivers, and from every
rank's state gathered, with another world on another node; zero-copy
tensors.

loader.keras is tested in test_keras.py, against a replay of Keras' own
call order.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture as fx  # noqa: E402

np, torch = fx.need("numpy", "torch")
import loader  # noqa: E402
import loader.torch  # noqa: E402

t = fx.Tap()
T = fx.tmpdir()
D = fx.pack_fmnist(T)
d = fx.Daemon(T, "d", "--threads", "2")
KW = dict(socket=d.sock, batch_size=500, outputs="image:unit,label", seed=21)


def digest(*arrays):
    return fx.digest([(a.ctypes.data, a.nbytes) for a in arrays])


def stream_epoch(epoch, start_batch=0):
    """[(index, ids digest, image digest)] of one epoch, by a plain Stream."""
    out = []
    with loader.Stream(D, order="random", epochs=1, start_epoch=epoch,
                       start_batch=start_batch, **KW) as s:
        for b in s:
            out.append((b.index, digest(b.ids.numpy()),
                        digest(b["image"].numpy())))
    return out


def torch_epoch(dl, first_index=0):
    out = []
    for i, (x, y, ids) in enumerate(dl):
        out.append((first_index + i, digest(ids.numpy()), digest(x.numpy())))
    return out


# --- loader.torch -------------------------------------------------------------
dl = loader.torch.DataLoader(D, keys=("image", "label"), with_ids=True,
                             epochs=3, **KW)
t.eq(len(dl), 20, "len(): batches per epoch")
ok = True
for e in range(3):
    dl.set_epoch(e)
    got = torch_epoch(dl)
    ok = ok and got == stream_epoch(e)
t.ok(ok, "3 epochs through set_epoch(): each the batches of a Stream of "
     "that epoch")
t.eq(list(dl), [], "after the stream's last epoch an iteration is empty")

dl = loader.torch.DataLoader(D, keys=("image", "label"), with_ids=True,
                             epochs=10, **KW)
dl.set_epoch(6)
t.eq(torch_epoch(dl), stream_epoch(6), "set_epoch(6) on a new loader: "
     "epoch 6's batches")
ids = set()
dl.set_epoch(7)
for x, y, i in dl:
    ids.update(i.tolist())
    ptr_ok = fx.in_ring(x.data_ptr()) and fx.in_ring(y.data_ptr())
t.eq(ids, set(range(10000)), "every sample once in an epoch")
t.ok(ptr_ok, "the tensors are views of the ring")
del x, y, i                    # the loop's last batch: its slot goes back

it = iter(dl)                  # epoch 8
head = [next(it) for _ in range(5)]
state = dl.state_dict()
t.eq((state["epoch"], state["batch"], state["seed"]), (8, 5, 21),
     "state_dict() after 5 batches of epoch 8: (seed, epoch, next batch)")
del head                       # 5 held slots would starve the ring
rest = torch_epoch(it, 5)
dl2 = loader.torch.DataLoader(D, keys=("image", "label"), with_ids=True,
                              epochs=10, **KW)
dl2.load_state_dict(state)
t.eq(torch_epoch(dl2, 5), rest, "load_state_dict() on a new loader: the "
     "same 15 batches an uninterrupted run delivered")
t.eq(rest, stream_epoch(8)[5:], "... which are epoch 8's from batch 5")
dl2.close()
dl.close()

# Elastic resume across nodes: world 2 stops part-way through epoch 0;
# every rank's state_dict(), gathered, resumes world 3 on two nodes (the
# second daemon never saw the job), each sample once in the epoch.
d2 = fx.Daemon(T, "d2", "--threads", "1")
EL = dict(KW, name="ela", order="random", epochs=1)
seen, states = [], []
for r, n in ((0, 3), (1, 4)):
    dl = loader.torch.DataLoader(D, keys=("image", "label"), with_ids=True,
                                 rank=r, world=2, **EL)
    it = iter(dl)
    for _ in range(n):
        seen.extend(next(it)[2].tolist())
    states.append(dl.state_dict())
    del it
    dl.close()
t.eq([(s["rank"], s["world"], s["epoch"], s["batch"]) for s in states],
     [(0, 2, 0, 3), (1, 2, 0, 4)], "state_dict() names rank, world and the "
     "next batch")
counts = []
for r, node in ((0, d), (1, d), (2, d2)):
    el = dict(EL, socket=node.sock)
    dl = loader.torch.DataLoader(D, keys=("image", "label"), with_ids=True,
                                 with_mask=True, rank=r, world=3, **el)
    dl.load_state_dict(list(reversed(states)))
    # The rest (10000 - 7 * 500) does not divide by 3: the DataLoader
    # pads, and the mask leaves the repeats out.
    batches = [ids[m].tolist() for _, _, ids, m in dl]
    got = [i for ids in batches for i in ids]
    counts.append(len(batches))
    seen.extend(got)
    dl.close()
t.eq((len(seen), len(set(seen))), (10000, 10000), "world 3 on two nodes "
     "from world 2's gathered states: epoch 0's every sample once")
t.eq(len(set(counts)), 1, "the 3 new ranks got as many batches each")
t.raises(loader.Error, lambda: loader.torch.DataLoader(
    D, rank=0, world=3, **KW).load_state_dict(states),
    "gathered states without a stream name are refused", "named stream")

b = next(iter(loader.torch.DataLoader(D, epochs=1, **KW)))
t.eq((sorted(b), b["image"].dtype, b["label"].dtype),
     (["image", "label"], torch.float32, torch.int64),
     "without keys: a dict of every output")

# --- ring slots a training loop needs ----------------------------------------
t.raises(loader.Error, lambda: loader.torch.DataLoader(D, ring_slots=2, **KW),
         "ring_slots=2 is refused for a training loop, saying why",
         "at least 4")
dl = loader.torch.DataLoader(D, keys=("image", "label"), ring_slots=4,
                             epochs=2, **KW)
n = 0
for e in range(2):
    dl.set_epoch(e)
    for x, y in dl:             # x, y hold the batch before each next()
        n += 1
t.eq(n, 40, "with 4 slots a plain loop keeping its loop variables runs "
     "two epochs")
