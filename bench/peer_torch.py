#!/usr/bin/python3
"""The peer: torchvision's ImageFolder + DataLoader on an ImageFolder tree.

The standard ImageNet training input pipeline -- RandomResizedCrop(224),
RandomHorizontalFlip, ToTensor, Normalize -- in a DataLoader with one
worker process per core, batch 256, shuffled, persistent workers (with
--eval, the evaluation pipeline: Resize(256), CenterCrop(224), ToTensor,
Normalize).  It
measures page-cached reads: every file is read once first.  The first
--warmup batches of the first epoch start the workers and are not timed;
the clock runs from there to the end of epoch --epochs, and the rate over
the images delivered in that time is printed as

    peer_torch img_per_s=... epochs=... images=... workers=... seconds=...
               ... transforms=train|eval

The consumer only iterates: it does no work with the batches.
"""

import argparse
import os
import sys
import time

import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def parse_args(argv):
    """Parse the command line; return the argparse namespace."""
    p = argparse.ArgumentParser(
        description="Time torchvision's DataLoader over an ImageFolder "
        "tree with the ImageNet training transforms (or, with --eval, the "
        "evaluation ones).")
    p.add_argument("root", help="ImageFolder tree (root/CLASS/IMAGE.jpg)")
    p.add_argument("--epochs", type=int, default=2,
                   help="epochs, all timed but for the warm-up batches "
                   "(default 2)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="DataLoader worker processes (default: all cores)")
    p.add_argument("--batch-size", type=int, default=256,
                   help="batch size (default 256)")
    p.add_argument("--warmup", type=int, default=3,
                   help="untimed warm-up batches at the start of the first "
                   "epoch (default 3)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the shuffle and the augmentations "
                   "(default 0)")
    p.add_argument("--eval", action="store_true",
                   help="Resize(256) + CenterCrop(224) instead of "
                   "RandomResizedCrop(224) + RandomHorizontalFlip()")
    a = p.parse_args(argv)
    if a.epochs < 1 or a.workers < 1 or a.batch_size < 1 or a.warmup < 0:
        p.error("--epochs, --workers and --batch-size must be positive, "
                "--warmup not negative")
    return a


def worker_init(_worker_id):
    """Keep each worker to one thread, as it has one core to itself."""
    torch.set_num_threads(1)


def make_loader(args):
    """Build the ImageFolder dataset and its DataLoader."""
    if args.eval:
        geometry = [transforms.Resize(256), transforms.CenterCrop(224)]
    else:
        geometry = [transforms.RandomResizedCrop(224),
                    transforms.RandomHorizontalFlip()]
    tf = transforms.Compose(geometry + [
        transforms.ToTensor(),
        transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
    ])
    ds = datasets.ImageFolder(args.root, transform=tf)
    gen = torch.Generator()
    gen.manual_seed(args.seed)
    return DataLoader(ds, batch_size=args.batch_size, shuffle=True,
                      num_workers=args.workers, persistent_workers=True,
                      pin_memory=False, worker_init_fn=worker_init,
                      generator=gen)


def read_all(paths):
    """Read every file once, so that the run measures page-cached reads."""
    for path in paths:
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass


def main(argv):
    """Warm up, time the epochs, print the rate."""
    args = parse_args(argv)
    torch.set_num_threads(1)
    loader = make_loader(args)
    n = len(loader.dataset)
    read_all(path for path, _ in loader.dataset.samples)

    # The warm-up batches are the first of the first epoch rather than an
    # epoch of their own: an iterator left unfinished would leave its
    # prefetched batches to be computed, and thrown away, on the clock.
    warmup = min(args.warmup, len(loader) - 1)
    images = 0
    t0 = time.monotonic()
    for _ in range(args.epochs):
        for x, _y in loader:
            if warmup > 0:
                warmup -= 1
                if warmup == 0:
                    t0 = time.monotonic()
                continue
            images += x.shape[0]
    dt = time.monotonic() - t0

    print("peer_torch img_per_s=%.1f epochs=%d images=%d workers=%d "
          "batch=%d seconds=%.2f dataset=%d transforms=%s"
          % (images / dt, args.epochs, images, args.workers,
             args.batch_size, dt, n, "eval" if args.eval else "train"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
