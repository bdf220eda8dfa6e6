"""Data-parallel jobs through loader.torch.DataLoader, real processes:
torch.distributed on gloo, each rank launched as a launcher does (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT; Debian 12's torchrun does not
start), running the recipe of examples/ddp_resume.py. One rank is killed
with SIGKILL mid-epoch, the other then killed as a launcher would, and
the job restarted from its last checkpoint (every rank's loader state
gathered with the model): with the same world, unnamed and named; 2 -> 1;
and 1 -> 2 -> 1. Every time each rank gets as many batches, the job does
not hang, every sample of each epoch is trained on exactly once after
the restored checkpoint, and with the same world the final weights are
an uninterrupted run's.
"""

import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture as fx  # noqa: E402

np, torch = fx.need("numpy", "torch")
if not torch.distributed.is_available():
    fx.skip_all("torch without torch.distributed")

t = fx.Tap()
T = fx.tmpdir()
D = fx.pack_fmnist(T)
d = fx.Daemon(T, "d", "--threads", "1")
WORKER = os.path.join(fx.SRC, "examples", "ddp_resume.py")
N, CKPT = 10000, 20


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def launch(run, attempt, world, *args, die=None):
    """Run attempt number `attempt` of a job in T/run: world ranks; rank r
    given --die-at die[r]. When a rank dies, the others are killed, as a
    launcher does. Returns the ranks' exit codes."""
    os.makedirs(os.path.join(T, run), exist_ok=True)
    port = free_port()
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   ATTEMPT=str(attempt))
        extra = ["--die-at", str(die[r])] if die and r in die else []
        procs.append(subprocess.Popen(
            [sys.executable, WORKER, D, d.sock, os.path.join(T, run)] +
            list(args) + extra, env=env, stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(T, run, "err.%d" % r), "a")))
    deadline = time.time() + 120
    while time.time() < deadline:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            return codes
        if any(c not in (None, 0) for c in codes):
            for p in procs:
                if p.poll() is None:
                    p.kill()
            return [p.wait() for p in procs]
        time.sleep(0.05)
    for p in procs:
        p.kill()
    return ["hung"] * world


def attempt_log(run, attempt, rank):
    """(start step, len() at the start, [(step, epoch, ids, size)]) of
    one rank's attempt: ids those the loss counted, size the batch's."""
    start, length, batches = 0, 0, []
    for line in open(os.path.join(T, run, "a%d.rank%d.log" % (attempt,
                                                                rank))):
        w = line.split()
        if w[0] == "start":
            start, length = int(w[1]), int(w[3])
        elif w[0] != "end":
            batches.append((int(w[0]), int(w[1]), [int(i) for i in w[3:]],
                            int(w[2])))
    return start, length, batches


def check_run(desc, run, worlds):
    """The samples the attempts trained on, each cut at the checkpoint
    the next attempt restored: every epoch's exactly once. In the last
    attempt, each rank as many batches, and as many in its first epoch
    as len() said when it began."""
    trained = []
    for k, w in enumerate(worlds):
        upto = attempt_log(run, k + 1, 0)[0] if k + 1 < len(worlds) \
            else None
        for r in range(w):
            for step, epoch, ids, _ in attempt_log(run, k, r)[2]:
                if upto is None or step <= upto:
                    trained.extend((epoch, i) for i in ids)
    per_epoch = {}
    for e, i in trained:
        per_epoch.setdefault(e, []).append(i)
    t.ok(sorted(per_epoch) == [0, 1] and all(
        sorted(v) == list(range(N)) for v in per_epoch.values()),
        "%s: every sample of each epoch trained on exactly once after the "
        "restored checkpoints" % desc, "epochs %s, counts %s" % (
            sorted(per_epoch), [len(v) for v in per_epoch.values()]))
    last = [attempt_log(run, len(worlds) - 1, r)
            for r in range(worlds[-1])]
    counts = [len(a[2]) for a in last]
    firsts = [sum(1 for b in a[2] if b[1] == a[2][0][1]) for a in last]
    lens = [a[1] for a in last]
    t.ok(len(set(counts)) == 1 and firsts == lens,
         "%s: the last attempt's ranks got as many batches each (%s), and "
         "in the resumed epoch as many as len() said" % (desc, counts[0]),
         "batches %s, in the first epoch %s, len() %s" % (counts, firsts,
                                                         lens))


# An uninterrupted run: the weights every same-world resume must reach.
codes = launch("whole", 0, 2)
t.eq(codes, [0, 0], "an uninterrupted 2-rank job runs")
whole = torch.load(os.path.join(T, "whole", "final.pt"))

for desc, run, name in (("same world, unnamed", "same", []),
                        ("same world, named", "named", ["--name", "n1"])):
    codes = launch(run, 0, 2, *name, die={1: 2 * CKPT + 5})
    t.ok(codes[1] == -signal.SIGKILL, "%s: rank 1 killed at step %d"
         % (desc, 2 * CKPT + 5), "exit codes %s" % codes)
    codes = launch(run, 1, 2, "--resume", *name)
    t.eq(codes, [0, 0], "%s: restarted from the step-%d checkpoint, the job "
         "finishes (no hang)" % (desc, 2 * CKPT))
    check_run(desc, run, [2, 2])
    got = torch.load(os.path.join(T, run, "final.pt"))
    t.ok(all(torch.equal(got[k], whole[k]) for k in whole),
         "%s: the final weights are the uninterrupted run's" % desc)

# 2 -> 1, and 1 -> 2 -> 1, of a named job (elastic: the gathered states).
launch("shrink", 0, 2, "--name", "n2", die={1: 2 * CKPT + 5})
codes = launch("shrink", 1, 1, "--resume", "--name", "n2")
t.eq(codes, [0], "2 -> 1: the job restarted with one rank finishes")
check_run("2 -> 1", "shrink", [2, 1])

launch("flex", 0, 1, "--name", "n3", die={0: CKPT + 5})
launch("flex", 1, 2, "--resume", "--name", "n3", die={1: 2 * CKPT + 3})
codes = launch("flex", 2, 1, "--resume", "--name", "n3")
t.eq(codes, [0], "1 -> 2 -> 1 within one epoch: the job finishes")
check_run("1 -> 2 -> 1", "flex", [1, 2, 1])

# World 3, batches of 101: the ranks' shares of the 10,000 samples are
# 3334, 3333 and 3333, so unpadded the last batches would hold 1, 0 and
# 0 samples (a NaN loss on the empty ones). The DataLoader pads by
# default: each rank's last batch holds 1, ranks 1 and 2 repeating a
# sample that their mask leaves out. Then a named job killed in epoch 0
# goes on with world 2 (padding the rest of the epoch as dealt anew).
codes = launch("pad", 0, 3, "--batch", "101")
t.eq(codes, [0, 0, 0], "world 3, batches of 101: the job runs, every loss "
     "finite")
last = [attempt_log("pad", 0, r)[2] for r in range(3)]
sizes = [[b[3] for b in a if b[1] == e][-1] for e in (0, 1) for a in last]
t.eq(sizes, [1] * 6, "padded: each rank's last batch of each epoch holds "
     "1 sample, none 0")
t.eq([sum(len(b[2]) for b in a if b[1] == 0) for a in last],
     [3334, 3333, 3333], "the masks leave out the repeats: ranks 1 and 2 "
     "train on their own 3333 samples")
check_run("world 3, padded", "pad", [3])
launch("padflex", 0, 3, "--batch", "101", "--name", "n4",
       die={2: CKPT + 7})
codes = launch("padflex", 1, 2, "--batch", "101", "--resume", "--name",
               "n4")
t.eq(codes, [0, 0], "padded 3 -> 2: the job restarted with two ranks "
     "finishes")
check_run("padded 3 -> 2", "padflex", [3, 2])
