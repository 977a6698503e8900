"""Reference and memory leaks (issue 8): tools/leak_check.py runs every API (encode, specials, batches, flat
batches, decode, stream decoding, three error paths) on o200k_base and a tokenizer.json family, warms up, then
measures Python's live block count and RSS around a second run.  Flat means no leak: one leaked object per call
would show as ~N blocks.  Here N = 200,000 calls per workload; the tool's default is a million."""
import json
import os
import subprocess
import sys

import pytest

from _shared import REPO_ROOT

ctok = pytest.importorskip("ctok")


def test_no_growth_over_many_calls():
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(ctok.__file__))))
    r = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "leak_check.py"), "--n", "200000", "--json",
                        "--max-blocks", "1000", "--max-rss-kb", "8192"],
                       capture_output=True, text=True, timeout=900, env=env)
    assert r.stdout, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(res["results"]) >= 7
    assert not res["failed"], res["failed"]
    assert r.returncode == 0
