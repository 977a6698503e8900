"""The documentation: it builds with warnings as errors, and its Python examples run.

* ``test_docs_build_strict`` runs ``mkdocs build --strict -f docs/mkdocs.yml`` (skipped when MkDocs or mkdocstrings
  is not installed: ``pip install mkdocs "mkdocstrings[python]"``).
* ``test_readme_python_api`` runs the README's Python API block, with its placeholder paths pointed at shared
  files, and checks the results its comments state (``ids = ...  # [24912, 2375]``).
* ``test_docs_examples`` runs every ```` ```python ```` block of docs/pages/*.md and docs/design.md, the blocks of
  one page in order in one namespace, from a folder that has ``../shared`` beside it (so the examples' paths are
  the ones a checkout has).  A block that is not a complete snippet must use another fence language.
"""
from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _shared import REPO_ROOT, SKIP_MESSAGE, SHARED

DOCS = REPO_ROOT / "docs"
PAGES = DOCS / "pages"
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)
CHECKED_COMMENT = re.compile(r"^(?P<code>\S.*?)\s+#\s+(?P<expected>\[[^\]]*\]|'[^']*')\s*$")


def python_blocks(path: Path):
    return [m.group(1) for m in FENCE.finditer(path.read_text(encoding="utf-8"))]


def with_checks(block: str) -> str:
    """Follow `name = expr  # literal`, `expr  # literal` and `print(expr)  # literal` lines by an assert of the
    literal (the expression is evaluated a second time; the examples are pure)."""
    out = []
    for line in block.splitlines():
        m = CHECKED_COMMENT.match(line)
        if m is None:
            out.append(line)
            continue
        try:
            expected = ast.literal_eval(m.group("expected"))
            tree = ast.parse(m.group("code"))
        except (ValueError, SyntaxError):
            out.append(line)
            continue
        stmt = tree.body[0] if len(tree.body) == 1 else None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            out += [m.group("code"), f"assert {stmt.targets[0].id} == {expected!r}, {stmt.targets[0].id}"]
        elif isinstance(stmt, ast.Expr):
            value = stmt.value
            if (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "print"
                    and len(value.args) == 1 and not value.keywords):
                value = value.args[0]                # print(x)  # literal: check x
            out += [m.group("code"), f"_got = {ast.unparse(value)}", f"assert _got == {expected!r}, _got"]
        else:
            out.append(line)
    return "\n".join(out) + "\n"


@pytest.fixture
def in_checkout_layout(tmp_path, monkeypatch):
    """cwd = a folder with ../shared beside it (a symlink to the shared ground truth)."""
    if SHARED is None:
        pytest.skip(SKIP_MESSAGE)
    (tmp_path / "shared").symlink_to(SHARED, target_is_directory=True)
    work = tmp_path / "repo"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("CTOK_CACHE_DIR", str(tmp_path / "cache"))
    return work


def run_blocks(blocks, label):
    ns = {"__name__": f"docs_example_{label}"}
    for i, block in enumerate(blocks):
        code = with_checks(block)
        try:
            exec(compile(code, f"<{label} python block {i + 1}>", "exec"), ns)
        except Exception as e:  # noqa: BLE001 - report which example failed and how
            pytest.fail(f"{label}, python block {i + 1} failed: {e.__class__.__name__}: {e}\n---\n{code}")


def test_docs_build_strict(tmp_path):
    for mod in ("mkdocs", "mkdocstrings", "mkdocstrings_handlers.python"):
        if importlib.util.find_spec(mod.split(".")[0]) is None or (
                "." in mod and importlib.util.find_spec(mod) is None):
            pytest.skip(f"{mod} is not installed (pip install mkdocs \"mkdocstrings[python]\")")
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(DOCS / "mkdocs.yml"),
                          "-d", str(tmp_path / "site")], cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, f"mkdocs build --strict failed:\n{res.stdout}\n{res.stderr}"
    for page in ("index", "guide", "api", "design", "supported-files", "performance", "benchmarks"):
        assert (tmp_path / "site" / f"{page}.html").is_file(), page
    api = (tmp_path / "site" / "api.html").read_text(encoding="utf-8")
    assert "encode_batch_flat" in api and "stream_decoder" in api      # generated from the docstrings


def test_readme_python_api(in_checkout_layout):
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    blocks = [b for b in python_blocks(REPO_ROOT / "README.md") if 'get_encoding("o200k_base")' in b]
    assert blocks, "README.md has no Python API block using o200k_base"
    assert "```python" in readme
    # A rank file for the README's `ctok.load("ranks.tiktoken", pattern=..., special_tokens={"<|end|>": 1000})`:
    # the first 1000 ranks of p50k_base, so id 1000 is free for the special token.
    with open(SHARED / "vocab" / "p50k_base" / "p50k_base.tiktoken", "rb") as src, \
            open("ranks.tiktoken", "wb") as dst:
        dst.writelines(line for _, line in zip(range(1000), src))
    block = (blocks[0]
             .replace('"path/to/tokenizer.model"', '"../shared/vocab/llama3-tiktoken/tokenizer.model"')
             .replace('"path/to/tokenizer.json"', '"../shared/vocab/llama3-hf/tokenizer.json"'))
    checked = with_checks(block)
    assert "assert ids == [24912, 2375]" in checked and "assert _got == 'hello world'" in checked
    run_blocks([block], "README.md")


DOC_FILES = sorted(PAGES.glob("*.md")) + [DOCS / "design.md"]


@pytest.mark.parametrize("page", [p for p in DOC_FILES if python_blocks(p)], ids=lambda p: p.name)
def test_docs_examples(page, in_checkout_layout):
    run_blocks(python_blocks(page), str(page.relative_to(REPO_ROOT)))


def test_docs_have_examples():
    assert len(python_blocks(PAGES / "guide.md")) >= 8
