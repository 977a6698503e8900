"""The embedding APIs: a C extension (ctok.h through PyCapsules) and a Cython extension (cimport of
ctok._encoder) are built against this ctok and must give Encoding.encode_ordinary's ids, also from
several threads with the GIL released."""
import os
import subprocess
import sys
import textwrap

import pytest

import ctok
from _shared import corpus_names, corpus_text

C_SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "ctok.h"

typedef struct { const ctok_api* api; const void* h; const char* text; size_t len; uint32_t* out; size_t cap;
                 size_t n; int rc; } job_t;

static void* run(void* p) {
    job_t* j = (job_t*)p;
    j->rc = j->api->encode(j->h, (const uint8_t*)j->text, j->len, j->out, j->cap, &j->n);
    return NULL;
}

/* encode(api, handle, text_bytes, n_threads) -> list of id lists, one per thread */
static PyObject* encode(PyObject* self, PyObject* args) {
    PyObject *api_cap, *h_cap; const char* text; Py_ssize_t len; int nt;
    if (!PyArg_ParseTuple(args, "OOy#i", &api_cap, &h_cap, &text, &len, &nt)) return NULL;
    const ctok_api* api = PyCapsule_GetPointer(api_cap, "ctok.api");
    const void* h = PyCapsule_GetPointer(h_cap, "ctok.encoder");
    if (!api || !h) return NULL;
    if (api->version != CTOK_API_VERSION) { PyErr_SetString(PyExc_RuntimeError, "api version"); return NULL; }
    size_t need = 0;
    int rc = api->encode(h, (const uint8_t*)text, (size_t)len, NULL, 0, &need);
    if (rc != CTOK_OK && rc != CTOK_ERR_BUFFER) return PyLong_FromLong(rc);
    job_t jobs[16]; pthread_t th[16];
    if (nt < 1 || nt > 16) nt = 1;
    Py_BEGIN_ALLOW_THREADS
    for (int i = 0; i < nt; i++) {
        jobs[i] = (job_t){api, h, text, (size_t)len, malloc((need + 1) * 4), need, 0, 0};
        pthread_create(&th[i], NULL, run, &jobs[i]);
    }
    for (int i = 0; i < nt; i++) pthread_join(th[i], NULL);
    Py_END_ALLOW_THREADS
    PyObject* result = PyList_New(nt);
    for (int i = 0; i < nt; i++) {
        PyObject* ids = PyList_New(jobs[i].n);
        for (size_t k = 0; k < jobs[i].n; k++) PyList_SET_ITEM(ids, k, PyLong_FromUnsignedLong(jobs[i].out[k]));
        if (jobs[i].rc != CTOK_OK) { Py_DECREF(ids); ids = PyLong_FromLong(jobs[i].rc); }
        PyList_SET_ITEM(result, i, ids);
        free(jobs[i].out);
    }
    return result;
}

/* decode(api, handle, ids) -> bytes, or the status code */
static PyObject* decode(PyObject* self, PyObject* args) {
    PyObject *api_cap, *h_cap, *ids;
    if (!PyArg_ParseTuple(args, "OOO", &api_cap, &h_cap, &ids)) return NULL;
    const ctok_api* api = PyCapsule_GetPointer(api_cap, "ctok.api");
    const void* h = PyCapsule_GetPointer(h_cap, "ctok.encoder");
    Py_ssize_t n = PyList_Size(ids);
    uint32_t* buf = malloc((n + 1) * 4);
    for (Py_ssize_t i = 0; i < n; i++) buf[i] = (uint32_t)PyLong_AsUnsignedLong(PyList_GET_ITEM(ids, i));
    size_t need = 0;
    int rc = api->decode(h, buf, n, NULL, 0, &need);
    if (rc == CTOK_ERR_BUFFER) {
        uint8_t* out = malloc(need + 1);
        rc = api->decode(h, buf, n, out, need, &need);
        PyObject* b = rc == CTOK_OK ? PyBytes_FromStringAndSize((char*)out, need) : PyLong_FromLong(rc);
        free(out); free(buf);
        return b;
    }
    free(buf);
    return rc == CTOK_OK ? PyBytes_FromStringAndSize("", 0) : PyLong_FromLong(rc);
}

static PyMethodDef methods[] = {{"encode", encode, METH_VARARGS, ""}, {"decode", decode, METH_VARARGS, ""},
                                {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "ctok_c_client", NULL, -1, methods};
PyMODINIT_FUNC PyInit_ctok_c_client(void) { return PyModule_Create(&mod); }
"""

CYTHON_SOURCE = """
# cython: language_level=3
from libc.stdint cimport uint32_t
from libc.stdlib cimport malloc, free
from ctok._encoder cimport CoreEncoder, capi_encode, CTOK_OK, CTOK_ERR_BUFFER

def encode(CoreEncoder core, bytes text):
    cdef size_t need = 0, n = 0
    cdef const unsigned char* s = text
    cdef size_t length = len(text)
    cdef uint32_t* out
    cdef int rc
    with nogil:
        rc = capi_encode(&core.state, s, length, NULL, 0, &need)
    if rc != CTOK_OK and rc != CTOK_ERR_BUFFER:
        return rc
    out = <uint32_t*>malloc((need + 1) * sizeof(uint32_t))
    with nogil:
        rc = capi_encode(&core.state, s, length, out, need, &n)
    try:
        return [out[i] for i in range(n)] if rc == CTOK_OK else rc
    finally:
        free(out)
"""


def _build(tmp_path, name, source, suffix, setup_extra=""):
    (tmp_path / f"{name}{suffix}").write_text(source)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(ctok.__file__)))
    (tmp_path / "setup.py").write_text(textwrap.dedent(f"""
        from setuptools import setup, Extension
        {setup_extra}
        ext = Extension({name!r}, [{name + suffix!r}], include_dirs=[{ctok.get_include()!r}, {os.path.dirname(ctok.__file__)!r}])
        setup(name={name!r}, ext_modules=EXT([ext]) if "EXT" in globals() else [ext])
    """))
    proc = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-q"], cwd=tmp_path,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": pkg_parent})
    if proc.returncode != 0:
        pytest.fail(f"building {name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    sys.path.insert(0, str(tmp_path))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(tmp_path))


def _sample_texts():
    texts = ["", "hello world", "héllo\u00a0wörld 123456 can't", "日本語のテキスト、漢字", "🙂👍🏽 " * 50,
             "<|endoftext|> is encoded as text"]
    for name in corpus_names():
        texts.append(corpus_text(name, 20_000))
    return texts


@pytest.fixture(scope="module")
def c_client(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("cclient"), "ctok_c_client", C_SOURCE, ".c")


@pytest.fixture(scope="module")
def cy_client(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("cyclient"), "ctok_cy_client", CYTHON_SOURCE, ".pyx",
                  setup_extra="from Cython.Build import cythonize as EXT")


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_c_api_encode_decode_threads(c_client, name):
    enc = ctok.get_encoding(name)
    api, handle = enc.c_api(), enc.c_handle()
    for text in _sample_texts():
        want = enc.encode_ordinary(text)
        for got in c_client.encode(api, handle, text.encode("utf-8"), 4):
            assert got == want
        assert c_client.decode(api, handle, want) == enc.decode_bytes(want)
    assert c_client.decode(api, handle, [0, enc.n_vocab + 5]) == -3      # CTOK_ERR_UNKNOWN_ID


def test_c_handle_keeps_encoder_alive(c_client):
    import gc
    enc = ctok.load(ctok.get_include() + "/../data/o200k_base.tiktoken")
    want = enc.encode_ordinary("keep me alive")
    api, handle = enc.c_api(), enc.c_handle()
    del enc
    ctok._cache.clear()
    gc.collect()
    assert c_client.encode(api, handle, b"keep me alive", 2) == [want, want]


def test_cython_cimport(cy_client):
    enc = ctok.get_encoding("o200k_base")
    for text in _sample_texts():
        assert cy_client.encode(enc._core, text.encode("utf-8")) == enc.encode_ordinary(text)
