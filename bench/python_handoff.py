#!/usr/bin/python3
"""The Python side of a handoff: what a training loop pays per batch when
the batch is already waiting in the ring (bench/python_handoff.sh runs it).

One timed call is what a loop does to get its next batch as torch tensors:

    b = stream.next()
    x = y = None                          # the batch before is released
    x = torch.from_dlpack(b["image"])
    y = torch.from_dlpack(b["label"])

Dropping the tensors of the batch before gives its slot back to the
daemon (loader_release), as rebinding x and y does in a loop: the call
covers both halves of a handoff, as ldclient --handoff times loader_next
+ loader_release in C.
The loop sleeps --fill-ms between bursts of --burst calls so that the
daemon fills the ring, and, as ldclient does, leaves the first call after
each sleep out of the figures (it finds cold caches). Whether every timed
call found its batch published is checked, not assumed: the library's
wait counter (Stream.stats()["wait_s"]) is read after each burst, outside
the clock, and a burst in which it moved is counted as "waited".

With --dataloader the timed call is one step of loader.torch.DataLoader
instead (x, y = next(it)): the same, plus the epoch bookkeeping of the
adapter. Output, one line:

    python_handoff calls=... p50_us=... p90_us=... p99_us=... max_us=...
        waited_bursts=... next_p50_us=... release_p50_us=... dlpack_p50_us=...

(the last three are the medians of the Stream path's three parts:
stream.next(), the release, the two torch.from_dlpack; "na" with
--dataloader.)
"""

import argparse
import sys
import time

try:
    import torch
    import loader
    from loader.torch import DataLoader
except ImportError as e:
    print("python_handoff: %s; skipped" % e, file=sys.stderr)
    sys.exit(77)


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Time the Python handoff of ready batches.")
    p.add_argument("socket", help="loaderd's socket")
    p.add_argument("dataset", help="a packed Fashion-MNIST split")
    p.add_argument("--rounds", type=int, default=200,
                   help="bursts (default 200)")
    p.add_argument("--burst", type=int, default=6,
                   help="calls per burst, at most ring slots - 2 (default 6)")
    p.add_argument("--fill-ms", type=float, default=20.0,
                   help="sleep before each burst (default 20)")
    p.add_argument("--batch-size", type=int, default=256,
                   help="samples per batch (default 256)")
    p.add_argument("--warmup", type=int, default=5,
                   help="untimed bursts first (default 5)")
    p.add_argument("--dataloader", action="store_true",
                   help="time loader.torch.DataLoader instead of Stream")
    a = p.parse_args(argv)
    if a.rounds < 1 or a.burst < 2 or a.fill_ms < 0 or a.warmup < 0:
        p.error("--rounds >= 1, --burst >= 2, --fill-ms and --warmup >= 0")
    return a


def pct(v, q):
    """The q-quantile of the sorted list v, as ldclient takes it."""
    return v[min(len(v) - 1, int(len(v) * q))]


def main(argv):
    a = parse_args(argv)
    torch.set_num_threads(1)
    kw = dict(batch_size=a.batch_size, outputs="image:unit,label",
              order="random", seed=1, epochs=0, socket=a.socket)
    if a.dataloader:
        dl = DataLoader(a.dataset, keys=("image", "label"), **kw)
        s = dl.stream
        it = iter(dl)
    else:
        s = loader.Stream(a.dataset, **kw)
    if a.burst > s.slots - 2:
        # The slot the loop still holds, and the one the daemon writes
        # into, are not ready: a longer burst would wait for the daemon.
        print("python_handoff: --burst %d > ring slots (%d) - 2"
              % (a.burst, s.slots), file=sys.stderr)
        return 2

    clock = time.perf_counter_ns
    fd = torch.from_dlpack
    lat, nxt, rel, dlp = [], [], [], []
    waited = 0
    x = y = None
    wait0 = s.stats()["wait_s"]
    for r in range(a.warmup + a.rounds):
        time.sleep(a.fill_ms / 1000)
        for i in range(a.burst):
            if a.dataloader:
                t0 = clock()
                try:
                    x, y = next(it)
                except StopIteration:
                    # The adapter's epoch is over (one per iteration):
                    # the next one starts with a fresh iterator, a cost
                    # of once per epoch that is left out.
                    it = iter(dl)
                    x, y = next(it)
                    continue
                t1 = t2 = t3 = clock()
            else:
                t0 = clock()
                b = s.next()
                t1 = clock()
                # What rebinding x and y does in a loop, in its own
                # step so that it is timed apart.
                x = y = None
                t2 = clock()
                x = fd(b["image"])
                y = fd(b["label"])
                t3 = clock()
            if r >= a.warmup and i > 0:
                lat.append(t3 - t0)
                nxt.append(t1 - t0)
                rel.append(t2 - t1)
                dlp.append(t3 - t2)
        # One round trip to the daemon per burst, off the clock: did any
        # call of this burst block?
        w = s.stats()["wait_s"]
        if r >= a.warmup and w > wait0:
            waited += 1
        wait0 = w
    del x, y
    if a.dataloader:
        dl.close()
    else:
        s.close()

    for v in lat, nxt, rel, dlp:
        v.sort()
    us = 1e-3
    split = ["na"] * 3 if a.dataloader else \
        ["%.2f" % (pct(v, 0.5) * us) for v in (nxt, rel, dlp)]
    print("python_handoff calls=%d p50_us=%.2f p90_us=%.2f p99_us=%.2f "
          "max_us=%.2f waited_bursts=%d next_p50_us=%s release_p50_us=%s "
          "dlpack_p50_us=%s"
          % (len(lat), pct(lat, 0.5) * us, pct(lat, 0.9) * us,
             pct(lat, 0.99) * us, lat[-1] * us, waited, *split))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
