"""examples/torch_mlp.py, kept working: a PyTorch MLP trained on
Fashion-MNIST streamed from a real loaderd reaches 0.88 test accuracy,
and prints each epoch's data-stall percentage.
"""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture as fx  # noqa: E402

fx.need("numpy", "torch")
fx.need_fmnist()
t = fx.Tap()
T = fx.tmpdir()
fx.run(os.path.join(fx.TOP, "loaderctl"), "pack", "--shard-size", "8M",
       fx.FMNIST, os.path.join(T, "fm"))
d = fx.Daemon(T, "d", "--threads", "1")
ex = os.path.join(fx.SRC, "examples", "torch_mlp.py")
p = subprocess.run([sys.executable, ex, "--socket", d.sock,
                    os.path.join(T, "fm")], stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT, text=True, timeout=600)
for line in p.stdout.splitlines():
    print("#   " + line)
t.eq(p.returncode, 0, "torch_mlp.py exits 0 (target reached)")
last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
kv = dict(f.split("=", 1) for f in last.split() if "=" in f)
t.ok(float(kv.get("test_accuracy", 0)) >= 0.88 and kv.get("reached") == "1",
     "test accuracy >= 0.88", last)
epochs = [ln for ln in p.stdout.splitlines() if ln.startswith("epoch ")]
t.ok(epochs and all(re.search(r"stall [0-9.]+%", ln) for ln in epochs),
     "every epoch line reports the data stall", "\n".join(epochs))
t.eq(len(epochs), int(kv.get("epochs", -1)), "one line per epoch trained")
