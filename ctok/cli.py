"""Command line: ``ctok encode|decode|count [FILE...]``.

Examples::

    ctok encode --encoding o200k_base <<< "hello world"        # ids as text, one line per input
    ctok encode --format json notes.txt                         # one JSON array per input
    ctok encode --format u32 big.txt > big.u32                  # raw little-endian uint32
    ctok decode --format u32 big.u32 > big.txt
    ctok count --tokenizer path/to/tokenizer.json *.md          # counts per file and a total

Inputs are files (``-`` or none means stdin), read as UTF-8 exactly as they are (no newline translation).
With a terminal on stderr, inputs over 1 MB show a progress bar there.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

PROGRESS_MIN_BYTES = 1 << 20  # inputs at least this big get a progress bar (when stderr is a terminal)
CHUNK_CHARS = 1 << 18  # the progress bar advances in pieces of about this many characters
_CHECK_WINDOW = 4096  # characters each side of a chunk boundary that are re-encoded to check the boundary
_BOUNDARY = re.compile(r"\n(?=[A-Za-z])")


class CliError(Exception):
    pass


# --------------------------------------------------------------------------------------------------------------
# argument parsing


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    src = common.add_mutually_exclusive_group()
    src.add_argument("--encoding", "-e", metavar="NAME", default=None,
                     help="an embedded encoding (default: o200k_base); see `ctok list`")
    src.add_argument("--tokenizer", "-t", metavar="PATH", default=None,
                     help="a tokenizer file or folder: tokenizer.json, a tiktoken rank file, a Tekken JSON")
    common.add_argument("--format", "-f", choices=("text", "json", "u32"), default="text",
                        help="token ids as text (space separated, one line per input), JSON (one array per "
                             "input and line) or raw little-endian uint32 (default: text)")
    common.add_argument("files", nargs="*", metavar="FILE", help="input files; none or '-' reads stdin")

    specials = argparse.ArgumentParser(add_help=False)
    specials.add_argument("--allowed-special", metavar="all|NAMES", default="",
                          help="special tokens whose text becomes their id: 'all' or comma-separated names "
                               "(default: none)")
    specials.add_argument("--disallowed-special", metavar="all|none|NAMES", default="all",
                          help="special tokens whose text is an error: 'all' (default: every one not allowed), "
                               "'none' (encode it as plain text) or comma-separated names")
    specials.add_argument("--no-progress", action="store_true", help="never show a progress bar")

    p = argparse.ArgumentParser(prog="ctok", description="Exact BPE tokenization (tiktoken and HF tokenizer.json "
                                "files) from the command line.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    sub.add_parser("encode", parents=[common, specials], help="text -> token ids",
                   description="Encode each input; print its token ids.")
    sub.add_parser("decode", parents=[common], help="token ids -> text",
                   description="Decode token ids (read in --format) and write the text to stdout.")
    sub.add_parser("count", parents=[common, specials], help="count tokens",
                   description="Print the number of tokens of each input (and a total for several).")
    sub.add_parser("list", help="list the embedded encodings")
    return p


def _special_args(args):
    def names(value):
        return {n for n in (s.strip() for s in value.split(",")) if n}

    allowed = "all" if args.allowed_special.strip() == "all" else frozenset(names(args.allowed_special))
    d = args.disallowed_special.strip()
    if d == "all":
        disallowed = "all"
    elif d in ("none", ""):
        disallowed = ()
    else:
        disallowed = frozenset(names(d))
    return allowed, disallowed


def _load(args):
    import ctok

    if args.tokenizer:
        return ctok.load(args.tokenizer)
    return ctok.get_encoding(args.encoding or "o200k_base")


# --------------------------------------------------------------------------------------------------------------
# input / output


def _inputs(files):
    """(label, bytes) for each input."""
    if not files:
        files = ["-"]
    for f in files:
        if f == "-":
            yield "<stdin>", sys.stdin.buffer.read()
        else:
            try:
                with open(f, "rb") as fh:
                    yield f, fh.read()
            except OSError as e:
                raise CliError(f"{f}: {e.strerror or e}") from None


def _text(label, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CliError(f"{label}: not valid UTF-8 (byte {e.start})") from None


def _ids_to_bytes(ids, fmt) -> bytes:
    if fmt == "u32":
        import numpy as np

        return np.asarray(ids, dtype="<u4").tobytes()
    if fmt == "json":
        return (json.dumps(list(ids), separators=(",", ":")) + "\n").encode("ascii")
    return (" ".join(map(str, ids)) + "\n").encode("ascii")


def _parse_ids(label, data: bytes, fmt):
    """A list of id lists (one per array or line) read from ``data`` in ``fmt``."""
    if fmt == "u32":
        if len(data) % 4:
            raise CliError(f"{label}: {len(data)} bytes is not a whole number of uint32 ids")
        import numpy as np

        return [np.frombuffer(data, dtype="<u4").tolist()]
    text = _text(label, data)
    if fmt == "json":
        out = []
        dec = json.JSONDecoder()
        pos = 0
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos >= len(text):
                break
            try:
                value, pos = dec.raw_decode(text, pos)
            except json.JSONDecodeError as e:
                raise CliError(f"{label}: not JSON ({e.msg} at char {e.pos})") from None
            if isinstance(value, list) and value and all(isinstance(v, list) for v in value):
                out.extend(value)
            elif isinstance(value, list):
                out.append(value)
            else:
                raise CliError(f"{label}: expected a JSON array of token ids")
        for ids in out:
            if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
                raise CliError(f"{label}: token ids must be integers")
        return out
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        fields = [f for f in re.split(r"[\s,\[\]]+", line) if f]
        try:
            ids = [int(f) for f in fields]
        except ValueError:
            bad = next(f for f in fields if not re.fullmatch(r"[+-]?\d+", f))
            raise CliError(f"{label}: line {n}: {bad!r} is not a token id") from None
        if ids:
            out.append(ids)
    return out


# --------------------------------------------------------------------------------------------------------------
# progress


class _Progress:
    """A one-line progress bar on stderr; does nothing unless enabled."""

    def __init__(self, label, total, enabled):
        self.label, self.total, self.enabled = label, max(1, total), enabled
        self.t0 = time.monotonic()
        self.last = 0.0

    def update(self, done, force=False):
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self.last < 0.1:
            return
        self.last = now
        frac = min(1.0, done / self.total)
        width = 30
        filled = int(frac * width)
        bar = "#" * filled + "-" * (width - filled)
        rate = done / max(now - self.t0, 1e-9) / 1e6
        sys.stderr.write(f"\r{self.label[-30:]} [{bar}] {frac * 100:5.1f}% {done / 1e6:.1f}/{self.total / 1e6:.1f} "
                         f"MB {rate:.1f} MB/s")
        sys.stderr.flush()

    def close(self):
        if self.enabled:
            self.update(self.total, force=True)
            sys.stderr.write("\n")
            sys.stderr.flush()


def _progress_wanted(args, nbytes):
    if getattr(args, "no_progress", False):
        return False
    if os.environ.get("CTOK_PROGRESS", "") not in ("", "0"):  # force (for tests and pipes)
        return nbytes >= int(os.environ.get("CTOK_PROGRESS_MIN_BYTES", PROGRESS_MIN_BYTES))
    return nbytes >= PROGRESS_MIN_BYTES and sys.stderr.isatty()


def _chunks(text, encode):
    """Split ``text`` for the progress bar, only where encoding the parts gives the same ids as the whole.

    A boundary is a line start that begins with an ASCII letter; every split pattern ctok knows ends a piece
    there, and the boundary is also checked: the text around it, encoded whole, must equal its two sides
    encoded apart. Where no boundary passes, the rest is one chunk.
    """
    start = 0
    n = len(text)
    while n - start > CHUNK_CHARS * 3 // 2:
        cut = None
        pos = start + CHUNK_CHARS
        for _ in range(8):  # try a few candidate boundaries
            m = _BOUNDARY.search(text, pos, min(n, pos + CHUNK_CHARS))
            if m is None:
                break
            b = m.end()
            lo, hi = max(start, b - _CHECK_WINDOW), min(n, b + _CHECK_WINDOW)
            if encode(text[lo:hi]) == encode(text[lo:b]) + encode(text[b:hi]):
                cut = b
                break
            pos = b + 1
        if cut is None:
            break
        yield text[start:cut]
        start = cut
    yield text[start:]


# --------------------------------------------------------------------------------------------------------------
# commands


def _encode_one(enc, args, label, data):
    allowed, disallowed = _special_args(args)

    def encode(t):
        return enc.encode(t, allowed_special=allowed, disallowed_special=disallowed)

    text = _text(label, data)
    if not _progress_wanted(args, len(data)):
        return encode(text)
    bar = _Progress(label, len(data), True)
    ids, done = [], 0
    try:
        for chunk in _chunks(text, encode):
            ids += encode(chunk)
            done += len(chunk.encode("utf-8"))
            bar.update(done)
    finally:
        bar.close()
    return ids


def cmd_encode(enc, args, out):
    for label, data in _inputs(args.files):
        out.write(_ids_to_bytes(_encode_one(enc, args, label, data), args.format))
    return 0


def cmd_count(enc, args, out):
    counts = []
    for label, data in _inputs(args.files):
        counts.append((label, len(_encode_one(enc, args, label, data))))
    if len(counts) == 1:
        out.write(f"{counts[0][1]}\n".encode())
    else:
        for label, c in counts:
            out.write(f"{c}\t{label}\n".encode())
        out.write(f"{sum(c for _, c in counts)}\ttotal\n".encode())
    return 0


def cmd_decode(enc, args, out):
    for label, data in _inputs(args.files):
        for ids in _parse_ids(label, data, args.format):
            out.write(enc.decode(ids).encode("utf-8", "surrogatepass"))
    return 0


def cmd_list(out):
    import ctok

    for name in ctok.list_encodings():
        out.write(f"{name}\n".encode())
    return 0


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    out = sys.stdout.buffer
    try:
        if args.command == "list":
            return cmd_list(out)
        enc = _load(args)
        cmd = {"encode": cmd_encode, "decode": cmd_decode, "count": cmd_count}[args.command]
        rc = cmd(enc, args, out)
        out.flush()
        return rc
    except BrokenPipeError:
        # the reader went away (e.g. `| head`): stop quietly, and keep Python's exit-time flush quiet too
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        return 130
    except (CliError, ValueError, KeyError, OSError, NotImplementedError, TypeError) as e:
        msg = str(e) if not isinstance(e, KeyError) else f"unknown name {e}"
        sys.stderr.write(f"ctok: error: {msg.strip()}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
