"""Importing the package: it refuses a libloader of another major
version, or one without loader_version(), and a missing one, each with an
ImportError that names the file and says what to do; the library it does
load is the one of this build.
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture as fx  # noqa: E402

t = fx.Tap()
libs = os.path.join(fx.TOP, "tests", "tools", ".libs")


def import_with(library):
    env = dict(os.environ, LOADER_LIBRARY=library)
    p = subprocess.run([sys.executable, "-c", "import loader"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    return p.returncode, p.stdout.strip().splitlines()[-1:] or [""]


rc, out = import_with(os.path.join(libs, "libverfake.so"))
t.ok(rc != 0 and "ImportError" in out[0] and "version 2.0" in out[0]
     and "needs 1.x" in out[0],
     "a libloader of major version 2 is refused at import, naming both",
     out[0])
rc, out = import_with("/usr/lib/x86_64-linux-gnu/libxxhash.so.0")
t.ok(rc != 0 and "no loader_version()" in out[0],
     "a library without loader_version() is refused", out[0])
rc, out = import_with("/nonexistent/libloader.so.1")
t.ok(rc != 0 and "/nonexistent/libloader.so.1" in out[0] and
     "LOADER_LIBRARY" in out[0],
     "a missing library: ImportError naming it and LOADER_LIBRARY", out[0])

import loader  # noqa: E402
t.eq(os.path.realpath(loader.library_path),
     os.path.realpath(os.path.join(fx.TOP, ".libs", "libloader.so.1")),
     "the build tree's libloader is the one loaded")
t.eq(loader.__version__, "1.7", "loader.__version__ is the ABI it needs")
