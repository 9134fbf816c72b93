# cython: language_level=3
"""A signed 64-bit integer written in decimal ASCII: shared by the compiled twins that encode
numbers into headers (``cimport``). The caller gives room for 20 bytes."""

from libc.stdint cimport int64_t, uint64_t


cdef inline Py_ssize_t write_decimal(int64_t v, char* out) noexcept nogil:
    """``v`` in decimal into ``out`` (20 bytes at least); returns the length."""
    cdef char tmp[20]
    cdef Py_ssize_t n = 0, i, k = 0
    cdef uint64_t u
    if v < 0:
        u = <uint64_t>0 - <uint64_t>v
    else:
        u = <uint64_t>v
    while True:
        tmp[n] = <char>(48 + u % 10)
        n += 1
        u //= 10
        if u == 0:
            break
    if v < 0:
        out[0] = 45
        k = 1
    for i in range(n):
        out[k + i] = tmp[n - 1 - i]
    return k + n
