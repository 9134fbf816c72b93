# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twins of ``rocketlite.formats.record_encode``: ``check_singles`` (a run of single
messages validated and sized) and ``encode_singles`` (their records for one segment, queue offsets
from the topic/queue table). Properties and topics are read as the UTF-8 the ``str`` already holds
(no ``bytes`` per message); each record is written field by field into one ``bytes`` per segment.
``tests/unit/native/test_encode_twin.py`` checks them against the pure functions. The body CRC is
the one ``message_record`` uses (ISA-L's).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport (
    INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, int32_t, int64_t, uint32_t, uint64_t,
)
from libc.string cimport memchr, memcpy, memset

from rocketlite.formats._be_write cimport _be32, _be64

from struct import error as _struct_error

from rocketlite.formats.message_record import crc32 as _crc32

cdef extern from "Python.h":
    object PyType_GenericAlloc(PyTypeObject* t, Py_ssize_t n)
    PyObject* PyDict_GetItemWithError(object d, object k) except? NULL
    long long PyLong_AsLongLongAndOverflow(object o, int* overflow) except? -1
    bint PyType_IsSubtype(PyTypeObject* a, PyTypeObject* b)

cdef enum:
    MAGIC_V1 = -626843481  # 0xDAA320A7
    MAGIC_V2 = -626843477  # 0xDAA320AB
    V1_MAX = 127
    QUEUE_ID_MAX = 65535
    PROPERTIES_MAX = 32767
    BORN_V6 = 0x10
    STORE_V6 = 0x20
    TXN_MASK = 0xC
    TXN_PREPARED = 0x4
    TXN_ROLLBACK = 0xC


cdef inline Py_ssize_t _record_size(Py_ssize_t blen, Py_ssize_t tlen, Py_ssize_t plen,
                                    int64_t sys_flag) noexcept nogil:
    """``message_record.record_size``."""
    return (48 + (20 if sys_flag & BORN_V6 else 8) + 8 + (20 if sys_flag & STORE_V6 else 8)
            + 4 + 8 + 4 + blen + (2 if tlen > V1_MAX else 1) + tlen + 2 + plen)


cdef inline bint _int_in(object v, long long lo, long long hi):
    """``v`` is an ``int`` (exactly) between ``lo`` and ``hi``."""
    cdef int overflow = 0
    cdef long long x
    if type(v) is not int:
        return False
    x = PyLong_AsLongLongAndOverflow(v, &overflow)
    return not overflow and lo <= x <= hi


def check_singles(msgs, Py_ssize_t start, dict topics, Py_ssize_t max_body,
                  Py_ssize_t max_record, int64_t host_flag):
    cdef Py_ssize_t i, n = len(msgs), plen = 0, size, total = 0
    cdef const char* pp
    cdef PyObject* tb
    cdef object m, topic, props, body, bh, sys_flag
    for i in range(start, n):
        m = msgs[i]
        topic = m.topic
        if type(topic) is not str:
            return i, total
        tb = PyDict_GetItemWithError(topics, topic)
        props = m.properties
        body = m.body
        bh = m.born_host
        if (tb is NULL or type(props) is not str or type(body) is not bytes
                or type(bh) is not bytes or PyBytes_GET_SIZE(bh) != 4):
            return i, total
        pp = PyUnicode_AsUTF8AndSize(props, &plen)
        sys_flag = m.sys_flag
        if (PyBytes_GET_SIZE(body) > max_body or plen > PROPERTIES_MAX
                or (plen and memchr(pp, 0, plen) != NULL)
                or not _int_in(m.queue_id, 0, QUEUE_ID_MAX)
                or not _int_in(m.flag, INT32_MIN, INT32_MAX)
                or not _int_in(sys_flag, INT32_MIN, INT32_MAX)
                or not _int_in(m.born_port, INT32_MIN, INT32_MAX)
                or not _int_in(m.reconsume_times, INT32_MIN, INT32_MAX)
                or not _int_in(m.born_timestamp, INT64_MIN, INT64_MAX)
                or not _int_in(m.prepared_transaction_offset, INT64_MIN, INT64_MAX)):
            return i, total
        size = _record_size(PyBytes_GET_SIZE(body), PyBytes_GET_SIZE(<object>tb), plen,
                            <int64_t><int32_t>sys_flag | host_flag)
        if size > max_record:
            return i, total
        total += size
    return n, total


cdef struct Rec:
    const char* topic
    const char* props
    const char* body
    const char* born_host
    Py_ssize_t tlen, plen, blen, bhlen, size
    int64_t sys_flag, queue_id, flag, born_ts, born_port, reconsume, prepared


cdef inline Py_ssize_t _host(char* o, const char* host, Py_ssize_t hlen, bint v6) noexcept nogil:
    """A ``4s``/``16s`` host field (truncated or zero-padded, as ``struct`` does); its width."""
    cdef Py_ssize_t w = 16 if v6 else 4
    if hlen >= w:
        memcpy(o, host, w)
    else:
        memcpy(o, host, hlen)
        memset(o + hlen, 0, w - hlen)
    return w


cdef inline void _set(object t, Py_ssize_t i, object v):
    Py_INCREF(v)
    PyTuple_SET_ITEM(t, i, v)


def _pure_encode_singles(*args):
    from rocketlite.formats.record_encode import _encode_singles_py
    return _encode_singles_py(*args)


cdef inline int64_t _i32(object v) except? -1:
    cdef int64_t x = v
    if x < -2147483648 or x > 2147483647:
        raise _struct_error("'i' format requires -2147483648 <= number <= 2147483647")
    return x


def encode_singles(msgs, Py_ssize_t lo, dict table, int64_t offset, Py_ssize_t free, int64_t now,
                   bytes store_host, int32_t store_port, int64_t host_flag, result):
    cdef Py_ssize_t i, k, hi, n = len(msgs), used = 0, at = 0
    cdef Py_ssize_t shlen = PyBytes_GET_SIZE(store_host)
    cdef Rec* recs
    cdef Rec* r
    cdef object m, body, bh, key, res, now_o
    cdef char* o
    cdef bytes out
    cdef list results = []
    cdef PyObject* got
    cdef int64_t qoff, at_offset
    cdef bint as_tuple = (isinstance(result, type)
                          and PyType_IsSubtype(<PyTypeObject*>result, <PyTypeObject*>tuple))
    recs = <Rec*>PyMem_Malloc(max(n - lo, 1) * sizeof(Rec))
    if recs is NULL:
        raise MemoryError()
    try:
        # Pass 1: read and size the records that fit (nothing taken from the table yet).
        hi = lo
        for i in range(lo, n):
            m = msgs[i]
            r = &recs[i - lo]
            body = m.body
            bh = m.born_host
            if (type(m.topic) is not str or type(m.properties) is not str
                    or type(body) is not bytes or type(bh) is not bytes):
                return _pure_encode_singles(msgs, lo, table, offset, free, now, store_host,
                                            store_port, host_flag, result)
            r.topic = PyUnicode_AsUTF8AndSize(m.topic, &r.tlen)
            if m.properties:
                r.props = PyUnicode_AsUTF8AndSize(m.properties, &r.plen)
            else:
                r.props, r.plen = NULL, 0
            r.body, r.blen = PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body)
            r.born_host, r.bhlen = PyBytes_AS_STRING(bh), PyBytes_GET_SIZE(bh)
            r.sys_flag = _i32(m.sys_flag) | host_flag
            if r.bhlen == 16:
                r.sys_flag |= BORN_V6
            r.size = _record_size(r.blen, r.tlen, r.plen, r.sys_flag)
            if r.size > free - used:
                break
            r.queue_id = _i32(m.queue_id)
            r.flag = _i32(m.flag)
            r.born_ts = m.born_timestamp
            r.born_port = _i32(m.born_port)
            r.reconsume = _i32(m.reconsume_times)
            r.prepared = m.prepared_transaction_offset
            if r.plen > 0xFFFF:
                raise _struct_error("'H' format requires 0 <= number <= 65535")
            used += r.size
            hi = i + 1
        # Pass 2: queue offsets and the records.
        out = PyBytes_FromStringAndSize(NULL, used)
        o = PyBytes_AS_STRING(out)
        crc = _crc32
        now_o = now
        for i in range(lo, hi):
            m = msgs[i]
            r = &recs[i - lo]
            if r.sys_flag & TXN_MASK == TXN_PREPARED or r.sys_flag & TXN_MASK == TXN_ROLLBACK:
                qoff = 0
            else:
                key = (m.topic, m.queue_id)
                got = PyDict_GetItemWithError(table, key)
                qoff = 0 if got is NULL else <int64_t><object>got
                table[key] = qoff + 1
            body = m.body
            at_offset = offset + at
            _be32(o + at, <uint32_t>r.size)
            _be32(o + at + 4, <uint32_t><int32_t>(MAGIC_V2 if r.tlen > V1_MAX else MAGIC_V1))
            _be32(o + at + 8, (<uint32_t>crc(body)) & 0x7FFFFFFF)
            _be32(o + at + 12, <uint32_t>r.queue_id)
            _be32(o + at + 16, <uint32_t>r.flag)
            _be64(o + at + 20, qoff)
            _be64(o + at + 28, at_offset)
            _be32(o + at + 36, <uint32_t>r.sys_flag)
            _be64(o + at + 40, r.born_ts)
            k = at + 48
            k += _host(o + k, r.born_host, r.bhlen, r.sys_flag & BORN_V6)
            _be32(o + k, <uint32_t>r.born_port)
            _be64(o + k + 4, now)
            k += 12
            k += _host(o + k, PyBytes_AS_STRING(store_host), shlen, r.sys_flag & STORE_V6)
            _be32(o + k, <uint32_t>store_port)
            _be32(o + k + 4, <uint32_t>r.reconsume)
            _be64(o + k + 8, r.prepared)
            _be32(o + k + 16, <uint32_t>r.blen)
            k += 20
            memcpy(o + k, r.body, r.blen)
            k += r.blen
            if r.tlen > V1_MAX:
                o[k] = <char>((r.tlen >> 8) & 0xFF)
                o[k + 1] = <char>(r.tlen & 0xFF)
                k += 2
            else:
                o[k] = <char>r.tlen
                k += 1
            memcpy(o + k, r.topic, r.tlen)
            k += r.tlen
            o[k] = <char>((r.plen >> 8) & 0xFF)
            o[k + 1] = <char>(r.plen & 0xFF)
            if r.plen:
                memcpy(o + k + 2, r.props, r.plen)
            at += r.size
            if as_tuple:  # a NamedTuple's __new__ only fills the tuple: do it here
                res = PyType_GenericAlloc(<PyTypeObject*>result, 4)
                _set(res, 0, at_offset)
                _set(res, 1, r.size)
                _set(res, 2, qoff)
                _set(res, 3, now_o)
            else:
                res = result(at_offset, r.size, qoff, now)
            results.append(res)
    finally:
        PyMem_Free(recs)
    return out, hi, results
