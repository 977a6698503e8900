"""Build script for ctok's Cython extensions.

Compiler directives are set once here.  CTOK_DEBUG=1 turns bounds checks, wraparound checks and
assertions back on (and builds with -O0 -g), so the whole test suite can run against a checked build.
"""
import os
import sys

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

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

extensions = [
    Extension(
        f"ctok.{name}",
        [f"ctok/{name}.pyx"],
        include_dirs=["ctok", numpy.get_include()],
        extra_compile_args=cflags,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for name in MODULES
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives=directives,
        include_path=["ctok"],
        annotate=os.environ.get("CTOK_ANNOTATE", "") not in ("", "0"),
    ),
)
