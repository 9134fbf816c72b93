# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``rocketlite.proxy.h2.hpack_decode._scan_py``: a header block's indexed
fields and cached not-indexed literals from ``pos`` up to the first representation the Python
decoder must handle. Same results as the pure one (``tests/unit/native/test_h2_hpack_twin.py``)."""

from cpython.bytes cimport PyBytes_FromStringAndSize


def scan(bytes data, Py_ssize_t pos, dict cache, tuple static, table):
    cdef const unsigned char* p = <const unsigned char*>data
    cdef Py_ssize_t end = len(data), n_static = len(static), n_table = len(table)
    cdef Py_ssize_t stop, n, index, name_index, size = 0
    cdef unsigned char b
    cdef list out = []
    cdef object field
    while pos < end:
        b = p[pos]
        if b & 0x80:
            if b == 0xFF:
                break
            index = b & 0x7F
            if 0 < index <= n_static:
                field = static[index - 1]
            elif n_static < index <= n_static + n_table:
                field = table[index - n_static - 1][0]
            else:
                break
            pos += 1
        elif b & 0xE0:
            break
        else:
            stop = pos + 1
            name_index = b & 0x0F
            if name_index == 0x0F or stop >= end:
                break
            if name_index == 0:
                n = p[stop] & 0x7F
                stop += 1 + n
                if n == 0x7F or stop >= end:
                    break
            n = p[stop] & 0x7F
            stop += 1 + n
            if n == 0x7F or stop > end:
                break
            field = cache.get(PyBytes_FromStringAndSize(<const char*>p + pos, stop - pos))
            if field is None:
                break
            pos = stop
        out.append(field)
        size += len(field[0]) + len(field[1]) + 32
    return out, size, pos
