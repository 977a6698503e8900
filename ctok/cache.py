"""The compiled vocabulary cache: parse a rank file once, then load its native tables in milliseconds.

A cache file holds a JSON header (format version, the source file's path, size and mtime, the load
arguments, the Python-level facts of the vocabulary) and the native tables (`Vocab.to_bytes`), with a
CRC-32 of the tables.  It is used only if all of these match; otherwise it is rebuilt.  `Vocab.from_bytes`
also checks every index it will follow, so even a file that passes the CRC cannot cause a bad read.

Where: $CTOK_CACHE_DIR, else $XDG_CACHE_HOME/ctok, else ~/.cache/ctok.  CTOK_CACHE_DIR=off disables it.
An unwritable location only costs speed.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import zlib
from typing import Optional, Tuple

MAGIC = b"CTOKVOC\x01"
FORMAT_VERSION = 1


def cache_dir() -> Optional[str]:
    d = os.environ.get("CTOK_CACHE_DIR")
    if d is not None:
        return None if d.strip().lower() in ("", "0", "off", "none") else d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ctok")


def _stamp(path: str) -> dict:
    st = os.stat(path)
    return {"source": os.path.realpath(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def cache_path(path: str, args) -> Optional[str]:
    d = cache_dir()
    if d is None:
        return None
    key = json.dumps([os.path.realpath(path), args, FORMAT_VERSION], sort_keys=True, default=str)
    return os.path.join(d, hashlib.sha256(key.encode()).hexdigest()[:32] + ".ctokv")


def load_compiled(path: str, args) -> Optional[Tuple[dict, object]]:
    """(meta, Vocab) from the cache, or None when there is no valid entry."""
    from ._vocab import Vocab
    cp = cache_path(path, args)
    if cp is None or not os.path.isfile(cp):
        return None
    try:
        with open(cp, "rb") as f:
            data = f.read()
        if data[:8] != MAGIC or len(data) < 24:
            return None
        hlen, crc = struct.unpack_from("<QQ", data, 8)
        start = 24 + hlen
        if start % 8 or start > len(data):
            return None
        header = json.loads(data[24:start].decode("utf-8"))
        if header.get("format") != FORMAT_VERSION or header.get("args") != json.loads(json.dumps(args)):
            return None
        if header.get("stamp") != _stamp(path):
            return None
        if zlib.crc32(memoryview(data)[start:]) != crc:
            return None
        return header["meta"], Vocab.from_bytes(data, start)
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None


def save_compiled(path: str, args, meta: dict, vocab) -> None:
    cp = cache_path(path, args)
    if cp is None:
        return
    try:
        payload = vocab.to_bytes()
        header = json.dumps({"format": FORMAT_VERSION, "args": args, "stamp": _stamp(path), "meta": meta},
                            ensure_ascii=True).encode("utf-8")
        header += b" " * ((8 - (24 + len(header)) % 8) % 8)       # tables start 8-aligned
        import tempfile
        os.makedirs(os.path.dirname(cp), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(cp), suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + struct.pack("<QQ", len(header), zlib.crc32(payload)) + header)
                f.write(payload)
            os.replace(tmp, cp)                                       # readers see old or new, never half
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError:
        pass
