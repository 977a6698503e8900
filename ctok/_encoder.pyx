"""The native encoder: pretokenizer + BPE over whole segments, with the GIL released.

Contract: `CoreEncoder.encode_ordinary(data)` splits the UTF-8 bytes `data` with its pretokenizer kind
(`ctok._pretok`, PRETOK_WHOLE = one piece) and appends every piece's BPE ids; it knows nothing of special
tokens, normalizers or added tokens, which the Python layer handles before calling it.  Tables are
read-only after construction, so one CoreEncoder serves any number of threads at once.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_FromUnsignedLong
from cpython.ref cimport Py_INCREF
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t, int64_t
from libc.stdlib cimport malloc, calloc, realloc, free
from libc.string cimport memcpy

from ctok._vocab cimport Vocab, NO_ID
from ctok._bpe cimport (IdVec, BpeScratch, BpeOptions, BPE_OK, idvec_free, idvec_reserve, scratch_init,
                        scratch_free, bpe_encode_piece)
from ctok._pretok cimport next_piece_end, PRETOK_WHOLE

from ctok.errors import UnknownTokenError


cdef extern from "Python.h":
    ctypedef struct PyObject
    PyObject* PyLong_FromUnsignedLong_ptr "PyLong_FromUnsignedLong"(unsigned long v) except NULL
    void Py_INCREF_ptr "Py_INCREF"(PyObject* o)
    void Py_DECREF_ptr "Py_DECREF"(PyObject* o)
    void PyList_SET_ITEM_ptr "PyList_SET_ITEM"(object lst, Py_ssize_t i, PyObject* o)


cdef class CoreEncoder:
    """Encoder tables and options for one vocabulary (see module docstring).

    CoreEncoder(token_bytes, merges=None, *, special_bytes=None, pretok_kind=0, char_level=False,
                byte_fallback=False, unk_id=-1, fuse_unk=False, ignore_merges=None)
    ignore_merges: a piece that is itself a token is emitted whole; default True for tiktoken
    semantics (merges=None), False for merge lists (HF), where the file's `ignore_merges` decides.
    """
    cdef readonly Vocab vocab
    cdef BpeOptions opt
    cdef readonly int pretok_kind
    # One Python int per token id, made on first use and kept: building the result list then costs an
    # INCREF per token instead of an allocation.  Filled and read only with the GIL held.
    cdef PyObject** int_cache
    cdef Py_ssize_t int_cache_size

    def __cinit__(self):
        self.int_cache = NULL
        self.int_cache_size = 0

    def __dealloc__(self):
        cdef Py_ssize_t i
        if self.int_cache != NULL:
            for i in range(self.int_cache_size):
                if self.int_cache[i] != NULL:
                    Py_DECREF_ptr(self.int_cache[i])
            free(self.int_cache)

    cdef list ids_to_list(self, IdVec* v):
        cdef list out = PyList_New(v.size)
        cdef Py_ssize_t i
        cdef uint32_t tid
        cdef PyObject* o
        if self.int_cache == NULL:
            self.int_cache = <PyObject**>calloc(self.vocab.t.n_ids, sizeof(PyObject*))
            if self.int_cache == NULL:
                raise MemoryError()
            self.int_cache_size = self.vocab.t.n_ids
        for i in range(v.size):
            tid = v.data[i]                       # every id the encoder emits is < n_ids
            o = self.int_cache[tid]
            if o == NULL:
                o = PyLong_FromUnsignedLong_ptr(tid)
                self.int_cache[tid] = o           # the cache keeps this reference
            Py_INCREF_ptr(o)                      # and the list gets its own (SET_ITEM steals it)
            PyList_SET_ITEM_ptr(out, i, o)
        return out

    def __init__(self, list token_bytes=None, merges=None, *, dict special_bytes=None, int pretok_kind=0,
                 bint char_level=False, bint byte_fallback=False, Py_ssize_t unk_id=-1,
                 bint fuse_unk=False, ignore_merges=None, Vocab vocab=None):
        # vocab: prebuilt tables (e.g. from the compiled cache) instead of token_bytes/merges/special_bytes.
        if vocab is None:
            self.vocab = Vocab(token_bytes, merges, special_bytes)
        else:
            self.vocab = vocab
            merges = None if vocab.rank_merges else ()
        self.pretok_kind = pretok_kind
        self.opt.char_level = char_level
        self.opt.byte_fallback = byte_fallback
        self.opt.unk_id = NO_ID if unk_id < 0 else <uint32_t>unk_id
        self.opt.fuse_unk = fuse_unk
        if ignore_merges is None:
            ignore_merges = merges is None
        self.opt.whole_piece_first = bool(ignore_merges)
        if pretok_kind != PRETOK_WHOLE:
            # Fail at construction, not at the first encode, if the kind is unknown to the scanner.
            self._check_kind()

    cdef _check_kind(self):
        from ctok import _pretok
        if not hasattr(_pretok, "split"):
            return
        _pretok.split(self.pretok_kind, b"a")

    cdef int encode_into(self, const uint8_t* s, Py_ssize_t n, IdVec* out, BpeScratch* sc) noexcept nogil:
        cdef Py_ssize_t pos = 0, end
        cdef int rc
        cdef int kind = self.pretok_kind
        while pos < n:
            end = n if kind == PRETOK_WHOLE else next_piece_end(kind, s, n, pos)
            rc = bpe_encode_piece(&self.vocab.t, &self.opt, s + pos, end - pos, out, sc)
            if rc != BPE_OK:
                return rc
            pos = end
        return BPE_OK

    cdef int _encode_bytes(self, bytes data, IdVec* out, bint split) except -1:
        cdef const uint8_t* s = <const uint8_t*>PyBytes_AS_STRING(data)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
        cdef BpeScratch sc
        cdef int rc
        scratch_init(&sc)
        with nogil:
            if split:
                rc = self.encode_into(s, n, out, &sc)
            else:
                rc = bpe_encode_piece(&self.vocab.t, &self.opt, s, n, out, &sc)
            scratch_free(&sc)
        if rc != BPE_OK:
            raise MemoryError()
        return 0

    def encode_ordinary(self, bytes data):
        """Token ids of `data` (UTF-8 bytes) split with this encoder's pretokenizer."""
        cdef IdVec out
        out.data = NULL; out.size = 0; out.cap = 0
        try:
            self._encode_bytes(data, &out, True)
            return self.ids_to_list(&out)
        finally:
            idvec_free(&out)

    def count(self, bytes data):
        cdef IdVec out
        out.data = NULL; out.size = 0; out.cap = 0
        try:
            self._encode_bytes(data, &out, True)
            return out.size
        finally:
            idvec_free(&out)

    cdef int _encode_many(self, list datas, IdVec* out, int64_t* ends) except -1:
        # Encode every bytes object of `datas` into `out`, ends[i] = out.size after text i, with the GIL
        # released for the whole loop (the list and its items stay alive: the caller holds `datas`).
        cdef Py_ssize_t i, n = len(datas)
        cdef const uint8_t** ptrs = <const uint8_t**>malloc((n + 1) * sizeof(uint8_t*))
        cdef Py_ssize_t* lens = <Py_ssize_t*>malloc((n + 1) * sizeof(Py_ssize_t))
        cdef BpeScratch sc
        cdef int rc = BPE_OK
        cdef object d
        if ptrs == NULL or lens == NULL:
            free(ptrs); free(lens)
            raise MemoryError()
        try:
            for i in range(n):
                d = datas[i]
                if not isinstance(d, bytes):
                    raise TypeError(f"item {i}: expected bytes")
                ptrs[i] = <const uint8_t*>PyBytes_AS_STRING(d)
                lens[i] = PyBytes_GET_SIZE(d)
            scratch_init(&sc)
            with nogil:
                for i in range(n):
                    rc = self.encode_into(ptrs[i], lens[i], out, &sc)
                    if rc != BPE_OK:
                        break
                    ends[i] = out.size
                scratch_free(&sc)
            if rc != BPE_OK:
                raise MemoryError()
        finally:
            free(ptrs)
            free(lens)
        return 0

    def encode_many(self, list datas):
        """[encode_ordinary(d) for d in datas], with one GIL release for the whole list."""
        cdef IdVec out
        cdef Py_ssize_t n = len(datas), i, start = 0
        cdef int64_t* ends = <int64_t*>malloc((n + 1) * sizeof(int64_t))
        cdef IdVec view
        cdef list result = []
        if ends == NULL:
            raise MemoryError()
        out.data = NULL; out.size = 0; out.cap = 0
        try:
            self._encode_many(datas, &out, ends)
            for i in range(n):
                view.data = out.data + start
                view.size = ends[i] - start
                result.append(self.ids_to_list(&view))
                start = ends[i]
            return result
        finally:
            free(ends)
            idvec_free(&out)

    def encode_many_flat(self, list datas):
        """(bytearray of native uint32 ids, bytearray of native int64 ends) for all of `datas`: ends[i]
        is where text i's ids stop.  numpy.frombuffer views both without copying."""
        cdef IdVec out
        cdef Py_ssize_t n = len(datas)
        cdef bytearray ends = bytearray(n * sizeof(int64_t))
        cdef bytearray ids
        out.data = NULL; out.size = 0; out.cap = 0
        try:
            self._encode_many(datas, &out, <int64_t*><char*>ends)
            ids = bytearray(out.size * sizeof(uint32_t))
            if out.size:
                memcpy(<char*>ids, out.data, out.size * sizeof(uint32_t))
            return ids, ends
        finally:
            idvec_free(&out)

    def encode_pieces(self, pieces):
        """Token ids of each piece in `pieces` (bytes), BPE-merged as given, concatenated."""
        cdef IdVec out
        cdef bytes p
        out.data = NULL; out.size = 0; out.cap = 0
        try:
            for p in pieces:
                self._encode_bytes(p, &out, False)
            return self.ids_to_list(&out)
        finally:
            idvec_free(&out)

    def encode_piece(self, bytes piece):
        return self.encode_pieces((piece,))

    def encode_to_buffer(self, bytes data):
        """Like encode_ordinary, as a bytearray of native uint32 ids (numpy.frombuffer views it without
        a copy), so no per-token Python objects are made."""
        cdef IdVec out
        cdef bytearray buf
        out.data = NULL; out.size = 0; out.cap = 0
        try:
            self._encode_bytes(data, &out, True)
            buf = bytearray(out.size * sizeof(uint32_t))
            if out.size:
                memcpy(<char*>buf, out.data, out.size * sizeof(uint32_t))
            return buf
        finally:
            idvec_free(&out)

    def token_id(self, bytes b):
        return self.vocab.token_id(b)

    def decode_bytes(self, tokens):
        """Concatenated bytes of `tokens` (ordinary and special ids); unknown ids raise UnknownTokenError."""
        cdef Vocab v = self.vocab
        cdef Py_ssize_t total = 0, pos = 0, tid, ln
        cdef list ids
        if isinstance(tokens, list):
            ids = tokens
        elif hasattr(tokens, "tolist"):               # numpy arrays: plain ints, not numpy scalars
            ids = tokens.tolist()
        else:
            ids = list(tokens)
        for t in ids:
            tid = t
            if tid < 0 or tid >= v.t.n_ids or v.t.kind[tid] == 0:
                raise UnknownTokenError(t)
            total += v.t.offsets[tid + 1] - v.t.offsets[tid]
        cdef bytes result = PyBytes_FromStringAndSize(NULL, total)
        cdef char* dst = PyBytes_AS_STRING(result)
        for t in ids:
            tid = t
            ln = v.t.offsets[tid + 1] - v.t.offsets[tid]
            memcpy(dst + pos, v.t.blob + v.t.offsets[tid], ln)     # tid checked in the first pass
            pos += ln
        return result

    def token_bytes(self, Py_ssize_t tid):
        return self.vocab.token_bytes(tid)
