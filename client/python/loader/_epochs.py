"""Epochs over one stream: what the framework adapters share.

A training loop iterates a loader once per epoch; a loaderd stream runs
through all its epochs without a break, so that the daemon prefetches
across the boundary. Epochs cuts the stream at epoch boundaries: the
first batch of the next epoch, once seen, is kept (converted, so that its
tensors hold its slot) for the next iteration. set_epoch() and
load_state_dict() move to another place by opening the stream again
there (start_epoch, start_batch), which the order contract makes exact.

The stream is opened lazily: at the first iteration, len(), state_dict()
or .stream, never in the constructor. So a load_state_dict() that comes
before (one rank's state, or the gathered list) decides where the first
open starts, as a training script's resume path does: make the loader,
load the checkpoint, set_epoch(), iterate.
"""

import errno

from . import Error, Stream, UsageError, _check_options, _int

# A loop holds the batch before while it asks for the next, and the first
# batch of the next epoch is read ahead: 3 held at most, so 4 slots.
MIN_SLOTS = 4


def key_tuple(keys):
    """keys as a tuple of output names; a lone str is a mistake for
    ("name",), not a sequence of one-letter names."""
    if keys is None:
        return None
    if isinstance(keys, (str, bytes)):
        raise TypeError("keys=%r: a tuple of output names, e.g. (%r,)"
                        % (keys, keys))
    return tuple(keys)


class Epochs:
    """A stream in which each for loop is one epoch; convert(batch)
    makes what is yielded (it must not keep the Batch itself: only what
    it made from its outputs)."""

    def __init__(self, dataset, convert, stream_kwargs, keys=None,
                 extra=()):
        # A mixture's list is copied: each open (set_epoch(), a resume)
        # must see the members the loader was made with.
        self._dataset = list(dataset) if isinstance(dataset, list) else \
            dataset
        self._convert = convert
        self._kw = dict(stream_kwargs)
        self._kw.setdefault("order", "random")
        self._kw.setdefault("epochs", 0)
        # Checked here as Stream checks them: some are counted with below.
        _check_options(self._kw)
        slots = self._kw.get("ring_slots") or 0
        if slots and slots < MIN_SLOTS:
            raise Error(-errno.EINVAL,
                        "ring_slots=%d: a training loop holds the batch "
                        "before while it asks for the next, and the next "
                        "epoch's first is read ahead: at least %d"
                        % (slots, MIN_SLOTS))
        self._first = _int("start_epoch", self._kw.pop("start_epoch", 0)) \
            or 0
        self._stream = None
        self._opened = False   # the stream opened since the last move
        self._peek = None      # (epoch, index, converted) of a next epoch
        self.epoch = self._first  # the epoch the next iteration yields
        self.batch = _int("start_batch", self._kw.pop("start_batch", 0)) \
            or 0  # its next batch
        # Where this epoch's iteration starts (len() counts from it).
        self._epoch_start = self.batch
        self._resume = None    # gathered positions for the next open
        self._keys, self._extra = keys, extra
        # With outputs= the keys are checked now; else at the open,
        # which reads the first batch to learn the outputs.
        if keys is not None and self._kw.get("outputs") is not None:
            self._check_keys(keys, extra)

    def _ensure(self):
        """Open the stream where the loader stands, if it is not open."""
        if self._opened:
            return
        self._opened = True
        self._open(self.epoch, self.batch, self._resume)
        self._resume = None
        if self._keys is not None and self._kw.get("outputs") is None:
            self._check_keys(self._keys, self._extra)

    def _move(self, epoch, batch, resume=None):
        """Stand at (epoch, batch): the stream opens there when next
        used."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        self._peek = None
        self._opened = False
        self.epoch, self.batch = epoch, batch
        self._epoch_start = batch
        self._resume = resume

    def _outputs(self):
        """The stream's output names and the batch they were read from:
        from outputs= when it was given (the daemon has checked each
        against the dataset's fields), else from the stream's first
        batch (None when the stream has none)."""
        spec = self._kw.get("outputs")
        if spec is not None:
            if isinstance(spec, bytes):
                spec = spec.decode("utf-8", "replace")
            if not isinstance(spec, str):
                spec = ",".join(spec)
            return tuple(p.split(":", 1)[0] for p in spec.split(",")), None
        if self._stream is None:
            return None, None
        b = self._stream.next()
        return (tuple(b) if b is not None else None), b

    def _check_keys(self, keys, extra):
        """Every key an output of the stream (or one of extra), or
        UsageError listing the outputs: told now, not as a KeyError at
        the first batch. When that takes the first batch, it is kept
        (converted) for the first iteration."""
        names, b = self._outputs()
        missing = [] if names is None else \
            [k for k in keys if k not in names and k not in extra]
        if missing:
            if b is not None:
                b.release()
            self.close()
            raise UsageError(
                "keys=%r: the stream has no output%s %s (its outputs: %s)"
                % (tuple(keys), "s" if len(missing) > 1 else "",
                   ", ".join(missing), ", ".join(names + tuple(extra))))
        if b is not None:
            self._peek = (b.epoch, b.index, self._convert(b))
            self.epoch, self.batch = b.epoch, b.index
            self._epoch_start = b.index
            b.release()

    def _open(self, epoch, batch, resume=None):
        if self._stream is not None:
            self._stream.close()
        self._peek = None
        kw = dict(self._kw)
        total = kw.get("epochs") or 0
        if total:
            # epochs counts from the first epoch of the loader's life:
            # a stream reopened later runs only the ones left.
            left = self._first + total - epoch
            if left <= 0:
                self._stream = None
                self.epoch, self.batch = epoch, batch
                self._epoch_start = batch
                return
            kw["epochs"] = left
        if resume:
            kw["resume_from"], kw["resume_plan"] = resume
        self._stream = Stream(self._dataset, start_epoch=epoch,
                              start_batch=batch, **kw)
        if self._stream.slots < MIN_SLOTS:
            n = self._stream.slots
            self._stream.close()
            self._stream = None
            raise Error(-errno.E2BIG,
                        "loaderd gave the stream %d ring slots (its batches "
                        "are too large for 4 under its --max-ring): a "
                        "training loop needs at least %d; use a smaller "
                        "batch or raise loaderd's --max-ring" % (n, MIN_SLOTS))
        # Where it really starts: a named stream's saved position, or the
        # positions given, may say otherwise than the request.
        self.epoch, self.batch = self._stream.start
        self._epoch_start = self.batch

    @property
    def stream(self):
        self._ensure()
        return self._stream

    def __len__(self):
        """The batches the next (or the current) iteration yields: an
        epoch's, less those a resume starts past."""
        self._ensure()
        if self._stream is None:
            return 0
        return max(self._stream.batches_in(self.epoch) - self._epoch_start,
                   0)

    def set_epoch(self, epoch):
        """The next iteration yields epoch `epoch`: from its first batch,
        unless that is where the loader already stands and none of it
        has been yielded since (a new epoch, or a checkpoint loaded in
        it), which it keeps: the usual loop set_epoch(e); for b in dl
        goes on from a resumed position instead of repeating it."""
        epoch = _int("epoch", epoch)
        if epoch is None:
            raise TypeError("epoch=None: must be an integer")
        if epoch == self.epoch and self.batch == self._epoch_start:
            return
        self._move(epoch, 0)

    def state_dict(self):
        """Where the next iteration starts: (seed, epoch, batch), with
        what else makes the order (loaderd's order contract). Right at
        any moment: before the first batch it opens the stream, to say
        where a named one really starts."""
        self._ensure()
        kw = self._kw
        s = self._stream
        return {"seed": kw.get("seed", 0), "epoch": self.epoch,
                "batch": self.batch, "order": kw.get("order"),
                "batch_size": kw.get("batch_size"),
                "rank": s.rank if s else None,
                "world": s.world if s else None,
                "plan": list(s.plan) if s else [0, 0]}

    def load_state_dict(self, state):
        """Resume where state_dict() was taken: the batches that follow
        are those an uninterrupted run would have delivered.

        state may also be a list of every rank's state_dict() (gathered,
        e.g. with torch.distributed.all_gather_object, at the
        checkpoint): a named stream then goes on from all of them, with
        this process's rank and world, which may differ from theirs
        (elastic resume across nodes, libloader(3)).

        For a named stream the state wins over the position the daemon
        saved: one rank's state is taken as every rank's of its world
        (the ranks of a data-parallel job checkpoint at the same batch)."""
        if isinstance(state, (list, tuple)):
            self._load_gathered(list(state))
            return
        if self._kw.get("name") and state.get("world"):
            # A named stream's daemon has saved positions of its own:
            # the checkpoint's win. One rank's state stands for every
            # rank of its world (a data-parallel job's ranks checkpoint
            # in lockstep, at the same batch).
            self._load_gathered([dict(state, rank=r)
                                 for r in range(state["world"])])
            return
        for k in ("seed", "order", "batch_size"):
            if k in state and state[k] is not None:
                self._kw[k] = state[k]
        # States saved before 1.3's checks said batch_size 0 for the
        # default, which Stream now refuses.
        if self._kw.get("batch_size") == 0:
            self._kw["batch_size"] = None
        self._move(_int("start_epoch", state["epoch"], "state epoch"),
                   _int("start_batch", state["batch"], "state batch"))

    def _load_gathered(self, states):
        if not states or not self._kw.get("name"):
            raise Error(-errno.EINVAL,
                        "a list of states resumes a named stream: give "
                        "name= and every rank's state_dict()")
        states = sorted(states, key=lambda s: s["rank"])
        world = len(states)
        if [s["rank"] for s in states] != list(range(world)) or \
                any(s["world"] != world for s in states):
            raise Error(-errno.EINVAL,
                        "the states are not those of ranks 0..%d of one "
                        "world of %d" % (world - 1, world))
        for k in ("seed", "order", "batch_size"):
            vals = {s.get(k) for s in states}
            if len(vals) != 1:
                raise Error(-errno.EINVAL,
                            "the ranks' states differ in %s" % k)
            v = vals.pop()
            if v is not None:
                self._kw[k] = v
        if self._kw.get("batch_size") == 0:  # as in load_state_dict()
            self._kw["batch_size"] = None
        plans = {tuple(s.get("plan") or (0, 0)) for s in states}
        if len(plans) != 1:
            raise Error(-errno.EINVAL, "the ranks' states differ in plan")
        pos = [(s["epoch"], s["batch"]) for s in states]
        self._move(min(e for e, _ in pos), 0, (pos, plans.pop()))

    def __iter__(self):
        self._ensure()
        s = self._stream
        if s is None:
            return
        want = self.epoch
        if self._peek is not None:
            e, i, item = self._peek
            self._peek = None
            if e == want:
                self.batch = i + 1
                yield item
            del item
        for b in s:
            if b.epoch != want:
                # The next epoch began: keep its first batch for then.
                self._peek = (b.epoch, b.index, self._convert(b))
                b.release()
                self.epoch, self.batch = b.epoch, b.index
                self._epoch_start = b.index
                return
            item = self._convert(b)
            b.release()
            self.batch = b.index + 1
            if self.batch >= len(s):
                self.epoch, self.batch = want + 1, 0
                self._epoch_start = 0
            yield item
            del item
        # The stream ended (its last epoch): nothing more to peek.
        self.epoch, self.batch = want + 1, 0
        self._epoch_start = 0

    def close(self):
        self._peek = None
        self._opened = True  # closed stays closed: no open on use
        if self._stream is not None:
            self._stream.close()
            self._stream = None
