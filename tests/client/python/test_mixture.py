"""A mixture of two datasets end to end, against a real loaderd: the
Fashion-MNIST test split (A, 10000 samples) and train split (B, 60000).

Each epoch, member m gives c_m samples (pipeline/stream/mixture.h): with
proportions p, c_m = p_m / sum(p) * E, E the epoch_size or the members'
sizes added up; with repeat, round(repeat_m * n_m); with choose, the
number given. The numbers here make each c_m a whole number, so that no
rounding rule is in question. A member of n_m samples whose c_m exceeds
it gives floor(c_m / n_m) whole copies and a subsample of the rest, so
within an epoch (all ranks together) every one of its samples comes
floor(c_m / n_m) times and exactly c_m mod n_m of them once more; a
smaller c_m is a subsample, each sample at most once. The subsamples
change with the epoch. A batch's ids are indices within members, and
b.member says which member: each sample's label must be that member's
label at that index. A mixture file opened by path, the list form, and
the C client (ldclient --member) deliver the same batches; a named
mixture rides a daemon restart, every batch once.
"""

import collections
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture as fx  # noqa: E402

np = fx.need("numpy")
import loader  # noqa: E402

try:
    import torch  # noqa: F401
    import loader.torch
except ImportError:
    torch = None

t = fx.Tap()
T = fx.tmpdir()
A = fx.pack_fmnist(T)  # T/fm/test
fx.run(os.path.join(fx.TOP, "loaderctl"), "pack", "--split", "train",
       "--shard-size", "2M", fx.FMNIST, os.path.join(T, "fmt"))
B = os.path.join(T, "fmt", "train")
N = (10000, 60000)
d = fx.Daemon(T, "d", "--threads", "2")
S = d.sock


def labels(ds):
    """Every label of a dataset, by index (a sequential stream)."""
    with loader.Stream(ds, socket=S, batch_size=10000, outputs="label",
                       epochs=1) as s:
        parts = []
        for b in s:
            ids = np.asarray(b.ids)
            assert (ids == np.arange(b.index * 10000,
                                     b.index * 10000 + b.count)).all()
            parts.append(np.asarray(b["label"]).astype(np.int64))
    return np.concatenate(parts)


LABELS = (labels(A), labels(B))
t.eq(tuple(len(x) for x in LABELS), N, "the members' labels, by index")


def run(dataset, **kw):
    """Every batch of a stream of labels: ((batches per epoch, samples,
    members), [(epoch, index, members, ids)], batches whose samples are
    not their members', batches whose b.member is not a uint32 view of
    the ring of count samples)."""
    out, wrong, form = [], [], []
    with loader.Stream(dataset, socket=S, outputs="label", **kw) as s:
        info = (len(s), s.samples, s.nmembers)
        for n, b in enumerate(s):
            m, ids = b.member, np.asarray(b.ids)
            # Where it lies is read from /proc: for the first batch.
            if m is None or m.dtype != np.uint32 or \
                    m.shape != (b.count,) or \
                    (n == 0 and not fx.in_ring(m.ctypes.data)):
                form.append((b.epoch, b.index))
                m = np.zeros(b.count, np.uint32) if m is None else m
            lab = np.asarray(b["label"]).astype(np.int64)
            ok = m < 2
            for k in (0, 1):
                sel = m == k
                inside = ids[sel] < N[k]
                ok[sel] &= inside
                ok[np.flatnonzero(sel)[inside]] &= \
                    LABELS[k][ids[sel][inside]] == lab[sel][inside]
            if not ok.all():
                wrong.append((b.epoch, b.index, int((~ok).sum())))
            out.append((b.epoch, b.index, m.copy(), ids.copy()))
    return info, out, wrong, form


def per_epoch(batches):
    """{epoch: [how often each sample of member 0 came, ... of 1]}."""
    by = collections.defaultdict(lambda: ([], []))
    for e, _, m, ids in batches:
        for k in (0, 1):
            by[e][k].append(ids[m == k].astype(np.int64))
    return {e: [np.bincount(np.concatenate(v[k]), minlength=N[k])
                for k in (0, 1)] for e, v in sorted(by.items())}


def planned(c, n):
    """How many of a member's n samples come how often in an epoch in
    which it gives c: {times: samples}."""
    whole, rest = divmod(c, n)
    out = {whole: n - rest}
    if rest:
        out[whole + 1] = rest
    return out


def times(counts):
    return dict(collections.Counter(counts.tolist()))


def case(desc, fn):
    """Run one case; a stream the daemon refuses fails it, not the
    script, so that every case reports."""
    try:
        return fn()
    except loader.Error as e:
        t.ok(False, desc, "%s" % e)
        return None


def check_counts(desc, batches, counts, epochs):
    """Each epoch's samples of each member, as the plan has them."""
    got = per_epoch(batches)
    t.eq(sorted(got), list(range(epochs)), "%s: %d epochs" % (desc, epochs))
    for e, cm in sorted(got.items()):
        t.eq([int(x.sum()) for x in cm], list(counts),
             "%s, epoch %d: samples of each member" % (desc, e))
        t.eq([times(cm[k]) for k in (0, 1)],
             [planned(counts[k], N[k]) for k in (0, 1)],
             "%s, epoch %d: each member's samples, each as often as "
             "planned" % (desc, e))
    return got


def check_batches(desc, wrong, form):
    t.eq(wrong, [], "%s: each sample is its member's at its index (label)"
         % desc)
    t.eq(form, [], "%s: b.member is a uint32 view of the ring" % desc)


# --- one dataset: no members -------------------------------------------------
with loader.Stream(A, socket=S, batch_size=1000, outputs="label") as s:
    b = next(s)
    t.ok(b.member is None and s.nmembers == 0 and s.members is None,
         "one dataset: b.member None, nmembers 0")


# --- proportions, 3 ranks, 3 epochs ------------------------------------------
# E = 70000: A gives 49000 (4 copies and 9000), B 21000 (a subsample).
def proportions():
    desc = "0.7/0.3 over 3 ranks"
    kw = dict(batch_size=1000, order="random", seed=7, epochs=3, world=3)
    runs = [run([(A, 0.7), (B, 0.3)], rank=r, **kw) for r in range(3)]
    t.eq([r[0] for r in runs], [(24, 70000, 2)] * 3,
         "%s: 24 batches per epoch on every rank, 70000 samples, 2 "
         "members" % desc)
    t.eq([collections.Counter(e for e, _, _, _ in r[1]) for r in runs],
         [{0: 24, 1: 24, 2: 24}] * 3,
         "%s: every rank the same batches each epoch" % desc)
    for r, (_, _, wrong, form) in enumerate(runs):
        check_batches("%s, rank %d" % (desc, r), wrong, form)
    got = check_counts(desc, [x for r in runs for x in r[1]],
                       (49000, 21000), 3)
    if len(got) == 3:
        b_sets = [frozenset(np.flatnonzero(got[e][1]).tolist())
                  for e in range(3)]
        a_sets = [frozenset(np.flatnonzero(got[e][0] == 5).tolist())
                  for e in range(3)]
        t.ok(len(set(b_sets)) == 3 and len(set(a_sets)) == 3,
             "%s: each epoch draws its subsamples afresh" % desc)
    return runs


case("proportions", proportions)


# --- epoch_size, repeat, choose, quasi ---------------------------------------
def one(desc, dataset, bpe, samples, counts, epochs=2, **kw):
    kw.setdefault("order", "random")
    info, batches, wrong, form = run(dataset, batch_size=1000, seed=3,
                                     epochs=epochs, **kw)
    t.eq(info, (bpe, samples, 2), "%s: %d batches per epoch, %d samples"
         % (desc, bpe, samples))
    check_batches(desc, wrong, form)
    check_counts(desc, batches, counts, epochs)
    return batches


SMALL = [(A, 0.7), (B, 0.3)]
small = case("epoch_size", lambda: one(
    "0.7/0.3 of epoch_size 7000", SMALL, 7, 7000, (4900, 2100),
    epoch_size=7000))
case("repeat", lambda: one(
    "repeat 2.5 and 0.25", [{"path": A, "repeat": 2.5},
                            {"path": B, "repeat": 0.25}],
    40, 40000, (25000, 15000)))
case("choose", lambda: one(
    "choose 12345 and 777", [{"path": A, "choose": 12345},
                             {"path": B, "choose": 777}],
    14, 13122, (12345, 777)))
case("quasi", lambda: one(
    "0.7/0.3 in the quasi order", SMALL, 70, 70000, (49000, 21000),
    epochs=1, order="quasi"))


def flat(batches):
    return [(e, i, m.tolist(), ids.tolist()) for e, i, m, ids in batches]


# --- a mixture file, opened by path ------------------------------------------
# Its paths are relative to its own directory, not to this process's.
mix = os.path.join(T, "mix.json")
with open(mix, "w") as f:
    json.dump({"format": "loaderd-mixture", "version": 1,
               "epoch_size": 7000,
               "members": [{"path": "fm/test", "proportion": 0.7},
                           {"path": "fmt/train", "proportion": 0.3}]}, f)


def from_file():
    info, batches, wrong, form = run(mix, batch_size=1000, seed=3, epochs=2,
                                     order="random")
    t.eq(info, (7, 7000, 2), "a mixture file: 7 batches of its epoch_size, "
         "2 members")
    check_batches("a mixture file", wrong, form)
    if small is not None:
        t.ok(flat(batches) == flat(small), "a mixture file delivers the "
             "batches of the same members given as a list")


case("mixture file", from_file)


# --- the C client ------------------------------------------------------------
def ldclient_ids(*args):
    """ldclient --ids: "members N", and (epoch, index, [members], [ids])
    per batch."""
    out = fx.run(fx.tool("ldclient"), "--ids", "--outputs", "label",
                 "--batch", "1000", "--order", "random", "--seed", "3",
                 "--epochs", "2", *args)
    members, by = None, collections.OrderedDict()
    for line in out.splitlines():
        f = line.split()
        if f[0] == "members":
            members = int(f[1])
        elif f[0] == "id":
            e, i, ident, m = map(int, f[1:5])
            by.setdefault((e, i), ([], []))
            by[(e, i)][0].append(m)
            by[(e, i)][1].append(ident)
    return members, [(e, i, m, ids) for (e, i), (m, ids) in by.items()]


def c_client():
    for desc, args in (
            ("--member", ("--member", "proportion:0.7:" + A,
                          "--member", "proportion:0.3:" + B,
                          "--epoch-size", "7000", S, "my mixture")),
            ("a mixture file", (S, mix))):
        try:
            members, got = ldclient_ids(*args)
        except RuntimeError as e:
            t.ok(False, "ldclient %s: the mixture opens" % desc, e)
            continue
        t.eq(members, 2, "ldclient %s: 2 members" % desc)
        if small is not None:
            t.ok(got == flat(small), "ldclient %s: loader_members() and the "
                 "ids give the Python stream's batches" % desc)


c_client()


# --- the torch adapter -------------------------------------------------------
def adapter():
    dl = loader.torch.DataLoader(SMALL, socket=S, keys=("label",),
                                 batch_size=1000, seed=3, epochs=2,
                                 epoch_size=7000, with_ids=True, pad=False)
    got = []
    for epoch in range(2):
        dl.set_epoch(epoch)
        for label, ids, member in dl:
            got.append((epoch, member.tolist(), ids.tolist()))
    dl.close()
    if small is not None:
        t.ok(got == [(e, m.tolist(), ids.tolist())
                     for e, _, m, ids in small],
             "loader.torch.DataLoader(a list, with_ids=True): ids and "
             "member of the Stream's batches")


if torch is not None:
    case("torch", adapter)


# --- a named mixture's weights change part-way through an epoch -------------
# 0.7 / 0.3 of 7000 places: 14 batches of 500. Then A once and 1000 of
# B: 11000 places, 22 batches, from the next epoch on.
NEW = [{"path": A, "repeat": 1}, {"path": B, "choose": 1000}]


def new_weights():
    kw = dict(socket=S, batch_size=500, order="random", seed=11, epochs=3,
              outputs="label")
    with loader.Stream(SMALL, name="py-w", fresh=True, epoch_size=7000,
                       **kw) as s:
        for i, b in enumerate(s):
            if i == 4:
                break
    with loader.Stream(NEW, name="py-w", **kw) as s:
        t.eq(s.start, (0, 5), "other weights part-way through epoch 0: "
             "the job goes on where it stopped")
        t.eq([len(s), s.batches_in(0), s.batches_in(1), s.batches_in(2)],
             [14, 14, 22, 22], "len() and batches_in(): epoch 0 keeps its "
             "14 batches, the next epochs have the new weights' 22")
        per, lens, members = collections.Counter(), {}, {}
        for b in s:
            per[b.epoch] += 1
            lens[b.epoch] = len(s)
            members.setdefault(b.epoch, collections.Counter()).update(
                b.member.tolist())
    t.eq(dict(per), {0: 9, 1: 22, 2: 22}, "the batches of each epoch")
    t.eq(lens, {0: 14, 1: 22, 2: 22}, "len() follows the epoch delivered")
    t.eq(members[1], {0: 10000, 1: 1000}, "epoch 1 with the new weights")
    if torch is None:
        return
    with loader.Stream(SMALL, name="py-w2", fresh=True, epoch_size=7000,
                       **kw) as s:
        for i, b in enumerate(s):
            if i == 4:
                break
    dl = loader.torch.DataLoader(NEW, name="py-w2", keys=("label",),
                                 **dict(kw, outputs=None))
    got = []
    for epoch in range(3):
        dl.set_epoch(epoch)
        got.append((len(dl), sum(1 for _ in dl)))
    dl.close()
    t.eq(got, [(9, 9), (22, 22), (22, 22)],
         "loader.torch.DataLoader: len() of each epoch is what it yields")


case("new weights", new_weights)


# --- a named mixture rides a daemon restart ----------------------------------
def restart():
    global d
    kw = dict(socket=S, batch_size=500, order="random", seed=11, epochs=1,
              epoch_size=7000, outputs="label")
    with loader.Stream(SMALL, **kw) as s:
        whole = [(b.epoch, b.index, b.member.tolist(),
                  np.asarray(b.ids).tolist()) for b in s]
    got = []
    with loader.Stream(SMALL, name="py-mix", fresh=True,
                       reconnect_ms=20000, **kw) as s:
        for i, b in enumerate(s):
            got.append((b.epoch, b.index, b.member.tolist(),
                        np.asarray(b.ids).tolist()))
            if i == 5:
                d.kill()
                d = fx.Daemon(T, "d", "--threads", "2")
    t.eq(len(got), 14, "a named mixture rides a daemon SIGKILL out")
    t.ok(got == whole, "... every batch once, each member's files sent "
         "again, as the uninterrupted stream has them")


case("restart", restart)
d.kill(signal.SIGTERM)
