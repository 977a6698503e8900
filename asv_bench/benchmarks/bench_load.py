"""Load time and memory: get_encoding in a fresh process, ctok.load of the shared files (with and without the
compiled vocabulary cache), the peers' load time, and peak memory after a load."""
import os
import shutil
import tempfile

from .common import (FAMILIES, FAMILY_NAMES, PEERS, REPO_ROOT, build_peer, clear_ctok_cache, ctok, load_ctok,
                     need_shared)

CACHE_MODES = ["compiled-cache", "no-cache"]


class _CacheDir:
    """Point CTOK_CACHE_DIR at a private folder (or "off") for the benchmark, restore it afterwards."""

    def _enter(self, mode):
        self._old = os.environ.get("CTOK_CACHE_DIR")
        self._tmp = None
        if mode == "no-cache":
            os.environ["CTOK_CACHE_DIR"] = "off"
        else:
            self._tmp = tempfile.mkdtemp(prefix="ctok-asv-cache-")
            os.environ["CTOK_CACHE_DIR"] = self._tmp
        return os.environ["CTOK_CACHE_DIR"]

    def _exit(self):
        if self._old is None:
            os.environ.pop("CTOK_CACHE_DIR", None)
        else:
            os.environ["CTOK_CACHE_DIR"] = self._old
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)


class GetEncodingFreshProcess(_CacheDir):
    """`import ctok; ctok.get_encoding(name)` in a new interpreter: what a CLI call or a worker start pays."""
    params = (["o200k_base", "cl100k_base"], CACHE_MODES)
    param_names = ["encoding", "cache"]
    repeat = (3, 10, 20.0)
    timeout = 120

    def setup(self, name, mode):
        self.cache_dir = self._enter(mode)
        if mode == "compiled-cache":                    # prime the cache, as after a first use
            clear_ctok_cache()
            ctok.get_encoding(name)
            clear_ctok_cache()

    def teardown(self, name, mode):
        self._exit()

    def _raw_setup(self):
        return (f"import os, sys, importlib.util\n"
                f"os.environ['CTOK_CACHE_DIR'] = {self.cache_dir!r}\n"
                f"if importlib.util.find_spec('ctok') is None: sys.path.insert(0, {REPO_ROOT!r})\n")

    def timeraw_import_and_get_encoding(self, name, mode):
        return f"import ctok\nctok.get_encoding({name!r})", self._raw_setup()

    def timeraw_import_get_encoding_and_first_encode(self, name, mode):
        # The same and a first short encode: issue 4 asks for no lazy cost on it (since session 12 the int
        # table's pages are mapped when the encoder is made: the call went from about 50 us to 7 us).
        return f"import ctok\nctok.get_encoding({name!r}).encode_ordinary('hello world')", self._raw_setup()


class Load(_CacheDir):
    """ctok.load (get_encoding for the embedded o200k_base) of each family's file, in-process memo cleared."""
    params = (FAMILY_NAMES, CACHE_MODES)
    param_names = ["family", "cache"]
    number = 1
    repeat = (2, 5, 20.0)
    timeout = 300

    def setup(self, family, mode):
        if FAMILIES[family][0] != "embedded":
            need_shared()
        self._enter(mode)
        clear_ctok_cache()
        load_ctok(family)                               # fails here, not in the timing; primes the cache
        clear_ctok_cache()

    def teardown(self, family, mode):
        clear_ctok_cache()
        self._exit()

    def time_load(self, family, mode):
        load_ctok(family)
        clear_ctok_cache()


class LoadPeers:
    """The peers' load time for the same files (tiktoken built from recipe.json, as MANIFEST.md says)."""
    params = (FAMILY_NAMES, PEERS)
    param_names = ["family", "peer"]
    number = 1
    repeat = (2, 5, 20.0)
    timeout = 300

    def setup(self, family, lib):
        build_peer(lib, family)                         # raises NotImplementedError where it does not apply

    def time_load(self, family, lib):
        build_peer(lib, family)


class PeakMemLoad:
    """Peak RSS of a process that imported the suite and loaded one family (asv runs each in its own process)."""
    params = (FAMILY_NAMES, ["ctok"] + PEERS)
    param_names = ["family", "lib"]
    timeout = 300

    def setup(self, family, lib):
        if FAMILIES[family][0] != "embedded" or lib != "ctok":
            need_shared()
        if lib != "ctok":
            build_peer(lib, family)                     # skip early where the peer does not apply

    def peakmem_load(self, family, lib):
        if lib == "ctok":
            clear_ctok_cache()
            load_ctok(family)
        else:
            build_peer(lib, family)
