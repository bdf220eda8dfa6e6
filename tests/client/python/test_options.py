"""Every integer keyword of the package against a real loaderd: 0 or a
negative value where neither means anything, a value too large for its
C field, a bool or float where an integer is meant, each refused before
the stream opens with the keyword and the value as given; None (or the
keyword left out) the only default; 0 kept where it is a value (seed,
epochs, start_epoch, rank, reconnect_ms). The same limits as loaderctl
where it has the option. DataLoader(keys=...) checked against the
stream's outputs when it is made, and the daemon's "no such field"
naming the dataset's fields.
"""

import io
import os
import subprocess
import sys
import tarfile
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture as fx  # noqa: E402

np, torch = fx.need("numpy", "torch")
import loader  # noqa: E402
import loader.keras  # noqa: E402
import loader.torch  # noqa: E402

t = fx.Tap()
T = fx.tmpdir()
D = fx.pack_fmnist(T)
d = fx.Daemon(T, "d", "--threads", "2")
S = d.sock
CTL = os.path.join(fx.TOP, "loaderctl")
DEF = " (leave it out or pass None for the default)"
U = loader.UsageError

# --- refused before the stream opens -----------------------------------------
# (keywords, exception, its exact text)
refused = [
    (dict(batch_size=0), U,
     "batch_size=0: must be a positive integer" + DEF),
    (dict(batch_size=-1), U,
     "batch_size=-1: must be a positive integer" + DEF),
    (dict(batch_size=65537), U, "batch_size=65537: must be at most 65536"),
    (dict(batch_size=2 ** 32), U,
     "batch_size=4294967296: must be at most 65536"),
    (dict(batch_size=2.0), TypeError,
     "batch_size=2.0: must be an integer, not float"),
    (dict(batch_size=True), TypeError,
     "batch_size=True: must be an integer, not bool"),
    (dict(batch_size="256"), TypeError,
     "batch_size='256': must be an integer, not str"),
    (dict(seed=-1), U, "seed=-1: must be 0 or more"),
    (dict(seed=2 ** 64), U, "seed=18446744073709551616: must be at most "
     "2**64-1"),
    (dict(epochs=-1), U, "epochs=-1: must be 0 (endless) or more"),
    (dict(epochs=2 ** 32), U, "epochs=4294967296: must be at most 2**32-1"),
    (dict(start_epoch=-2), U, "start_epoch=-2: must be 0 or more"),
    (dict(start_epoch=2 ** 32 - 1, epochs=2), U,
     "epochs=2 with start_epoch=4294967295: the last epoch would be past "
     "2**32-1 (epochs counts from start_epoch)"),
    (dict(start_batch=-1), U, "start_batch=-1: must be 0 or more"),
    (dict(rank=-1, world=2), U, "rank=-1: must be 0 or more"),
    (dict(rank=2, world=2), U, "rank=2: must be below world=2"),
    (dict(rank=0, world=0), U, "world=0: must be a positive integer "
     "(leave it out or pass None for the launcher's, else 1)"),
    (dict(world=65537), U, "world=65537: must be at most 65536"),
    (dict(world=1.5), TypeError, "world=1.5: must be an integer, not float"),
    (dict(ring_slots=0), U,
     "ring_slots=0: must be a power of two in 2..1024" + DEF),
    (dict(ring_slots=6), U,
     "ring_slots=6: must be a power of two in 2..1024"),
    (dict(ring_slots=2048), U,
     "ring_slots=2048: must be a power of two in 2..1024"),
    (dict(prefetch_bytes=0), U, "prefetch_bytes=0: must be at least 4096 "
     "(leave it out or pass None for the default, 64 MiB)"),
    (dict(prefetch_bytes=(64 << 30) + 1), U, "prefetch_bytes=68719476737: "
     "must be at most 64 GiB (68719476736)"),
    (dict(threads=0), U, "threads=0: must be a positive integer (leave it "
     "out or pass None for the daemon's default)"),
    (dict(threads=1025), U, "threads=1025: must be at most 1024"),
    (dict(timeout_ms=0), U, "timeout_ms=0: must be a positive number of "
     "milliseconds, or negative for no limit (leave it out or pass None "
     "for the default, 10000)"),
    (dict(timeout_ms=2 ** 31), U,
     "timeout_ms=2147483648: must be at most 2**31-1"),
    (dict(reconnect_ms=-1), U, "reconnect_ms=-1: must be 0 (never), a "
     "positive number of milliseconds, or None (the default: 60000 for a "
     "named stream, never for another)"),
    (dict(ragged_bytes=0), U, "ragged_bytes=0: must be a positive integer "
     "(leave it out or pass None for the daemon's default)"),
    (dict(ragged_bytes=(1 << 30) + 1), U, "ragged_bytes=1073741825: must "
     "be at most 1 GiB (1073741824)"),
    (dict(wait_timeout=-1), U,
     "wait_timeout=-1: must be 0 or more seconds (None: for ever)"),
    (dict(wait_timeout=float("nan")), U,
     "wait_timeout=nan: must be 0 or more seconds (None: for ever)"),
    (dict(order=3), U,
     "order=3: must be one of quasi, random, sequential (or 0..2)"),
    (dict(on_bad=-1), U, "on_bad=-1: must be one of fail, skip (or 0..1)"),
    (dict(name="r", resume_from=[(0, -1)]), U,
     "resume_from[0] batch=-1: must be 0 or more"),
    (dict(name="r", resume_from=[(0, 1)], resume_plan=(1, 2 ** 32)), U,
     "resume_plan end_epoch=4294967296: must be at most 2**32-1"),
]
for kw, exc, text in refused:
    e = t.raises(exc, lambda: loader.Stream(D, socket=S, **kw),
                 "Stream(%s) is refused" % ", ".join(
                     "%s=%r" % i for i in kw.items()))
    t.eq(str(e), text, "... saying so")
    if exc is U:
        t.ok(isinstance(e, ValueError) and isinstance(e, loader.Error) and
             e.code == loader.EUSAGE, "... a ValueError and a loader.Error "
             "with code EUSAGE")

# --- accepted ---------------------------------------------------------------
accepted = [
    (dict(), dict(batch_size=0, threads=0, ring_slots=0, prefetch_bytes=0,
                  timeout_ms=0, ragged_bytes=0, epochs=1), 256),
    (dict(batch_size=None, ring_slots=None, prefetch_bytes=None,
          threads=None, timeout_ms=None, ragged_bytes=None, seed=None,
          epochs=None), dict(batch_size=0, epochs=0, seed=0), 256),
    (dict(batch_size=1, seed=0, epochs=0, start_epoch=0, start_batch=0,
          rank=0, world=1, reconnect_ms=0, timeout_ms=-1, wait_timeout=30.5),
     dict(batch_size=1, epochs=0, timeout_ms=-1), 1),
    (dict(batch_size=65536, threads=1024, prefetch_bytes=64 << 30,
          ring_slots=2, seed=2 ** 64 - 1, start_epoch=2 ** 32 - 2,
          epochs=1),
     dict(batch_size=65536, threads=1024, prefetch_bytes=64 << 30,
          seed=2 ** 64 - 1), 10000),
    (dict(batch_size=4, prefetch_bytes=4096, ring_slots=1024),
     dict(prefetch_bytes=4096, ring_slots=1024), 4),
    (dict(batch_size=np.int64(100), seed=np.uint64(3), order=1),
     dict(batch_size=100, seed=3, order=1), 100),
]
for kw, want, count in accepted:
    with loader.Stream(D, socket=S, **kw) as s:
        b = next(s)
        got = {k: s.options[k] for k in want}
        t.eq((got, b.count), (want, count),
             "Stream(%s): the struct loader_opts sent, and the batch"
             % ", ".join("%s=%r" % i for i in kw.items()))

# --- the launcher's environment ----------------------------------------------
env = dict(os.environ, RANK="-1", WORLD_SIZE="2")
p = subprocess.run([sys.executable, "-c", "import loader\n"
                    "try:\n loader.default_rank_world()\n"
                    "except ValueError as e:\n print(e)"],
                   env=env, stdout=subprocess.PIPE, text=True)
t.eq(p.stdout.strip(), "$RANK=-1: must be 0 or more",
     "a negative $RANK is refused, naming the variable")

# --- Stream.next(timeout=) ---------------------------------------------------
with loader.Stream(D, socket=S, batch_size=100) as s:
    e = t.raises(U, lambda: s.next(timeout=-0.5), "next(timeout=-0.5) is "
                 "refused")
    t.eq(str(e), "timeout=-0.5: must be 0 or more seconds (None: for ever)",
         "... saying so")
    t.eq(next(s).index, 0, "... and the stream goes on")

# --- loaderctl agrees --------------------------------------------------------
# (Stream keyword, loaderctl bench pipeline option, values both refuse,
#  values the Stream takes)
same = [
    ("batch_size", "--batch", [0, -1, 65537, 2 ** 32], [1, 65536]),
    ("threads", "--threads", [-1, 1025], [1, 1024]),
    ("prefetch_bytes", "--prefetch", [4095, (64 << 30) + 1],
     [4096, 64 << 30]),
    ("seed", "--seed", [-1, 2 ** 64], [0, 2 ** 64 - 1]),
]
for kw, opt, bad, good in same:
    for v in bad:
        p = subprocess.run([CTL, "bench", "pipeline", opt, str(v), D],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=fx.child_env(), timeout=60)
        ctl = p.returncode != 0 and p.stderr.startswith(
            "loaderctl bench pipeline: %s: " % opt)
        try:
            loader.Stream(D, socket=S, **{kw: v}).close()
            py = False
        except ValueError:
            py = True
        t.ok(ctl and py, "%s=%d and loaderctl bench pipeline %s %d are "
             "both refused" % (kw, v, opt, v), p.stderr.splitlines()[:1])
    for v in good:
        small = dict(batch_size=4)  # 4096 bytes of prefetch hold a batch
        small[kw] = v
        with loader.Stream(D, socket=S, **small) as s:
            t.ok(next(s).count > 0, "%s=%d is taken, as loaderctl takes %s "
                 "%d" % (kw, v, opt, v))

# --- DataLoader(keys=...) ----------------------------------------------------
# With outputs= the keys are checked when the loader is made; without,
# at its first use, which opens the stream (it opens lazily, so that a
# load_state_dict() before decides where).
for desc, kw, use in (("outputs given", dict(outputs="image:unit,label"),
                       lambda dl: None),
                      ("outputs=None (the first batch tells)", dict(), len)):
    e = t.raises(U, lambda: use(loader.torch.DataLoader(
        D, socket=S, keys=("img", "label"), epochs=1, **kw)),
        "DataLoader(keys=('img', 'label')), %s: refused when %s" %
        (desc, "made" if kw else "first used"))
    t.eq(str(e), "keys=('img', 'label'): the stream has no output img (its "
         "outputs: image, label)", "... listing the outputs")
e = t.raises(TypeError, lambda: loader.torch.DataLoader(
    D, socket=S, keys="image"), "keys='image' (a str) is refused")
t.eq(str(e), "keys='image': a tuple of output names, e.g. ('image',)",
     "... saying what to give")
dl = loader.torch.DataLoader(D, socket=S, keys=("label",), batch_size=100,
                             seed=3, epochs=1, with_ids=True)
got = [ids.tolist() for _, ids in dl]
with loader.Stream(D, socket=S, batch_size=100, order="random", seed=3,
                   epochs=1) as s:
    want = [b.ids.numpy().tolist() for b in s]
t.ok(got == want, "keys checked from the first batch: that batch is kept, "
     "the epoch is a Stream's, batch for batch", "%d batches, %d wanted"
     % (len(got), len(want)))
e = t.raises(U, lambda: dl.set_epoch(-1), "set_epoch(-1) is refused")
t.eq(str(e), "epoch=-1: must be 0 or more", "... saying so")
t.raises(TypeError, lambda: dl.set_epoch(1.0), "set_epoch(1.0) is refused")
dl.close()
dl = loader.torch.DataLoader(D, socket=S, keys=("label",), epochs=2)
dl.load_state_dict({"seed": 0, "epoch": 1, "batch": 2, "order": "random",
                    "batch_size": 0})
t.eq(next(iter(dl))[0].shape[0], 256, "a state saved with batch_size 0 "
     "(before None meant the default) loads as the default")
t.eq(dl.state_dict()["batch_size"], None, "state_dict(): batch_size None "
     "when it was left out")
dl.close()

# --- loader.keras ------------------------------------------------------------
class StandInPyDataset:
    def __init__(self, workers=1, use_multiprocessing=False,
                 max_queue_size=10):
        self.workers = workers


keras = types.SimpleNamespace(
    utils=types.SimpleNamespace(PyDataset=StandInPyDataset))
for kw, text in ((dict(workers=0), "workers=0: must be a positive integer"),
                 (dict(max_queue_size=-1),
                  "max_queue_size=-1: must be a positive integer"),
                 (dict(batch_size=0),
                  "batch_size=0: must be a positive integer" + DEF),
                 (dict(x="img"), "keys=('img', 'label'): the stream has no "
                  "output img (its outputs: image, label, ids)")):
    e = t.raises(U, lambda: len(loader.keras.PyDataset(
        D, keras=keras, socket=S, epochs=1, **kw)),
        "keras.PyDataset(%s) is refused (by its first use when the stream "
        "must tell its outputs)" % kw)
    t.eq(str(e), text, "... saying so")
e = t.raises(U, lambda: loader.keras.tf_dataset(
    D, keys=("image", "lbl"), tf=types.SimpleNamespace(), socket=S,
    outputs="image,label"), "tf_dataset(keys=('image', 'lbl')) is refused")
t.eq(str(e), "keys=('image', 'lbl'): the stream has no output lbl (its "
     "outputs: image, label, ids)", "... listing the outputs")

# --- the daemon names the dataset's fields -----------------------------------
e = t.raises(loader.Error, lambda: loader.Stream(D, socket=S,
                                                 outputs="img,label"),
             "outputs='img,label' is refused by the daemon")
t.eq(e.reason, "loaderd: output img: no such field in the dataset (its "
     "fields: image, label)", "... naming the dataset's fields")
wide = os.path.join(T, "wide.tar")
with tarfile.open(wide, "w") as tf:
    for i in range(4):
        for k in range(12):
            data = b"%d-%d" % (i, k)
            ti = tarfile.TarInfo("s%04d.f%02d" % (i, k))
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
e = t.raises(loader.Error, lambda: loader.Stream(wide, socket=S,
                                                 outputs="nope"),
             "a field missing from a dataset of 12 fields is refused")
t.eq(e.reason, "loaderd: output nope: no such field in the dataset (its 12 "
     "fields: f00, f01, f02, f03, f04, f05, f06, f07, f08, f09, ...)",
     "... naming the first 10 fields only")

# --- mixtures: the dataset as a list, refused before anything opens ----------
# (dataset, keywords, exception, its exact text)
nan, inf = float("nan"), float("inf")
P = "dataset[0] proportion="
NUM = ": must be a number above 0, at most 2**48"
FORMS = ("a (path, proportion) pair, or a dict with path and one of "
         "proportion, repeat and choose (a mixture is a list of them)")
ONE = "give one of proportion, repeat and choose"
mix_refused = [
    ([], {}, U, "dataset: a mixture of 0 members; it has 1 to 32"),
    ([(D, 1)] * 33, {}, U,
     "dataset: a mixture of 33 members; it has 1 to 32"),
    ([D], {}, TypeError, "dataset[0]=%r: %s" % (D, FORMS)),
    ([(D, 1, 2)], {}, TypeError, "dataset[0]=%r: %s" % ((D, 1, 2), FORMS)),
    ((D, 0.5), {}, TypeError, "dataset[0]=%r: %s" % (D, FORMS)),
    ([(D, 0)], {}, U, P + "0" + NUM),
    ([(D, -1)], {}, U, P + "-1" + NUM),
    ([(D, nan)], {}, U, P + "nan" + NUM),
    ([(D, inf)], {}, U, P + "inf" + NUM),
    ([(D, 2 ** 49)], {}, U, P + "562949953421312" + NUM),
    ([(D, "0.5")], {}, TypeError, P + "'0.5': must be a number, not str"),
    ([(D, True)], {}, TypeError, P + "True: must be a number, not bool"),
    ([(3, 1)], {}, TypeError,
     "dataset[0] path=3: must be a path (str or os.PathLike), not int"),
    ([("", 1)], {}, U, "dataset[0] path='': must not be empty"),
    ([(D, 1), {"path": D, "weight": 1}], {}, U,
     "dataset[1]: unknown key 'weight' (a member has path, proportion, "
     "repeat, choose and pipeline)"),
    ([{"path": D}], {}, U, "dataset[0]: none of them: " + ONE),
    ([{"path": D, "proportion": 1, "choose": 2}], {}, U,
     "dataset[0]: proportion and choose: " + ONE),
    ([{"proportion": 1}], {}, U, "dataset[0]: no path"),
    ([{"path": D, "choose": 0.5}], {}, TypeError,
     "dataset[0] choose=0.5: must be an integer, not float"),
    ([{"path": D, "choose": 0}], {}, U,
     "dataset[0] choose=0: must be a number of samples, 1 to 2**48"),
    ([{"path": D, "choose": 2 ** 48 + 1}], {}, U,
     "dataset[0] choose=281474976710657: must be a number of samples, 1 "
     "to 2**48"),
    ([{"path": D, "repeat": 0}], {}, U, "dataset[0] repeat=0" + NUM),
    ([(D, 0.7), {"path": D, "repeat": 2}], {}, U,
     "dataset[1]: repeat beside dataset[0]'s proportion: either every "
     "member gives a proportion or none does"),
    ([{"path": D, "choose": 5}, (D, 1)], {}, U,
     "dataset[1]: proportion beside dataset[0]'s repeat or choose: either "
     "every member gives a proportion or none does"),
    ([{"path": D, "proportion": 1, "pipeline": "x" * 512}], {}, U,
     "dataset[0] pipeline: 512 bytes, at most 511"),
    ([{"path": D, "proportion": 1, "pipeline": 5}], {}, TypeError,
     "dataset[0] pipeline=5: must be a str, not int"),
    ([(D, 1)], dict(epoch_size=-1), U,
     "epoch_size=-1: must be 0 (the members' samples added up) or more"),
    ([(D, 1)], dict(epoch_size=2 ** 48 + 1), U,
     "epoch_size=281474976710657: must be at most 2**48"),
    ([(D, 1)], dict(epoch_size=1.5), TypeError,
     "epoch_size=1.5: must be an integer, not float"),
    ([{"path": D, "repeat": 2}], dict(epoch_size=100), U,
     "epoch_size=100: only with proportions (members that repeat or choose "
     "give their own counts)"),
    (D, dict(epoch_size=100), U,
     "epoch_size=100: only for a mixture given as a list of proportions (a "
     "mixture file says its own)"),
]
for ds, kw, exc, text in mix_refused:
    e = t.raises(exc, lambda: loader.Stream(ds, socket=S, **kw),
                 "Stream(%.60r%s) is refused" % (ds, "".join(
                     ", %s=%r" % i for i in kw.items())))
    t.eq(str(e), text, "... saying so")
    if exc is U:
        t.ok(isinstance(e, ValueError) and e.code == loader.EUSAGE,
             "... a ValueError with code EUSAGE")

# The adapters hand the list to Stream as it is: the same refusal, at the
# first use (they open lazily).
e = t.raises(U, lambda: len(loader.torch.DataLoader([(D, 0)], socket=S)),
             "DataLoader([(D, 0)]) is refused at its first use")
t.eq(str(e), P + "0" + NUM, "... with Stream's words")
e = t.raises(U, lambda: len(loader.keras.PyDataset(
    [(D, 0.5), {"path": D, "choose": 3}], keras=keras, socket=S)),
    "keras.PyDataset(a mixture of proportion and choose) is refused")
t.eq(str(e), "dataset[1]: choose beside dataset[0]'s proportion: either "
     "every member gives a proportion or none does", "... with Stream's "
     "words")

# --- mixtures: the forms taken, as the mixture file's keys -------------------
import pathlib  # noqa: E402
forms = [
    ([(D, 0.7), ("s3://bucket/prefix", 3)],
     [{"path": D, "proportion": 0.7},
      {"path": "s3://bucket/prefix", "proportion": 3.0}]),
    (((pathlib.Path(D), np.float32(0.5)),
      {"path": D, "proportion": 1, "pipeline": "decode | center 8 | f32"}),
     [{"path": D, "proportion": 0.5},
      {"path": D, "proportion": 1.0, "pipeline": "decode | center 8 | f32"}]),
    ([{"path": D, "repeat": 0.5}, {"path": D, "choose": np.int64(7)},
      {"path": D, "repeat": 3, "pipeline": ""}],
     [{"path": D, "repeat": 0.5}, {"path": D, "choose": 7},
      {"path": D, "repeat": 3.0, "pipeline": ""}]),
    ([{"path": D, "choose": 2 ** 48}, {"path": D, "repeat": 2.0 ** 48}],
     [{"path": D, "choose": 2 ** 48}, {"path": D, "repeat": 2.0 ** 48}]),
]
for ds, want in forms:
    t.eq(loader._members(ds, None), want, "dataset=%.60r: the members as "
         "the mixture file has them" % (ds,))
keep = []
arr = loader._member_array([{"path": D, "proportion": 0.7},
                            {"path": "b", "choose": 9, "pipeline": "decode"}],
                           keep)
t.eq([(arr[i].dataset, arr[i].how, arr[i].value, arr[i].pipeline,
       arr[i].reserved) for i in range(2)],
     [(os.fsencode(D), 0, 0.7, None, 0), (b"b", 2, 9.0, b"decode", 0)],
     "struct loader_member: path, how (LOADER_MIX_*), value, pipeline")

# --- mixtures: what libloader refuses, before the OPEN -----------------------
none = os.path.join(T, "none")
e = t.raises(loader.Error, lambda: loader.Stream(
    [(D, 0.5), (none, 0.5)], socket=S), "a member that is not there is "
    "refused")
t.eq((e.code, e.reason), (-2, "member 1: %s: No such file or directory"
                          % none), "... naming the member and its path")
mixjson = os.path.join(T, "mix.json")
with open(mixjson, "w") as f:
    f.write('{"format": "loaderd-mixture", "version": 1, "members": '
            '[{"path": "fm/test", "proportion": 1, "seed": 3}]}')
e = t.raises(loader.Error, lambda: loader.Stream(mixjson, socket=S),
             "a mixture file with an unknown key is refused")
t.eq((e.code, e.reason), (loader.EFORMAT, "%s: member 0: unknown key "
                          "\"seed\" (a member has path, proportion, repeat, "
                          "choose and pipeline)" % mixjson),
     "... naming the file, the member and the key")
with open(mixjson, "w") as f:
    f.write('{"format": "loaderd-mixture", "version": 1, "members": '
            '[{"path": "fm/test", "proportion": 1},'
            ' {"path": "fm/test", "repeat": 1}]}')
e = t.raises(loader.Error, lambda: loader.Stream(mixjson, socket=S),
             "a mixture file of proportion and repeat is refused")
t.eq((e.code, e.reason), (loader.EUSAGE, "%s: member 1: repeat beside "
                          "member 0's proportion: either every member gives "
                          "a proportion or none does" % mixjson),
     "... by libloader, naming the file")
e = t.raises(loader.Error, lambda: loader.Stream([(mixjson, 1)], socket=S),
             "a mixture file as a member is refused")
t.eq((e.code, e.reason), (loader.EUSAGE, "member 0: %s is a mixture file: "
                          "mixtures do not nest (list its members instead)"
                          % mixjson), "... saying they do not nest")
