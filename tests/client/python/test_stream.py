"""loader.Stream against a real loaderd: the same bytes as the C client,
batch by batch (raw tensors and the JPEG pipeline); every sample exactly
once per epoch for world 1 and 3; outputs that are views of the ring
(NumPy and torch pointers inside its mapping); the struct layouts ctypes
uses equal the C compiler's; errors that carry the daemon's reason.
"""

import errno
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture as fx  # noqa: E402

np, torch = fx.need("numpy", "torch")
import loader  # noqa: E402
from loader import _lib  # noqa: E402

t = fx.Tap()
T = fx.tmpdir()
D = fx.pack_fmnist(T)
J = fx.pack_jpegs(T)
d = fx.Daemon(T, "d", "--threads", "2")
S = d.sock

# --- the C structs, as ctypes sees them -----------------------------------
c = {}
for line in fx.run(fx.tool("abisizes")).splitlines():
    k, *v = line.split()
    c[k] = int(v[-1])
for name, cls in (("loader_opts", _lib.Opts), ("loader_tensor", _lib.Tensor),
                  ("loader_batch", _lib.BatchView),
                  ("loader_stats", _lib.Stats),
                  ("loader_member", _lib.Member)):
    got = {"%s.%s" % (name, f): getattr(cls, f).offset
           for f, _ in cls._fields_}
    got[name] = __import__("ctypes").sizeof(cls)
    want = {k: v for k, v in c.items()
            if k == name or k.startswith(name + ".")}
    t.eq(got, want, "struct %s: ctypes layout equals the C compiler's" % name)
t.eq(c["LOADER_VERSION"], _lib.version,
     "the loaded library is the version its header says")
t.eq(loader.library_version, (1, 7), "loader.library_version")

# --- same bytes as the C client --------------------------------------------
cases = [
    ("raw, random", D, dict(batch_size=100, outputs="image:unit,label",
                            order="random", seed=5, epochs=2),
     ["--batch", "100", "--outputs", "image:unit,label", "--order", "random",
      "--seed", "5", "--epochs", "2"]),
    ("raw as stored, quasi, 3 threads", D,
     dict(batch_size=64, order="quasi", seed=2, epochs=1, threads=3),
     ["--batch", "64", "--order", "quasi", "--seed", "2", "--epochs", "1",
      "--threads", "3"]),
    ("JPEG pipeline f16 nchw", J,
     dict(batch_size=8, outputs="image,label",
          pipeline="decode | rrc 64 | flip 0.5 | normalize imagenet | f16 | nchw",
          order="random", seed=9, epochs=2),
     ["--batch", "8", "--outputs", "image,label", "--pipeline",
      "decode | rrc 64 | flip 0.5 | normalize imagenet | f16 | nchw",
      "--order", "random", "--seed", "9", "--epochs", "2"]),
    ("JPEG pipeline u8 nhwc, start at epoch 1 batch 2", J,
     dict(batch_size=8, outputs="image,label",
          pipeline="decode | resize 80 | center 64 | u8 | nhwc",
          order="random", seed=9, epochs=1, start_epoch=1, start_batch=2),
     ["--batch", "8", "--outputs", "image,label", "--pipeline",
      "decode | resize 80 | center 64 | u8 | nhwc",
      "--order", "random", "--seed", "9", "--epochs", "1",
      "--start-epoch", "1", "--start-batch", "2"]),
]
for desc, ds, kw, cargs in cases:
    want = fx.c_batch_hashes(S, ds, *cargs)
    got = []
    with loader.Stream(ds, socket=S, **kw) as s:
        for b in s:
            got.append((b.epoch, b.index, b.count, fx.batch_hash(b)))
    t.ok(len(want) > 1 and got == want,
         "%s: %d batches equal the C client's, byte for byte"
         % (desc, len(want)),
         "C:      %r" % want[:3], "Python: %r" % got[:3])

# --- exactly once per epoch -------------------------------------------------
for world in (1, 3):
    seen = {}
    nb = set()
    for rank in range(world):
        with loader.Stream(D, socket=S, batch_size=64, order="random",
                           seed=11, epochs=2, rank=rank, world=world) as s:
            n = 0
            for b in s:
                for i in b.ids.numpy().tolist():
                    seen.setdefault((b.epoch, i), 0)
                    seen[(b.epoch, i)] += 1
                n += 1
            nb.add(n)
    good = len(seen) == 20000 and set(seen.values()) == {1} and \
        {e for e, _ in seen} == {0, 1} and \
        {i for _, i in seen} == set(range(10000))
    t.ok(good, "world %d: every sample exactly once in each of 2 epochs"
         % world, "%d (epoch, id) pairs, counts %r" % (len(seen),
                                                       set(seen.values())))
    t.eq(len(nb), 1, "world %d: every rank gets as many batches" % world)

# --- zero copy ------------------------------------------------------------
with loader.Stream(D, socket=S, batch_size=32, outputs="image:unit,label",
                   epochs=1) as s:
    t.eq(len(s), 313, "len(stream): batches per epoch (10000 / 32, rounded up)")
    b = next(s)
    img, lab = b["image"], b["label"]
    a = np.asarray(img)
    x = torch.from_dlpack(img)
    y = torch.from_dlpack(lab)
    z = np.from_dlpack(lab)
    t.ok(fx.in_ring(img.data_ptr), "the image output lies in the ring's mapping",
         "0x%x, ring at %r" % (img.data_ptr, fx.ring_ranges()))
    t.eq(a.ctypes.data, img.data_ptr, "np.asarray views the ring (same address)")
    t.eq(x.data_ptr(), img.data_ptr, "torch.from_dlpack views the ring")
    t.eq(y.data_ptr(), lab.data_ptr, "... for the label too")
    t.eq(z.ctypes.data, lab.data_ptr, "np.from_dlpack views the ring")
    t.ok(fx.in_ring(lab.data_ptr) and fx.in_ring(b.ids.data_ptr),
         "labels and ids lie in the ring's mapping")
    t.eq((tuple(x.shape), x.dtype, tuple(y.shape), y.dtype),
         ((32, 28, 28), torch.float32, (32,), torch.int64),
         "shapes and dtypes as asked")
    t.ok(float(x.max()) <= 1.0 and float(x.min()) >= 0.0,
         "image:unit is in [0, 1]")
    t.eq(a.flags.writeable, True, "the NumPy view is writable")
    t.eq(sorted(b.keys()), ["image", "label"], "a batch maps output names")
    st = s.stats()
    t.eq((st["batches_per_epoch"], st["dataset_samples"], st["slots"]),
         (313, 10000, 8), "stats(): the stream's shape")
    t.ok(st["batches"] == 1 and st["daemon_bytes_read"] > 0 and
         st["daemon_rss"] > 0, "stats(): the client's and the daemon's counters",
         repr(st))
    del a, x, y, z, img, lab, b

# --- rank and world from the environment -----------------------------------
env = dict(os.environ)
try:
    os.environ.update({"RANK": "2", "WORLD_SIZE": "3"})
    with loader.Stream(D, socket=S, batch_size=100, epochs=1) as s:
        t.eq((s.rank, s.world, s.rank_source), (2, 3, "RANK/WORLD_SIZE"),
             "rank and world default from RANK/WORLD_SIZE")
        t.eq(len(s), 34, "... and the stream is that rank's (3334 samples)")
    del os.environ["RANK"], os.environ["WORLD_SIZE"]
    os.environ.update({"SLURM_PROCID": "1", "SLURM_NTASKS": "2"})
    t.eq(loader.default_rank_world(), (1, 2, "SLURM_PROCID/SLURM_NTASKS"),
         "... or from Slurm's")
    os.environ["RANK"] = "1"
    t.raises(loader.Error, loader.default_rank_world,
             "RANK without WORLD_SIZE is refused, not taken as world 1",
             "WORLD_SIZE")
finally:
    os.environ.clear()
    os.environ.update(env)

# --- errors -------------------------------------------------------------------
e = t.raises(loader.Error, lambda: loader.Stream(T + "/nope", socket=S),
             "a missing dataset: loader.Error naming it", T + "/nope")
t.eq(getattr(e, "code", None), -errno.ENOENT, "... with code -ENOENT")
e = t.raises(loader.Error, lambda: loader.Stream(D, socket=S,
                                                 outputs="image,nosuch"),
             "an unknown output: the daemon's reason", "nosuch")
t.eq(getattr(e, "code", None), loader.EUSAGE, "... with code loader.EUSAGE")
t.raises(loader.Error, lambda: loader.Stream(D, socket=S, order="shuffled"),
         "an unknown order is refused, naming the choices", "random")
t.raises(loader.Error, lambda: loader.Stream(D, socket=T + "/no.sock"),
         "no daemon on the socket: the reason says so", "is loaderd running")
t.raises(loader.Error, lambda: loader.Stream(D, socket=S, start_batch=100,
                                             batch_size=100),
         "a start batch past the epoch is refused", "start batch 100")

# --- named streams: resume at the first batch not released --------------------
def ids_of(stream, n):
    """The sample ids of the next n batches, each released after reading."""
    out = []
    for _ in range(n):
        b = next(stream)
        out.append((b.epoch, b.index, tuple(np.asarray(b.ids).tolist())))
    return out


kw = dict(socket=S, batch_size=100, order="random", seed=11, epochs=1,
          outputs="label", name="py-job")
with loader.Stream(D, fresh=True, **kw) as s:
    t.eq((s.start, s.resumed), ((0, 0), False),
         "a fresh named stream starts at the start")
    first = ids_of(s, 7)
with loader.Stream(D, **kw) as s:
    t.eq(s.resumed, True, "opened again under its name, it resumes")
    # A batch is released once nothing views it any more: the 7 read
    # were copied out, so all 7 were released before the stream closed.
    t.eq(s.start, (0, 7), "... at the first batch not released (0, 7)")
    rest = ids_of(s, len(s) - 7)
whole = ids_of(loader.Stream(D, socket=S, batch_size=100, order="random",
                             seed=11, epochs=1, outputs="label"),
               len(first) + len(rest))
t.eq(first + rest, whole,
     "the released batches of both equal an uninterrupted stream's")
t.raises(loader.Error, lambda: loader.Stream(D, **dict(kw, seed=12)),
         "other order options are refused, with the reason", "fresh start")

# A daemon killed (SIGKILL) and started again while the trainer still
# views the batch before the one it asks for: the stream reconnects and
# goes on, every batch once, as an uninterrupted stream has them.
kw2 = dict(socket=S, batch_size=100, order="random", seed=13, epochs=2,
           outputs="label")
whole2 = ids_of(loader.Stream(D, **kw2), 200)
got2 = []
with loader.Stream(D, name="py-ride", fresh=True, reconnect_ms=20000,
                   **kw2) as s:
    prev = None
    for i, b in enumerate(s):
        labels = np.asarray(b["label"])  # a view: the batch stays held
        got2.append((b.epoch, b.index, tuple(np.asarray(b.ids).tolist())))
        if i == 30:
            d.kill()
            d = fx.Daemon(T, "d", "--threads", "2")
        prev = labels  # the batch before is still viewed at next()
t.eq(len(got2), 200, "a stream viewing a batch rides a daemon SIGKILL out")
t.eq(got2, whole2, "every batch once, in the uninterrupted stream's order")

# The same through a graceful stop (SIGTERM: a service restart, a package
# upgrade), with the reconnect a named stream has by default: the daemon
# fails the ring with "loaderd is stopping", which a reconnecting stream
# rides out as the daemon going away, not as the stream's failure.
got3 = []
with loader.Stream(D, name="py-restart", fresh=True, **kw2) as s:
    held = []
    for i, b in enumerate(s):
        held = (held + [np.asarray(b["label"])])[-2:]  # two batches held
        got3.append((b.epoch, b.index, tuple(np.asarray(b.ids).tolist())))
        if i == 30:
            d.kill(signal.SIGTERM)
            d = fx.Daemon(T, "d", "--threads", "2")
t.eq(got3, whole2,
     "a named stream rides a daemon restart (SIGTERM) with its default reconnect, every batch once")

# A daemon that does not come back: the error says so, with the last
# try's reason, and the batches still held are given back without a ring
# (closing the stream once segfaulted on the ring that went away). In a
# child, so that a crash is a failed check rather than the test's end.
child = r"""
import sys, signal, numpy as np
sys.path.insert(0, sys.argv[1])
import fixture as fx, loader
dg = fx.Daemon(sys.argv[2], "gone", "--threads", "2")
s = loader.Stream(sys.argv[3], socket=dg.sock, name="py-gone", fresh=True,
                  reconnect_ms=600, batch_size=100, epochs=2,
                  outputs="label")
held = []
try:
    for i, b in enumerate(s):
        held = (held + [np.asarray(b["label"])])[-2:]
        if i == 3:
            dg.kill(signal.SIGTERM)
except loader.Error as e:
    print(e)
del held
s.close()
print("closed")
"""
r = subprocess.run([sys.executable, "-c", child,
                    os.path.dirname(os.path.abspath(__file__)), T, D],
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                   universal_newlines=True)
t.ok(r.returncode == 0 and r.stdout.endswith("closed\n"),
     "a stream whose daemon stays away closes, its held batches given back",
     r.stdout, "exit %d" % r.returncode)
t.ok(re.search(r"did not come back within 600 ms \(connect .*gone\.sock: "
               r"No such file", r.stdout),
     "the error names the wait and the last try's reason", r.stdout)
