#!/usr/bin/python3
"""recipe_keras.py - a Keras ImageDataGenerator recipe, done by loaderd.

What a Keras user writes as

    ImageDataGenerator(rotation_range=20, width_shift_range=0.1,
                       height_shift_range=0.1, shear_range=0.2,
                       zoom_range=0.2, horizontal_flip=True,
                       fill_mode="nearest")

is one pipeline line here (loaderd(8), PIPELINE, says where it departs
from Keras' code), after a resize to 256 and a 224 centre crop; batches
come channels-last (NHWC) as NumPy arrays, which Keras' fit() takes as
they are (loader.keras wraps the same stream as a PyDataset or a
tf.data dataset where Keras is installed).

    build/loaderctl pack photos/ imgs                 # an ImageFolder tree
    build/loaderd -f --socket /tmp/ld.sock &
    build/loader-python examples/recipe_keras.py --socket /tmp/ld.sock imgs

It prints each epoch's batches, images per second and the first batch's
shape and value range, then one line of key=value pairs. Exit status: 0,
2 on errors (usage, no daemon, a failed stream), 77 when NumPy or the
loader package is missing.
"""

import argparse
import sys
import time

try:
    import numpy as np
    import loader
except ImportError as e:
    print("recipe_keras: %s; skipped (Debian: python3-numpy; run through "
          "BUILD/loader-python)" % e, file=sys.stderr)
    sys.exit(77)

RECIPE = ("decode | resize 256 | center 224 | flip 0.5 | affine rotate 20 "
          "translate 0.1 0.1 zoom 0.8 1.2 shear 0 0 -0.2 0.2 interp bilinear "
          "fill nearest | normalize imagenet | f32 | nhwc")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", help="a dataset loaderctl pack made")
    p.add_argument("--socket", default=None, help="the daemon's socket")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    seen = 0
    t0 = time.monotonic()
    with loader.Stream(a.dataset, batch_size=a.batch, outputs="image,label",
                       pipeline=RECIPE, order="random", seed=a.seed,
                       epochs=a.epochs, on_bad="skip",
                       socket=a.socket) as s:
        epoch, n, start = -1, 0, time.monotonic()
        for b in s:
            x = np.asarray(b["image"])  # a view of the shared ring
            if b.epoch != epoch:
                if epoch >= 0:
                    print("epoch %d: %d images, %.0f img/s"
                          % (epoch, n, n / (time.monotonic() - start)))
                epoch, n, start = b.epoch, 0, time.monotonic()
                print("epoch %d: first batch %s %s, labels %s, values "
                      "%.2f..%.2f" % (epoch, x.shape, x.dtype,
                                      np.asarray(b["label"]).shape,
                                      float(x.min()), float(x.max())))
            n += x.shape[0]
            seen += x.shape[0]
        print("epoch %d: %d images, %.0f img/s"
              % (epoch, n, n / (time.monotonic() - start)))
    print("images=%d epochs=%d img_per_s=%.1f" %
          (seen, a.epochs, seen / (time.monotonic() - t0)))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except loader.Error as e:
        print("recipe_keras: %s" % e, file=sys.stderr)
        sys.exit(2)
