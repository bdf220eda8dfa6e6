#!/usr/bin/python3
"""train_cnn.py - a small CNN trained on real photographs with
torchvision's reference training recipe, fed by loaderd or by
torchvision's own DataLoader.

The recipe is torchvision's references/classification one
(ClassificationPresetTrain with --auto-augment ta_wide --random-erase
0.1): RandomResizedCrop(224), RandomHorizontalFlip, TrivialAugmentWide,
PILToTensor, ConvertImageDtype(float), Normalize, RandomErasing(p=0.1),
written once below as a torchvision Compose. Both ways train the same
network from the same initial weights, on the same photographs:

  loaderd  the Compose translated to a loaderd pipeline spec
           (loader.torch.from_torchvision) and streamed through
           loader.torch.DataLoader from the dataset `loaderctl pack` made
           of the ImageFolder; the daemon decodes and augments, the
           tensors the loop gets are views of its shared memory.
  torch    the Compose itself in torchvision.datasets.ImageFolder and
           torch.utils.data.DataLoader, one worker process per core.

    build/loaderctl pack photos/ packed          # photos/CLASS/*.jpg
    build/loaderd -f --socket /tmp/ld.sock --threads 2 &   # see below
    build/loader-python examples/train_cnn.py loaderd packed --socket /tmp/ld.sock
    build/loader-python examples/train_cnn.py torch photos

After --warmup untimed steps it trains --steps timed ones and prints
every tenth step's loss, then one line of key=value pairs:

    train_cnn loader=loaderd steps=150 batch=32 images=4768 seen=4928
        img_per_s=... stall_pct=... seconds=... loop_cpu_pct=...
        loss_first=... loss_last=... classes=10 width=10 threads=1
        workers=0 spec="..."

images: those of the timed steps (an epoch's last batch may be short);
seen: all, warm-up included; img_per_s: images over the timed steps'
wall time; stall_pct: the share of that wall time the loop spent
blocked in the loader's next(), waiting for its next batch, measured the
same way for both loaders; loop_cpu_pct: the CPU time of this process
over that wall time (the loop's, and for torch what receiving batches
costs it). bench/mkcorpus.py's corpus (bench/recipe_train.sh's) labels
its images by their index, not by what they show: there the loss stays
near ln(classes), as it is there for the rate and the stall.

Exit status: 0; 1 when a loss is not finite; 2 on errors (usage, no
daemon, a failed stream); 77 when torch, torchvision or (for loaderd)
the loader package is missing.
"""

import argparse
import json
import math
import os
import sys
import time

try:
    import torch
    from torch import nn
    import torchvision
    from torchvision import transforms as T
except ImportError as e:
    print("train_cnn: %s; skipped (Debian: python3-torch, "
          "python3-torchvision)" % e, file=sys.stderr)
    sys.exit(77)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# How the network and the threads were chosen, for a 2-core machine.
#
# The two cores are the budget that the loader and the training step
# share. Per image, let C be the step's CPU time (forward, backward, SGD)
# and P the loader's (read, decode, the recipe's augmentations, collate).
# Measured here in this loop: the DataLoader's workers spend P = 3.7 ms
# of CPU an image, loaderd 1.0 ms (bench/augment.sh's "recipe" line says
# the same of the pipelines alone: ~3.8x the images/s). A network whose
# C is small beside the DataLoader's P, yet not small beside loaderd's,
# is one that loaderd keeps fed and the DataLoader cannot:
#
#  - The loop runs torch on one intra-op thread (--threads 1), on both
#    sides. With two, each op's OpenMP team waits for its slower thread,
#    which the loader's threads keep preempting: beside the DataLoader a
#    run went five times slower than with one.
#  - The DataLoader has one worker process per core (2), each on one
#    thread. Its workers use the cores the loop leaves them and make
#    ~460 images/s (a third worker made no more: they are CPU-bound).
#    While the loop computes, three threads share two cores and the loop
#    gets about 2/3 of one; it spends 0.64 ms of CPU an image here (0.2
#    more than beside loaderd, in part for taking in the batches the
#    workers send), so it is busy for under half its wall time: stall
#    ~55 %.
#  - loaderd runs with --threads 2: two pool threads and the stream's own
#    decode. While the ring has room they get about 3/4 of the two cores,
#    the loop 1/2 of one, and they make images faster than the loop eats
#    them; once the ring is full they sleep and the loop has a core to
#    itself. So the loop rarely waits (stall ~3 %) and the run goes at
#    what two cores can do for C + P (0.45 + 1.0 ms): ~1450 images/s.
#    With --threads 1 the daemon's two threads get 4/3 of a core while
#    the loop runs, not quite enough: the loop waited 7-10 % of its time.
#  - The network: an 8x8 stride-8 stem (224 -> 28, as a ViT cuts its
#    patches, or ConvNeXt with 4x4), then two stages that double the
#    width and halve the side (28 -> 14 -> 7), each a strided 3x3
#    convolution and a plain 3x3 one, BatchNorm and ReLU after each
#    convolution, then global average pooling and a linear classifier:
#    five convolutions, 30k weights at --width 10 (channels 10, 20, 40).
#    A step costs C = 0.35 ms of CPU an image alone, 0.45 beside loaderd.
#    At --width 8 loaderd can no longer keep up either (stall 8-13 %); at
#    --width 16 the DataLoader's loop computes for more than half its
#    time (stall ~45 %) and the ratio falls to ~2.8.
#  - Batch 32: large enough that a step's fixed costs (Python, the
#    optimizer) are small beside its convolutions, small enough that
#    batches (19 MB of f32 each) come often and loaderd's 8-slot ring
#    holds several steps.
# The input resolution stays the recipe's 224.


def recipe():
    """torchvision's reference training recipe, as one Compose."""
    bilinear = T.InterpolationMode.BILINEAR
    return T.Compose([
        T.RandomResizedCrop(224, interpolation=bilinear),
        T.RandomHorizontalFlip(),
        T.TrivialAugmentWide(interpolation=bilinear),
        T.PILToTensor(),
        T.ConvertImageDtype(torch.float),
        T.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        T.RandomErasing(p=0.1),
    ])


def to_spec(compose):
    """The loaderd pipeline spec of compose."""
    import loader.torch
    return loader.torch.from_torchvision(compose)


def cbr(cin, cout, k, stride, pad):
    """Convolution, BatchNorm, ReLU."""
    return [nn.Conv2d(cin, cout, k, stride, pad, bias=False),
            nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]


def make_net(width, classes):
    """The CNN (see the comment above recipe() for why this one)."""
    layers = cbr(3, width, 8, 8, 0)
    c = width
    for _ in range(2):
        layers += cbr(c, 2 * c, 3, 2, 1) + cbr(2 * c, 2 * c, 3, 1, 1)
        c *= 2
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, classes)]
    return nn.Sequential(*layers)


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Train a small CNN on photographs with torchvision's "
        "reference recipe, fed by loaderd or by torchvision's DataLoader.")
    p.add_argument("loader", choices=("loaderd", "torch"),
                   help="loaderd: DATA is a dataset loaderctl pack made; "
                   "torch: DATA is the ImageFolder itself")
    p.add_argument("data", help="the packed dataset (loaderd) or the "
                   "ImageFolder tree, DATA/CLASS/*.jpg (torch)")
    p.add_argument("--socket", help="loaderd's socket (default: "
                   "$LOADERD_SOCKET, then the library's default)")
    p.add_argument("--steps", type=int, default=150,
                   help="timed training steps (default 150)")
    p.add_argument("--warmup", type=int, default=5,
                   help="untimed steps first (default 5)")
    p.add_argument("--batch-size", type=int, default=32,
                   help="images per step (default 32)")
    p.add_argument("--width", type=int, default=10,
                   help="the stem's channels; each stage doubles them "
                   "(default 10)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch's intra-op threads in the training loop "
                   "(default 1)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="torch: DataLoader worker processes (default: "
                   "one per core)")
    p.add_argument("--lr", type=float, default=0.05,
                   help="SGD's learning rate, momentum 0.9 (default 0.05)")
    p.add_argument("--seed", type=int, default=1,
                   help="seed of the weights, the order and the "
                   "augmentations (default 1)")
    a = p.parse_args(argv)
    if a.steps < 1 or a.warmup < 0 or a.batch_size < 1 or a.width < 1 or \
            a.threads < 1 or a.workers < 1:
        p.error("--steps, --batch-size, --width, --threads and --workers "
                "must be positive, --warmup not negative")
    return a


def endless(dl):
    """Batches across epochs: each for loop over dl is one epoch."""
    epoch = 0
    while True:
        if hasattr(dl, "set_epoch"):
            dl.set_epoch(epoch)
        for x, y in dl:
            yield x, y
        epoch += 1


def worker_init(_worker_id):
    """A DataLoader worker has one core's share: one thread."""
    torch.set_num_threads(1)


def torch_loader(a, compose):
    """torchvision's ImageFolder and DataLoader; (loader, classes)."""
    ds = torchvision.datasets.ImageFolder(a.data, transform=compose)
    gen = torch.Generator()
    gen.manual_seed(a.seed)
    dl = torch.utils.data.DataLoader(
        ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
        persistent_workers=True, worker_init_fn=worker_init, generator=gen)
    return dl, len(ds.classes)


def loaderd_loader(a, spec):
    """loader.torch.DataLoader over the packed dataset; (loader,
    classes), the classes from the dataset's manifest."""
    from loader.torch import DataLoader
    with open(os.path.join(a.data, "manifest.json")) as f:
        classes = len(json.load(f).get("classes") or ())
    if classes < 1:
        raise SystemExit("train_cnn: %s: the manifest names no classes "
                         "(pack an ImageFolder)" % a.data)
    dl = DataLoader(a.data, keys=("image", "label"), outputs="image,label",
                    pipeline=spec, batch_size=a.batch_size, order="random",
                    seed=a.seed, on_bad="skip", socket=a.socket)
    return dl, classes


def train(a, batches, model):
    """Warm up, then time --steps steps; returns a dict of figures."""
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    clock = time.perf_counter
    losses = []
    seen = images = 0
    wait = 0.0
    t0 = clock()
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            # The clock starts here, with the warm-up's steps behind: the
            # workers or the daemon's stream are running, and the loader
            # is as far ahead as it gets in the steady state.
            t0 = clock()
            c0 = time.process_time()
            wait = 0.0
        w0 = clock()
        x, y = next(batches)
        wait += clock() - w0
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        n = y.shape[0]
        seen += n
        if step >= a.warmup:
            images += n
            losses.append(loss.item())
            k = step - a.warmup + 1
            if k % 10 == 0 or k == a.steps:
                print("step %d/%d: loss %.4f" % (k, a.steps, losses[-1]),
                      flush=True)
        # Drop this step's batch before the next one is asked for: the
        # loaderd tensors hold their ring slot while they live.
        del x, y, loss
    secs = clock() - t0
    cpu = time.process_time() - c0
    return {"images": images, "seen": seen, "seconds": secs,
            "wait": wait, "cpu": cpu, "losses": losses}


def main(argv):
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    compose = recipe()
    if a.loader == "loaderd":
        try:
            import loader
        except ImportError as e:
            print("train_cnn: %s; skipped (run through BUILD/loader-python)"
                  % e, file=sys.stderr)
            return 77
        spec = to_spec(compose)
        print("loaderd spec: %s" % spec)
        try:
            dl, classes = loaderd_loader(a, spec)
            torch.manual_seed(a.seed)
            model = make_net(a.width, classes)
            r = train(a, endless(dl), model)
        except loader.Error as e:
            print("train_cnn: %s" % e, file=sys.stderr)
            return 2
        workers = 0
    else:
        spec = ""
        dl, classes = torch_loader(a, compose)
        torch.manual_seed(a.seed)
        model = make_net(a.width, classes)
        r = train(a, endless(dl), model)
        workers = a.workers
    losses = r["losses"]
    finite = all(math.isfinite(v) for v in losses)
    print("train_cnn loader=%s steps=%d batch=%d images=%d seen=%d "
          "img_per_s=%.1f stall_pct=%.2f seconds=%.2f loop_cpu_pct=%.1f "
          "loss_first=%.4f loss_last=%.4f classes=%d width=%d threads=%d "
          "workers=%d%s"
          % (a.loader, a.steps, a.batch_size, r["images"], r["seen"],
             r["images"] / r["seconds"], 100 * r["wait"] / r["seconds"],
             r["seconds"], 100 * r["cpu"] / r["seconds"], losses[0], losses[-1], classes, a.width,
             a.threads, workers, ' spec="%s"' % spec if spec else ""),
          flush=True)
    if not finite:
        print("train_cnn: a loss is not finite", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
