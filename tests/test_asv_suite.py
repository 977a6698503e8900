"""The asv suite's modules import, and the pretokenizer benchmark measures what it says (a smoke run on one
kind and file; the suite itself runs under asv, not here)."""
import os
import sys

import pytest

from _shared import shared_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def benchmarks():
    shared_dir()
    sys.path.insert(0, os.path.join(ROOT, "asv_bench"))
    try:
        import benchmarks
        yield benchmarks
    finally:
        sys.path.remove(os.path.join(ROOT, "asv_bench"))


def test_every_module_imports(benchmarks):
    import importlib
    names = [f[:-3] for f in os.listdir(os.path.join(ROOT, "asv_bench", "benchmarks"))
             if f.startswith("bench_") and f.endswith(".py")]
    assert "bench_pretok" in names
    for name in names:
        importlib.import_module(f"benchmarks.{name}")


def test_pretokenize_counts_the_pieces(benchmarks):
    from benchmarks.bench_pretok import KINDS, Pretokenize
    from ctok import _pretok, patterns
    assert set(KINDS) == {n for k, n in patterns.KIND_NAMES.items() if k != patterns.PRETOK_WHOLE}
    b = Pretokenize()
    b.setup("o200k", "en_botchan.txt")
    assert b.kind == patterns.PRETOK_O200K
    assert _pretok.count_pieces(b.kind, b.data) == len(_pretok.piece_ends(b.kind, b.data))
    assert b.track_mbps("o200k", "en_botchan.txt") > 0
