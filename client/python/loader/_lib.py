"""The C library under the package: finding libloader.so, its structs and
functions as ctypes sees them, and the check that the two agree.

Nothing here is public; the package's modules use it.
"""

import ctypes
import ctypes.util
import os

# The LOADER_VERSION this package was written against: the library must
# have the same major and at least this minor (loader.h, "version").
NEED_MAJOR = 1
NEED_MINOR = 7
SONAME = "libloader.so.%d" % NEED_MAJOR

MAX_OUTPUTS = 8
MAX_DIMS = 5
MAX_MEMBERS = 32  # LOADER_MAX_MEMBERS: of a mixture
RAGGED = (1 << 64) - 1  # LOADER_RAGGED: shape[1] of a ragged output

# LOADER_E* (common/loader_error.h): the range no errno reaches.
CODES = {
    "EFORMAT": -4096, "EVERSION": -4097, "ETRUNC": -4098,
    "ECHECKSUM": -4099, "ESCHEMA": -4100, "EDECODE": -4101,
    "ERANGE": -4102, "ETOOBIG": -4103, "EUSAGE": -4104, "EPROTO": -4105,
    "EEND": -4106, "ESTREAM": -4107,
}
EEND = CODES["EEND"]
ESTREAM = CODES["ESTREAM"]

# Element types: LOADER_DTYPE_* to NumPy's array-interface type strings.
TYPESTR = {
    1: "|u1", 2: "|i1", 3: "<u2", 4: "<i2", 5: "<u4", 6: "<i4",
    7: "<u8", 8: "<i8", 9: "<f2", 10: "<f4", 11: "<f8",
}
DTYPE_NAME = {
    1: "uint8", 2: "int8", 3: "uint16", 4: "int16", 5: "uint32",
    6: "int32", 7: "uint64", 8: "int64", 9: "float16", 10: "float32",
    11: "float64",
}

ORDERS = {"sequential": 0, "random": 1, "quasi": 2}
ON_BAD = {"fail": 0, "skip": 1}
MIX_HOW = {"proportion": 0, "repeat": 1, "choose": 2}  # LOADER_MIX_*


class Member(ctypes.Structure):
    """struct loader_member (1.6): one dataset of a mixture."""
    _fields_ = [
        ("dataset", ctypes.c_char_p),
        ("how", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("value", ctypes.c_double),
        ("pipeline", ctypes.c_char_p),
    ]


class Opts(ctypes.Structure):
    """struct loader_opts, LOADER_VERSION 1.6."""
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("socket_path", ctypes.c_char_p),
        ("outputs", ctypes.c_char_p),
        ("pipeline", ctypes.c_char_p),
        ("on_bad", ctypes.c_uint32),
        ("batch_size", ctypes.c_uint32),
        ("order", ctypes.c_uint32),
        ("seed", ctypes.c_uint64),
        ("epochs", ctypes.c_uint32),
        ("start_epoch", ctypes.c_uint32),
        ("rank", ctypes.c_uint32),
        ("world", ctypes.c_uint32),
        ("drop_last", ctypes.c_uint32),
        ("ring_slots", ctypes.c_uint32),
        ("prefetch_bytes", ctypes.c_uint64),
        ("threads", ctypes.c_uint32),
        ("direct", ctypes.c_uint32),
        ("timeout_ms", ctypes.c_int),
        ("start_batch", ctypes.c_uint64),
        # 1.1
        ("name", ctypes.c_char_p),
        ("fresh", ctypes.c_uint32),
        ("reconnect_ms", ctypes.c_int),
        # 1.2
        ("ragged_bytes", ctypes.c_uint64),
        # 1.3
        ("from_world", ctypes.c_uint32),
        ("from_plan_end", ctypes.c_uint32),
        ("from_epoch", ctypes.POINTER(ctypes.c_uint32)),
        ("from_batch", ctypes.POINTER(ctypes.c_uint64)),
        ("from_plan", ctypes.c_uint64),
        # 1.4
        ("pad", ctypes.c_uint32),
        # 1.6
        ("members", ctypes.POINTER(Member)),
        ("nmembers", ctypes.c_uint32),
        ("member_size", ctypes.c_uint32),
        ("epoch_size", ctypes.c_uint64),
    ]


class Tensor(ctypes.Structure):
    """struct loader_tensor."""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_uint32),
        ("ndim", ctypes.c_uint32),
        ("shape", ctypes.c_uint64 * MAX_DIMS),
        ("bytes", ctypes.c_size_t),
    ]


class BatchView(ctypes.Structure):
    """struct loader_batch."""
    _fields_ = [
        ("seq", ctypes.c_uint64),
        ("index", ctypes.c_uint64),
        ("epoch", ctypes.c_uint32),
        ("count", ctypes.c_uint32),
        ("ids", ctypes.c_void_p),
        ("noutputs", ctypes.c_uint32),
        ("out", Tensor * MAX_OUTPUTS),
    ]


class MixView(ctypes.Structure):
    """struct loader_mix (1.5)."""
    _fields_ = [
        ("kind", ctypes.c_uint32),
        ("pair", ctypes.c_uint32),
        ("lam", ctypes.c_double),
        ("box", ctypes.c_uint32 * 4),
    ]


MIX_KINDS = {1: "mixup", 2: "cutmix"}  # LOADER_MIX_*; 0: none
PAIRS = {0: "flip", 1: "roll"}  # LOADER_PAIR_*


class Stats(ctypes.Structure):
    """struct loader_stats, LOADER_VERSION 1.2."""
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("batches", ctypes.c_uint64),
        ("samples", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
        ("wait_ns", ctypes.c_uint64),
        ("batches_per_epoch", ctypes.c_uint64),
        ("dataset_samples", ctypes.c_uint64),
        ("daemon_bytes_read", ctypes.c_uint64),
        ("daemon_bad_samples", ctypes.c_uint64),
        ("daemon_rss", ctypes.c_uint64),
        # 1.2
        ("daemon_cache_hits", ctypes.c_uint64),
        ("daemon_cache_misses", ctypes.c_uint64),
    ]


def _candidates():
    """Where libloader may be, in the order it is looked for."""
    env = os.environ.get("LOADER_LIBRARY")
    if env:
        # An explicit choice is the only one: a wrong path must not
        # silently fall back to another library.
        return [env]
    out = []
    try:
        from . import _installed  # written by make install
        out.append(os.path.join(_installed.LIBDIR, SONAME))
    except ImportError:
        pass
    out.append(SONAME)  # the dynamic loader's search path
    found = ctypes.util.find_library("loader")
    if found:
        out.append(found)
    return out


def _load():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError(
        "loader: cannot load %s (%s). Install the Debian package libloader%d "
        "(apt install libloader%d) or loaderd from source (make install), "
        "or point LOADER_LIBRARY at %s (in a build tree: "
        "BUILD/.libs/%s, or run python through BUILD/loader-python)"
        % (SONAME, "; ".join(errors), NEED_MAJOR, NEED_MAJOR, SONAME, SONAME))


lib, path = _load()

try:
    lib.loader_version.restype = ctypes.c_int
except AttributeError:
    raise ImportError("loader: %s has no loader_version(): a libloader "
                      "older than %d.0 (or not libloader)"
                      % (path, NEED_MAJOR))
lib.loader_version.argtypes = []
version = lib.loader_version()
if version // 1000 != NEED_MAJOR or version % 1000 < NEED_MINOR:
    raise ImportError(
        "loader: %s is version %d.%d; this package needs %d.x with x >= %d"
        % (path, version // 1000, version % 1000, NEED_MAJOR, NEED_MINOR))

_P = ctypes.c_void_p
lib.loader_open.restype = ctypes.c_int
lib.loader_open.argtypes = [ctypes.POINTER(_P), ctypes.c_char_p,
                            ctypes.POINTER(Opts), ctypes.c_char_p,
                            ctypes.c_size_t]
lib.loader_next.restype = ctypes.c_int
lib.loader_next.argtypes = [_P, ctypes.POINTER(BatchView), ctypes.c_int]
lib.loader_release.restype = ctypes.c_int
lib.loader_release.argtypes = [_P, ctypes.POINTER(BatchView)]
lib.loader_stats.restype = ctypes.c_int
lib.loader_stats.argtypes = [_P, ctypes.POINTER(Stats)]
lib.loader_reason.restype = ctypes.c_char_p
lib.loader_reason.argtypes = [_P]
lib.loader_close.restype = None
lib.loader_close.argtypes = [_P]
lib.loader_start.restype = ctypes.c_int
lib.loader_start.argtypes = [_P, ctypes.POINTER(ctypes.c_uint32),
                             ctypes.POINTER(ctypes.c_uint64)]
lib.loader_plan.restype = ctypes.c_uint64
lib.loader_plan.argtypes = [_P, ctypes.POINTER(ctypes.c_uint32)]
lib.loader_batches_per_epoch.restype = ctypes.c_uint64
lib.loader_batches_per_epoch.argtypes = [_P]
lib.loader_samples.restype = ctypes.c_uint64
lib.loader_samples.argtypes = [_P]
lib.loader_slots.restype = ctypes.c_uint32
lib.loader_slots.argtypes = [_P]
lib.loader_offsets.restype = ctypes.c_void_p
lib.loader_offsets.argtypes = [_P, ctypes.POINTER(BatchView), ctypes.c_uint32]
lib.loader_repeats.restype = ctypes.c_int
lib.loader_repeats.argtypes = [_P, ctypes.POINTER(BatchView)]
lib.loader_members.restype = ctypes.c_void_p
lib.loader_members.argtypes = [_P, ctypes.POINTER(BatchView)]
lib.loader_nmembers.restype = ctypes.c_uint32
lib.loader_nmembers.argtypes = [_P]
lib.loader_batches_in_epoch.restype = ctypes.c_uint64
lib.loader_batches_in_epoch.argtypes = [_P, ctypes.c_uint32]
lib.loader_mix.restype = ctypes.c_int
lib.loader_mix.argtypes = [_P, ctypes.POINTER(BatchView),
                           ctypes.POINTER(MixView)]
lib.loader_strerror.restype = ctypes.c_char_p
lib.loader_strerror.argtypes = [ctypes.c_int]


def strerror(code):
    return lib.loader_strerror(code).decode("utf-8", "replace")
