"""examples/recipe_reference.py and examples/recipe_keras.py, kept
working: each streams two epochs of a packed ImageFolder from a real
loaderd through its recipe (TrivialAugmentWide and RandomErasing; a
Keras-style affine with fill nearest) and gets normalized float32
batches of the right layout.
"""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture as fx  # noqa: E402

fx.need("numpy", "torch")
t = fx.Tap()
T = fx.tmpdir()
ds = fx.pack_jpegs(T, 48)
d = fx.Daemon(T, "d", "--threads", "2")
for name, shape in (("recipe_reference.py", r"\(16, 3, 224, 224\) "
                     r"torch\.float32"),
                    ("recipe_keras.py", r"\(16, 224, 224, 3\) float32")):
    ex = os.path.join(fx.SRC, "examples", name)
    p = subprocess.run([sys.executable, ex, "--socket", d.sock, "--batch",
                        "16", "--epochs", "2", ds], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=600)
    for line in p.stdout.splitlines():
        print("#   " + line)
    t.eq(p.returncode, 0, "%s exits 0" % name)
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    kv = dict(f.split("=", 1) for f in last.split() if "=" in f)
    t.ok(kv.get("images") == "96" and kv.get("epochs") == "2",
         "%s: two epochs of 48 images" % name, last)
    firsts = [ln for ln in p.stdout.splitlines() if "first batch" in ln]
    rng = [re.search(r"values (-?[0-9.]+)\.\.(-?[0-9.]+)", ln)
           for ln in firsts]
    t.ok(len(firsts) == 2 and all(re.search(shape, ln) for ln in firsts) and
         all(m and float(m.group(1)) < -1 and float(m.group(2)) > 1
             for m in rng),
         "%s: batches of the recipe's layout, normalized (values beyond "
         "+-1)" % name, "\n".join(firsts))
