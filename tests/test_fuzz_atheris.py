"""A short run of each atheris target in fuzz/ (issue 8): bounded runs with a fixed seed, in a subprocess so
that a crash fails the test instead of the test run.  Skipped when atheris is not installed (it is in the
``test`` extra on Linux x86-64, Python 3.11-3.13, where PyPI has wheels).  ``CTOK_ATHERIS_RUNS`` sets the
number of runs per target (default 2000); docs/pages/reliability.md shows long runs."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from _shared import REPO_ROOT, SHARED

pytest.importorskip("atheris")

RUNS = int(os.environ.get("CTOK_ATHERIS_RUNS", "2000"))
TARGETS = ["fuzz_encode", "fuzz_load", "fuzz_vocab_cache", "fuzz_normalize"]


@pytest.mark.parametrize("target", TARGETS)
def test_atheris_target_short_run(target, tmp_path):
    if target == "fuzz_encode" and SHARED is None:
        pytest.skip("fuzz_encode compares with tiktoken built from the shared files")
    import ctok

    # the ctok under test (an out-of-tree sanitizer build first on PYTHONPATH, else the repository)
    env = dict(os.environ, CTOK_CACHE_DIR="off",
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(ctok.__file__))))
    cmd = [sys.executable, str(REPO_ROOT / "fuzz" / f"{target}.py"), f"-runs={RUNS}", "-seed=1", "-max_len=1024",
           "-len_control=0", "-timeout=120", "-rss_limit_mb=4096", f"-artifact_prefix={tmp_path}/"]
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    tail = "\n".join((r.stdout + r.stderr).splitlines()[-40:])
    crashes = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "timeout-", "oom-")))
    assert r.returncode == 0 and not crashes, f"{target}: rc={r.returncode}, artifacts {crashes}\n{tail}"
    assert f"Done {RUNS} runs" in r.stderr, tail
