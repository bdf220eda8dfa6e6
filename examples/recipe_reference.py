#!/usr/bin/python3
"""recipe_reference.py - torchvision's ImageNet reference training recipe,
done by loaderd instead of the training process.

The recipe of torchvision's references/classification (RandomResizedCrop
224, RandomHorizontalFlip, TrivialAugmentWide with bilinear
interpolation, ToTensor, Normalize, RandomErasing p 0.1) is one pipeline
line; the daemon draws, decodes, warps and colours every sample on its
own threads and the loop gets float32 NCHW tensors that are views of its
shared memory.

    build/loaderctl pack photos/ imgs                 # an ImageFolder tree
    build/loaderd -f --socket /tmp/ld.sock &
    build/loader-python examples/recipe_reference.py --socket /tmp/ld.sock imgs

It prints each epoch's batches, images per second and the first batch's
shape and value range, then one line of key=value pairs. Exit status: 0,
2 on errors (usage, no daemon, a failed stream), 77 when torch or the
loader package is missing.
"""

import argparse
import sys
import time

try:
    import torch
    import loader
    from loader.torch import DataLoader
except ImportError as e:
    print("recipe_reference: %s; skipped (Debian: python3-torch, "
          "python3-numpy; run through BUILD/loader-python)" % e,
          file=sys.stderr)
    sys.exit(77)

# torchvision/references/classification/presets.py, ClassificationPresetTrain
# with auto_augment_policy="ta_wide", random_erase_prob=0.1.
RECIPE = ("decode | rrc 224 | flip 0.5 | trivialaugment interp bilinear | "
          "normalize imagenet | erase p 0.1 | f32 | nchw")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", help="a dataset loaderctl pack made")
    p.add_argument("--socket", default=None, help="the daemon's socket")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    dl = DataLoader(a.dataset, keys=("image", "label"),
                    batch_size=a.batch, outputs="image,label",
                    pipeline=RECIPE, order="random", seed=a.seed,
                    on_bad="skip", socket=a.socket)
    seen = 0
    t0 = time.monotonic()
    for epoch in range(a.epochs):
        dl.set_epoch(epoch)
        n, start = 0, time.monotonic()
        for i, (x, y) in enumerate(dl):
            if i == 0:
                print("epoch %d: first batch %s %s, labels %s, values "
                      "%.2f..%.2f" % (epoch, tuple(x.shape), x.dtype,
                                      tuple(y.shape), float(x.min()),
                                      float(x.max())))
            n += x.shape[0]
        dt = time.monotonic() - start
        print("epoch %d: %d images, %.0f img/s" % (epoch, n, n / dt))
        seen += n
    print("images=%d epochs=%d img_per_s=%.1f" %
          (seen, a.epochs, seen / (time.monotonic() - t0)))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except loader.Error as e:
        print("recipe_reference: %s" % e, file=sys.stderr)
        sys.exit(2)
