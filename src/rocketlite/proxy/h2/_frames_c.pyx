# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``rocketlite.proxy.h2.frames._split_frames_py`` and ``_split_messages_py``:
the whole HTTP/2 frames / gRPC messages at the start of a read buffer, each payload one new
``bytes``. Same results as the pure ones (``tests/unit/native/test_h2_frames_twin.py``)."""

from cpython.bytes cimport PyBytes_FromStringAndSize
from rocketlite.common._bytes cimport be_u32


def split_frames(buf, Py_ssize_t max_size):
    cdef const unsigned char[::1] b = buf
    cdef Py_ssize_t pos = 0, end = b.shape[0], length, stop
    cdef const unsigned char* p
    cdef list frames = []
    while end - pos >= 9:
        p = &b[pos]
        length = (<Py_ssize_t>p[0] << 16) | (<Py_ssize_t>p[1] << 8) | <Py_ssize_t>p[2]
        if length > max_size:
            return frames, pos, length
        stop = pos + 9 + length
        if stop > end:
            break
        frames.append((p[3], p[4], be_u32(p + 5) & 0x7FFFFFFF,
                       PyBytes_FromStringAndSize(<const char*>p + 9, length)))
        pos = stop
    return frames, pos, 0


def split_messages(buf, Py_ssize_t max_size):
    cdef const unsigned char[::1] b = buf
    cdef Py_ssize_t pos = 0, end = b.shape[0], length, stop
    cdef const unsigned char* p
    cdef list out = []
    while end - pos >= 5:
        p = &b[pos]
        if p[0]:
            return out, pos, -1
        length = <Py_ssize_t>be_u32(p + 1)
        if length > max_size:
            return out, pos, length
        stop = pos + 5 + length
        if stop > end:
            break
        out.append(PyBytes_FromStringAndSize(<const char*>p + 5, length))
        pos = stop
    return out, pos, 0
