"""examples/train_cnn.py, kept working: a few training steps of its CNN
on a tiny ImageFolder of real photographs (crops of Debian's wallpapers
by bench/mkcorpus.py), fed by a real loaderd from the packed folder and
by torchvision's DataLoader from the folder itself. Each must train:
every step counted, finite losses, the same number of images on both
sides, across an epoch's end (24 images, batch 8, 1 + 4 steps).
"""

import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture as fx  # noqa: E402

fx.need("numpy", "torch", "torchvision", "PIL")
photos = fx.need_photos(3)
t = fx.Tap()
T = fx.tmpdir()
folder = os.path.join(T, "photos")
src = []
for p in photos:
    src += ["--src", p]
fx.run(sys.executable, os.path.join(fx.SRC, "bench", "mkcorpus.py"),
       "--count", "24", "--classes", "3", "--seed", "1", "--jobs", "1",
       *src, folder)
ds = os.path.join(T, "packed")
fx.run(os.path.join(fx.TOP, "loaderctl"), "pack", folder, ds)
d = fx.Daemon(T, "d", "--threads", "1")

STEPS, WARMUP, BATCH = 4, 1, 8
ex = os.path.join(fx.SRC, "examples", "train_cnn.py")
res = {}
outs = {}
# A python3 child keeps this environment: in a sanitizer build it needs
# the runtimes loader-python preloads (fx.child_env() is for C programs).
for side, data, extra in (("loaderd", ds, ["--socket", d.sock]),
                          ("torch", folder, ["--workers", "2"])):
    p = subprocess.run([sys.executable, ex, side, data, "--steps",
                        str(STEPS), "--warmup", str(WARMUP), "--batch-size",
                        str(BATCH)] + extra, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=600)
    for line in p.stdout.splitlines():
        print("#   " + line)
    t.eq(p.returncode, 0, "%s: train_cnn.py exits 0" % side)
    last = [ln for ln in p.stdout.splitlines()
            if ln.startswith("train_cnn ")]
    kv = {}
    if last:
        # spec="..." holds spaces: the key=value pairs before it.
        kv = dict(f.split("=", 1) for f in
                  last[-1].split(' spec="')[0].split() if "=" in f)
    res[side] = kv
    outs[side] = p.stdout
    t.ok(kv.get("loader") == side and kv.get("steps") == str(STEPS) and
         kv.get("images") == str(STEPS * BATCH) and
         kv.get("seen") == str((STEPS + WARMUP) * BATCH),
         "%s: %d timed steps of %d images, %d seen with the warm-up"
         % (side, STEPS, BATCH, (STEPS + WARMUP) * BATCH), last)
    steps = [ln for ln in p.stdout.splitlines() if ln.startswith("step ")]
    t.ok(steps and steps[-1].startswith("step %d/%d: loss " % (STEPS, STEPS)),
         "%s: the last timed step reports its loss" % side, steps)
    losses = [float(kv.get(k, "nan")) for k in ("loss_first", "loss_last")]
    t.ok(all(math.isfinite(v) and v > 0 for v in losses),
         "%s: the losses are finite and positive" % side, losses)
    rate, stall = float(kv.get("img_per_s", 0)), float(kv.get("stall_pct",
                                                             -1))
    t.ok(rate > 0 and 0 <= stall <= 100,
         "%s: a rate and a stall share" % side, kv)
    t.eq(kv.get("classes"), "3", "%s: the model has the folder's 3 "
         "classes" % side)

t.eq(res["loaderd"].get("images"), res["torch"].get("images"),
     "both sides trained on the same number of images")
spec = [ln.split(": ", 1)[1] for ln in outs["loaderd"].splitlines()
        if ln.startswith("loaderd spec: ")]
t.ok(len(spec) == 1 and all(w in spec[0] for w in (
    "rrc 224", "flip", "trivialaugment", "bilinear", "normalize", "erase")),
     "loaderd's spec is the recipe's: crop, flip, TrivialAugmentWide, "
     "bilinear, normalize, erase", spec)
if spec:
    # loaderctl pipeline parses it as the daemon does.
    out = fx.pipeline(spec[0])
    t.ok("f32 [3,224,224]" in out, "loaderctl pipeline takes the spec: "
         "f32 [3,224,224] samples", out)
    # The example's spec is the translation of the very Compose its
    # torch side runs.
    import loader.torch
    sys.path.insert(0, os.path.join(fx.SRC, "examples"))
    import train_cnn
    t.eq(spec[0], loader.torch.from_torchvision(train_cnn.recipe()),
         "the spec is loader.torch.from_torchvision of the Compose")
