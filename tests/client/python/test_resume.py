"""Resuming through the torch adapter as training scripts do (issue 41's
reproductions that one process shows; the DDP ones run real ranks).

The loader opens lazily, so that a checkpoint loaded after it was made
decides where its stream starts:
- set_epoch(e) after load_state_dict() of a state in epoch e keeps the
  position: the usual loop `for e in range(start, E): dl.set_epoch(e);
  for b in dl` goes on from the checkpoint, delivering no batch twice;
- len() of a resumed epoch is the batches left, not a whole epoch's;
- state_dict() is right before the first batch: a named stream that the
  daemon resumes says where it really starts;
- a named stream goes on from a loaded state, not from the position the
  daemon saved after it.
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
d = fx.Daemon(T, "d", "--threads", "1")
KW = dict(socket=d.sock, batch_size=100, outputs="label", seed=5,
          epochs=2)
BPE = 100  # the test split's 10,000 samples in batches of 100


def ids_of(dl, n=None):
    """The ids of the batches the next iteration yields (the first n of
    them, no more taken)."""
    if n is None:
        return [tuple(ids.tolist()) for _, ids in dl]
    it = iter(dl)
    out = [tuple(next(it)[1].tolist()) for _ in range(n)]
    del it
    return out


# A run that stops after 10 batches of epoch 0, saving its state.
dl = loader.torch.DataLoader(D, keys=("label",), with_ids=True, **KW)
dl.set_epoch(0)
first = ids_of(dl, 10)
state = dl.state_dict()
dl.close()
t.eq((state["epoch"], state["batch"]), (0, 10), "a state after 10 batches")

# The usual resume: make the loader, load the state, then the loop.
dl = loader.torch.DataLoader(D, keys=("label",), with_ids=True, **KW)
dl.load_state_dict(state)
t.eq(len(dl), BPE - 10, "len() of the resumed epoch: the batches left "
     "(a scheduler's or progress bar's count)")
rest = {}
for e in range(state["epoch"], 2):
    dl.set_epoch(e)
    rest[e] = ids_of(dl)
dl.close()
t.eq(len(rest[0]), BPE - 10, "set_epoch(0) after loading a state in epoch "
     "0 keeps its position: 90 batches, not 100")
seen = [i for b in first + rest[0] for i in b]
t.eq((len(seen), len(set(seen))), (10000, 10000),
     "epoch 0: every sample once across the stop and the resume")
with loader.Stream(D, order="random", start_epoch=0, **dict(KW, epochs=1,
                                                           outputs=None)) \
        as s:
    want = [tuple(b.ids.numpy().tolist()) for b in s]
t.ok(first + rest[0] == want, "... the batches an uninterrupted run "
     "delivers, in its order")
t.eq(len(rest[1]), BPE, "epoch 1 whole")

# A loop that breaks off an epoch and asks for it again gets it whole.
dl = loader.torch.DataLoader(D, keys=("label",), with_ids=True, **KW)
dl.set_epoch(0)
ids_of(dl, 3)
dl.set_epoch(0)
t.eq(len(ids_of(dl)), BPE, "set_epoch(0) after 3 batches of epoch 0 "
     "starts it over (a new epoch's request)")
dl.close()

# A named stream that the daemon resumes: state_dict() before the first
# batch says where it starts, and len() counts from there.
NK = dict(KW, name="r5")
dl = loader.torch.DataLoader(D, keys=("label",), with_ids=True, **NK)
ids_of(dl, 5)
dl.close()
dl = loader.torch.DataLoader(D, keys=("label",), with_ids=True, **NK)
s = dl.state_dict()
t.eq((s["epoch"], s["batch"]), (0, 5), "state_dict() before the first "
     "batch of a named stream resumed at 0:5 says 0:5, not the 0:0 asked")
t.eq(len(dl), BPE - 5, "... and len() is the 95 batches left")
dl.set_epoch(0)
t.eq(len(ids_of(dl)), BPE - 5, "set_epoch(0) keeps that position too")
dl.close()

# A named stream: the checkpoint's position wins over the one the daemon
# saved since. 10 batches, a state, 5 more: the daemon saved 15; loading
# the state goes back to 10.
NK = dict(KW, name="r2")
dl = loader.torch.DataLoader(D, keys=("label",), with_ids=True, **NK)
got = ids_of(dl, 10)
state = dl.state_dict()
got += ids_of(dl, 5)
dl.close()
dl = loader.torch.DataLoader(D, keys=("label",), with_ids=True, **NK)
dl.load_state_dict(state)
t.eq((dl.state_dict()["epoch"], dl.state_dict()["batch"]), (0, 10),
     "named stream saved at 0:15, a state of 0:10 loaded: it starts at "
     "0:10, not where the daemon saved it")
dl.set_epoch(0)
again = ids_of(dl)
t.ok(again[:5] == got[10:15] and len(again) == BPE - 10,
     "... and delivers batches 10.. again (those after the checkpoint)")
dl.close()
