"""Build script for ctok's Cython extensions.

Compiler directives are set once here.  CTOK_DEBUG=1 turns bounds checks, wraparound checks and
assertions back on (and builds with -O0 -g), so the whole test suite can run against a checked build.
"""
import os
import subprocess
import sys
from glob import glob

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

DEBUG = os.environ.get("CTOK_DEBUG", "") not in ("", "0")

directives = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": not DEBUG,
    "nonecheck": DEBUG,
    "embedsignature": True,
}

if sys.platform == "win32":
    cflags = ["/O2"]
else:
    cflags = ["-O0", "-g", "-UNDEBUG"] if DEBUG else ["-O3", "-fno-strict-aliasing"]

MODULES = ["_vocab", "_bpe", "_pretok", "_piece_cache", "_encoder", "_prefix", "_stream"]
# CTOK_MODULES=_pretok,_bpe builds a subset (handy while one module is being edited).
if os.environ.get("CTOK_MODULES"):
    MODULES = [m for m in MODULES if m in os.environ["CTOK_MODULES"].split(",")]

# Every module is rebuilt when a header changes: Cython sees the headers a .pxd names (cdef extern from "x.h"),
# not those #included by code in a .pyx (_int_list.h, _head_mask.h...), whose edits otherwise left the built
# modules as they were.
HEADERS = sorted(glob("ctok/*.h") + glob("ctok/include/*.h"))

extensions = [
    Extension(
        f"ctok.{name}",
        [f"ctok/{name}.pyx"],
        depends=HEADERS,
        include_dirs=["ctok", numpy.get_include()],
        extra_compile_args=cflags,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for name in MODULES
]

# GCC stops inlining in a translation unit once it has grown by inline-unit-growth (40%) over its size before
# inlining.  _pretok.c, with its scanners per pattern and their windows, reaches that: the scalar scanners' calls
# to their small helpers (ctok_char, run_of, ws_tail...) were left as calls, and which ones moved with every
# change elsewhere in the unit.  Measured (tools/bench_pretok.py --no-regex, pinned, two rounds alternating):
# 1.00-1.14x on every kind and corpus file with the limit raised (median 1.06x).  GCC only: other compilers have
# their own inliners and may not take the option.
PRETOK_GCC_ARGS = ["--param", "inline-unit-growth=400"]


def _is_gcc(compiler_cmd):
    try:
        out = subprocess.run(list(compiler_cmd[:1]) + ["--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "Free Software Foundation" in out and "clang" not in out.lower()


class BuildExt(build_ext):
    def build_extensions(self):
        cmd = getattr(self.compiler, "compiler_so", None)
        if cmd and not DEBUG and _is_gcc(cmd):
            for ext in self.extensions:
                if ext.name == "ctok._pretok":
                    ext.extra_compile_args = list(ext.extra_compile_args) + PRETOK_GCC_ARGS
        super().build_extensions()


setup(
    cmdclass={"build_ext": BuildExt},
    ext_modules=cythonize(
        extensions,
        compiler_directives=directives,
        include_path=["ctok"],
        annotate=os.environ.get("CTOK_ANNOTATE", "") not in ("", "0"),
    ),
)
