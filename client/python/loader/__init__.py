"""loader: batches from loaderd in Python, without a copy.

    import loader
    with loader.Stream("var/fashion-mnist/train", batch_size=256,
                       outputs="image:unit,label", order="random",
                       seed=1, epochs=1) as s:
        for b in s:
            x = torch.from_dlpack(b["image"])   # a view of shared memory
            y = np.asarray(b["label"])          # so is this

A Stream is one stream of the daemon (libloader's struct loader): the
dataset's files are opened here, with this process's permissions, and
each batch is written by the daemon straight into a ring of shared memory
that this process maps. A Batch is valid until the next iteration or
b.release(); each output (b["image"]) is an Output, a view into the ring
that NumPy (__array_interface__) and every DLPack consumer
(torch.from_dlpack, np.from_dlpack, JAX's and TensorFlow's DLPack import)
take without a copy. An Output, and every array or tensor made from it,
keeps its batch's slot of the ring until the last of them is gone: the
daemon refills a slot only then, so a tensor never sees its memory
reused. The slots are mapped writable, so an in-place operation on a
delivered tensor (x.sub_(1)) changes this process's batch and nothing
else.

A stream holds at most ring_slots - 1 batches (8 slots by default):
keeping more tensors of past batches alive (a list of them, a loss that
keeps its graph) raises loader.Error naming the remedy (copy what you
keep, e.g. x.clone()).

The adapters are modules of their own, imported only when used:
loader.torch (an iterable of torch tensors with set_epoch() and
state_dict()) and loader.keras (a keras.utils.PyDataset and a tf.data
generator).

The package binds libloader.so.1 with ctypes: from $LOADER_LIBRARY if
set (and only there), else from an installed loaderd (make install's
libdir, then the dynamic loader's path, where Debian's libloader1 puts
it); in a build tree, through BUILD/loader-python. The wheel (make wheel)
carries no library: it finds the system's.
"""

import collections
import ctypes
import errno as _errno
import gc
import math
import operator
import os
import threading

from . import _lib

__all__ = ["Stream", "Batch", "Output", "Ragged", "Error", "UsageError",
           "library_version", "default_rank_world"]

__version__ = "%d.%d" % (_lib.NEED_MAJOR, _lib.NEED_MINOR)

#: LOADER_VERSION of the libloader that was loaded, as (major, minor).
library_version = (_lib.version // 1000, _lib.version % 1000)
library_path = _lib.path

# The library's own error codes, as loader.EEND etc.
globals().update(_lib.CODES)

_get_ident = threading.get_ident

# How long one wait in the library lasts before Python looks at its
# signals again: Ctrl-C is noticed within this much.
_SLICE_MS = 100


class Error(Exception):
    """A failure of libloader or the daemon.

    code: the negative code (-errno or a LOADER_E* code, e.g. loader.EEND);
    reason: the daemon's or the library's reason (loader_reason());
    strerror: loader_strerror(code).
    """

    def __init__(self, code, reason=""):
        self.code = code
        self.strerror = _lib.strerror(code)
        self.reason = reason or self.strerror
        self.errno = -code if -4096 < code < 0 else None
        super().__init__(code, self.reason)

    def __str__(self):
        if self.reason == self.strerror:
            return self.reason
        return "%s (%s)" % (self.reason, self.strerror)


class UsageError(Error, ValueError):
    """An argument refused before anything is asked of libloader or the
    daemon: a ValueError, and a loader.Error with code loader.EUSAGE
    (what libloader itself would have returned). The text names the
    keyword and quotes the value as given, e.g. "batch_size=-1: must be
    a positive integer (leave it out or pass None for the default)"."""

    def __init__(self, reason):
        super().__init__(_lib.CODES["EUSAGE"], reason)

    def __str__(self):
        return self.reason


_U32 = (1 << 32) - 1
_U64 = (1 << 64) - 1
_INT_MAX = (1 << 31) - 1
_DEFAULT = " (leave it out or pass None for the default)"

# Every integer keyword of the package, checked here because ctypes
# stores what it is given modulo the field's width: -1 became 4294967295
# and 2**32 became 0, the library's "default". None (or leaving the
# keyword out) is the only way to ask for a default; 0 stays a value
# only where it means one (a seed, an epoch, "endless", "never").
# keyword: (least, most, what the values below least are told,
#           what the values above most are told).
# Where loaderctl or loaderd take the same setting, the ranges are
# theirs: batch_size as "loaderctl bench pipeline --batch", threads as
# its --threads and loaderd's, prefetch_bytes as its --prefetch.
_INTS = {
    "batch_size": (1, 65536, "a positive integer" + _DEFAULT,
                   "at most 65536"),
    "seed": (0, _U64, "0 or more", "at most 2**64-1"),
    "epochs": (0, _U32, "0 (endless) or more", "at most 2**32-1"),
    "start_epoch": (0, _U32, "0 or more", "at most 2**32-1"),
    "start_batch": (0, _U64, "0 or more", "at most 2**64-1"),
    "rank": (0, 65535, "0 or more", "below world, at most 65535"),
    "world": (1, 65536, "a positive integer (leave it out or pass None "
              "for the launcher's, else 1)", "at most 65536"),
    "ring_slots": (2, 1024, "a power of two in 2..1024" + _DEFAULT,
                   "a power of two in 2..1024"),
    "prefetch_bytes": (4096, 64 << 30, "at least 4096 (leave it out or "
                       "pass None for the default, 64 MiB)",
                       "at most 64 GiB (68719476736)"),
    "threads": (1, 1024, "a positive integer (leave it out or pass None "
                "for the daemon's default)", "at most 1024"),
    "timeout_ms": (-_INT_MAX - 1, _INT_MAX, "at least -2**31",
                   "at most 2**31-1"),
    "reconnect_ms": (0, _INT_MAX, "0 (never), a positive number of "
                     "milliseconds, or None (the default: 60000 for a "
                     "named stream, never for another)", "at most 2**31-1"),
    "ragged_bytes": (1, 1 << 30, "a positive integer (leave it out or "
                     "pass None for the daemon's default)",
                     "at most 1 GiB (1073741824)"),
    # A mixture's epoch (libloader's bound on it, as on its counts).
    "epoch_size": (0, 1 << 48, "0 (the members' samples added up) or "
                   "more", "at most 2**48"),
    # Epochs.set_epoch(), and the Keras adapter's own.
    "epoch": (0, _U32, "0 or more", "at most 2**32-1"),
    "workers": (1, None, "a positive integer", ""),
    "max_queue_size": (1, None, "a positive integer", ""),
}

# Zero where it is no value but is not negative either.
_ZERO = {
    "timeout_ms": "a positive number of milliseconds, or negative for no "
                  "limit (leave it out or pass None for the default, "
                  "10000)",
}


def _int(key, value, label=None):
    """value as an int, checked against key's row of _INTS; None stays
    None (the default). label names it in the message instead of key
    (an environment variable, an element of a list)."""
    if value is None:
        return None
    name = label or key
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError("%s=%r: must be an integer, not %s"
                        % (name, value, type(value).__name__))
    v = operator.index(value)
    lo, hi, low, high = _INTS[key]
    if v == 0 and key in _ZERO:
        raise UsageError("%s=%r: must be %s" % (name, value, _ZERO[key]))
    if v < lo:
        raise UsageError("%s=%r: must be %s" % (name, value, low))
    if hi is not None and v > hi:
        raise UsageError("%s=%r: must be %s" % (name, value, high))
    if key == "ring_slots" and v & (v - 1):
        raise UsageError("%s=%r: must be %s" % (name, value, high))
    return v


def _seconds(name, value):
    """A wait in seconds: None (for ever), or a number >= 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not hasattr(value, "__float__"):
        raise TypeError("%s=%r: must be a number of seconds, not %s"
                        % (name, value, type(value).__name__))
    v = float(value)
    if math.isnan(v) or v < 0:
        raise UsageError("%s=%r: must be 0 or more seconds (None: for ever)"
                         % (name, value))
    return None if math.isinf(v) else v


def _check_options(kw):
    """The integer keywords of a Stream in kw, checked (as Stream does),
    for the adapters, which do arithmetic with some before opening."""
    for k in _INTS:
        if k in kw:
            _int(k, kw[k])
    if "wait_timeout" in kw:
        _seconds("wait_timeout", kw["wait_timeout"])


def _env_int(name):
    v = os.environ.get(name)
    if v is None or v == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise Error(-_errno.EINVAL, "$%s is %r, not a number" % (name, v))


# Where a distributed job's launcher puts a process's rank and world size,
# in the order they are believed: torch.distributed (torchrun), one node's
# local pair, Open MPI, Horovod, Slurm.
_RANK_ENV = (
    ("RANK", "WORLD_SIZE"),
    ("LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("HOROVOD_RANK", "HOROVOD_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
)


def default_rank_world():
    """(rank, world, source) from the environment; (0, 1, None) if unset.

    A pair is used only whole: RANK without WORLD_SIZE is an error rather
    than a silent world of 1 (which would deliver every sample to every
    rank).
    """
    for r, w in _RANK_ENV:
        rank, world = _env_int(r), _env_int(w)
        if rank is None and world is None:
            continue
        if rank is None or world is None:
            raise Error(_lib.CODES["EUSAGE"],
                        "$%s is set but $%s is not: pass rank= and world="
                        % (r if rank is not None else w,
                           w if rank is not None else r))
        _int("rank", rank, "$" + r)
        _int("world", world, "$" + w)
        return rank, world, "%s/%s" % (r, w)
    return 0, 1, None


def _enum(value, table, what):
    if isinstance(value, str):
        try:
            return table[value]
        except KeyError:
            raise Error(_lib.CODES["EUSAGE"], "%s %r: one of %s"
                        % (what, value, ", ".join(sorted(table))))
    # The C enum's number (loader.h) is taken too, but only one it has.
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError("%s=%r: must be one of %s, not %s"
                        % (what, value, ", ".join(sorted(table)),
                           type(value).__name__))
    if operator.index(value) not in table.values():
        raise UsageError("%s=%r: must be one of %s (or %d..%d)"
                         % (what, value, ", ".join(sorted(table)),
                            min(table.values()), max(table.values())))
    return operator.index(value)


def _text(v):
    if v is None:
        return None
    if isinstance(v, (list, tuple)):
        v = ",".join(v)
    return os.fsencode(v) if isinstance(v, (str, os.PathLike)) else v


# --- mixtures ----------------------------------------------------------------

_MIX_MAX = 1 << 48  # the most a member's value may be (libloader's bound)
_MEMBER_KEYS = ("path", "proportion", "repeat", "choose", "pipeline")
_PIPELINE_MAX = 511  # bytes of a pipeline spec (PROTO_PIPELINE_MAX - 1)


def _mix_value(name, how, value):
    """A member's proportion or repeat (a number above 0) or choose (an
    integer number of samples), within libloader's bound."""
    label = "%s %s=%r" % (name, how, value)
    if how == "choose":
        if isinstance(value, bool) or not hasattr(value, "__index__"):
            raise TypeError("%s: must be an integer, not %s"
                            % (label, type(value).__name__))
        v = operator.index(value)
        if not 1 <= v <= _MIX_MAX:
            raise UsageError("%s: must be a number of samples, 1 to 2**48"
                             % label)
        return v
    if isinstance(value, (bool, str, bytes)) or \
            not hasattr(value, "__float__"):
        raise TypeError("%s: must be a number, not %s"
                        % (label, type(value).__name__))
    v = float(value)
    if not 0 < v <= _MIX_MAX:  # NaN fails too
        raise UsageError("%s: must be a number above 0, at most 2**48"
                         % label)
    return v


def _member(i, item):
    """Item i of a mixture's list as a dict of the mixture file's keys:
    path, one of proportion, repeat and choose, and pipeline if given."""
    name = "dataset[%d]" % i
    if isinstance(item, dict):
        unknown = [k for k in item if k not in _MEMBER_KEYS]
        if unknown:
            raise UsageError("%s: unknown key %r (a member has path, "
                             "proportion, repeat, choose and pipeline)"
                             % (name, unknown[0]))
        hows = [k for k in _lib.MIX_HOW if k in item]
        if len(hows) != 1:
            raise UsageError("%s: %s: give one of proportion, repeat and "
                             "choose" % (name, " and ".join(hows) or
                                         "none of them"))
        if "path" not in item:
            raise UsageError("%s: no path" % name)
        how, path, pipeline = hows[0], item["path"], item.get("pipeline")
        value = item[how]
    elif isinstance(item, (tuple, list)) and len(item) == 2:
        (path, value), how, pipeline = item, "proportion", None
    else:
        raise TypeError("%s=%r: a (path, proportion) pair, or a dict with "
                        "path and one of proportion, repeat and choose (a "
                        "mixture is a list of them)" % (name, item))
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError("%s path=%r: must be a path (str or os.PathLike), "
                        "not %s" % (name, path, type(path).__name__))
    if not os.fspath(path):
        raise UsageError("%s path=%r: must not be empty" % (name, path))
    d = {"path": os.fspath(path), how: _mix_value(name, how, value)}
    if pipeline is not None:
        if not isinstance(pipeline, (str, bytes)):
            raise TypeError("%s pipeline=%r: must be a str, not %s"
                            % (name, pipeline, type(pipeline).__name__))
        n = len(os.fsencode(pipeline))
        if n > _PIPELINE_MAX:
            raise UsageError("%s pipeline: %d bytes, at most %d"
                             % (name, n, _PIPELINE_MAX))
        d["pipeline"] = pipeline
    return d


def _members(dataset, epoch_size):
    """A mixture given as a list (loader(7), Mixtures), checked as
    libloader checks it: its members as dicts of the mixture file's keys.
    A refused one raises UsageError or TypeError naming dataset[i]."""
    items = list(dataset)
    if not 1 <= len(items) <= _lib.MAX_MEMBERS:
        raise UsageError("dataset: a mixture of %d members; it has 1 to %d"
                         % (len(items), _lib.MAX_MEMBERS))
    out = [_member(i, item) for i, item in enumerate(items)]
    # Proportions share out an epoch; repeat and choose count samples.
    prop = "proportion" in out[0]
    for i, d in enumerate(out[1:], 1):
        if ("proportion" in d) != prop:
            raise UsageError(
                "dataset[%d]: %s beside dataset[0]'s %s: either every "
                "member gives a proportion or none does"
                % (i, next(k for k in _lib.MIX_HOW if k in d),
                   "proportion" if prop else "repeat or choose"))
    if epoch_size and not prop:
        raise UsageError("epoch_size=%r: only with proportions (members "
                         "that repeat or choose give their own counts)"
                         % epoch_size)
    return out


def _member_array(members, keep):
    """members (from _members()) as a struct loader_member array, its
    strings kept alive in keep."""
    arr = (_lib.Member * len(members))()
    for m, d in zip(arr, members):
        how = next(k for k in _lib.MIX_HOW if k in d)
        path = os.fsencode(d["path"])
        pipeline = _text(d.get("pipeline"))
        keep += [path, pipeline]
        m.dataset, m.how, m.value = path, _lib.MIX_HOW[how], d[how]
        m.pipeline = pipeline
    keep.append(arr)
    return ctypes.cast(arr, ctypes.POINTER(_lib.Member))


class _Ring:
    """The native stream (libloader's handle) and the slots it has not
    given back yet, oldest first, as [seq, done] records.

    Every _Slot holds its ring, so the mapping outlives any tensor that
    views it; the Stream holds the ring too, but no _Slot holds the
    Stream, so dropping a Stream frees it at once (no cycle).
    """

    __slots__ = ("h", "held", "busy", "owner", "closing", "rel", "prel",
                 "arrays", "interrupted")

    def __init__(self, h):
        self.h = h
        self.held = collections.deque()
        self.busy = False          # inside libloader, or sweeping
        self.owner = _get_ident()  # the thread that iterates
        self.closing = False
        self.rel = _lib.BatchView()
        self.prel = ctypes.byref(self.rel)
        # (address, shape) -> an ndarray of the ring there, for DLPack.
        self.arrays = {}
        # A Ctrl-C that came while a _Slot was finalised: Python drops
        # exceptions raised in __del__, so the next call raises it.
        self.interrupted = False

    def sweep(self):
        """Give done slots back to the daemon, oldest first."""
        if self.h is None or self.busy:
            return
        self.busy = True
        try:
            held, rel = self.held, self.rel
            while held and held[0][1]:
                rel.seq = held[0][0]
                rc = _lib.lib.loader_release(self.h, self.prel)
                held.popleft()
                if rc:
                    raise Error(rc, "loader_release of batch %d" % rel.seq)
        finally:
            self.busy = False
        if self.closing and not held:
            self.close_now()

    def close(self):
        self.closing = True
        self.sweep()

    def close_now(self):
        h, self.h = self.h, None
        if h is not None:
            _lib.lib.loader_close(h)

    def __del__(self):
        # Nothing views the ring any more, and no Stream uses it.
        self.close_now()


class _Slot:
    """A batch's slot of the ring, as long as anything views it.

    The Batch holds it until released; every Output holds it, and so
    (through the Output) does every array and tensor made from one. When
    the last of them is gone the slot is done, and the ring gives done
    slots back to the daemon in order. Finalisation may happen on any
    thread (a tensor freed by another one): it only sets a flag there,
    and the iterating thread does the giving back.
    """

    __slots__ = ("rec", "ring")

    def __init__(self, ring, rec):
        self.rec = rec
        self.ring = ring

    def __del__(self):
        r = self.ring
        try:
            self.rec[1] = True
            if r.owner == _get_ident() and not r.busy:
                r.sweep()
        except KeyboardInterrupt:
            # Raised here it would be lost: Stream.next() raises it.
            r.interrupted = True
        except Exception:
            # At interpreter exit, or a failed release: the flag is set,
            # and the next call on the stream will see to it.
            pass


class Output:
    """One output of a batch: a view of shared memory, not a copy.

    name, dtype (a NumPy dtype name), shape (batch dimension first),
    nbytes, and data_ptr (the address). np.asarray(o) and
    torch.from_dlpack(o) view the same memory; the batch's slot stays
    taken while any of them lives.
    """

    __slots__ = ("_slot", "name", "dtype", "shape", "nbytes", "data_ptr",
                 "_typestr")

    def __init__(self, slot, name, ptr, dtype, shape, nbytes):
        self._slot = slot
        self.name = name
        self.data_ptr = ptr
        self.dtype = _lib.DTYPE_NAME[dtype]
        self._typestr = _lib.TYPESTR[dtype]
        self.shape = shape
        self.nbytes = nbytes

    @property
    def __array_interface__(self):
        return {"version": 3, "shape": self.shape, "typestr": self._typestr,
                "data": (self.data_ptr, False)}

    def __dlpack__(self, stream=None):
        """A DLPack capsule of this output (CPU memory, no copy).

        The capsule is NumPy's: its deleter drops an array that holds
        this Output, so the slot stays taken until the consumer (a torch
        tensor, say) is freed.
        """
        if stream is not None:
            raise BufferError("loader: a CPU output takes no stream")
        # A view of an array made once per slot and shape, which holds
        # this Output: cheaper than np.asarray(self) on the hot path.
        key = (self.data_ptr, self.shape)
        base = self._slot.ring.arrays.get(key)
        if base is None:
            # Made from the bare address: the cached array must not keep
            # this Output (and its slot) alive, as np.asarray(self) would.
            np = _np or _numpy()
            mem = (ctypes.c_char * self.nbytes).from_address(self.data_ptr)
            base = np.frombuffer(mem, self._typestr).reshape(self.shape)
            self._slot.ring.arrays[key] = base
        v = base.view(_Held)
        v.owner = self
        return v.__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU, device 0

    def numpy(self):
        """np.asarray(self): a writable NumPy view."""
        return _numpy().asarray(self)

    def __repr__(self):
        return "<loader.Output %s %s%s at 0x%x>" % (
            self.name, self.dtype, list(self.shape), self.data_ptr)


class Ragged:
    """A ragged output: a bytes field, one value of its own length per
    sample, the values back to back in shared memory (no copy).

    len(r) is the batch's sample count; r[i] is sample i's value: for a
    bytes field a memoryview (bytes(r[i]) copies it, np.frombuffer views
    it, bytes(r[i]).decode() decodes it), for a ragged tensor a NumPy
    view of shape (rows,) + r.row_shape and dtype r.dtype; iterating
    gives the same views. r.data is every value, a uint8
    memoryview of r.nbytes bytes; r.offsets the count + 1 byte offsets
    into it (a uint64 memoryview: sample i is data[offsets[i]:
    offsets[i + 1]]); r.tolist() the values as bytes objects (copies);
    data_ptr and offsets_ptr their addresses.
    Like an Output, a Ragged and every view made from it keep the
    batch's slot until the last of them is gone. The memory is the
    stream's alone and writable; writing the offsets spoils only what
    this object shows (views are cut within data, never outside it).
    """

    __slots__ = ("_slot", "name", "count", "nbytes", "data", "offsets",
                 "data_ptr", "offsets_ptr", "dtype", "row_shape", "_typestr",
                 "__weakref__")

    def __init__(self, slot, name, ptr, optr, count, nbytes, dtype=1,
                 row_shape=()):
        self._slot = slot
        self.name = name
        self.dtype = _lib.DTYPE_NAME[dtype]
        self._typestr = _lib.TYPESTR[dtype]
        self.row_shape = row_shape
        # A bytes field's values stay memoryviews; a tensor's are arrays.
        if dtype == 1 and not row_shape:
            self._typestr = None
        self.count = count
        self.nbytes = nbytes
        self.data_ptr, self.offsets_ptr = ptr, optr
        # ctypes arrays that hold this object: a memoryview of them (and
        # every slice of it) keeps the slot taken.
        mem = (ctypes.c_char * nbytes).from_address(ptr)
        mem.owner = self
        self.data = memoryview(mem).cast("B")
        idx = (ctypes.c_char * (8 * (count + 1))).from_address(optr)
        idx.owner = self
        self.offsets = memoryview(idx).cast("B").cast("Q")

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        if not isinstance(i, int):
            raise TypeError("loader.Ragged: index with an int")
        n = self.count
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("sample %d of %d" % (i, n))
        o = self.offsets
        return self._value(self.data[o[i]:o[i + 1]])

    def _value(self, raw):
        if self._typestr is None:
            return raw
        np = _np or _numpy()
        return np.frombuffer(raw, self._typestr).reshape(
            (-1,) + self.row_shape)

    def __iter__(self):
        o, d = self.offsets, self.data
        for i in range(self.count):
            yield self._value(d[o[i]:o[i + 1]])

    def tolist(self):
        """The values as bytes objects (a bytes field) or lists (a ragged
        tensor): copies."""
        if self._typestr is None:
            return [bytes(v) for v in self]
        return [v.tolist() for v in self]

    def __repr__(self):
        return "<loader.Ragged %s %s[*%s]: %d values, %d bytes>" % (
            self.name, self.dtype,
            "".join(",%d" % d for d in self.row_shape), self.count,
            self.nbytes)


_np = None
_Held = None


def _numpy():
    global _np, _Held
    if _np is None:
        try:
            import numpy
        except ImportError:
            raise ImportError("loader: DLPack export goes through NumPy; "
                              "install python3-numpy")

        class Held(numpy.ndarray):
            """An array that keeps `owner` (an Output) alive."""
            owner = None

        _np, _Held = numpy, Held
    return _np


class Mix:
    """What a batch's batch stages drew (the pipeline's mixup, cutmix):
    kind ("mixup" or "cutmix"), lam (the weight of each sample's own
    pixels and label; cutmix's corrected to its box's area), box (cutmix:
    (x0, y0, x1, y1) in pixels, ends exclusive; None for mixup) and pair
    ("flip": sample i mixes with count - 1 - i; "roll": with i - 1, and
    sample 0 with count - 1)."""

    __slots__ = ("kind", "lam", "box", "pair")

    def __init__(self, kind, lam, box, pair):
        self.kind, self.lam, self.box, self.pair = kind, lam, box, pair

    def partner(self, i, count):
        """Sample i's partner in a batch of count samples."""
        if self.pair == "roll":
            return i - 1 if i else count - 1
        return count - 1 - i

    def __repr__(self):
        return "<loader.Mix %s lam %.6g%s, pair %s>" % (
            self.kind, self.lam,
            " box %s" % (self.box,) if self.box else "", self.pair)


class Batch(collections.abc.Mapping):
    """A batch: a mapping from output names to Outputs, plus its place.

    epoch, index (within the epoch), seq (in the stream), count (samples),
    repeats (of count, those at the end that repeat a sample of the epoch:
    padding, Stream(pad=True); 0 or 1), ids (an Output of the samples'
    global indices, uint64; in a mixture, each one's index within its
    member), member (a mixture's: each sample's member, a NumPy uint32
    array; else None), mix (None, or a Mix: what the pipeline's
    mixup or cutmix drew for this batch). Valid until
    the stream's next iteration or release(); b[name] after that raises
    loader.Error. Outputs taken before stay valid as long as they live.
    """

    __slots__ = ("_slot", "_ptrs", "_rbytes", "_shapes", "_by_name",
                 "_names", "_mptr", "seq", "index", "epoch", "count",
                 "repeats", "mix")

    def __init__(self, stream, slot, seq, index, epoch, count, ptrs,
                 rbytes=None, repeats=0, shapes=None, mix=None, mptr=None):
        # The stream's layout, not the stream: the stream holds its
        # current batch, and a cycle would keep both until a GC pass.
        self._by_name = stream._by_name
        self._names = stream._names
        self._slot = slot
        self.seq = seq
        self.index = index
        self.epoch = epoch
        self.count = count
        self.repeats = repeats
        self.mix = mix
        self._ptrs = ptrs  # the outputs', then the ids'
        self._mptr = mptr  # a mixture's members, else None
        self._rbytes = rbytes  # {output: bytes} of ragged outputs
        # {output: (sample shape, bytes)} where this batch's differ from
        # the layout's (a schedule's smaller epoch), else None.
        self._shapes = shapes

    def _check(self):
        if self._slot is None:
            raise Error(-_errno.EINVAL,
                        "batch %d of epoch %d was released: its slot may "
                        "hold another batch now (take outputs before "
                        "releasing, or copy them)" % (self.index, self.epoch))
        return self._slot

    def __getitem__(self, name):
        slot = self._check()
        k, dtype, sample_shape, sample_bytes = self._by_name[name]
        if sample_bytes is None:  # ragged: sample_shape is a row's
            ptr, optr = self._ptrs[k]
            return Ragged(slot, name, ptr, optr, self.count,
                          self._rbytes[k], dtype, sample_shape)
        if self._shapes is not None and k in self._shapes:
            shape, nbytes = self._shapes[k]
            return Output(slot, name, self._ptrs[k], dtype,
                          (self.count,) + shape, nbytes)
        return Output(slot, name, self._ptrs[k], dtype,
                      (self.count,) + sample_shape, self.count * sample_bytes)

    def __iter__(self):
        return iter(self._names)

    def __len__(self):
        return len(self._names)

    @property
    def ids(self):
        return Output(self._check(), "ids", self._ptrs[-1], 7,
                      (self.count,), 8 * self.count)

    @property
    def member(self):
        """A mixture's batch: the member each sample came from (its
        place in the list or the mixture file), a NumPy uint32 array
        that views the ring beside ids, which then holds each sample's
        index within its member; it keeps the slot as an Output does.
        None for a stream of one dataset."""
        if self._mptr is None:
            return None
        return Output(self._check(), "member", self._mptr, 5,
                      (self.count,), 4 * self.count).numpy()

    @property
    def released(self):
        return self._slot is None

    def release(self):
        """Done with this batch. Its slot goes back to the daemon once no
        Output, array or tensor of it is left. Idempotent."""
        self._slot = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def mask(self):
        """A NumPy bool array of count: False for the repeats (padding)
        at the end, True for the epoch's own samples; e.g. a loss's
        per-sample weights."""
        np = _numpy()
        m = np.ones(self.count, dtype=bool)
        if self.repeats:
            m[self.count - self.repeats:] = False
        return m

    def __repr__(self):
        return "<loader.Batch epoch %d index %d: %d samples%s, %s>" % (
            self.epoch, self.index, self.count,
            " (%d repeated)" % self.repeats if self.repeats else "",
            ", ".join(self._names))


class Stream:
    """A stream of batches from loaderd.

    Stream(dataset, batch_size=None, outputs=None, pipeline=None,
           order="sequential", seed=0, epochs=1, start_epoch=0,
           start_batch=0, rank=None, world=None, drop_last=False,
           ring_slots=None, prefetch_bytes=None, threads=None,
           direct=False, on_bad="fail", timeout_ms=None, socket=None,
           wait_timeout=None, name=None, fresh=False, reconnect_ms=None,
           ragged_bytes=None, pad=False, epoch_size=None)

    Every keyword is the struct loader_opts field of the same name
    (libloader(3)), None meaning the library's default (batch_size 256,
    ring_slots 8, prefetch_bytes 64 MiB, threads the daemon's,
    timeout_ms 10000, ragged_bytes the daemon's), except: epochs
    defaults to 1 (0 or None: endless); reconnect_ms None is the
    library's default, 60000 for a named stream and never for another,
    and 0 is never;
    outputs may be a list; order is "sequential", "random" or "quasi";
    on_bad "fail" or "skip"; rank and world default from the environment
    (RANK/WORLD_SIZE, LOCAL_RANK/LOCAL_WORLD_SIZE,
    OMPI_COMM_WORLD_RANK/SIZE, HOROVOD_RANK/SIZE, SLURM_PROCID/NTASKS,
    else 0 of 1); socket is the daemon's socket path; wait_timeout
    (seconds, None: for ever) bounds each wait for a batch. len(stream)
    is the number of batches per epoch. Iterating yields Batches; each
    stays valid until the next one is asked for.

    Numbers are checked before anything is opened: 0 is never a
    default (batch_size=0, threads=0, ... are refused), nor is a value
    too large for its field; a refused value raises loader.UsageError (a
    ValueError and a loader.Error with code EUSAGE) naming the keyword
    and the value, a bool or float where an integer is meant TypeError.
    The ranges: batch_size 1..65536, seed 0..2**64-1, epochs and
    start_epoch 0..2**32-1 (start_epoch + epochs too), start_batch
    0..2**64-1, rank 0..world-1, world 1..65536, ring_slots a power of
    two in 2..1024, prefetch_bytes 4096..64 GiB, threads 1..1024,
    timeout_ms any int but 0 (negative: no limit), reconnect_ms
    0..2**31-1, ragged_bytes 1..1 GiB, epoch_size 0..2**48, wait_timeout
    >= 0.

    name (a str of 1..63 bytes, no "/") makes it a named stream: the
    daemon saves its position, per user, as batches are released, and a
    Stream opened again with the name (after a crash, a preemption)
    resumes at the first batch not released; fresh=True drops what was
    saved. Every rank of a job gives the same name; restarted with
    another world, the job goes on elastically (the rest of the old
    ranks' epoch is dealt to the new ones, each the same number of
    batches: libloader(3), Named streams). stream.start is (epoch,
    batch) where it started, and stream.resumed whether that was a
    saved position. Each loaderd keeps the positions of the ranks that
    ran on its node only: a job restarted with another world across
    nodes gives every new rank all the old ranks' positions, as its
    checkpoint gathered them, in resume_from ([(epoch, batch)] by old
    rank: each rank's next batch) with resume_plan (stream.plan of those
    ranks, (id, end_epoch)); Epochs.load_state_dict() does this from a
    list of the ranks' state_dict()s. reconnect_ms lets
    the library connect again to a daemon that went away (crashed,
    restarted) and go on at the first batch not released.

    pad=True fills the epoch's end as torch's DistributedSampler does:
    when world does not divide the dataset, the ranks short of a sample
    take one of the epoch again, so that every rank's last batch has the
    same size and none is empty. Each repeat is the last sample of its
    rank's last batch; batch.repeats counts it and batch.mask() leaves it
    out. Batch counts and every other sample stay those of pad=False.

    A bytes field (captions, tokens, JSON) is a ragged output: b["text"]
    is a Ragged (its values as memoryviews, plus .data and .offsets), and
    ragged_bytes is the room for its values in a batch (None: the daemon's
    default; a batch that does not fit fails the stream, naming the
    sample and this option).

    dataset may be an s3://BUCKET/PREFIX URL of a dataset that
    "loaderctl pack SRC s3://BUCKET/PREFIX" stored in an S3-API object
    store: Stream("s3://bucket/prefix", ...) works as with a local one.
    Its credentials, region and endpoint are found in this process, from
    the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    AWS_SESSION_TOKEN, AWS_PROFILE, AWS_REGION, AWS_ENDPOINT_URL, ...) or
    ~/.aws/credentials and ~/.aws/config, as loaderctl finds them, and
    sent to the daemon, which fetches the dataset into its shard cache
    with them (never with its own): the shards' headers and footers
    before the stream starts, their records as it reads them. The open
    waits at least 30 minutes for the daemon unless timeout_ms is
    negative. Of
    a dataset larger than the cache, the shards that do not fit are read
    in place, from the store, as each batch needs them (order="quasi"
    reads them in long runs).
    Errors name the object, s3://BUCKET/KEY (loader(7), libloader(3),
    loaderd(8) S3 DATASETS).

    dataset may also be a mixture: one stream drawn from several
    datasets at set proportions, in Mosaic Streaming's terms (loader(7),
    Mixtures). Either a list (of 1 to 32) whose items are (path,
    proportion) pairs or dicts {"path": ..., one of "proportion",
    "repeat" or "choose": ..., "pipeline": ...}, e.g.
    [("fm-a", 0.7), ("fm-b", 0.3)]; or the path of a mixture file
    ("loaderctl mix create" writes one). Every member gives a proportion
    (its share of an epoch of epoch_size samples; None or 0: the
    members' samples added up) or none does (repeat: times its own
    samples; choose: that many). A member's pipeline replaces pipeline=
    for it. A batch's ids are then each sample's index within its
    member, and batch.member says which member; stream.members is the
    list, each member a dict of the mixture file's keys (None for a
    file), stream.nmembers the count. A named mixture opened again with
    other weights takes them from the first epoch none of its ranks has
    begun; stream.batches_in(epoch) gives each epoch's batches.
    """

    def __init__(self, dataset, *, batch_size=None, outputs=None,
                 pipeline=None, order="sequential", seed=0, epochs=1,
                 start_epoch=0, start_batch=0, rank=None, world=None,
                 drop_last=False, ring_slots=None, prefetch_bytes=None,
                 threads=None, direct=False, on_bad="fail", timeout_ms=None,
                 socket=None, wait_timeout=None, name=None, fresh=False,
                 reconnect_ms=None, ragged_bytes=None, resume_from=None,
                 resume_plan=None, pad=False, epoch_size=None):
        self._ring = None
        # Every number is checked before anything is opened: see _INTS.
        batch_size = _int("batch_size", batch_size)
        seed = _int("seed", seed)
        epochs = _int("epochs", epochs)
        start_epoch = _int("start_epoch", start_epoch)
        start_batch = _int("start_batch", start_batch)
        ring_slots = _int("ring_slots", ring_slots)
        prefetch_bytes = _int("prefetch_bytes", prefetch_bytes)
        threads = _int("threads", threads)
        timeout_ms = _int("timeout_ms", timeout_ms)
        reconnect_ms = _int("reconnect_ms", reconnect_ms)
        ragged_bytes = _int("ragged_bytes", ragged_bytes)
        epoch_size = _int("epoch_size", epoch_size)
        wait_timeout = _seconds("wait_timeout", wait_timeout)
        # A list is a mixture; a path may name a mixture file, which
        # libloader reads (and which gives its own epoch_size).
        members = None
        if isinstance(dataset, (list, tuple)):
            members = _members(dataset, epoch_size)
        elif epoch_size:
            raise UsageError("epoch_size=%r: only for a mixture given as a "
                             "list of proportions (a mixture file says its "
                             "own)" % epoch_size)
        if epochs and (start_epoch or 0) + epochs > _U32:
            raise UsageError(
                "epochs=%r with start_epoch=%r: the last epoch would be "
                "past 2**32-1 (epochs counts from start_epoch)"
                % (epochs, start_epoch))
        if rank is None and world is None:
            rank, world, self.rank_source = default_rank_world()
        else:
            self.rank_source = "arguments"
            rank = _int("rank", rank) or 0
            world = _int("world", world) or 1
        if rank >= world:
            raise UsageError("rank=%r: must be below world=%r%s"
                             % (rank, world, "" if self.rank_source ==
                                "arguments" else " (from $%s)"
                                % self.rank_source))
        self.rank, self.world = rank, world
        o = _lib.Opts()
        o.size = ctypes.sizeof(o)
        self._keep = [_text(socket), _text(outputs), _text(pipeline),
                      _text(name)]
        o.socket_path, o.outputs, o.pipeline, o.name = self._keep
        o.fresh = bool(fresh)
        # None: the library's default (0 in C); 0: never (-1 in C).
        o.reconnect_ms = -1 if reconnect_ms == 0 else reconnect_ms or 0
        o.on_bad = _enum(on_bad, _lib.ON_BAD, "on_bad")
        o.batch_size = batch_size or 0
        o.order = _enum(order, _lib.ORDERS, "order")
        o.seed = seed or 0
        o.epochs = epochs or 0
        o.start_epoch = start_epoch or 0
        o.start_batch = start_batch or 0
        o.rank, o.world = rank, world
        o.drop_last = bool(drop_last)
        o.pad = bool(pad)
        o.ring_slots = ring_slots or 0
        o.prefetch_bytes = prefetch_bytes or 0
        o.threads = threads or 0
        o.direct = bool(direct)
        o.timeout_ms = timeout_ms or 0
        o.ragged_bytes = ragged_bytes or 0
        o.member_size = ctypes.sizeof(_lib.Member)
        if members is not None:
            o.members = _member_array(members, self._keep)
            o.nmembers = len(members)
            o.epoch_size = epoch_size or 0
        if resume_from:
            try:
                pos = [(e, b) for e, b in resume_from]
            except (TypeError, ValueError):
                raise Error(-_errno.EINVAL,
                            "resume_from: a list of (epoch, batch), one "
                            "per rank of the earlier world")
            if len(pos) > 65536:
                raise UsageError("resume_from: %d ranks, at most 65536"
                                 % len(pos))
            pos = [(_int("start_epoch", e, "resume_from[%d] epoch" % i),
                    _int("start_batch", b, "resume_from[%d] batch" % i))
                   for i, (e, b) in enumerate(pos)]
            if any(e is None or b is None for e, b in pos):
                raise UsageError("resume_from: None in a position")
            n = len(pos)
            self._keep.append((ctypes.c_uint32 * n)(*[e for e, _ in pos]))
            self._keep.append((ctypes.c_uint64 * n)(*[b for _, b in pos]))
            o.from_world = n
            o.from_epoch = self._keep[-2]
            o.from_batch = self._keep[-1]
            if resume_plan:
                try:
                    plan, plan_end = resume_plan
                except (TypeError, ValueError):
                    raise UsageError("resume_plan=%r: a stream's plan, "
                                     "(id, end_epoch)" % (resume_plan,))
                o.from_plan = _int("start_batch", plan, "resume_plan id")
                o.from_plan_end = _int("epoch", plan_end,
                                       "resume_plan end_epoch")
        self.options = {f: getattr(o, f) for f, _ in o._fields_
                        if f not in ("size", "socket_path", "from_epoch",
                                     "from_batch", "members", "member_size")}
        # A mixture's members as the mixture file would have them.
        self.members = members
        self.dataset = members if members is not None else \
            os.fspath(dataset)
        self._wait_ms = None if wait_timeout is None else \
            int(wait_timeout * 1000)

        h = ctypes.c_void_p()
        err = ctypes.create_string_buffer(1024)
        rc = _lib.lib.loader_open(ctypes.byref(h), None if members else
                                  os.fsencode(dataset), ctypes.byref(o),
                                  err, len(err))
        if rc:
            raise Error(rc, err.value.decode("utf-8", "replace"))
        self._ring = _Ring(h)
        self._pad = bool(pad) and not drop_last
        self._view = _lib.BatchView()
        self._pview = ctypes.byref(self._view)
        self._mixview = _lib.MixView()
        self.slots = _lib.lib.loader_slots(h)
        # Members of a mixture (of a list or a file); 0 for one dataset.
        self.nmembers = _lib.lib.loader_nmembers(h)
        self._mask = self.slots - 1
        self._ptrs = {}
        self._bpe = _lib.lib.loader_batches_per_epoch(h)
        self.samples = _lib.lib.loader_samples(h)
        se, sb = ctypes.c_uint32(), ctypes.c_uint64()
        self.resumed = _lib.lib.loader_start(h, ctypes.byref(se),
                                             ctypes.byref(sb)) == 1
        self.start = (se.value, sb.value)
        self._epoch = se.value  # of the batch handed out last
        pend = ctypes.c_uint32()
        pid = _lib.lib.loader_plan(h, ctypes.byref(pend))
        self.plan = (pid, pend.value)
        self._cur = None   # the batch handed out last
        self._final = None  # the code that ended the stream
        self._layout = None
        self._ragged = ()
        self._names = ()
        self._by_name = {}

    # ---- iteration ---------------------------------------------------------

    def __len__(self):
        """Batches of the epoch the stream is in, for this rank: that of
        the batch handed out last, or before the first the start's. The
        same for every epoch, except in a named mixture whose weights
        changed part-way through an epoch (batches_in())."""
        return self.batches_in(self._epoch)

    def batches_in(self, epoch):
        """Batches of epoch `epoch` for this rank: len() of every epoch,
        except in a named mixture whose weights changed part-way through
        an epoch: the epochs from the next one no rank had begun have the
        new weights' number."""
        ring = self._ring
        if ring is None or ring.h is None:
            return self._bpe
        return _lib.lib.loader_batches_in_epoch(ring.h, epoch)

    def __iter__(self):
        return self

    def __next__(self):
        b = self.next()
        if b is None:
            raise StopIteration
        return b

    def next(self, timeout=None):
        """The next Batch, or None after the last epoch.

        Releases the batch handed out before. timeout (seconds) overrides
        wait_timeout for this call; on expiry loader.Error with code
        -ETIMEDOUT, and the stream goes on.
        """
        ring = self._ring
        if ring is None or ring.closing:
            raise Error(-_errno.EBADF, "the stream is closed")
        # Slots are given back on the thread that iterates (see _Slot).
        ring.owner = _get_ident()
        cur = self._cur
        if cur is not None:
            # Dropping the batch's hold gives its slot back right away
            # (_Slot.__del__) when nothing else views it.
            self._cur = None
            cur._slot = None
        held = ring.held
        if held and held[0][1]:
            ring.sweep()
        if self._final is not None:
            return self._ended()
        if len(held) >= self.slots - 1:
            # Tensors of earlier batches are alive; a cycle may be all
            # that keeps them.
            gc.collect()
            ring.sweep()
            if len(held) >= self.slots - 1:
                raise Error(-_errno.EBUSY, self._full_reason())
        if ring.interrupted:
            ring.interrupted = False
            raise KeyboardInterrupt
        if timeout is None:
            wait = self._wait_ms
        else:
            timeout = _seconds("timeout", timeout)
            wait = None if timeout is None else int(timeout * 1000)
        left = wait
        lib, h, pv = _lib.lib, ring.h, self._pview
        while True:
            ms = _SLICE_MS if left is None or left > _SLICE_MS else left
            ring.busy = True
            try:
                rc = lib.loader_next(h, pv, ms)
            finally:
                ring.busy = False
            if rc != -_errno.ETIMEDOUT:
                break
            # Back in Python between slices: a pending Ctrl-C raises
            # KeyboardInterrupt here.
            if left is not None:
                left -= ms
                if left <= 0:
                    raise Error(rc, "no batch within %g s" % (wait / 1000))
        if rc:
            self._final = rc
            return self._ended()
        v = self._view
        if self._layout is None:
            self._learn_layout(v)
        seq = v.seq
        # A slot's addresses change only when libloader reconnected to a
        # daemon (a new ring, mapped elsewhere): read them from the view
        # once per ring, and check one of them each time.
        ptrs = self._ptrs.get(seq & self._mask)
        if ptrs is None or ptrs[-1] != v.ids:
            if ptrs is not None:
                self._ptrs.clear()
                ring.arrays.clear()
            # A mixture's members sit before the ids, which stay last.
            ptrs = [v.out[i].data for i in range(v.noutputs)] + \
                ([lib.loader_members(h, pv)] if self.nmembers else []) + \
                [v.ids]
            for i in self._ragged:
                ptrs[i] = (ptrs[i], lib.loader_offsets(h, pv, i))
            self._ptrs[seq & self._mask] = ptrs
        rbytes = {i: v.out[i].bytes for i in self._ragged} \
            if self._ragged else None
        # A schedule (progressive resizing) gives some epochs smaller
        # images: the slot says each batch's shape, within the layout's.
        shapes = None
        for i, shape in self._plain:
            t = v.out[i]
            now = tuple(t.shape[1:t.ndim])
            if now != shape:
                if shapes is None:
                    shapes = {}
                shapes[i] = (now, t.bytes)
        rec = [seq, False, v.epoch, v.index]
        held.append(rec)
        b = Batch(self, _Slot(ring, rec), seq, v.index, v.epoch, v.count,
                  ptrs, rbytes,
                  lib.loader_repeats(h, pv) if self._pad else 0, shapes,
                  self._mix(h, pv), ptrs[-2] if self.nmembers else None)
        self._cur = b
        self._epoch = v.epoch
        return b

    def _mix(self, h, pv):
        """The batch's Mix, or None: read from its slot by libloader,
        which checks the values."""
        m = self._mixview
        rc = _lib.lib.loader_mix(h, pv, ctypes.byref(m))
        if rc:
            raise Error(rc, "batch %d of epoch %d: its slot's mix is out "
                        "of range" % (self._view.index, self._view.epoch))
        kind = _lib.MIX_KINDS.get(m.kind)
        if kind is None:
            return None
        return Mix(kind, m.lam,
                   tuple(m.box) if kind == "cutmix" else None,
                   _lib.PAIRS[m.pair])

    def _learn_layout(self, v):
        """The outputs' names, types and sample shapes: the same in every
        batch, so read once."""
        lay, ragged = [], []
        for i in range(v.noutputs):
            t = v.out[i]
            shape = tuple(int(t.shape[d]) for d in range(1, t.ndim))
            sb = t.bytes // v.count if v.count else 0
            if t.ndim >= 2 and t.shape[1] == _lib.RAGGED:
                shape, sb = shape[1:], None  # a Ragged, and its row
                ragged.append(i)
            lay.append((t.name.decode(), (i, t.dtype, shape, sb)))
        self._ragged = tuple(ragged)
        self._plain = tuple((i, shape) for _, (i, _, shape, sb) in lay
                            if sb is not None)
        self._layout = lay
        self._names = tuple(n for n, _ in lay)
        self._by_name = dict(lay)

    def _ended(self):
        rc = self._final
        if rc == _lib.EEND:
            return None
        raise Error(rc, _lib.lib.loader_reason(self._ring.h).decode(
            "utf-8", "replace"))

    def _full_reason(self):
        held = self._ring.held
        alive = ["%d:%d" % (r[2], r[3]) for r in held if not r[1]]
        waiting = len(held) - len(alive)
        return ("the ring's %d slots are taken (the daemon needs one): "
                "batch%s %s (epoch:index) %s still viewed by Outputs, "
                "arrays or tensors%s. Drop what keeps %s (a loop variable "
                "of an earlier loop, a list of tensors, a loss kept with "
                "its graph), copy what you keep (x.clone(), np.array(x)), "
                "or open the stream with more ring_slots (a loop that "
                "holds the batch before while it asks for the next needs "
                "at least 4)"
                % (self.slots, "es" if len(alive) > 1 else "",
                   ", ".join(alive), "are" if len(alive) > 1 else "is",
                   "" if not waiting else
                   ", and %d finished batch%s wait%s behind (slots go "
                   "back in order)" % (waiting, "es" if waiting > 1 else "",
                                       "" if waiting > 1 else "s"),
                   "them" if len(alive) > 1 else "it"))

    # ---- the rest ------------------------------------------------------------

    def stats(self):
        """Counters as a dict: this client's (batches, samples, bytes,
        wait_s: time blocked waiting for batches), the stream's shape
        (batches_per_epoch, dataset_samples, slots, held) and the
        daemon's (daemon_bytes_read, daemon_bad_samples, daemon_rss).
        One round trip to the daemon."""
        ring = self._ring
        if ring is None or ring.closing:
            raise Error(-_errno.EBADF, "the stream is closed")
        st = _lib.Stats()
        st.size = ctypes.sizeof(st)
        ring.busy = True
        try:
            rc = _lib.lib.loader_stats(ring.h, ctypes.byref(st))
        finally:
            ring.busy = False
        if rc:
            raise Error(rc, _lib.lib.loader_reason(ring.h).decode(
                "utf-8", "replace"))
        d = {f: getattr(st, f) for f, _ in st._fields_
             if f not in ("size", "reserved", "wait_ns")}
        d["wait_s"] = st.wait_ns / 1e9
        d["slots"] = self.slots
        d["held"] = len(ring.held)
        return d

    def close(self):
        """End the stream. The shared memory stays mapped (and the daemon's
        stream open) until the last Output, array or tensor of it is
        gone: closing never pulls memory from under a live tensor."""
        ring = self._ring
        if ring is None:
            return
        if self._cur is not None:
            self._cur._slot = None
            self._cur = None
        ring.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # The ring lives on while a tensor views it (each _Slot holds
        # it); this only says that no one will ask for more batches.
        ring = getattr(self, "_ring", None)
        if ring is not None:
            self._cur = None
            ring.close()

    def __repr__(self):
        what = self.dataset if self.members is None else \
            "a mixture of %d members" % len(self.members)
        return "<loader.Stream %s: %d batches per epoch, rank %d of %d>" % (
            what, self._bpe, self.rank, self.world)
