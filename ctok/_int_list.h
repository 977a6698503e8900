/* Lists of Python ints made from token ids (ctok/_encoder.pyx, ctok/_prefix.pyx).
 *
 * Contract: ctok_int_list(head, nh, ids, ni, tail, nt, cache) returns a new list of head[0:nh] (new references
 * to the same objects) followed by the ints of ids[0:ni] and of tail[0:nt], each taken from cache[id] (and added
 * to it when missing: the cache keeps that reference); every id is < the cache's size (ids the encoder emitted).
 * Why not PyList_New(n): it zeroes its n slots first, a second pass over them; here one private array is filled
 * and taken by the list when complete, so the list is never seen with an unset slot (not even by the garbage
 * collector), and a failed int allocation leaves nothing half made (NULL with MemoryError). */
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
    if (op == NULL || n == 0) return (PyObject*)op;
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
#endif
