"""Ragged outputs (bytes fields, ragged tensors) against a real loaderd:
every value
equals its sample's (by id) in random order, stored and zstd-compressed,
exactly once per epoch for world 1 and 3; the same batches twice and as
the C client sees them; the room's limits (a batch that does not fit
fails naming the sample and ragged_bytes; one value larger than all the
room is a bad sample under the skip policy); damaged records replaced
under skip, with their values moved; a value's view keeping its slot;
the torch and tf.data adapters; a program that knows only 1.1's options
is refused bytes fields as before.
"""

import ctypes
import errno
import os
import random
import sys
import tarfile
import io

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture as fx  # noqa: E402

np, torch = fx.need("numpy", "torch")
import loader  # noqa: E402
from loader import _lib  # noqa: E402

t = fx.Tap()
T = fx.tmpdir()
CTL = os.path.join(fx.TOP, "loaderctl")
N = 600


def text(i, rnd):
    """Sample i's caption: its id first, then a length of its own."""
    n = rnd.choice([0, 1, 7, 64, 300, 1500, 5000])
    return ("id=%06d;" % i + "".join(
        rnd.choice("abcdefgh ") for _ in range(n))).encode()


rnd = random.Random(7)
TEXT = [text(i, rnd) for i in range(N)]
JSON = [b'{"n": %d}' % (i * i) for i in range(N)]


def make_tar(path, texts, jsons=None):
    """A WebDataset-style tar written by Python's tarfile, members sorted."""
    with tarfile.open(path, "w") as tf:
        for i, v in enumerate(texts):
            members = [("txt", v), ("cls", b"%d" % (i % 10))]
            if jsons is not None:
                members.append(("json", jsons[i]))
            for ext, data in sorted(members):
                ti = tarfile.TarInfo("s%06d.%s" % (i, ext))
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))


make_tar(os.path.join(T, "a.tar"), TEXT, JSON)
PLAIN = os.path.join(T, "plain")
ZSTD = os.path.join(T, "zstd")
fx.run(CTL, "pack", "--shard-size", "256k", os.path.join(T, "a.tar"), PLAIN)
fx.run(CTL, "pack", "--shard-size", "256k", "--compress", "zstd",
       os.path.join(T, "a.tar"), ZSTD)
info = fx.run(CTL, "inspect", ZSTD)
t.ok("txt: bytes zstd" in info or "txt: bytes" in info and "zstd" in info,
     "the compressed dataset stores txt as zstd bytes", info)

d = fx.Daemon(T, "d", "--threads", "2")
S = d.sock


def epochs_of(ds, **kw):
    """[(epoch, index, [(id, txt, json)])] of a whole stream."""
    out = []
    with loader.Stream(ds, socket=S, **kw) as s:
        for b in s:
            ids = [int(x) for x in np.asarray(b.ids)]
            txt = b["txt"]
            js = b["json"] if "json" in b else None
            rows = []
            for k, i in enumerate(ids):
                rows.append((i, bytes(txt[k]),
                             bytes(js[k]) if js is not None else None))
            out.append((b.epoch, b.index, rows))
    return out


def check_exact(runs, epochs, desc):
    bad = [(e, i, r[0]) for e, i, rows in runs for r in rows
           if r[1] != TEXT[r[0]] or (r[2] is not None and r[2] != JSON[r[0]])]
    t.eq(bad[:3], [], "%s: every value is its sample's" % desc)
    for e in range(epochs):
        got = sorted(r[0] for ep, _, rows in runs if ep == e for r in rows)
        t.eq(got, list(range(N)), "%s: epoch %d has every sample once"
             % (desc, e))


for name, ds in (("stored", PLAIN), ("zstd", ZSTD)):
    kw = dict(batch_size=50, order="random", seed=11, epochs=2)
    a = epochs_of(ds, **kw)
    check_exact(a, 2, name)
    t.eq(epochs_of(ds, **kw), a, "%s: the same batches again" % name)
    ranks = []
    for r in range(3):
        ranks += epochs_of(ds, batch_size=32, order="quasi", seed=4,
                           epochs=1, rank=r, world=3)
    check_exact(ranks, 1, "%s, world 3" % name)

# The same bytes as the C client (values and offsets, batch by batch).
with loader.Stream(ZSTD, socket=S, batch_size=40, order="random", seed=3,
                   epochs=1) as s:
    py = [(b.epoch, b.index, b.count, fx.batch_hash(b)) for b in s]
c = fx.c_batch_hashes(S, ZSTD, "--batch", "40", "--order", "random",
                      "--seed", "3", "--epochs", "1")
t.eq(py, c, "batches equal the C client's (%d)" % len(c))

# The Ragged object.
with loader.Stream(PLAIN, socket=S, batch_size=16, epochs=1) as s:
    b = s.next()
    r = b["txt"]
    t.ok(isinstance(r, loader.Ragged), "b[\"txt\"] is a Ragged", repr(r))
    off = list(r.offsets)
    t.eq(len(off), 17, "count + 1 offsets")
    t.eq((off[0], off[-1]), (0, r.nbytes), "offsets from 0 to nbytes")
    t.eq(r.tolist(), TEXT[:16], "tolist() gives the values")
    t.eq(bytes(r.data), b"".join(TEXT[:16]), "data holds them back to back")
    t.eq(bytes(r[-1]), TEXT[15], "a negative index counts from the end")
    t.raises(IndexError, lambda: r[16], "an index past the count")
    t.ok(fx.in_ring(r.data_ptr) and fx.in_ring(r.offsets_ptr),
         "values and offsets are views of the ring")
    # A value's view keeps the slot: batches after it do not reuse it,
    # and once the other slots are taken the stream says so.
    keep = r[3]
    del r, b
    for _ in range(6):
        s.next()
    t.eq(bytes(keep), TEXT[3], "a value's view outlives its batch, unspoiled")
    e = t.raises(loader.Error, s.next, "a view holds its slot: ring full")
    t.ok(e is not None and e.code == -errno.EBUSY, "-EBUSY", str(e))
    del keep, e
    # Spoiled offsets spoil only what this object shows; no crash.
    b = s.next()
    r = b["txt"]
    r.offsets[1] = 1 << 62
    t.eq(len(r[0]) <= r.nbytes, True, "spoiled offsets cut within the data")
    del r, b

# The room: a small dataset, one value far larger than the others.
SMALL = [b"id=%06d;" % i + b"y" * (i % 300) for i in range(200)]
SMALL[77] = b"id=%06d;" % 77 + b"z" * 20000
TEXT_SMALL = SMALL
make_tar(os.path.join(T, "small.tar"), SMALL)
SM = os.path.join(T, "small")
fx.run(CTL, "pack", os.path.join(T, "small.tar"), SM)


def run_small(**kw):
    got = []
    with loader.Stream(SM, socket=S, batch_size=8, epochs=1, **kw) as s:
        for b in s:
            ids = [int(x) for x in np.asarray(b.ids)]
            got += [(i, bytes(v)) for i, v in zip(ids, b["txt"])]
        st = s.stats()
    return got, st


got, _ = run_small()
t.eq(sorted(got), [(i, v) for i, v in enumerate(SMALL)],
     "the default room takes a 20 kB value among small ones")


def overflow():
    with loader.Stream(PLAIN, socket=S, batch_size=16, epochs=1,
                       ragged_bytes=8192, on_bad="skip") as s:
        for b in s:
            pass


e = t.raises(loader.Error, overflow,
             "a batch whose values do not fit 8192 bytes fails the stream "
             "(skip or not: no value is bad)")
t.ok(e is not None and "ragged_bytes" in str(e) and "8192" in str(e)
     and "values up to sample" in str(e),
     "its reason names the sample that crosses and the option", str(e))
e = t.raises(loader.Error, lambda: run_small(ragged_bytes=4096),
             "a value larger than all the room fails the stream (fail)")
t.ok(e is not None and "sample 77 " in str(e) and "ragged_bytes" in str(e),
     "the reason names sample 77 and ragged_bytes", str(e))
got, st = run_small(ragged_bytes=4096, on_bad="skip")
t.eq(st["daemon_bad_samples"], 1, "skip: the one too large is bad")
t.eq([i for i, _ in got].count(77), 0, "skip: sample 77 is not delivered")
t.eq([x for x in got if x[1] != SMALL[x[0]]], [],
     "skip: every value delivered is its id's (the replacement's too)")

# Damaged records under skip: their places take the next good sample's
# value, of another size, so the values of the batch move.
DMG = os.path.join(T, "dmg")
fx.run(CTL, "pack", "--shard-size", "256k", os.path.join(T, "a.tar"), DMG)
victims = sorted(random.Random(5).sample(range(N), 60))
for f in sorted(os.listdir(DMG)):
    p = os.path.join(DMG, f)
    if not f.endswith(".lds"):
        continue
    with open(p, "r+b") as fh:
        data = bytearray(fh.read())
        for v in victims:
            at = data.find(b"id=%06d;" % v)
            if at >= 0:
                data[at + 3] ^= 0x55
        fh.seek(0)
        fh.write(data)
with loader.Stream(DMG, socket=S, batch_size=20, order="random", seed=9,
                   epochs=2, on_bad="skip") as s:
    rows, seen = [], set()
    for b in s:
        ids = [int(x) for x in np.asarray(b.ids)]
        rows += [(i, bytes(v)) for i, v in zip(ids, b["txt"])]
        seen.update(ids)
    st = s.stats()
t.eq(st["daemon_bad_samples"], 2 * len(victims),
     "skip: each damaged record is bad once an epoch (%d)" % len(victims))
t.eq(len(rows), 2 * N, "skip: batches stay full")
t.eq([x[0] for x in rows if x[1] != TEXT[x[0]]], [],
     "skip: every value is its id's after the moves")
t.eq(sorted(seen & set(victims)), [], "skip: no damaged sample delivered")

# Adapters: torch keeps a Ragged; tf.data takes a string tensor.
from loader.torch import DataLoader  # noqa: E402
dl = DataLoader(PLAIN, socket=S, batch_size=25, epochs=1,
                order="sequential", keys=("txt", "cls"))
first = next(iter(dl))
t.ok(isinstance(first[0], loader.Ragged) and torch.is_tensor(first[1]),
     "loader.torch: txt stays a Ragged, cls is a tensor")
t.eq(bytes(first[0][1]), TEXT[1], "loader.torch: the Ragged's values")
dl.close()
del first


import keras_replay  # noqa: E402
from loader.keras import tf_dataset  # noqa: E402
tds = tf_dataset(PLAIN, keys=("txt", "cls"), tf=keras_replay.FakeTF(),
                 socket=S, batch_size=100, epochs=1, order="sequential")
t.eq([(x.shape, x.dtype) for x in tds.element_spec],
     [((None,), "string"), ((None,), "int64")],
     "tf_dataset: txt's spec is a string tensor")
vals = [v for x, _ in tds for v in x]
t.eq(vals, TEXT, "tf_dataset: the values as bytes, in order")

# Ragged tensors: .npy members whose first dimension varies, packed with
# --ragged, stored and zstd-compressed; every sample's arrays exact.
def npy(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


r2 = random.Random(3)
TOK, BOX = [], []
with tarfile.open(os.path.join(T, "n.tar"), "w") as tf:
    for i in range(400):
        TOK.append(np.arange(r2.choice([0, 1, 3, 17, 300]), dtype=np.int32)
                   + i * 1000)
        BOX.append(np.full((r2.choice([0, 2, 5]), 4), i, dtype=np.float32))
        for ext, data in (("box.npy", npy(BOX[i])), ("cls", b"%d" % (i % 7)),
                          ("tok.npy", npy(TOK[i]))):
            ti = tarfile.TarInfo("s%05d.%s" % (i, ext))
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
e = t.raises(RuntimeError, lambda: fx.run(CTL, "pack", os.path.join(T, "n.tar"),
                                          os.path.join(T, "n0")),
             "without --ragged, .npy arrays of other shapes are refused")
t.ok(e is not None and "--ragged" in str(e), "the message names --ragged",
     str(e))
NR = {}
for name, extra in (("stored", []), ("zstd", ["--compress", "zstd"])):
    NR[name] = os.path.join(T, "n-" + name)
    fx.run(CTL, "pack", "--ragged", "tok.npy,box.npy", *extra,
           os.path.join(T, "n.tar"), NR[name])
info = fx.run(CTL, "inspect", NR["zstd"])
t.ok("tok.npy: tensor i32 [*]" in info and "box.npy: tensor f32 [*,4]" in info,
     "inspect shows the ragged shapes", info)
fx.run(CTL, "verify", NR["zstd"])
for name, ds in NR.items():
    bad, seen = [], []
    with loader.Stream(ds, socket=S, batch_size=24, order="random", seed=6,
                       epochs=2) as s:
        for b in s:
            tok, box = b["tok.npy"], b["box.npy"]
            for k, i in enumerate(int(x) for x in np.asarray(b.ids)):
                seen.append((b.epoch, i))
                if not (np.array_equal(tok[k], TOK[i]) and
                        tok[k].dtype == np.int32 and
                        np.array_equal(box[k], BOX[i]) and
                        box[k].shape[1:] == (4,)):
                    bad.append(i)
    t.eq(bad[:3], [], "%s ragged tensors: every array is its sample's" % name)
    t.eq(sorted(seen), [(e, i) for e in range(2) for i in range(400)],
         "%s ragged tensors: every sample once an epoch" % name)
with loader.Stream(NR["zstd"], socket=S, batch_size=24, order="random",
                   seed=2, epochs=1) as s:
    py = [(b.epoch, b.index, b.count, fx.batch_hash(b)) for b in s]
c = fx.c_batch_hashes(S, NR["zstd"], "--batch", "24", "--order", "random",
                      "--seed", "2", "--epochs", "1")
t.eq(py, c, "ragged tensors: batches equal the C client's")
with loader.Stream(NR["stored"], socket=S, batch_size=8, epochs=1) as s:
    b = s.next()
    r = b["box.npy"]
    t.eq((r.dtype, r.row_shape), ("float32", (4,)), "a Ragged's dtype and row")
    t.eq(r.tolist()[1], BOX[1].tolist(), "tolist() of a ragged tensor")
    t.ok(all(int(o) % 16 == 0 for o in r.offsets),
         "offsets are whole rows (16 bytes)")
    del r, b

# A program that knows only 1.1's options is refused bytes fields.
o = _lib.Opts()
o.size = _lib.Opts.ragged_bytes.offset
o.socket_path = S.encode()
o.batch_size = 10
h = ctypes.c_void_p()
err = ctypes.create_string_buffer(512)
rc = _lib.lib.loader_open(ctypes.byref(h), PLAIN.encode(), ctypes.byref(o),
                          err, len(err))
t.eq(rc, _lib.CODES["EUSAGE"], "a 1.1-sized loader_opts: open refused")
t.ok(b"ragged" in err.value and b"1.2" in err.value,
     "the reason says bytes fields need 1.2", err.value)
if rc == 0:
    _lib.lib.loader_close(h)
o.outputs = b"cls"
rc = _lib.lib.loader_open(ctypes.byref(h), PLAIN.encode(), ctypes.byref(o),
                          err, len(err))
t.ok(rc == 0, "the same program may still stream the tensor fields",
     err.value)
if rc == 0:
    _lib.lib.loader_close(h)

