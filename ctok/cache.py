"""The compiled vocabulary cache: parse a rank file once, then load its native tables in milliseconds.

A cache file holds a JSON header (format version, the source file's path, size, mtime, ctime and inode,
the load arguments, the Python-level facts of the vocabulary) and the native tables (`Vocab.to_bytes`),
with a 64-bit checksum of header and tables (`_vocab.checksum64`).  It is used only if all of these match; otherwise it is rebuilt (a
source rewritten in place with its mtime put back still changes its ctime).  `Vocab.from_bytes` also
checks every index it will follow, so even a file that passes the checksum cannot cause a bad read.

Where: $CTOK_CACHE_DIR, else $XDG_CACHE_HOME/ctok, else ~/.cache/ctok.  CTOK_CACHE_DIR=off disables it.
An unwritable location only costs speed.  The folder stays bounded: each save drops the files whose source
is gone (rank files in temporary folders come and go) and then the least recently used ones beyond
$CTOK_CACHE_MAX_BYTES (default 256 MiB).
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
from typing import Optional, Tuple

MAGIC = b"CTOKVOC\x01"
FORMAT_VERSION = 3          # 2: the CRC covers the header too; the stamp has ctime and inode; 3: checksum64, not CRC-32
DEFAULT_MAX_BYTES = 256 << 20
META_KEYS = frozenset(["name", "source", "special_tokens", "pattern", "explicit_n_vocab", "extra"])


def checksum(data) -> int:
    """The integrity check of a cache file's bytes after its first 24 (header and tables)."""
    from ._vocab import checksum64
    return checksum64(data)


def cache_dir() -> Optional[str]:
    d = os.environ.get("CTOK_CACHE_DIR")
    if d is not None:
        return None if d.strip().lower() in ("", "0", "off", "none") else d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ctok")


def _stamp(path: str) -> dict:
    st = os.stat(path)
    return {"source": os.path.realpath(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "ctime_ns": st.st_ctime_ns, "inode": st.st_ino, "device": st.st_dev}


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
        hlen, check = struct.unpack_from("<QQ", data, 8)
        start = 24 + hlen
        if start % 8 or start > len(data):
            return None
        if checksum(memoryview(data)[24:]) != check:
            return None
        header = json.loads(data[24:start].decode("utf-8"))
        if header.get("format") != FORMAT_VERSION or header.get("args") != json.loads(json.dumps(args)):
            return None
        if header.get("stamp") != _stamp(path):
            return None
        meta = header.get("meta")
        if not isinstance(meta, dict) or set(meta) != META_KEYS:
            return None
        vocab = Vocab.from_bytes(data, start)
        try:
            os.utime(cp)                       # recency for the size bound (atime is often not kept)
        except OSError:
            pass
        return meta, vocab
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None


def source_stamp(path: str) -> Optional[dict]:
    """The source's stamp, to be taken before it is parsed and given to save_compiled."""
    try:
        return _stamp(path)
    except OSError:
        return None


def save_compiled(path: str, args, meta: dict, vocab, stamp: Optional[dict] = None) -> None:
    """stamp: the source's stamp from before it was parsed (source_stamp), so that a source rewritten while it
    was being parsed is not cached under its new stamp; None takes it now."""
    cp = cache_path(path, args)
    if cp is None:
        return
    try:
        if stamp is None:
            stamp = _stamp(path)
        payload = vocab.to_bytes()
        header = json.dumps({"format": FORMAT_VERSION, "args": args, "stamp": stamp, "meta": meta},
                            ensure_ascii=True).encode("utf-8")
        header += b" " * ((8 - (24 + len(header)) % 8) % 8)       # tables start 8-aligned
        import tempfile
        os.makedirs(os.path.dirname(cp), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(cp), suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(MAGIC + struct.pack("<QQ", len(header), checksum(header + payload)) + header)
                f.write(payload)
            os.replace(tmp, cp)                                       # readers see old or new, never half
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        prune(os.path.dirname(cp), keep=cp)
    except OSError:
        pass


def _source_of(path: str) -> Optional[str]:
    # The source path recorded in a cache file's header, or None if the header cannot be read.
    try:
        with open(path, "rb") as f:
            head = f.read(24)
            if head[:8] != MAGIC or len(head) < 24:
                return None
            hlen = struct.unpack_from("<Q", head, 8)[0]
            if hlen > 1 << 20:
                return None
            header = json.loads(f.read(hlen).decode("utf-8"))
        return header["stamp"]["source"]
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None


def prune(folder: str, keep: Optional[str] = None, max_bytes: Optional[int] = None) -> None:
    """Bound the cache folder: drop files whose source is gone or that cannot be read, then the least
    recently used beyond max_bytes (default $CTOK_CACHE_MAX_BYTES or 256 MiB).  `keep` is never dropped."""
    if max_bytes is None:
        try:
            max_bytes = int(os.environ.get("CTOK_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES))
        except ValueError:
            max_bytes = DEFAULT_MAX_BYTES
    entries = []
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if not name.endswith(".ctokv"):
            continue
        p = os.path.join(folder, name)
        try:
            st = os.stat(p)
        except OSError:
            continue
        if p != keep:
            src = _source_of(p)
            if src is None or not os.path.exists(src):
                _unlink(p)
                continue
        entries.append((st.st_mtime_ns, st.st_size, p))
    total = sum(size for _, size, _ in entries)
    for _, size, p in sorted(entries):
        if total <= max_bytes:
            break
        if p != keep:
            _unlink(p)
            total -= size


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
