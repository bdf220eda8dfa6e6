#!/usr/bin/python3
"""ddp_resume.py - a data-parallel training job that resumes exactly.

The recipe (loader(7), "Resuming a data-parallel job"): every rank makes
its loader.torch.DataLoader, loads the checkpoint if there is one, then
for each epoch calls set_epoch() and iterates. At each checkpoint every
rank's dl.state_dict() is gathered with all_gather_object and saved with
the model and the optimizer; on restart each rank loads its own entry
(the same world, a stream without a name) or the whole list (a named
stream, whose world may have changed). The loader opens its stream only
when first used, so the state loaded decides where it starts, and every
sample of each epoch is trained on once after the restored checkpoint,
with as many batches on every rank.

An MLP on Fashion-MNIST, torch.distributed on gloo (CPU). Launch each
rank with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (Debian 12's
torchrun does not start: set them yourself, as a launcher does):

    build/loaderctl pack --split test /usr/share/datasets/fashion-mnist fm
    build/loaderd -f --socket /tmp/ld.sock &
    for r in 0 1; do RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
        MASTER_PORT=29500 build/loader-python examples/ddp_resume.py \
        fm/test /tmp/ld.sock ckpt & done; wait
    ... kill a rank; start them all again with --resume

    ddp_resume.py DATASET SOCKET DIR [--resume] [--name NAME]
                  [--die-at STEP] [--batch N]

DIR holds the checkpoint (ckpt.pt, every 20 steps), the final weights
(final.pt) and each rank's log, aATTEMPT.rankR.log (ATTEMPT from the
environment, default 0): "start STEP len N", then "STEP EPOCH SIZE ID ID
..." for every batch trained on (its size, and the ids its loss counts),
then "end STEP".
--die-at STEP kills the rank with SIGKILL after that step, to try a
resume (tests/client/python/test_ddp.py does). --batch sets the batch
size (64).

When the world does not divide the dataset, the DataLoader pads (its
default, as DistributedSampler does): every rank's last batch has the
same size, the ranks short of a sample taking one again. The loss
leaves those repeats out through the batch's mask, so that each sample
of an epoch counts once; a batch of repeats only adds nothing.
"""

import argparse
import os
import signal

import torch
import torch.distributed as dist

import loader.torch

EPOCHS, BATCH, CKPT = 2, 64, 20

p = argparse.ArgumentParser()
p.add_argument("dataset")
p.add_argument("socket")
p.add_argument("dir")
p.add_argument("--resume", action="store_true")
p.add_argument("--die-at", type=int, default=-1)
p.add_argument("--name", default=None)
p.add_argument("--batch", type=int, default=BATCH)
a = p.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
    torch.nn.Flatten(), torch.nn.Linear(784, 32), torch.nn.ReLU(),
    torch.nn.Linear(32, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
kw = dict(socket=a.socket, keys=("image", "label"), with_ids=True,
          with_mask=True, batch_size=a.batch, outputs="image:unit,label", seed=7,
          epochs=EPOCHS, rank=rank, world=world)
if a.name:
    kw["name"] = a.name
dl = loader.torch.DataLoader(a.dataset, **kw)
ckpt = os.path.join(a.dir, "ckpt.pt")
step = 0
if a.resume:
    ck = torch.load(ckpt)
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["opt"])
    states = ck["loader"]
    # This rank's own state when the world is the checkpoint's and the
    # stream unnamed; else every rank's (a named stream's elastic resume).
    if a.name:
        dl.load_state_dict(states)
    else:
        dl.load_state_dict(states[rank])
    step = ck["step"]
first = dl.epoch
log = open(os.path.join(a.dir, "a%s.rank%d.log" % (
    os.environ.get("ATTEMPT", "0"), rank)), "w")
log.write("start %d len %d\n" % (step, len(dl)))
log.flush()
for e in range(first, EPOCHS):
    dl.set_epoch(e)
    for x, y, ids, mask in dl:
        opt.zero_grad()
        per = torch.nn.functional.cross_entropy(model(x), y, reduction="none")
        loss = (per * mask).sum() / mask.sum().clamp(min=1)
        if not torch.isfinite(loss):
            raise SystemExit("rank %d step %d: loss %s on a batch of %d"
                             % (rank, step + 1, loss.item(), len(y)))
        loss.backward()
        opt.step()
        step += 1
        log.write("%d %d %d %s\n" % (step, e, len(y),
                                     " ".join(map(str, ids[mask].tolist()))))
        log.flush()
        if step % CKPT == 0:
            states = [None] * world
            dist.all_gather_object(states, dl.state_dict())
            if rank == 0:
                torch.save({"model": model.state_dict(),
                            "opt": opt.state_dict(), "loader": states,
                            "step": step}, ckpt + ".tmp")
                os.replace(ckpt + ".tmp", ckpt)
            dist.barrier()
        if step == a.die_at:
            os.kill(os.getpid(), signal.SIGKILL)
dl.close()
if rank == 0:
    torch.save(model.state_dict(), os.path.join(a.dir, "final.pt"))
log.write("end %d\n" % step)
log.close()
dist.barrier()
dist.destroy_process_group()
