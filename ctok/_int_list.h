/* Lists of Python ints made from token ids (ctok/_encoder.pyx, ctok/_prefix.pyx).
 *
 * Contract: ctok_int_list(head, nh, ids, ni, tail, nt, cache) returns a new list of head[0:nh] (new references
 * to the same objects) followed by the ints of ids[0:ni] and of tail[0:nt], each taken from cache[id] (and added
 * to it when missing: the cache keeps that reference); every id is < the cache's size (ids the encoder emitted).
 * Why not PyList_New(n): it zeroes its n slots first, a second pass over them; here one private array is filled
 * and taken by the list when complete, so the list is never seen with an unset slot (not even by the garbage
 * collector), and a failed int allocation leaves nothing half made (NULL with MemoryError).
 *
 * The lists are not tracked by the cyclic garbage collector when they hold ints only (always, but for a head
 * of other objects): a list of ints is in no reference cycle.  Tracked, each collection while a batch's lists
 * lived visited every one of their items: a fifth of a 5,000-text batch's time on one thread (gc.disable():
 * 100 -> 123 MB/s), more on two, where the collections run holding the GIL.  msgspec's decoders untrack
 * such containers too.  The cost: a list of ids that its owner later makes part of a reference cycle (appending
 * an object that refers back to it) is not collected with the cycle. */
#ifndef CTOK_INT_LIST_H
#define CTOK_INT_LIST_H
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* items[at:at + n] = the ints of ids[0:n]; at + n, or -1 having dropped the references of items[0:at + i]. */
static inline Py_ssize_t ctok_fill_ints(PyObject** items, Py_ssize_t at, const uint32_t* ids, Py_ssize_t n,
                                        PyObject** cache) {
    Py_ssize_t i, j;
    for (i = 0; i < n; i++) {
        uint32_t t = ids[i];                   /* an id the encoder emitted: < the cache's size */
        PyObject* o = cache[t];
        if (o == NULL) {
            o = PyLong_FromUnsignedLong(t);
            if (o == NULL) {
                for (j = 0; j < at + i; j++) Py_DECREF(items[j]);
                return -1;
            }
            cache[t] = o;                      /* the cache keeps this reference */
        }
        Py_INCREF(o);                          /* and the list gets its own */
        items[at + i] = o;                     /* at + i < at + n <= the array's size */
    }
    return at + n;
}

static PyObject* ctok_int_list(PyObject* const* head, Py_ssize_t nh, const uint32_t* ids, Py_ssize_t ni,
                               const uint32_t* tail, Py_ssize_t nt, PyObject** cache) {
    PyListObject* op = (PyListObject*)PyList_New(0);
    Py_ssize_t n = nh + ni + nt, i;
    PyObject** items;
    int ints_only = 1;
    if (op == NULL) return NULL;
    for (i = 0; i < nh && ints_only; i++) ints_only = PyLong_CheckExact(head[i]);
    if (ints_only) PyObject_GC_UnTrack(op);            /* see above */
    if (n == 0) return (PyObject*)op;
    items = (PyObject**)PyMem_Malloc((size_t)n * sizeof(PyObject*));
    if (items == NULL) { Py_DECREF(op); return PyErr_NoMemory(); }
    /* a copy, then the reference counts: the loop of increments then has no store that its next load must
       wait for */
    if (nh > 0) memcpy(items, head, (size_t)nh * sizeof(PyObject*));
    for (i = 0; i < nh; i++) Py_INCREF(items[i]);
    if (ctok_fill_ints(items, nh, ids, ni, cache) < 0 || ctok_fill_ints(items, nh + ni, tail, nt, cache) < 0) {
        PyMem_Free(items);
        Py_DECREF(op);
        return NULL;
    }
    op->ob_item = items;
    op->allocated = n;
    Py_SET_SIZE(op, n);
    return (PyObject*)op;
}
/* ctok_int_lists(out, ids, ends, n, cache, n_cache, counts): append to the list `out` the list of the ints of each
 * text's ids, ids[ends[i - 1]:ends[i]] (from 0 for the first), as ctok_int_list makes them; 0, or -1 with an
 * exception set (some lists may have been appended: the caller drops `out`).  counts: n_cache zeros (every
 * id is < n_cache, the cache's size), left all zeros; NULL takes ctok_int_list's way, a list at a time (few
 * ids, where the two GIL releases and the count cost more than they free).
 * Why: in a batch on several threads the lists are made holding the GIL, and one Py_INCREF per id was most of
 * that time (a store into each id's int object, 6 MB of them for o200k): the other threads waited.  Here each
 * distinct id's references are taken at once (its count added to its int's), and the ids are counted and the
 * item arrays filled with the GIL released; what is left under the GIL is an allocation per text and an
 * addition per distinct id.  A build without the GIL (Py_GIL_DISABLED) takes ctok_int_list's way. */
static int ctok_int_lists(PyObject* out, const uint32_t* ids, const int64_t* ends, Py_ssize_t n,
                          PyObject** cache, Py_ssize_t n_cache, uint32_t* counts) {
    Py_ssize_t total = n > 0 ? (Py_ssize_t)ends[n - 1] : 0, nd = 0, i, k, j, start;
    uint32_t* distinct = NULL;
    PyObject*** items = NULL;
    PyObject* op;
#ifndef Py_GIL_DISABLED
    if (counts != NULL && total > 0 && total <= (Py_ssize_t)UINT32_MAX) {
        distinct = (uint32_t*)PyMem_RawMalloc((size_t)(total < n_cache ? total : n_cache) * sizeof(uint32_t));
        items = (PyObject***)PyMem_RawCalloc((size_t)n, sizeof(PyObject**));
    }
#endif
    if (distinct == NULL || items == NULL) {
        /* one list at a time, as before */
        PyMem_RawFree(distinct);
        PyMem_RawFree(items);
        for (i = 0, start = 0; i < n; start = (Py_ssize_t)ends[i], i++) {
            op = ctok_int_list(NULL, 0, ids + start, (Py_ssize_t)ends[i] - start, NULL, 0, cache);
            if (op == NULL || PyList_Append(out, op) < 0) { Py_XDECREF(op); return -1; }
            Py_DECREF(op);
        }
        return 0;
    }
    /* 1. Each distinct id and how often it occurs. */
    Py_BEGIN_ALLOW_THREADS
    for (i = 0; i < total; i++) {
        uint32_t t = ids[i];                           /* < the cache's size: counts has a place for it */
        if (counts[t]++ == 0) distinct[nd++] = t;      /* nd < min(total, n_cache): a new id each time */
    }
    Py_END_ALLOW_THREADS
    /* 2. Every int made, then all the references to it taken at once: `total` references held after this. */
    for (k = 0; k < nd; k++) {
        uint32_t t = distinct[k];
        if (cache[t] == NULL) {
            PyObject* o = PyLong_FromUnsignedLong(t);
            if (o == NULL) {
                for (j = 0; j < nd; j++) counts[distinct[j]] = 0;
                goto fail;
            }
            cache[t] = o;                              /* the cache keeps this reference */
        }
    }
    for (k = 0; k < nd; k++) {
        uint32_t t = distinct[k];
        Py_SET_REFCNT(cache[t], Py_REFCNT(cache[t]) + (Py_ssize_t)counts[t]);   /* no-op on immortal ints */
        counts[t] = 0;
    }
    /* 3. The item arrays, from the allocator the lists free them with. */
    for (i = 0, start = 0; i < n; start = (Py_ssize_t)ends[i], i++) {
        if (ends[i] > start) {
            items[i] = (PyObject**)PyMem_Malloc((size_t)(ends[i] - start) * sizeof(PyObject*));
            if (items[i] == NULL) {
                PyErr_NoMemory();
                for (j = 0; j < total; j++) Py_DECREF(cache[ids[j]]);   /* the references of step 2 */
                goto fail;
            }
        }
    }
    /* 4. Filled without the GIL: the arrays are private, the ints exist and no longer change in the cache. */
    Py_BEGIN_ALLOW_THREADS
    for (i = 0, start = 0; i < n; start = (Py_ssize_t)ends[i], i++)
        for (k = start; k < (Py_ssize_t)ends[i]; k++)
            items[i][k - start] = cache[ids[k]];       /* k - start < the array's size */
    Py_END_ALLOW_THREADS
    /* 5. The lists take their arrays (never seen with an unset slot). */
    for (i = 0, start = 0; i < n; start = (Py_ssize_t)ends[i], i++) {
        Py_ssize_t m = (Py_ssize_t)ends[i] - start;
        op = PyList_New(0);
        if (op != NULL) PyObject_GC_UnTrack(op);       /* ints only: see ctok_int_list */
        if (op != NULL && m > 0) {
            ((PyListObject*)op)->ob_item = items[i];
            ((PyListObject*)op)->allocated = m;
            Py_SET_SIZE(op, m);
            items[i] = NULL;
        }
        if (op == NULL || PyList_Append(out, op) < 0) {
            Py_XDECREF(op);                            /* drops its items' references, if it took them */
            for (j = i; j < n; j++) {                  /* and those of the arrays no list took */
                if (items[j] != NULL) {
                    Py_ssize_t s0 = j > 0 ? (Py_ssize_t)ends[j - 1] : 0;
                    for (k = 0; k < (Py_ssize_t)ends[j] - s0; k++) Py_DECREF(items[j][k]);
                }
            }
            goto fail;
        }
        Py_DECREF(op);
    }
    PyMem_RawFree(distinct);
    PyMem_RawFree(items);
    return 0;
fail:
    for (i = 0; i < n; i++) PyMem_Free(items[i]);
    PyMem_RawFree(distinct);
    PyMem_RawFree(items);
    return -1;
}
#endif
