#!/usr/bin/python3
"""torch_mlp.py - a PyTorch training loop fed by loaderd.

An MLP (784-256-128-10, ReLU, Adam) trained on Fashion-MNIST batches
streamed from a running loaderd through loader.torch.DataLoader, and
evaluated after every epoch on the test split through a second
DataLoader (sequential order). The tensors it gets are views of the
daemon's shared memory: no copy is made between the daemon and the model.

    build/loaderctl pack /usr/share/datasets/fashion-mnist fm
    build/loaderd -f --socket /tmp/ld.sock &
    build/loader-python examples/torch_mlp.py --socket /tmp/ld.sock fm

Per epoch it prints the training loss, the test accuracy, the training
samples/s and the data stall: the time the loop spent blocked waiting for
its next batch, over the epoch's wall time (and, of that, the part when
the daemon had no batch ready). It stops at the first epoch whose test
accuracy reaches --target (or after --epochs), and ends with one line of
key=value pairs:

    test_accuracy=0.8809 epochs=5 samples_per_s=... stall_pct=...
        target=0.8800 reached=1

Exit status: 0 when the target was reached (or --target 0), 1 when it was
not, 2 on errors (usage, no daemon, a failed stream), 77 when torch or the
loader package is missing.
"""

import argparse
import os
import sys
import time

try:
    import torch
    from torch import nn
    import loader
    from loader.torch import DataLoader
except ImportError as e:
    print("torch_mlp: %s; skipped (Debian: python3-torch, python3-numpy; "
          "run through BUILD/loader-python)" % e, file=sys.stderr)
    sys.exit(77)

# Fashion-MNIST's pixel mean and standard deviation on [0, 1]: a centred
# input lets Adam's first steps go the right way.
MEAN, STD = 0.2860, 0.3530


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Train an MLP on Fashion-MNIST streamed from loaderd.")
    p.add_argument("dataset", metavar="DATASET_DIR",
                   help="packed dataset holding train/ and test/ "
                   "(loaderctl pack)")
    p.add_argument("--socket", help="loaderd's socket (default: "
                   "$LOADERD_SOCKET, then the library's default)")
    p.add_argument("--epochs", type=int, default=15,
                   help="epochs to train at most (default 15)")
    p.add_argument("--batch-size", type=int, default=128,
                   help="samples per batch (default 128)")
    p.add_argument("--lr", type=float, default=1e-3,
                   help="Adam's learning rate (default 0.001)")
    p.add_argument("--seed", type=int, default=1,
                   help="seed of the weights and of the sample order "
                   "(default 1)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch's threads (default 1: leave the daemon a "
                   "core)")
    p.add_argument("--target", type=float, default=0.88,
                   help="test accuracy to reach; 0 trains every epoch "
                   "(default 0.88)")
    a = p.parse_args(argv)
    if a.epochs < 1 or a.batch_size < 1 or a.threads < 1:
        p.error("--epochs, --batch-size and --threads must be positive")
    return a


def evaluate(model, test):
    """Accuracy on one epoch of the test stream."""
    model.eval()
    right = total = 0
    with torch.no_grad():
        for x, y in test:
            logits = model((x.view(x.shape[0], -1) - MEAN) / STD)
            right += (logits.argmax(1) == y).sum().item()
            total += y.shape[0]
    model.train()
    return right / total


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(),
                          nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()

    # The order and every random number are a function of the seed and
    # the epoch alone, so a run with the same seed sees the same batches.
    # Both streams are opened for every epoch up front: the daemon then
    # prefetches across epoch boundaries. Pixels come as f32 in [0, 1]
    # ("unit"), labels as stored (int64), which is what the loss takes.
    train = DataLoader(os.path.join(args.dataset, "train"),
                       keys=("image", "label"), outputs="image:unit,label",
                       batch_size=args.batch_size, order="random",
                       seed=args.seed, epochs=args.epochs,
                       socket=args.socket)
    test = DataLoader(os.path.join(args.dataset, "test"),
                      keys=("image", "label"), outputs="image:unit,label",
                      batch_size=1000, order="sequential",
                      epochs=args.epochs, socket=args.socket)

    acc = 0.0
    reached = False
    samples = epochs = 0
    wall = wait = 0.0
    for epoch in range(args.epochs):
        train.set_epoch(epoch)
        test.set_epoch(epoch)
        it = iter(train)
        n = 0
        loss_sum = 0.0
        waited = 0.0
        ring0 = train.stream.stats()["wait_s"]
        t0 = time.perf_counter()
        while True:
            # The stall is the time spent here: everything else in the
            # loop is work a trainer would do whatever fed it.
            w0 = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                waited += time.perf_counter() - w0
                break
            waited += time.perf_counter() - w0
            # x and y view the ring until the next batch replaces them:
            # what outlives a step must be a copy. The loss keeps y (for
            # its backward), so keep loss.item(), not loss: a list of
            # losses would hold every batch's slot and stop the stream.
            loss = loss_fn(model((x.view(x.shape[0], -1) - MEAN) / STD), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * y.shape[0]
            n += y.shape[0]
        dt = time.perf_counter() - t0
        # Of the stall, the part when the ring had no batch ready (the
        # library's own count): the rest is the Python side of taking a
        # batch (the tensors' making and the release of the one before).
        ring = train.stream.stats()["wait_s"] - ring0
        acc = evaluate(model, test)
        samples += n
        wall += dt
        wait += waited
        epochs += 1
        print("epoch %d/%d loss %.4f test_acc %.4f samples/s %.0f "
              "stall %.1f%% (ring empty %.1f%%) time %.2fs"
              % (epoch + 1, args.epochs, loss_sum / max(n, 1), acc,
                 n / dt, 100.0 * waited / dt, 100.0 * ring / dt, dt),
              flush=True)
        if args.target > 0 and acc >= args.target:
            reached = True
            break

    train.close()
    test.close()
    print("test_accuracy=%.4f epochs=%d samples_per_s=%.0f stall_pct=%.2f "
          "target=%.4f reached=%d"
          % (acc, epochs, samples / wall, 100.0 * wait / wall, args.target,
             reached))
    return 0 if reached or args.target <= 0 else 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except loader.Error as e:
        # The daemon's or the library's reason, e.g. "connect ...: No
        # such file or directory (is loaderd running?)".
        print("torch_mlp: %s" % e, file=sys.stderr)
        sys.exit(2)
