"""Shared by the Python package's tests: TAP output, a private loaderd on
a private socket, packed datasets, the C client's digests to compare with.

Run through make check (PY_LOG_COMPILER: BUILD/loader-python), which sets
top_srcdir and top_builddir. A test that lacks something (NumPy, torch,
the Fashion-MNIST package) prints "1..0 # SKIP why" and exits 77.
"""

import atexit
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TOP = os.environ.get("top_builddir")
SRC = os.environ.get("top_srcdir")
FMNIST = os.environ.get("FASHION_MNIST_DIR",
                        "/usr/share/datasets/fashion-mnist")


def skip_all(why):
    print("1..0 # SKIP %s" % why)
    sys.stdout.flush()
    sys.exit(77)


if not TOP or not SRC:
    skip_all("run through make check (top_builddir unset)")


def need(*modules):
    """Import each module (a dotted name gives the submodule) or skip the
    whole test, naming the Debian package of its top-level package."""
    import importlib
    out = []
    for m in modules:
        try:
            out.append(importlib.import_module(m))
        except ImportError:
            top = m.split(".")[0]
            skip_all("python3 module %s missing (Debian: python3-%s)"
                     % (top, top.replace("_", "-")))
    return out[0] if len(out) == 1 else out


def need_fmnist():
    if not os.path.exists(os.path.join(FMNIST, "t10k-labels-idx1-ubyte.gz")):
        skip_all("Fashion-MNIST not installed (Debian package "
                 "dataset-fashion-mnist)")


PHOTOS = "/usr/share/backgrounds"


def need_photos(n=3):
    """The first n of Debian's wallpaper photographs (real JPEGs for the
    image pipeline's checks), or skip."""
    names = sorted(f for f in os.listdir(PHOTOS) if f.endswith(".jpg")) \
        if os.path.isdir(PHOTOS) else []
    if len(names) < n:
        skip_all("no photographs in %s (Debian: lomiri-wallpapers-16.04)"
                 % PHOTOS)
    return [os.path.join(PHOTOS, f) for f in names[:n]]


def pipeline(*args):
    """loaderctl pipeline ARGS: its standard output (raises on failure)."""
    return subprocess.run([os.path.join(TOP, "loaderctl"), "pipeline"] +
                          list(args), check=True, capture_output=True,
                          text=True).stdout


def pipeline_image(spec, photo, seed, dirname):
    """The sample of seed that spec makes of photo, as u8 HWC NumPy."""
    import numpy
    out = os.path.join(dirname, "s.npy")
    pipeline("--seed", str(seed), "%s | u8 | nhwc" % spec, photo, out)
    return numpy.load(out)


class Tap:
    """TAP, the plan printed at the end. A failed check prints why."""

    def __init__(self):
        self.n = 0
        self.failed = 0
        atexit.register(self.done)
        sys.excepthook = self._uncaught

    def _uncaught(self, kind, value, tb):
        """A test script that raises fails as a test, with the traceback."""
        import traceback
        self.ok(False, "the test script ran to its end",
                "".join(traceback.format_exception(kind, value, tb)))

    def ok(self, cond, desc, *diag):
        self.n += 1
        if cond:
            print("ok %d - %s" % (self.n, desc))
        else:
            self.failed += 1
            print("not ok %d - %s" % (self.n, desc))
            for d in diag:
                for line in str(d).splitlines():
                    print("#   %s" % line)
        sys.stdout.flush()
        return bool(cond)

    def eq(self, got, want, desc):
        return self.ok(got == want, desc, "got:  %r" % (got,),
                       "want: %r" % (want,))

    def raises(self, exc, fn, desc, match=None):
        """fn() must raise exc (whose text contains match); returns it."""
        try:
            fn()
        except exc as e:
            if match is not None and match not in str(e):
                self.ok(False, desc, "raised %r, without %r" % (e, match))
                return e
            self.ok(True, desc)
            print("#   %s: %s" % (type(e).__name__, e))
            return e
        except BaseException as e:  # noqa: B902 - any other is a failure
            self.ok(False, desc, "raised %s: %s, expected %s"
                    % (type(e).__name__, e, exc.__name__))
            return None
        self.ok(False, desc, "nothing raised, expected %s" % exc.__name__)
        return None

    def done(self):
        print("1..%d" % self.n)
        sys.stdout.flush()


def tmpdir():
    d = tempfile.mkdtemp(prefix="loaderd-pytest.")
    atexit.register(shutil.rmtree, d, True)
    return d


def run(*args, **kw):
    """Run a program of the build tree; its stdout as text."""
    p = subprocess.run([str(a) for a in args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, env=child_env(),
                       **kw)
    if p.returncode:
        raise RuntimeError("%s: exit %d: %s%s" % (
            " ".join(map(str, args)), p.returncode, p.stdout, p.stderr))
    return p.stdout


def child_env():
    """The environment for the programs a test starts: without what
    loader-python adds for python3 in a sanitizer build (the preloaded
    runtimes, leak checks off), which the programs, linked with the
    sanitizers themselves, must not inherit."""
    env = dict(os.environ)
    if env.pop("LOADER_SAN_PRELOAD", None):
        env.pop("LD_PRELOAD", None)
        opts = [o for o in env.get("ASAN_OPTIONS", "").split(":")
                if o and o != "detect_leaks=0"]
        env["ASAN_OPTIONS"] = ":".join(opts)
    return env


def tool(name):
    return os.path.join(TOP, "tests", "tools", name)


_daemons = []


def kill_daemons():
    """Kill every Daemon still running, stopped ones included."""
    for d in _daemons:
        try:
            d.kill(signal.SIGKILL)
        except Exception:
            pass


class Daemon:
    """A private loaderd in the foreground, killed at exit.

    Its output goes to its log, never to the test's: the TAP driver reads
    until every holder of its pipe is gone, and a daemon left stopped by
    a failed test would hold it for ever.
    """

    def __init__(self, dirname, name="d", *args):
        self.sock = os.path.join(dirname, name + ".sock")
        self.log = open(self.sock + ".log", "w")
        self.proc = subprocess.Popen(
            [os.path.join(TOP, "loaderd"), "-f", "--socket", self.sock,
             "--state-dir", self.sock + ".state",
             "--cache-dir", self.sock + ".cache"]
            + list(args), stdin=subprocess.DEVNULL, stdout=self.log,
            stderr=self.log, env=child_env())
        _daemons.append(self)
        atexit.register(self.kill)
        for _ in range(200):
            if os.path.exists(self.sock):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError("loaderd did not start: see %s.log" % self.sock)

    @property
    def pid(self):
        return self.proc.pid

    def kill(self, sig=signal.SIGKILL):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                self.proc.wait(10)


def pack_fmnist(dirname):
    """The Fashion-MNIST test split, packed: 10000 samples."""
    need_fmnist()
    out = os.path.join(dirname, "fm")
    run(os.path.join(TOP, "loaderctl"), "pack", "--split", "test",
        "--shard-size", "2M", FMNIST, out)
    return os.path.join(out, "test")


def pack_jpegs(dirname, n=48):
    """An ImageFolder of n generated JPEGs of varied sizes, packed."""
    src = os.path.join(dirname, "img")
    sizes = [(320, 240), (200, 300), (96, 96), (640, 480), (150, 100)]
    for i in range(n):
        cls = os.path.join(src, "c%d" % (i % 3))
        os.makedirs(cls, exist_ok=True)
        w, h = sizes[i % len(sizes)]
        args = [tool("mkjpeg"), os.path.join(cls, "%03d.jpg" % i), w, h, i]
        if i % 7 == 3:
            args.append("--gray")
        run(*args)
    out = os.path.join(dirname, "jpg")
    run(os.path.join(TOP, "loaderctl"), "pack", src, out)
    return out


def c_batch_hashes(sock, dataset, *args):
    """ldclient --batch-hash: [(epoch, index, count, hex digest)]."""
    out = run(tool("ldclient"), "--batch-hash", *args, sock, dataset)
    res = []
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "batch":
            res.append((int(f[1]), int(f[2]), int(f[3]), f[5]))
        elif f and f[0] == "error:":
            raise RuntimeError(line)
    return res


class _XXH:
    """XXH3-64 from libxxhash, over memory addresses (no copy)."""

    def __init__(self):
        lib = ctypes.CDLL("libxxhash.so.0")
        lib.XXH3_createState.restype = ctypes.c_void_p
        lib.XXH3_64bits_reset.argtypes = [ctypes.c_void_p]
        lib.XXH3_64bits_update.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                           ctypes.c_size_t]
        lib.XXH3_64bits_digest.argtypes = [ctypes.c_void_p]
        lib.XXH3_64bits_digest.restype = ctypes.c_uint64
        self.lib = lib
        self.st = lib.XXH3_createState()

    def digest(self, spans):
        """The digest of the (address, length) spans, in order."""
        self.lib.XXH3_64bits_reset(self.st)
        for p, n in spans:
            self.lib.XXH3_64bits_update(self.st, p, n)
        return "%016x" % self.lib.XXH3_64bits_digest(self.st)


_xxh = None


def digest(spans):
    """XXH3-64 of the (address, length) spans, in order, as hex."""
    global _xxh
    if _xxh is None:
        _xxh = _XXH()
    return _xxh.digest(spans)


def batch_hash(b):
    """The digest ldclient --batch-hash prints for the same batch: the ids,
    then every output, read where they lie in the ring."""
    spans = [(b.ids.data_ptr, b.ids.nbytes)]
    for k in b:
        o = b[k]
        spans.append((o.data_ptr, o.nbytes))
        if hasattr(o, "offsets_ptr"):  # a Ragged: its offsets after
            spans.append((o.offsets_ptr, 8 * (o.count + 1)))
    return digest(spans)


def ring_ranges():
    """The address ranges this process maps of loaderd's ring memfds."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            if "loaderd-ring" in line:
                lo, hi = line.split()[0].split("-")
                out.append((int(lo, 16), int(hi, 16)))
    return out


def in_ring(addr):
    return any(lo <= addr < hi for lo, hi in ring_ranges())
