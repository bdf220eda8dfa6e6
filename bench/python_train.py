#!/usr/bin/python3
"""A training loop with a simulated accelerator, fed by loaderd or by
torchvision's DataLoader (bench/python_train.sh runs it).

The loop is what a PyTorch trainer does with an accelerator that works
T ms per batch: take the next batch, do the host-side work (here, touch
every page of the images, as a copy to the device would, and sum the
labels), then wait T ms (time.sleep, standing in for the device step;
the host thread is idle meanwhile, as it is while a device computes).
The data stall is the time spent waiting for the next batch, over the
loop's wall time: 0 when the loader keeps up, near 100 % when the step
is short and the loader is the bottleneck.

The two loaders read the same images and apply the same transforms
(with random draws of their own):
  loaderd  loader.torch.DataLoader over the packed corpus, the pipeline
           'decode | rrc 224 | flip 0.5 | normalize imagenet | f32 | nchw'
           computed by a running loaderd (tensors view its ring).
  torch    torchvision ImageFolder + DataLoader on the corpus itself, with
           --workers worker processes and RandomResizedCrop(224),
           RandomHorizontalFlip, ToTensor, Normalize (bench/peer_torch.py's
           make_loader, as bench/image_pipeline.sh measures it).
For each step time both are run in turn (which goes first alternates with
--seed), each for --warmup untimed batches (taken without the step, then
one step) and --batches timed ones, and one line per run is printed:

    python_train loader=loaderd step_ms=50 samples_per_s=... stall_pct=...
        batches=... seconds=...
"""

import argparse
import os
import sys
import time

try:
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import peer_torch
    from loader.torch import DataLoader as LoaderdLoader
except ImportError as e:
    print("python_train: %s; skipped" % e, file=sys.stderr)
    sys.exit(77)

SPEC = "decode | rrc 224 | flip 0.5 | normalize imagenet | f32 | nchw"


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Data stall of a simulated training loop: loaderd "
        "against torchvision's DataLoader.")
    p.add_argument("socket", help="loaderd's socket")
    p.add_argument("dataset", help="the corpus packed by loaderctl pack")
    p.add_argument("corpus", help="the ImageFolder corpus itself")
    p.add_argument("--steps", default="0,50,100,200,300,400",
                   help="simulated step times in ms, comma-separated")
    p.add_argument("--batches", type=int, default=16,
                   help="timed batches per run (default 16)")
    p.add_argument("--warmup", type=int, default=3,
                   help="untimed batches first (default 3)")
    p.add_argument("--batch-size", type=int, default=64,
                   help="samples per batch (default 64)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="DataLoader worker processes (default: cores)")
    p.add_argument("--slots", type=int, default=4,
                   help="loaderd ring slots, a power of two (default 4: "
                   "3 batches made ahead of the one the loop holds; the "
                   "DataLoader has 2 per worker in flight)")
    p.add_argument("--seed", type=int, default=1,
                   help="seed of both loaders (default 1)")
    a = p.parse_args(argv)
    a.steps = [float(s) for s in a.steps.split(",") if s]
    if a.batches < 1 or a.warmup < 0 or a.batch_size < 1 or \
            a.workers < 1 or a.slots < 2 or any(s < 0 for s in a.steps):
        p.error("--batches, --batch-size, --workers >= 1, --slots >= 2, "
                "--warmup and step times >= 0")
    return a


def endless(loader):
    """Batches across epochs: a new iteration when one runs out."""
    while True:
        for batch in loader:
            yield batch


def touch(x, y):
    """The host-side work of a step, kept light: one float per 4 KiB page
    of the images (every page is read, none twice) and the labels."""
    return x.view(-1)[::1024].sum().item() + y.sum().item()


def loop(batches, step_s, warmup, n):
    """Run the loop; return (samples, seconds, seconds waited)."""
    clock = time.perf_counter
    # The warm-up batches are taken as fast as they come, without the
    # step, which leaves no batch made ahead; then one step passes off
    # the clock, as one does before every timed call. The first timed
    # call thus finds what it would in the steady state: neither a
    # buffer filled at start-up (which would hide a part of the stall of
    # a short run) nor an empty pipeline (which would add one).
    for _ in range(warmup):
        x, y = next(batches)
        touch(x, y)
    time.sleep(step_s)
    samples = 0
    wait = 0.0
    t0 = clock()
    for _ in range(n):
        w0 = clock()
        x, y = next(batches)
        wait += clock() - w0
        touch(x, y)
        samples += y.shape[0]
        time.sleep(step_s)
    return samples, clock() - t0, wait


def run_loaderd(a, step_s):
    dl = LoaderdLoader(a.dataset, keys=("image", "label"),
                       outputs="image,label", pipeline=SPEC,
                       batch_size=a.batch_size, order="random", seed=a.seed,
                       epochs=0, ring_slots=a.slots, on_bad="skip",
                       socket=a.socket)
    batches = endless(dl)
    try:
        return loop(batches, step_s, a.warmup, a.batches)
    finally:
        # The daemon's stream ends once the last tensor of it is gone.
        batches.close()
        dl.close()


def run_torch(a, step_s):
    args = argparse.Namespace(root=a.corpus, batch_size=a.batch_size,
                              workers=a.workers, seed=a.seed)
    batches = endless(peer_torch.make_loader(args))
    try:
        return loop(batches, step_s, a.warmup, a.batches)
    finally:
        # Closing the generator drops the DataLoader and its iterator,
        # which stops the workers before the next run starts its own.
        batches.close()


def main(argv):
    a = parse_args(argv)
    torch.set_num_threads(1)
    # Page-cached reads for the DataLoader, as for loaderd's shards.
    peer_torch.read_all(
        os.path.join(d, f) for d, _, fs in os.walk(a.corpus) for f in fs)
    runs = [("loaderd", run_loaderd), ("torch", run_torch)]
    if a.seed % 2 == 0:
        runs.reverse()
    for step in a.steps:
        for name, fn in runs:
            samples, secs, wait = fn(a, step / 1000)
            print("python_train loader=%s step_ms=%g samples_per_s=%.1f "
                  "stall_pct=%.2f batches=%d seconds=%.2f"
                  % (name, step, samples / secs, 100 * wait / secs,
                     a.batches, secs), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
