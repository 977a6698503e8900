"""Incremental (streaming) detokenization for tokenizer.json files, in compiled code.

Contract: a decoder's `.step(token_id) -> str` returns exactly what HF tokenizers' `DecodeStream.step`
(tokenizers 0.23.3, `decoders.DecodeStream`) returns for the same ids ("" where it returns None), and
`.flush()` the text still held back, so that the steps plus the flush concatenate to `decode()` of the stream.

Two decoder chains are done here; every other chain uses core._WindowStreamDecoder (the same algorithm over
the Python decode):
- ByteWindowDecoder: the ByteLevel decoder alone (GPT-2, Llama 3, Qwen, DeepSeek), O(1) per token by a
  reduction of DecodeStream's window, proven in its docstring.
- FusedWindowDecoder: Replace* + ByteFallback + Fuse + Strip* (SentencePiece-style files: Llama 2, Mistral),
  DecodeStream's own algorithm with the window decoded into a byte buffer, never into Python strings but the
  text a step emits.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport uint8_t, uint16_t, uint32_t
from ctok._pretok cimport ctok_char
from libc.stdlib cimport realloc, free
from libc.string cimport memcpy, memcmp, memmove

cdef extern from "Python.h":
    Py_ssize_t PyLong_AsSsize_t(object o) except? -1
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)


cdef struct Buf:
    # A growable byte buffer owned by the decoder that declares it.
    char* data
    Py_ssize_t size
    Py_ssize_t cap


cdef int buf_reserve(Buf* b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t cap
    cdef char* grown
    if b.size + extra <= b.cap:
        return 0
    cap = (b.size + extra) * 2 + 64
    grown = <char*>realloc(b.data, cap)
    if grown == NULL:
        raise MemoryError()
    b.data = grown
    b.cap = cap
    return 0


cdef inline int buf_add(Buf* b, const char* p, Py_ssize_t n) except -1:
    if n == 0:
        return 0                            # an empty buffer's data is NULL: memcpy must not see it
    buf_reserve(b, n)
    memcpy(b.data + b.size, p, n)           # room for n bytes reserved above
    b.size += n
    return 0


cdef bint utf8_valid(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    # Strict UTF-8 (Rust's String::from_utf8, Python's "strict"): the pretokenizer's decoder takes an
    # overlong, surrogate, out-of-range or cut-off sequence as a one-byte character, so a non-ASCII byte
    # that decodes to length 1 means invalid.
    cdef Py_ssize_t i = 0, k
    cdef uint16_t f
    while i < n:
        k = ctok_char(s, n, i, &f)          # i < n
        if k == 1 and s[i] >= 0x80:
            return False
        i += k
    return True


cdef inline bint ends_in_fffd(const char* s, Py_ssize_t n) noexcept nogil:
    # U+FFFD is EF BF BD in UTF-8.
    return (n >= 3 and <uint8_t>s[n - 3] == 0xEF and <uint8_t>s[n - 2] == 0xBF
            and <uint8_t>s[n - 1] == 0xBD)


cdef class FusedWindowDecoder:
    """HF's DecodeStream for the chain Replace* + ByteFallback + Fuse + Strip*.

    DecodeStream keeps a window of ids (context, then new ids) and the context's text (`prefix`); at each
    step it decodes the window and emits what grew beyond the prefix, once the text does not end in U+FFFD;
    the window then drops the old context.  This class runs those steps as they are, decoding a window into
    UTF-8 bytes: each id's piece (after the Replace steps) is cached, runs of <0xXX> byte tokens become their
    UTF-8 text if valid and one U+FFFD per byte if not (ByteFallback), pieces are joined (Fuse), and the Strip
    steps act on the joined text.  Comparing and measuring UTF-8 bytes gives what DecodeStream's string
    comparisons give: the texts are valid UTF-8, and `startswith` and `len` agree on them (DecodeStream
    compares byte lengths too).

    `piece_of(id)` is HFPipeline.fused_stream_piece: None for an unknown id (skipped, as HF skips it), an int
    (a byte value, + 256 for a special token) or the piece's UTF-8 (`special_type` when special). Results are
    kept per id in `cache` ([None] * n_vocab, shared by the streams of one Encoding; filled under the GIL).
    `strips` is [(character's UTF-8, start, stop)]."""
    cdef object piece_of
    cdef object special_type
    cdef list cache
    cdef bint skip
    cdef list strips
    cdef uint32_t* ids          # the window: DecodeStream's `ids`
    cdef Py_ssize_t n_ids
    cdef Py_ssize_t cap_ids
    cdef Py_ssize_t prefix_index
    cdef Buf prefix             # DecodeStream's `prefix`, as UTF-8
    cdef Buf text               # a decoded window
    cdef Buf run                # a run of byte tokens being joined

    def __cinit__(self):
        self.ids = NULL
        self.n_ids = 0
        self.cap_ids = 0
        self.prefix_index = 0
        self.prefix.data = NULL; self.prefix.size = 0; self.prefix.cap = 0
        self.text.data = NULL; self.text.size = 0; self.text.cap = 0
        self.run.data = NULL; self.run.size = 0; self.run.cap = 0

    def __dealloc__(self):
        free(self.ids)
        free(self.prefix.data)
        free(self.text.data)
        free(self.run.data)

    def __init__(self, piece_of, special_type, list cache, list strips, bint skip_special_tokens=False):
        self.piece_of = piece_of
        self.special_type = special_type
        self.cache = cache
        self.strips = strips
        self.skip = skip_special_tokens
        for ch, start, stop in strips:
            if not isinstance(ch, bytes) or not 1 <= len(ch) <= 4 or start < 0 or stop < 0:
                raise ValueError(f"FusedWindowDecoder: bad Strip step {(ch, start, stop)!r}")

    cdef object _piece(self, Py_ssize_t tid):
        cdef object v
        if tid < 0:
            return None
        if tid < len(self.cache):
            v = self.cache[tid]
            if v is None:
                v = self.piece_of(tid)
                self.cache[tid] = False if v is None else v     # False: known to be unknown
            elif v is False:
                return None
            return v
        return self.piece_of(tid)

    cdef int _flush_run(self, Buf* out) except -1:
        cdef Py_ssize_t k
        if self.run.size == 0:
            return 0
        if utf8_valid(<const uint8_t*>self.run.data, self.run.size):
            buf_add(out, self.run.data, self.run.size)
        else:
            buf_reserve(out, 3 * self.run.size)
            for k in range(self.run.size):
                buf_add(out, b"\xef\xbf\xbd", 3)
        self.run.size = 0
        return 0

    cdef int _decode(self, Py_ssize_t lo, Py_ssize_t hi, Buf* out) except -1:
        # out = decode(ids[lo:hi]) as UTF-8.
        cdef Py_ssize_t i, a, b, end, cl, count, start, stop
        cdef object v
        cdef const char* ch
        out.size = 0
        self.run.size = 0
        for i in range(lo, hi):
            v = self._piece(self.ids[i])          # lo <= i < hi <= n_ids
            if v is None:
                continue
            if type(v) is int:
                b = <Py_ssize_t>v
                if b >= 256:
                    if self.skip:
                        continue
                    b -= 256
                buf_reserve(&self.run, 1)
                self.run.data[self.run.size] = <char>b       # room for one byte reserved above
                self.run.size += 1
                continue
            if self.skip and type(v) is self.special_type:
                continue
            self._flush_run(out)
            buf_add(out, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v))
        self._flush_run(out)
        a = 0
        end = out.size
        for step in self.strips:
            ch_b, start, stop = step
            ch = PyBytes_AS_STRING(ch_b)
            cl = PyBytes_GET_SIZE(ch_b)
            # Strip on the text [a, end): up to `start` leading and `stop` trailing copies of the character,
            # each side looked for in the whole text (HF's Strip), empty when they overlap.  A match of the
            # character's whole encoding is a whole character: UTF-8 is prefix-free and self-synchronising.
            b = a
            count = 0
            while count < start and b + cl <= end and memcmp(out.data + b, ch, cl) == 0:
                b += cl
                count += 1
            i = end
            count = 0
            while count < stop and i - cl >= a and memcmp(out.data + i - cl, ch, cl) == 0:
                i -= cl
                count += 1
            if i < b:
                i = b
            a = b
            end = i
        if a > 0:
            memmove(out.data, out.data + a, end - a)
        out.size = end - a
        return 0

    cdef int _push(self, Py_ssize_t tid) except -1:
        cdef uint32_t* grown
        cdef Py_ssize_t cap
        if self.n_ids == self.cap_ids:
            cap = self.cap_ids * 2 + 16
            grown = <uint32_t*>realloc(self.ids, cap * sizeof(uint32_t))
            if grown == NULL:
                raise MemoryError()
            self.ids = grown
            self.cap_ids = cap
        # Ids outside uint32 are unknown to every vocabulary: keep them as an id no table holds.
        self.ids[self.n_ids] = <uint32_t>tid if 0 <= tid <= 0xFFFFFFFE else 0xFFFFFFFF
        self.n_ids += 1
        return 0

    def step(self, token):
        cdef Py_ssize_t tid = PyLong_AsSsize_t(token)
        cdef Py_ssize_t new_prefix_index
        cdef object new
        if self.prefix.size == 0 and self.n_ids > 0:
            # The context decoded to nothing complete so far: adopt it once it is complete.
            self._decode(0, self.n_ids, &self.text)
            if not ends_in_fffd(self.text.data, self.text.size):
                self.prefix.size = 0
                buf_add(&self.prefix, self.text.data, self.text.size)
                self.prefix_index = self.n_ids
        self._push(tid)
        self._decode(0, self.n_ids, &self.text)
        if self.text.size > self.prefix.size and not ends_in_fffd(self.text.data, self.text.size):
            if self.prefix.size and memcmp(self.text.data, self.prefix.data, self.prefix.size) != 0:
                raise ValueError("stream decoder: the decoded window no longer starts with its prefix")
            new = PyUnicode_DecodeUTF8(self.text.data + self.prefix.size, self.text.size - self.prefix.size,
                                       "surrogatepass")
            new_prefix_index = self.n_ids - self.prefix_index
            memmove(self.ids, self.ids + self.prefix_index, new_prefix_index * sizeof(uint32_t))
            self.n_ids = new_prefix_index
            self._decode(0, self.n_ids, &self.prefix)
            self.prefix_index = new_prefix_index
            return new
        return ""

    def flush(self):
        """Text still held back (e.g. a final incomplete byte sequence, decoded with U+FFFD).  When the window
        no longer extends the text already given (a byte run that read as a character turned invalid with
        the bytes after it, and ByteFallback then replaces the whole run), the ids not yet given are decoded
        on their own: what was given stays given, and nothing held back is dropped."""
        cdef object new = ""
        self._decode(0, self.n_ids, &self.text)
        if self.prefix.size == 0 or (self.text.size >= self.prefix.size
                                     and memcmp(self.text.data, self.prefix.data, self.prefix.size) == 0):
            new = PyUnicode_DecodeUTF8(self.text.data + self.prefix.size, self.text.size - self.prefix.size,
                                       "surrogatepass")
        else:
            self._decode(self.prefix_index, self.n_ids, &self.text)
            new = PyUnicode_DecodeUTF8(self.text.data, self.text.size, "surrogatepass")
        self.n_ids = 0
        self.prefix.size = 0
        self.prefix_index = 0
        return new


cdef class ByteWindowDecoder:
    """HF's DecodeStream for tokenizer.json files whose decoder is ByteLevel alone, in O(1) per token.

    DecodeStream decodes a window (the previous step's ids as context, then the new ids) and emits what grew
    once the text does not end in U+FFFD.  With ByteLevel alone, decode is "join the bytes, decode UTF-8
    with replacement", and a context that decoded without a trailing U+FFFD ends where the decoder is back in
    its initial state, so the window's text is the context's text followed by the pending bytes' text.  So
    each step emits decode(pending bytes) when that is non-empty and does not end in U+FFFD, else holds them.
    `token_bytes(id)` gives each id's bytes (a `special_type` instance for special tokens, skipped when
    skip_special_tokens); results are cached per id in `cache`."""
    cdef object token_bytes
    cdef object special_type
    cdef bint skip
    cdef list cache
    cdef Buf pending                # bytes of the ids not given yet

    def __cinit__(self):
        self.pending.data = NULL; self.pending.size = 0; self.pending.cap = 0

    def __dealloc__(self):
        free(self.pending.data)

    def __init__(self, token_bytes, special_type, list cache, bint skip_special_tokens=False):
        # cache: [None] * n_vocab, shared by the decoders of one Encoding (filled as ids are seen, under the
        # GIL), so a new stream starts warm.
        self.token_bytes = token_bytes
        self.special_type = special_type
        self.skip = skip_special_tokens
        self.cache = cache

    def step(self, token):
        cdef Py_ssize_t tid = PyLong_AsSsize_t(token)
        cdef object b
        cdef str text
        if 0 <= tid < len(self.cache):
            b = self.cache[tid]
            if b is None:
                b = self.token_bytes(tid)
                self.cache[tid] = b
        else:
            b = self.token_bytes(tid) if tid >= 0 else b""
        if self.skip and type(b) is self.special_type:
            return ""
        buf_add(&self.pending, PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))
        if self.pending.size == 0 or <unsigned char>self.pending.data[self.pending.size - 1] >= 0xC0:
            return ""                              # nothing, or a lead byte last: the text ends in U+FFFD
        text = PyUnicode_DecodeUTF8(self.pending.data, self.pending.size, "replace")
        if len(text) == 0 or text[len(text) - 1] == "\ufffd":
            return ""
        self.pending.size = 0
        return text

    def flush(self):
        """Text still held back, decoded with replacement."""
        cdef str text = (PyUnicode_DecodeUTF8(self.pending.data, self.pending.size, "replace")
                         if self.pending.size else "")
        self.pending.size = 0
        return text
