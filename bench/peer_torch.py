#!/usr/bin/python3
"""The peer: torchvision's ImageFolder + DataLoader on an ImageFolder tree.

A DataLoader with one worker process per core, batch 256, shuffled,
persistent workers, and one of these transforms (--transforms):

  train      the standard ImageNet training input pipeline (the default):
             RandomResizedCrop(224), RandomHorizontalFlip, ToTensor,
             Normalize
  eval       the evaluation pipeline (also --eval): Resize(256),
             CenterCrop(224), ToTensor, Normalize
  recipe     torchvision's ImageNet reference training recipe
             (references/classification/presets.py with
             --auto-augment ta_wide --random-erase 0.1):
             RandomResizedCrop(224), RandomHorizontalFlip,
             TrivialAugmentWide(interpolation=BILINEAR), PILToTensor,
             ConvertImageDtype(float), Normalize, RandomErasing(p=0.1)
  keras      a Keras-style augmentation in torchvision: Resize(256),
             CenterCrop(224), RandomHorizontalFlip, RandomAffine(
             degrees=20, translate=(0.1, 0.1), scale=(0.8, 1.2),
             shear=0.2, interpolation=BILINEAR), ToTensor, Normalize
  keras-idg  the same with Keras' own transform, Debian's
             keras_preprocessing 1.1.0: Resize(256), CenterCrop(224),
             then ImageDataGenerator(rotation_range=20,
             width_shift_range=0.1, height_shift_range=0.1,
             shear_range=0.2, zoom_range=0.2, horizontal_flip=True,
             fill_mode='nearest').random_transform() of the image as a
             float32 NumPy array (as Keras' img_to_array gives it), then
             x / 255 and Normalize, as a CHW tensor (in the same
             DataLoader: the same parallelism as the others)

The imagenet mean and std are Normalize's in all of them.  It measures
page-cached reads: every file is read once first.  The first --warmup
batches of the first epoch start the workers and are not timed; the
clock runs from there to the end of epoch --epochs, and the rate over
the images delivered in that time is printed as

    peer_torch img_per_s=... epochs=... images=... workers=... seconds=...
               ... transforms=train|eval|recipe|keras|keras-idg

The consumer only iterates: it does no work with the batches.
"""

import argparse
import os
import sys
import time

import numpy as np
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
        "evaluation ones; or others, --transforms).")
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
    p.add_argument("--transforms", choices=sorted(TRANSFORMS),
                   default="train",
                   help="the transforms (default train; see the module's "
                   "docstring)")
    p.add_argument("--eval", dest="transforms", action="store_const",
                   const="eval", help="--transforms eval: Resize(256) + "
                   "CenterCrop(224) instead of RandomResizedCrop(224) + "
                   "RandomHorizontalFlip()")
    a = p.parse_args(argv)
    if a.epochs < 1 or a.workers < 1 or a.batch_size < 1 or a.warmup < 0:
        p.error("--epochs, --workers and --batch-size must be positive, "
                "--warmup not negative")
    return a


def worker_init(_worker_id):
    """Keep each worker to one thread, as it has one core to itself."""
    torch.set_num_threads(1)


def train_transforms():
    """The ImageNet training transforms."""
    return transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
    ])


def eval_transforms():
    """The ImageNet evaluation transforms."""
    return transforms.Compose([
        transforms.Resize(256),
        transforms.CenterCrop(224),
        transforms.ToTensor(),
        transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
    ])


def recipe_transforms():
    """torchvision's reference training recipe: ClassificationPresetTrain
    with auto_augment_policy="ta_wide" and random_erase_prob=0.1, at its
    default bilinear interpolation."""
    bilinear = transforms.InterpolationMode.BILINEAR
    return transforms.Compose([
        transforms.RandomResizedCrop(224, interpolation=bilinear),
        transforms.RandomHorizontalFlip(),
        transforms.TrivialAugmentWide(interpolation=bilinear),
        transforms.PILToTensor(),
        transforms.ConvertImageDtype(torch.float),
        transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        transforms.RandomErasing(p=0.1),
    ])


def keras_transforms():
    """A Keras-style augmentation, in torchvision's transforms.
    RandomAffine fills what the transform brings in with black: torchvision
    has no fill_mode="nearest"."""
    return transforms.Compose([
        transforms.Resize(256),
        transforms.CenterCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.RandomAffine(
            degrees=20, translate=(0.1, 0.1), scale=(0.8, 1.2), shear=0.2,
            interpolation=transforms.InterpolationMode.BILINEAR),
        transforms.ToTensor(),
        transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
    ])


class KerasRandomTransform:
    """ImageDataGenerator.random_transform() as a torchvision transform:
    a PIL image in, a normalized float32 CHW tensor out.

    It draws with NumPy's global generator, as Keras does; the DataLoader
    seeds it in each worker from the loader's seed."""

    def __init__(self):
        from keras_preprocessing.image import ImageDataGenerator
        self.gen = ImageDataGenerator(
            rotation_range=20, width_shift_range=0.1,
            height_shift_range=0.1, shear_range=0.2, zoom_range=0.2,
            horizontal_flip=True, fill_mode="nearest")
        self.mean = np.array(IMAGENET_MEAN, dtype=np.float32)
        self.std = np.array(IMAGENET_STD, dtype=np.float32)

    def __call__(self, img):
        x = self.gen.random_transform(np.asarray(img, dtype=np.float32))
        x = (x / 255 - self.mean) / self.std
        return torch.from_numpy(
            np.ascontiguousarray(x.transpose(2, 0, 1), dtype=np.float32))


def keras_idg_transforms():
    """The Keras-style augmentation with Keras' own ImageDataGenerator."""
    return transforms.Compose([
        transforms.Resize(256),
        transforms.CenterCrop(224),
        KerasRandomTransform(),
    ])


TRANSFORMS = {
    "train": train_transforms,
    "eval": eval_transforms,
    "recipe": recipe_transforms,
    "keras": keras_transforms,
    "keras-idg": keras_idg_transforms,
}


def make_loader(args):
    """Build the ImageFolder dataset and its DataLoader.  args.transforms
    names the transforms; a namespace without it (bench/python_train.py's)
    gets the training ones."""
    name = getattr(args, "transforms", "train")
    ds = datasets.ImageFolder(args.root, transform=TRANSFORMS[name]())
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
             args.batch_size, dt, n, args.transforms))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
