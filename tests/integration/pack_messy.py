#!/usr/bin/python3
"""pack_messy.py - an ImageFolder tree holding what real ones hold, packed
and compared with torchvision's ImageFolder.

The tree (made here with Pillow): RGB, CMYK, grayscale and progressive
JPEGs, a PNG, a PNG named .JPEG (as ImageNet has one), a 16-bit PNG, a
JPEG cut to 90 % of its bytes, an empty .jpg, a .bmp, a text file, hidden
files, a hidden class directory (.ipynb_checkpoints), images nested in
subdirectories, and a class directory without images.

Checks: a pack without --skip-bad stops at the first bad file, by name;
with it, the damaged and empty files are skipped by name, the summary and
--json count what was not packed by reason and name the empty and hidden
class directories, and verify passes. Then, in dataset order, every
sample's label and payload bytes (packed with --jpeg-restart off, so the
bytes are the files') equal torchvision's ImageFolder samples over the
same tree, less what loaderd leaves out on purpose: hidden files and
directories, the .bmp (torchvision reads it; pack cannot store it) and
the two bad files; the empty class sorts last, so it shifts no label
(torchvision 0.14 refuses a tree with an empty class). And every PNG
decodes in a stream to Pillow's convert("RGB") pixels.

TAP on stdout; exit 77 without Pillow, NumPy or torchvision.
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

try:
    import numpy as np
    from PIL import Image
    import torchvision
except ImportError as e:
    print("1..0 # SKIP %s" % e)
    sys.exit(77)

top = os.environ["top_builddir"]
LOADERCTL = os.path.join(top, "loaderctl")
DSDUMP = os.path.join(top, "tests", "tools", "dsdump")
n = 0
failed = 0


def ok(cond, desc, why=""):
    global n, failed
    n += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", n, desc))
    if not cond:
        failed += 1
        for line in str(why).splitlines()[:8]:
            print("#   " + line)


def run(*args):
    p = subprocess.run(args, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def photo(w, h, seed):
    rng = np.random.default_rng(seed)
    x = np.linspace(0, 255, w)[None, :, None] * np.ones((h, 1, 3))
    x = x + rng.integers(0, 40, (h, w, 3))
    return Image.fromarray(x.clip(0, 255).astype("uint8"))


def png16(path, w, h, seed):
    """A 16-bit RGB PNG, written by hand (Pillow writes none)."""
    rng = np.random.default_rng(seed)
    px = rng.integers(0, 65536, (h, w, 3), dtype=np.uint16)
    raw = b"".join(b"\0" + px[y].astype(">u2").tobytes() for y in range(h))

    def chunk(t, d):
        return (struct.pack(">I", len(d)) + t + d +
                struct.pack(">I", zlib.crc32(t + d) & 0xffffffff))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw)))
        f.write(chunk(b"IEND", b""))


T = tempfile.mkdtemp(prefix="loaderd-messy.")
try:
    src = os.path.join(T, "src")

    def put(rel):
        p = os.path.join(src, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p

    photo(64, 48, 1).save(put("a_cat/rgb.jpg"), quality=90)
    photo(60, 40, 2).convert("CMYK").save(put("a_cat/cmyk.jpg"))
    photo(50, 70, 3).convert("L").save(put("a_cat/gray.jpg"))
    photo(80, 60, 4).save(put("a_cat/prog.jpeg"), progressive=True)
    photo(40, 40, 5).save(put("a_cat/nested/deeper/n.JPG"))
    photo(33, 21, 6).save(put("b_dog/image.png"))
    photo(35, 25, 7).save(put("b_dog/n02105855_2933.JPEG"), format="PNG")
    photo(30, 30, 8).convert("RGBA").save(put("b_dog/alpha.png"))
    png16(put("b_dog/deep16.png"), 20, 12, 9)
    photo(44, 33, 10).save(put("b_dog/sub/x.jpg"))
    whole = put("c_bird/cut.jpg")
    photo(120, 90, 11).save(whole, quality=95)
    data = open(whole, "rb").read()
    open(whole, "wb").write(data[: len(data) * 9 // 10])
    photo(20, 20, 12).save(put("c_bird/fine.jpg"))
    open(put("c_bird/empty.jpg"), "wb").close()
    photo(20, 20, 13).save(put("c_bird/old.bmp"))
    open(put("c_bird/notes.txt"), "w").write("not an image\n")
    photo(20, 20, 14).save(put("c_bird/.hidden.jpg"))
    photo(20, 20, 15).save(put(".ipynb_checkpoints/x.jpg"))
    os.makedirs(os.path.join(src, "z_empty"))
    open(put("z_empty/readme.txt"), "w").write("nothing\n")

    out = os.path.join(T, "ds")
    rc, so, se = run(LOADERCTL, "pack", src, out)
    ok(rc == 2 and "c_bird/cut.jpg" in se and "Premature end" in se,
       "without --skip-bad, the truncated JPEG stops the pack, by name", se)
    ok(not os.path.exists(out), "and leaves no directory")

    rc, so, se = run(LOADERCTL, "pack", "--skip-bad", "--jpeg-restart",
                     "off", src, out)
    ok(rc == 0, "--skip-bad packs the rest", se)
    ok("skipped " + os.path.join(src, "c_bird/cut.jpg") in se and
       "skipped " + os.path.join(src, "c_bird/empty.jpg") in se,
       "naming the truncated and the empty file", se)
    ok("packed 11 samples" in so and ", 2 skipped" in so and
       "4 PNGs stored as they were" in so,
       "11 samples packed, 2 skipped, 4 of them PNGs", so)
    ok("not packed: 1 hidden, 2 not images, 1 images of formats pack "
       "cannot store (.bmp)" in so, "the summary counts what it left, by "
       "reason", so)
    ok("without an image" in se and "z_empty" in se,
       "the empty class directory is named", se)
    ok("hidden directories" in se and ".ipynb_checkpoints" in se and
       "labels differ" in se, "the hidden directory is named, and why", se)
    rc, so, se = run(LOADERCTL, "pack", "--skip-bad", "--jpeg-restart",
                     "off", "--force", "--json", src, out)
    try:
        j = json.loads(so.splitlines()[0])
    except (ValueError, IndexError):
        j = {}
    ok(j.get("not_packed") == {
        "hidden": 1, "not_image": 2, "unsupported": 1,
        "unsupported_ext": ".bmp", "empty_classes": "z_empty",
        "hidden_classes": ".ipynb_checkpoints"} and j.get("png") == 4 and
       j.get("skipped") == 2, "--json says the same", so)
    rc, so, se = run(LOADERCTL, "verify", out)
    ok(rc == 0 and "0 bad records" in so, "verify passes", so + se)

    # torchvision over the same tree, less what loaderd leaves out.
    ref = os.path.join(T, "ref")
    shutil.copytree(src, ref)
    for rel in (".ipynb_checkpoints", "c_bird/.hidden.jpg", "c_bird/old.bmp",
                "c_bird/cut.jpg", "c_bird/empty.jpg"):
        p = os.path.join(ref, rel)
        shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    # torchvision 0.14 refuses an empty class: give it a file it ignores
    # and count z_empty out of its classes (it sorts last).
    shutil.rmtree(os.path.join(ref, "z_empty"))
    tv = torchvision.datasets.ImageFolder(ref)
    man = json.load(open(os.path.join(out, "manifest.json")))
    ok(man["classes"] == tv.classes + ["z_empty"],
       "the classes are torchvision's, and the empty one last",
       "%s vs %s" % (man["classes"], tv.classes))
    got = []
    for i in range(man["records"]):
        img = subprocess.run([DSDUMP, "--raw", str(i), "image", out],
                             capture_output=True).stdout
        lab = subprocess.run([DSDUMP, "--raw", str(i), "label", out],
                             capture_output=True).stdout
        got.append((struct.unpack("<q", lab)[0] if len(lab) == 8 else None,
                    hashlib.sha256(img).hexdigest()))
    want = [(label, hashlib.sha256(open(p, "rb").read()).hexdigest())
            for p, label in tv.samples]
    ok(got == want, "sample by sample, label and bytes equal torchvision's "
       "ImageFolder (%d samples)" % len(want),
       "\n".join("%s %s" % (a, b) for a, b in zip(got, want) if a != b))

    # PNG pixels: what Pillow's convert("RGB") gives (16-bit: high byte).
    for rel in ("b_dog/image.png", "b_dog/n02105855_2933.JPEG",
                "b_dog/alpha.png", "b_dog/deep16.png"):
        p = os.path.join(src, rel)
        im = Image.open(p)
        w, h = im.size
        npy = os.path.join(T, "px.npy")
        rc, so, se = run(LOADERCTL, "pipeline", "decode | center %d | u8"
                         % min(w, h), p, npy)
        if im.mode.startswith("RGB") and "16" in rel:
            # Pillow reads 48-bit RGB through its high bytes as well.
            pass
        ref_px = np.asarray(im.convert("RGB"))
        # center N of a non-square image: the middle N x N
        s = min(w, h)
        y0, x0 = (h - s) // 2, (w - s) // 2
        got_px = np.load(npy).transpose(1, 2, 0) if rc == 0 else None
        ok(got_px is not None and np.array_equal(
            got_px, ref_px[y0:y0 + s, x0:x0 + s]),
           "%s decodes to Pillow's RGB pixels" % rel, se)
finally:
    shutil.rmtree(T, ignore_errors=True)
print("1..%d" % n)
sys.exit(1 if failed else 0)
