"""Schedules over epochs (ispec.h, SCHEDULES) through a real loaderd:
progressive resizing as ffcv-imagenet does it, each batch with its own
shape in the ring, an "at final" stream for evaluation, and a named
stream with mixup and cutmix (its alpha ramped) whose trainer is killed
mid-schedule resuming at the right resolution with the very batches an
uninterrupted run delivers.
"""

import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture as fx  # noqa: E402

np = fx.need("numpy")
import loader  # noqa: E402

t = fx.Tap()
T = fx.tmpdir()
ds = fx.pack_jpegs(T, 48)
d = fx.Daemon(T, "d", "--threads", "2")

LO, HI, START, END = 32, 96, 1, 4
# With the batch stages too, mixup's alpha ramped: a batch's draw comes
# from its epoch's values.
SPEC = ("decode | rrc %d@%d..%d@%d/32 | flip 0.5 | normalize imagenet "
        "| f32 | nchw | mixup 0.1@0..0.4@4 | cutmix 1.0 "
        "| label_smoothing 0.1" % (LO, START, HI, END))
EPOCHS = 6
KW = dict(socket=d.sock, batch_size=16, outputs="image,label",
          order="random", seed=3)


def ffcv_res(epoch):
    """ffcv-imagenet's get_resolution (train_imagenet.py), as written
    there: min_res up to start_ramp, max_res from end_ramp, between them
    np.interp rounded to the nearest multiple of 32 by np.round."""
    if epoch <= START:
        return LO
    if epoch >= END:
        return HI
    interp = np.interp([epoch], [START, END], [LO, HI])
    return int(np.round(interp[0] / 32)) * 32


def run(spec, start_epoch=0, epochs=EPOCHS, **kw):
    """[(epoch, index, image shape, label shape, batch hash)]."""
    out = []
    with loader.Stream(ds, pipeline=spec, start_epoch=start_epoch,
                       epochs=epochs, **dict(KW, **kw)) as s:
        for b in s:
            out.append((b.epoch, b.index, np.asarray(b["image"]).shape,
                        np.asarray(b["label"]).shape, fx.batch_hash(b)))
            b.release()
    return out


sched = run(SPEC)
want = {e: ffcv_res(e) for e in range(EPOCHS)}
print("# ffcv's resolutions by epoch: %r" % want)
t.ok(sorted(set(want.values())) == [32, 64, 96],
     "the ramp goes through 32, 64 and 96 (a test that sees each size)")
got = {}
for e, i, shape, lshape, _ in sched:
    got.setdefault(e, set()).add(shape[1:])
t.eq({e: sorted(v) for e, v in got.items()},
     {e: [(3, r, r)] for e, r in want.items()},
     "every batch of epoch e is [B, 3, R, R] with ffcv's R for e")
t.ok(all(shape[0] == ls[0] and ls[1:] == (3,)
         for _, _, shape, ls, _ in sched),
     "the label output keeps its shape, soft [B, 3], beside a changing "
     "image")

# Each epoch of the schedule is that epoch's fixed spec: same bytes.
same = True
for e, r in want.items():
    fixed = run(SPEC.replace("%d@%d..%d@%d/32" % (LO, START, HI, END),
                             str(r)), start_epoch=e, epochs=1)
    mine = [x for x in sched if x[0] == e]
    if [x[4] for x in fixed] != [x[4] for x in mine]:
        same = False
        print("# epoch %d differs from rrc %d" % (e, r))
t.ok(same, "each epoch's batches are those of rrc R_e alone (the same "
     "bytes: samples packed for the batch's shape)")

# An evaluation stream asks for the final resolution.
final = run(SPEC + " | at final", epochs=2)
fixed = run(SPEC.replace("%d@%d..%d@%d/32" % (LO, START, HI, END),
                         str(HI)).replace("0.1@0..0.4@4", "0.4"), epochs=2)
t.ok(all(x[2][2:] == (HI, HI) for x in final) and
     [x[4] for x in final] == [x[4] for x in fixed],
     "\"at final\": every epoch at the last keys' values, as rrc %d with "
     "mixup 0.4" % HI)

# A named stream whose trainer is killed in epoch 2 (size 64) resumes
# there with the batches of an uninterrupted run.
child = r"""
import os, signal, sys
sys.path.insert(0, %r)
import loader
n = 0
s = loader.Stream(%r, pipeline=%r, epochs=%d, name="sched", fresh=True,
                  **%r)
for b in s:
    b.release()
    n += 1
    if b.epoch == 2 and b.index == 1:
        print(b.epoch, b.index, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
""" % (os.path.join(fx.SRC, "client", "python"), ds, SPEC, EPOCHS, KW)
# python3 keeps this environment (the sanitizer runtimes loader-python
# preloads in a sanitizer build); fx.child_env() is for C programs.
p = subprocess.run([sys.executable, "-c", child], stdout=subprocess.PIPE,
                   text=True, timeout=300)
t.eq((p.returncode, p.stdout.split()), (-signal.SIGKILL, ["2", "1"]),
     "the trainer is killed after releasing batch 1 of epoch 2")
with loader.Stream(ds, pipeline=SPEC, epochs=EPOCHS, name="sched",
                   **KW) as s:
    t.eq((s.resumed, s.start), (True, (2, 2)),
         "the named stream resumes at batch 2 of epoch 2")
    resumed = []
    for b in s:
        resumed.append((b.epoch, b.index, np.asarray(b["image"]).shape,
                        np.asarray(b["label"]).shape, fx.batch_hash(b)))
        b.release()
after = [x for x in sched if (x[0], x[1]) >= (2, 2)]
t.ok(resumed and resumed[0][2][2:] == (64, 64),
     "its first batch is epoch 2's size, 64",
     resumed[0] if resumed else "no batch")
t.ok(resumed == after, "and from there every batch is the uninterrupted "
     "run's (%d batches)" % len(after))

# A schedule that is wrong at some epoch is refused at open, naming it.
e = t.raises(loader.Error,
             lambda: run("decode | center 64 | gaussian_blur 3@0..9@10 "
                         "0.1 2", epochs=1),
             "an even kernel size in the ramp is refused at open",
             "at epoch 1")
e = t.raises(loader.Error,
             lambda: run("decode | rrc 160@65..x", epochs=1),
             "a schedule that does not parse is refused",
             "is not a schedule")
t.eq(len(run(SPEC, epochs=1)), 3,
     "the daemon serves on after the refused opens (an epoch, 3 batches)")
