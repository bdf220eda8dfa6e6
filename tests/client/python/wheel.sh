#!/bin/sh
# The loader package as a trainer gets it: make wheel's
# dist/loader-VERSION-py3-none-any.whl (debian/pyproject.toml), its
# version configure's, installed with pip --no-index into a fresh venv
# outside the source and build trees (--system-site-packages: Debian's
# NumPy and torch stay visible), and from that venv's own python, away
# from the tree and with no PYTHONPATH, a stream of Fashion-MNIST from a
# daemon of this build, libloader.so.1 named by LOADER_LIBRARY. Without
# a library the import fails saying which file, which Debian package and
# LOADER_LIBRARY. Skipped without venv/ensurepip, pip or wheel.
. "$top_srcdir/tests/integration/tap.sh"

py=$(sed -n 's/^PYTHON3 = //p' "$top_builddir/Makefile")
version=$(sed -n 's/^VERSION = //p' "$top_builddir/Makefile")
[ -n "$py" ] && [ -x "$py" ] || skip_all "no python3 configured"
"$py" -c 'import venv, ensurepip' 2>/dev/null ||
	skip_all "no venv/ensurepip for $py (Debian package python3-venv)"
"$py" -m pip --version >/dev/null 2>&1 ||
	skip_all "no pip for $py (Debian package python3-pip)"
"$py" -c 'import setuptools, wheel' 2>/dev/null ||
	skip_all "no setuptools/wheel for $py (python3-setuptools, python3-wheel)"
need_fmnist
tmpdir
plan 10

whl=$top_builddir/dist/loader-$version-py3-none-any.whl
make -s -C "$top_builddir" wheel >"$T/wheel.log" 2>&1
ok "make wheel writes dist/loader-$version-py3-none-any.whl" test -f "$whl"

# A sanitizer build's python3 needs the runtimes preloaded, as
# loader-python does it.
eval "$(grep -E '^(LD_PRELOAD|ASAN_OPTIONS)=' "$top_builddir/loader-python")"
export LD_PRELOAD ASAN_OPTIONS
unset PYTHONPATH PYTHONHOME
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1

venv=$T/venv
(cd "$T" && "$py" -m venv --system-site-packages "$venv") >"$T/venv.log" 2>&1
ok "python3 -m venv --system-site-packages makes a venv" test -x "$venv/bin/python"
(cd "$T" && "$venv/bin/python" -m pip install --no-index "$whl") \
	>"$T/pip.log" 2>&1
r=$?
ok "pip install --no-index of the wheel succeeds in the venv" test $r -eq 0
[ $r -eq 0 ] || sed 's/^/# /' "$T/pip.log" | tail -5

vpy() {
	(cd "$T" && env -u PYTHONPATH "$@") 2>&1
}
lib=$top_builddir/.libs/libloader.so.1
got=$(vpy LOADER_LIBRARY="$lib" "$venv/bin/python" -c '
import importlib.metadata as m, loader
print(m.version("loader"), loader.__file__)')
is "$got" "$version $(cd "$venv" && "$venv/bin/python" -c \
	'import sysconfig; print(sysconfig.get_paths()["purelib"])')/loader/__init__.py" \
	"the venv imports the wheel's package (not the tree's), version $version"

src=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
"$LOADERCTL" pack --split test --shard-size 2M "$src" "$T/fm" >"$T/pack.log" 2>&1
ok "loaderctl packs the Fashion-MNIST test split" test -d "$T/fm/test"
start_daemon "$T/sock"
ok "a daemon of this build listens" test -S "$T/sock"

got=$(vpy LOADER_LIBRARY="$lib" "$venv/bin/python" -c '
import sys, numpy as np, loader
n = b = 0
labels = set()
with loader.Stream(sys.argv[1], socket=sys.argv[2], batch_size=500,
                   outputs="image:unit,label", order="random", seed=1,
                   epochs=1) as s:
    for x in s:
        img = np.asarray(x["image"])
        lab = np.asarray(x["label"])
        assert img.dtype == np.float32 and img[0].size == 784, img.shape
        assert 0.0 <= float(img.min()) and float(img.max()) <= 1.0
        n += img.shape[0]
        b += 1
        labels.update(int(v) for v in lab.reshape(-1))
print(b, n, sorted(labels) == list(range(10)))
' "$T/fm/test" "$T/sock")
is "$got" "20 10000 True" \
	"from the venv, an epoch of 10000 samples in 20 batches of the daemon"

got=$(vpy LOADER_LIBRARY="$T/nowhere/libloader.so.1" "$venv/bin/python" \
	-c 'import loader' | tail -1)
like "$got" "^ImportError: .*libloader\.so\.1.*$T/nowhere/libloader\.so\.1" \
	"LOADER_LIBRARY pointing nowhere: ImportError naming the file"
like "$got" "Debian package libloader1.*LOADER_LIBRARY" \
	"... the Debian package (libloader1) and LOADER_LIBRARY"

# Without LOADER_LIBRARY: the system's libloader.so.1, when there is one
# (where the package looks: the dynamic loader's path, find_library).
if vpy -u LOADER_LIBRARY "$venv/bin/python" -c '
import ctypes, ctypes.util, sys
try:
    ctypes.CDLL("libloader.so.1")
except OSError:
    sys.exit(0 if ctypes.util.find_library("loader") else 1)' >/dev/null; then
	tap_n=$((tap_n + 1))
	echo "ok $tap_n # SKIP a system libloader.so.1 is installed"
else
	got=$(vpy -u LOADER_LIBRARY "$venv/bin/python" -c 'import loader' |
		tail -1)
	like "$got" "^ImportError: loader: cannot load libloader\.so\.1 .*apt install libloader1.*LOADER_LIBRARY" \
		"no system library and no LOADER_LIBRARY: ImportError says libloader1 and LOADER_LIBRARY"
fi
