"""loader.torch: loaderd batches as torch tensors; each for loop is an epoch.

    from loader.torch import DataLoader
    dl = DataLoader("var/fashion-mnist/train", batch_size=256,
                    outputs="image:unit,label", seed=1, epochs=10)
    for epoch in range(10):
        dl.set_epoch(epoch)
        for batch in dl:                      # {"image": tensor, "label": tensor}
            loss = step(batch["image"], batch["label"])
    torch.save(dl.state_dict(), "loader.pt") # (seed, epoch, next batch)

A job on several nodes that may come back with another world gathers
every rank's state at its checkpoint and gives the list to each new
rank of a named stream (DataLoader(..., name="job")):

    states = [None] * dist.get_world_size()
    dist.all_gather_object(states, dl.state_dict())   # saved by rank 0
    ...
    dl.load_state_dict(states)    # any world, any nodes: each sample once

The tensors view the daemon's shared memory (torch.from_dlpack, no
copy), except bytes fields, which stay loader.Ragged objects; each
keeps its batch's slot of the ring until it is freed, so a
loop may hold a few batches (up to ring_slots - 1) but must copy what it
keeps for longer (x.clone()). In-place operations on them are allowed.
Options are those of loader.Stream; order defaults to "random",
epochs to 0 (endless; set_epoch() moves on) and pad to True: as with
DistributedSampler, when the world does not divide the dataset the
ranks short of a sample take one of the epoch again, so that every
rank's last batch has the same size (an empty or uneven last batch
gives DDP a NaN loss or a BatchNorm error). with_mask=True adds a
bool "mask", False at such a repeat, to leave it out of a loss;
pad=False delivers each sample exactly once instead.
"""

import torch as _torch

from . import Ragged
from ._epochs import Epochs, key_tuple

__all__ = ["DataLoader"]


def _tensor(o, from_dlpack):
    """An Output as a tensor; a Ragged (a bytes field) stays one: torch
    has no ragged tensor to view it as (torch.frombuffer(r[i],
    dtype=torch.uint8) views one value)."""
    return o if isinstance(o, Ragged) else from_dlpack(o)


class DataLoader:
    """An iterable of dicts (or tuples, with keys=) of torch tensors.

    keys: output names to yield as a tuple in that order (e.g.
    ("image", "label")); None yields a dict of every output. Each must
    be an output of the stream: one that is not is refused, with the
    outputs there are: here when outputs= names them, else at the first
    use, from the stream's first batch (kept for the first iteration).

    The stream opens at the first use (iteration, len(), state_dict(),
    .stream), not here: a load_state_dict() before it decides where.
    pin_memory: copy each batch into pinned memory (for asynchronous
    transfers to an accelerator); the copy frees the slot at once.
    with_ids: add the samples' global indices (int64) as "ids".
    with_mask: add "mask", a bool tensor, False for the samples that
    padding repeats (the last of a rank's last batch, at most), so that
    loss = (per_sample_loss * mask).sum() / mask.sum() counts each
    sample of the epoch once. pad (default True here) as loader.Stream.
    """

    def __init__(self, dataset, *, keys=None, pin_memory=False,
                 with_ids=False, with_mask=False, **stream_kwargs):
        self.keys = key_tuple(keys)
        self.pin_memory = pin_memory
        self.with_ids = with_ids
        self.with_mask = with_mask
        stream_kwargs.setdefault("pad", True)
        self._ep = Epochs(dataset, self._convert, stream_kwargs, self.keys)

    def _convert(self, b):
        from_dlpack = _torch.from_dlpack
        names = self.keys if self.keys is not None else tuple(b)
        t = [_tensor(b[n], from_dlpack) for n in names]
        if self.with_ids:
            names = names + ("ids",)
            # torch has no uint64 (DLPack import refuses it): the ids,
            # all below 2^63, as int64 through a NumPy view.
            t.append(from_dlpack(b.ids.numpy().view("int64")))
        if self.with_mask:
            names = names + ("mask",)
            t.append(_torch.from_numpy(b.mask()))
        if self.pin_memory:
            t = [x if isinstance(x, Ragged) else x.pin_memory() for x in t]
        if self.keys is not None:
            return tuple(t)
        return dict(zip(names, t))

    def __iter__(self):
        return iter(self._ep)

    def __len__(self):
        """The batches the next (or current) epoch's iteration yields: a
        whole epoch's, or those left of an epoch a checkpoint resumes."""
        return len(self._ep)

    @property
    def stream(self):
        """The loader.Stream underneath (stats(), samples, ...)."""
        return self._ep.stream

    @property
    def epoch(self):
        return self._ep.epoch

    def set_epoch(self, epoch):
        """The next iteration yields epoch `epoch` (as DistributedSampler's
        set_epoch); a no-op when that is the epoch that comes next and
        none of it has been yielded, from its first batch or from where
        load_state_dict() put it."""
        self._ep.set_epoch(epoch)

    def state_dict(self):
        return self._ep.state_dict()

    def load_state_dict(self, state):
        self._ep.load_state_dict(state)

    def close(self):
        self._ep.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
