"""pytest configuration shared by all test modules (helpers live in _shared.py)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _shared  # noqa: E402


def pytest_report_header(config):
    lines = []
    if _shared.SHARED is None:
        lines.append("ctok shared ground truth: NOT FOUND (" + _shared.SKIP_MESSAGE + ")")
    else:
        lines.append(f"ctok shared ground truth: {_shared.SHARED}")
    lines.append("ctok corpus budget: " + ("whole files (CTOK_FULL=1)" if _shared.FULL else
                 f"first {_shared.CORPUS_DEFAULT_BYTES} bytes, whole: {', '.join(_shared.CORPUS_WHOLE_IN_CI)}"))
    try:
        import ctok

        lines.append(f"ctok imported from {os.path.dirname(ctok.__file__)}")
    except Exception as e:  # noqa: BLE001
        lines.append(f"ctok NOT importable: {e.__class__.__name__}: {e}")
    return lines


@pytest.fixture(scope="session")
def shared():
    return _shared.shared_dir()


@pytest.fixture(scope="session")
def o200k_ref():
    """Reference tiktoken encoding for o200k_base, built from the shared file."""
    pytest.importorskip("tiktoken")
    return _shared.reference_encoding("o200k_base")


@pytest.fixture(scope="session")
def o200k(o200k_ref):
    """ctok's embedded o200k_base."""
    import ctok

    return ctok.get_encoding("o200k_base")


@pytest.fixture(scope="session")
def cl100k_ref():
    pytest.importorskip("tiktoken")
    return _shared.reference_encoding("cl100k_base")


@pytest.fixture(scope="session")
def cl100k(cl100k_ref):
    import ctok

    return ctok.get_encoding("cl100k_base")
