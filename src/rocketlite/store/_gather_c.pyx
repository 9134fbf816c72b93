# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``rocketlite.store.get_message._gather_py``.

``gather(segment, spans)`` copies the records a pull found in one CommitLog segment into one new
``bytes`` in a single pass: ``spans`` is a flat list ``[start, size, start, size, ...]`` of byte
ranges inside ``segment`` (the segment's mapping). One allocation and one copy per pull, where
slicing each record and joining the slices made two copies and an object per record. The GIL is
held throughout, so no other thread can close the mapping while it is being read.
``tests/unit/native/test_gather_twin.py`` checks the twin against the pure one.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.string cimport memcpy


def gather(segment, list spans):
    cdef const unsigned char[::1] src = segment
    cdef Py_ssize_t n = len(spans), i, total = 0, start, size, limit = src.shape[0]
    if n % 2:
        raise ValueError("spans must be start, size pairs")
    for i in range(0, n, 2):
        start = spans[i]
        size = spans[i + 1]
        if start < 0 or size < 0 or start > limit - size:
            raise ValueError(f"span {start}+{size} is outside a {limit}-byte segment")
        total += size
    out = PyBytes_FromStringAndSize(NULL, total)
    cdef char* dst = PyBytes_AS_STRING(out)
    if total == 0:
        return out
    cdef const unsigned char* base = &src[0]
    for i in range(0, n, 2):
        start = spans[i]
        size = spans[i + 1]
        memcpy(dst, base + start, size)
        dst += size
    return out
