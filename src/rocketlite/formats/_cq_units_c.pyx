# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``rocketlite.formats.cq_units.pack_units``: the units written straight into
one ``bytes``; columns of different lengths or a value out of its field's range go to the pure
function, for its error. ``tests/unit/native/test_cq_units_twin.py`` holds them equal."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t


cdef inline void _be32(unsigned char* p, uint32_t v) noexcept nogil:
    p[0] = (v >> 24) & 0xFF
    p[1] = (v >> 16) & 0xFF
    p[2] = (v >> 8) & 0xFF
    p[3] = v & 0xFF


cdef inline void _be64(unsigned char* p, uint64_t v) noexcept nogil:
    _be32(p, <uint32_t>(v >> 32))
    _be32(p + 4, <uint32_t>v)


def pack_units(offsets, sizes, codes):
    cdef Py_ssize_t n = len(offsets), i
    cdef int64_t off, code
    cdef int32_t size
    cdef unsigned char* o
    if len(sizes) != n or len(codes) != n:
        return _pure(offsets, sizes, codes)
    out = PyBytes_FromStringAndSize(NULL, 20 * n)
    o = <unsigned char*>PyBytes_AS_STRING(out)
    try:
        for i in range(n):
            off = offsets[i]
            size = sizes[i]
            code = codes[i]
            _be64(o + 20 * i, <uint64_t>off)
            _be32(o + 20 * i + 8, <uint32_t>size)
            _be64(o + 20 * i + 12, <uint64_t>code)
    except (OverflowError, TypeError):
        return _pure(offsets, sizes, codes)
    return out


def _pure(offsets, sizes, codes):
    from rocketlite.formats.cq_units import _pack_units_py
    return _pack_units_py(offsets, sizes, codes)
