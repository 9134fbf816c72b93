# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twins of ``rocketlite.protocol.message_batch``: ``decode_batch`` (a SEND_BATCH_MESSAGE
body split into columns in one pass; an entry's properties equal to the previous entry's are
that same ``bytes`` object) and ``message_ids`` (the comma-separated ids of a batch reply, written
straight into one ``str``). ``tests/unit/native/test_message_batch_twin.py`` checks both against
the pure functions."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int16_t, int32_t, int64_t, uint64_t
from libc.string cimport memcmp, memcpy

from rocketlite.common._bytes cimport be_i16, be_i32

from rocketlite.common.errors import BodyError


cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    unsigned char* PyUnicode_1BYTE_DATA(object o)


cdef const char* _HEX = b"0123456789ABCDEF"


cdef object _entry_error(Py_ssize_t i, Py_ssize_t pos, Py_ssize_t end, blen=None, plen=None,
                         total=0):
    from rocketlite.protocol.message_batch import _entry_error as error  # the pure one's words
    return error(i, pos, end, blen, plen, total)


def decode_batch(body, *, max_count=None):
    if type(body) is not bytes:
        from rocketlite.protocol.message_batch import _decode_batch_py
        return _decode_batch_py(body, max_count=max_count)
    cdef const unsigned char* b = <const unsigned char*>PyBytes_AS_STRING(body)
    cdef Py_ssize_t end = PyBytes_GET_SIZE(body), pos = 0, n = 0, b_end, p_end, blen
    cdef int32_t total, flag
    cdef int16_t plen
    cdef list bodies = [], props = [], flags = []
    cdef bytes p, last = None
    while pos < end:
        if end - pos < 22:
            raise _entry_error(n, pos, end)
        total = be_i32(b + pos)
        flag = be_i32(b + pos + 12)
        blen = be_i32(b + pos + 16)
        b_end = pos + 20 + blen
        if blen < 0 or b_end + 2 > end:
            raise _entry_error(n, pos, end, blen)
        plen = be_i16(b + b_end)
        p_end = b_end + 2 + plen
        if plen < 0 or p_end > end or total != p_end - pos:
            raise _entry_error(n, pos, end, blen, plen, total)
        bodies.append(PyBytes_FromStringAndSize(<const char*>b + pos + 20, blen))
        if last is not None and PyBytes_GET_SIZE(last) == plen and \
                memcmp(PyBytes_AS_STRING(last), b + b_end + 2, plen) == 0:
            p = last
        else:
            p = PyBytes_FromStringAndSize(<const char*>b + b_end + 2, plen)
            last = p
        props.append(p)
        flags.append(flag)
        n += 1
        pos = p_end
    if max_count is not None and n > max_count:
        raise BodyError(f"batch has {n} messages, the limit is {max_count}")
    return bodies, props, flags


def message_ids(bytes id_head, commit_log_offsets):
    cdef Py_ssize_t n = len(commit_log_offsets), hlen = PyBytes_GET_SIZE(id_head), i, k
    cdef Py_ssize_t id_len = 2 * hlen + 16
    cdef const unsigned char* h = <const unsigned char*>PyBytes_AS_STRING(id_head)
    cdef unsigned char* o
    cdef unsigned char* at
    cdef uint64_t v
    cdef int64_t off
    if n == 0:
        return ""
    out = PyUnicode_New(n * (id_len + 1) - 1, 127)
    o = PyUnicode_1BYTE_DATA(out)
    for k in range(hlen):
        o[2 * k] = _HEX[h[k] >> 4]
        o[2 * k + 1] = _HEX[h[k] & 0xF]
    for i in range(n):
        at = o + i * (id_len + 1)
        if i:
            o[i * (id_len + 1) - 1] = 44  # ','
            memcpy(at, o, 2 * hlen)
        try:
            off = commit_log_offsets[i]
        except (OverflowError, TypeError):  # not an int64: the pure function's error
            from rocketlite.protocol.message_batch import _message_ids_py
            return _message_ids_py(id_head, commit_log_offsets)
        v = <uint64_t>off
        at += 2 * hlen
        for k in range(15, -1, -1):
            at[k] = _HEX[v & 0xF]
            v >>= 4
    return out
