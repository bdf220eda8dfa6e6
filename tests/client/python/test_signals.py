"""Waiting, interrupted and failed, against a real loaderd: Ctrl-C during a
wait raises KeyboardInterrupt and the stream goes on afterwards; a wait
bounded by a timeout raises loader.Error(-ETIMEDOUT); a daemon killed
mid-stream ends the iteration with loader.Error, not a hang.

The daemon is stopped (SIGSTOP) to make a wait that only a signal or a
timeout ends. A watchdog (SIGALRM) turns a hang into a failure.
"""

import errno
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture as fx  # noqa: E402

np = fx.need("numpy")
import loader  # noqa: E402

t = fx.Tap()
T = fx.tmpdir()
D = fx.pack_fmnist(T)


def watchdog(signum, frame):
    print("not ok - hung: the watchdog fired")
    sys.stdout.flush()
    fx.kill_daemons()  # os._exit() runs no atexit: stopped ones too
    os._exit(1)


signal.signal(signal.SIGALRM, watchdog)
signal.alarm(120)
# Started in the background by a shell without job control (as CI may
# run the suite), Python inherits SIGINT ignored and installs no
# KeyboardInterrupt handler: put it in place, as in a terminal.
signal.signal(signal.SIGINT, signal.default_int_handler)

d = fx.Daemon(T, "d", "--threads", "1")
KW = dict(socket=d.sock, batch_size=100, outputs="image:unit,label",
          epochs=0, ring_slots=2)

# --- Ctrl-C while waiting -------------------------------------------------------
def stopped(pid):
    """Has every thread of pid stopped? (kill() returns before they do.)
    io_uring's workers (iou-*) are the kernel's and are not counted."""
    states = []
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
            stat = f.read()
        if stat.split("(", 1)[1].startswith("iou-"):
            continue
        states.append(stat.rsplit(")", 1)[1].split()[0])
    return all(st in "tT" for st in states)


with loader.Stream(D, **KW) as s:
    b = next(s)
    d.kill(signal.SIGSTOP)      # no batch will come after those published
    while not stopped(d.pid):
        time.sleep(0.01)
    # Take what was published before the stop: then the ring is empty
    # for good, and the first wait that ends by timeout proves it.
    n, e = 0, None
    while True:
        try:
            b = s.next(timeout=0.5)
            n += 1
        except loader.Error as err:
            e = err
            break
    t.eq(getattr(e, "code", None), -errno.ETIMEDOUT,
         "a wait with a timeout raises loader.Error(-ETIMEDOUT) (after %d "
         "batches published before the stop)" % n)
    t.ok("no batch within" in str(e), "... saying how long it waited",
         str(e))
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    t0 = time.monotonic()
    try:
        # Bounded: an interrupt lost is a failure, not a hang.
        s.next(timeout=30)
        t.ok(False, "Ctrl-C during a wait raises KeyboardInterrupt",
             "a batch came from a stopped daemon")
    except loader.Error as err:
        t.ok(False, "Ctrl-C during a wait raises KeyboardInterrupt",
             "the interrupt was lost: %s" % err)
    except KeyboardInterrupt:
        t.ok(True, "Ctrl-C during a wait raises KeyboardInterrupt")
        print("#   after %.2f s (SIGINT sent at 0.3 s)" % (time.monotonic() - t0))
    d.kill(signal.SIGCONT)
    b = s.next(timeout=30)
    t.ok(b is not None and b.count == 100,
         "after the interrupt and the timeout the stream goes on")
    del b

# --- the daemon killed mid-stream -------------------------------------------------
with loader.Stream(D, **KW) as s:
    for _ in range(3):
        next(s)
    d.kill(signal.SIGKILL)
    t0 = time.monotonic()
    n = 0
    try:
        for b in s:
            n += 1
        t.ok(False, "a killed daemon ends the iteration with loader.Error",
             "the iteration ended without an error")
    except loader.Error as e:
        t.ok(True, "a killed daemon ends the iteration with loader.Error")
        print("#   after %d more batches, %.2f s: %s"
              % (n, time.monotonic() - t0, e))
        t.eq(e.code, -errno.EPIPE, "... with code -EPIPE")
    t.raises(loader.Error, lambda: next(s),
             "... and so does every later call", "went away")
