"""The batch stages (mixup, cutmix, label smoothing) against a NumPy
reference, on a real loaderd and real JPEGs: the same stream is opened
without and with them (the per-sample images are the same), and the
reference, taking lambda, box and pair from b.mix, mixes the plain batch
and makes its soft labels. Also: the refusals at OPEN, and the same
batches with 1 and 3 threads.
"""

import io
import os
import sys
import tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture as fx  # noqa: E402

fx.need("numpy")
import numpy as np  # noqa: E402
import loader  # noqa: E402

t = fx.Tap()
T = fx.tmpdir()
ds = fx.pack_jpegs(T, 45)  # 3 classes; batches of 8: a short last of 5
d = fx.Daemon(T, "d", "--threads", "3")
BASE = "decode | resize 40 | center 32 | flip 0.5"
C = 3


def batches(spec, batch_size=8, **kw):
    """[(image float64, label, mix)] of one epoch, copied out."""
    out = []
    with loader.Stream(ds, socket=d.sock, batch_size=batch_size,
                       pipeline=spec, order="random", seed=11, epochs=1,
                       **kw) as s:
        for b in s:
            out.append((np.array(b["image"]).astype(np.float64),
                        np.array(b["label"]), b.mix, b.count))
    return out


def partners(mix, n):
    i = np.arange(n)
    return (i - 1) % n if mix.pair == "roll" else n - 1 - i


def reference(x, lab, mix, n, eps, nhwc, u8):
    """timm's Mixup ('batch' mode) on the plain batch, from b.mix."""
    y = np.zeros((n, C))
    y[np.arange(n), lab.astype(np.int64)] = 1.0
    if mix is None:
        return x, y * (1 - eps) + eps / C
    p = partners(mix, n)
    if mix.kind == "mixup":
        r = mix.lam * x + (1 - mix.lam) * x[p]
        if u8:
            r = np.floor(r + 0.5)
    else:
        r = x.copy()
        x0, y0, x1, y1 = mix.box
        if nhwc:
            r[:, y0:y1, x0:x1, :] = x[p][:, y0:y1, x0:x1, :]
        else:
            r[:, :, y0:y1, x0:x1] = x[p][:, :, y0:y1, x0:x1]
    y = mix.lam * y + (1 - mix.lam) * y[p]
    return r, y * (1 - eps) + eps / C


def check(name, tail, dtype, layout, eps, kinds):
    """The plain and the mixed stream of the same spec, batch by batch."""
    spec = "%s | %s | %s" % (BASE, dtype, layout)
    plain, mixed = batches(spec), batches(spec + " | " + tail)
    worst, within1, total, lab_err, lam_err, seen = 0.0, 0, 0, 0.0, 0.0, set()
    same = len(plain) == len(mixed) == 6 and mixed[-1][3] == 5
    for (x, lab, _, n), (got, soft, mix, n2) in zip(plain, mixed):
        same = same and n == n2 and soft.shape == (n, C) and \
            soft.dtype == np.float32
        seen.add(mix.kind if mix else None)
        ref, yref = reference(x, lab, mix, n, eps, layout == "nhwc",
                              dtype == "u8")
        diff = np.abs(got - ref)
        if dtype == "u8":
            worst = max(worst, diff.max())
            within1 += int((diff <= 1).sum())
            total += diff.size
        else:
            rel = diff / (np.abs(ref) + 1)
            worst = max(worst, rel.max())
        lab_err = max(lab_err, np.abs(soft - yref).max())
        if mix is not None:
            if mix.kind == "cutmix":
                x0, y0, x1, y1 = mix.box
                lam_err = max(lam_err, abs(
                    mix.lam - (1 - (x1 - x0) * (y1 - y0) / 32.0 / 32.0)))
            # A sample whose partner has another label holds lam (1 - E)
            # + E / C at its own.
            p = partners(mix, n)
            for i in range(n):
                if lab[i] != lab[p[i]]:
                    lam_err = max(lam_err, abs(
                        soft[i, lab[i]] - (mix.lam * (1 - eps) + eps / C)))
    t.ok(same, "%s: the same batches, the last short, labels f32 [n, %d]"
         % (name, C))
    if dtype == "u8":
        t.ok(worst <= 2 and within1 >= 0.99 * total,
             "%s: pixels as the reference's (max |diff| %g, %.4f within 1)"
             % (name, worst, within1 / max(total, 1)))
    else:
        tol = 2e-3 if dtype == "f16" else 1e-5
        t.ok(worst <= tol, "%s: pixels as the reference's (max rel %.3g)"
             % (name, worst))
    t.ok(lab_err <= 1e-6, "%s: soft labels as the reference's (max %.3g)"
         % (name, lab_err))
    t.ok(lam_err <= 1e-6, "%s: lambda agrees with box and labels (%.3g)"
         % (name, lam_err))
    t.ok(seen == kinds, "%s: kinds drawn %s" % (name, sorted(map(str, seen))))


check("mixup flip u8 nchw", "mixup 0.4 | label_smoothing 0.1", "u8",
      "nchw", 0.1, {"mixup"})
check("mixup roll f32 nhwc", "mixup 1 | pair roll", "f32", "nhwc", 0.0,
      {"mixup"})
check("cutmix flip f16 nchw", "cutmix 1 | label_smoothing 0.2", "f16",
      "nchw", 0.2, {"cutmix"})
check("cutmix roll u8 nhwc", "cutmix 1 | pair roll", "u8", "nhwc", 0.0,
      {"cutmix"})
check("switch f32 nchw", "mixup 0.2 | cutmix 1.0 | switch 0.5 | "
      "label_smoothing 0.1", "f32", "nchw", 0.1, {"mixup", "cutmix"})
check("label_smoothing alone", "label_smoothing 0.1", "f32", "nchw", 0.1,
      {None})

# The same batches with 1 and 3 threads (and twice the same).
spec = BASE + " | f16 | mixup 0.2 | cutmix 1.0 | label_smoothing 0.1"
hashes = []
for threads in (1, 3):
    with loader.Stream(ds, socket=d.sock, batch_size=8, pipeline=spec,
                       order="random", seed=5, epochs=2,
                       threads=threads) as s:
        hashes.append([(b.epoch, b.index, fx.batch_hash(b)) for b in s])
t.ok(len(hashes[0]) == 12 and hashes[0] == hashes[1],
     "the same batches with 1 and 3 threads (%d)" % len(hashes[0]))

# Refusals at OPEN.
e = t.raises(loader.Error, lambda: batches(BASE + " | mixup 0.2",
                                           outputs="image"),
             "no label output: refused")
t.ok(e is not None and "no output is one" in str(e) and "label" in str(e),
     "it says a label output is needed", str(e))
e = t.raises(loader.Error, lambda: batches(BASE + " | mixup 0.2 | classes 2"),
             "classes below the dataset's: refused")
t.ok(e is not None and "classes 2 is below the dataset's 3 classes" in str(e),
     "it names both counts", str(e))

# A WebDataset tar: a jpeg and a label (.cls), no class list.
src = os.path.join(T, "wds")
os.makedirs(src)
tar = os.path.join(src, "shard-000000.tar")
with tarfile.open(tar, "w") as tf:
    for i in range(6):
        jpg = os.path.join(T, "w%d.jpg" % i)
        fx.run(fx.tool("mkjpeg"), jpg, "64", "48", str(i))
        tf.add(jpg, "s%03d.jpg" % i)
        data = str(i % 4).encode()
        info = tarfile.TarInfo("s%03d.cls" % i)
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
wds = os.path.join(T, "wdsds")
fx.run(os.path.join(fx.TOP, "loaderctl"), "pack", tar, wds)


def wds_open(spec):
    with loader.Stream(wds, socket=d.sock, batch_size=6, pipeline=spec,
                       epochs=1) as s:
        return [(b.mix, np.array(b["cls"])) for b in s]


e = t.raises(loader.Error, lambda: wds_open(BASE + " | mixup 0.2"),
             "no class count: refused")
t.ok(e is not None and 'add "classes N"' in str(e),
     "it says to add classes N", str(e))
got = wds_open(BASE + " | label_smoothing 0 | classes 4")
t.ok(len(got) == 1 and got[0][0] is None and got[0][1].shape == (6, 4) and
     (got[0][1].argmax(1) == np.arange(6) % 4).all() and
     (got[0][1].sum(1) == 1).all(),
     "classes 4 with the tar's labels: one-hot f32 [6, 4]")
e = t.raises(loader.Error,
             lambda: wds_open(BASE + " | label_smoothing 0 | classes 3"),
             "a label outside the classes fails the stream (on_bad fail)")
t.ok(e is not None and "label 3 is not a class in [0, 3)" in str(e) and
     "sample 3" in str(e), "it names the sample and the value", str(e))
