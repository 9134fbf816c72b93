# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of the common-record path of ``rocketlite.client.message.iter_messages``.

``Decoder.run(body, pos, end, broker_name, verify_crc, out)`` decodes records back to back into
``MessageExt`` objects while they have the common shape (IPv4 hosts, a V1 topic, an uncompressed
body, a whole frame and, with ``verify_crc``, a matching BODYCRC), and returns the position of the
first record it leaves to the pure path (another shape, a damaged record, the end). The record's
byte table lives in ``rocketlite.formats.message_record``. The properties, the hosts and the ids are
left as the record's bytes (``MessageExt.LAZY`` slots None): the message makes them on first access,
as the pure path makes them at once. ``tests/unit/native/test_message_twin.py`` checks the twin
against the pure path.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.unicode cimport PyUnicode_DecodeUTF8
from rocketlite.common._bytes cimport be_i16, be_i32, be_i64, be_u32
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcmp


import types

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void* op)
    object PyType_GenericAlloc(PyTypeObject* cls, Py_ssize_t nitems)
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member

cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset
    int T_OBJECT_EX

# Offsets in a record with IPv4 hosts (the byte table in formats/message_record.py): TOTALSIZE 0,
# MAGIC 4, BODYCRC 8, QUEUEID 12, FLAG 16, QUEUEOFFSET 20, PHYSICALOFFSET 28, SYSFLAG 36,
# BORNTIMESTAMP 40, BORNHOST 48 (+port), STORETIMESTAMP 56, STOREHOST 64 (+port), RECONSUMETIMES 72,
# PREPAREDTRANSACTIONOFFSET 76, BODYLENGTH 84, BODY 88.
cdef enum:
    MAGIC_V1 = -626843481
    FIXED_SIZE_V4 = 91
    BODY_AT = 88  # fields 1-15 of a record with IPv4 hosts, BODYLENGTH included
    HOSTS_V6 = 0x30
    COMPRESSED = 0x1
    N_DECODED = 16
    N_LAZY = 5


cdef inline void _put(PyObject* o, Py_ssize_t offset, object value):
    """Fill an empty slot of a fresh object (what a slot's ``__set__`` does, without the lookup)."""
    Py_INCREF(value)
    (<PyObject**>((<char*>o) + offset))[0] = <PyObject*>value


cdef class Decoder:
    """Built once by ``client/message.py`` with the class to build, the slots it sets from a
    record (``MessageExt.DECODED``), the slots it leaves None (``MessageExt.LAZY``) and crc32.

    The objects are made as ``object.__new__`` makes them and their slots filled at the offsets
    their member descriptors name, which is what the descriptors' ``__set__`` would do."""

    cdef object cls, crc32
    cdef Py_ssize_t offsets[N_DECODED]
    cdef Py_ssize_t lazy_offsets[N_LAZY]

    def __init__(self, cls, decoded, lazy, crc32):
        self.cls = cls
        self.crc32 = crc32
        if len(decoded) != N_DECODED or len(lazy) != N_LAZY:
            raise TypeError(f"MessageExt has {len(decoded)} decoded and {len(lazy)} lazy slots, "
                            f"the twin knows {N_DECODED} and {N_LAZY}")
        if cls.__new__ is not object.__new__ or not isinstance(cls, type):
            raise TypeError(f"{cls!r} must be a class made by object.__new__")
        cdef int i
        for i in range(N_DECODED):
            self.offsets[i] = _slot_offset(cls, decoded[i])
        for i in range(N_LAZY):
            self.lazy_offsets[i] = _slot_offset(cls, lazy[i])

    def run(self, bytes body, Py_ssize_t pos, Py_ssize_t end, str broker_name, bint verify_crc,
            list out):
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(body)
        cdef Py_ssize_t size, body_len, body_at, topic_at, topic_len, props_at, props_len, rend
        cdef int32_t sys_flag
        cdef int64_t commit_log_offset
        cdef int i
        cdef PyObject* r
        cdef Py_ssize_t* f = self.offsets
        # A pull's records mostly share their topic and hosts: one object each while they repeat.
        cdef Py_ssize_t prev_topic_at = -1, prev_topic_len = -1, prev_at = -1
        cdef object topic = None, born = None, store = None
        if end > PyBytes_GET_SIZE(body):
            end = PyBytes_GET_SIZE(body)
        while end - pos >= BODY_AT:
            size = be_i32(p + pos)
            sys_flag = be_i32(p + pos + 36)
            commit_log_offset = be_i64(p + pos + 28)
            body_len = be_i32(p + pos + 84)
            if (be_i32(p + pos + 4) != MAGIC_V1 or sys_flag & (HOSTS_V6 | COMPRESSED)
                    or not FIXED_SIZE_V4 <= size <= end - pos or body_len < 0
                    or commit_log_offset < 0):
                break
            rend = pos + size
            body_at = pos + BODY_AT
            topic_at = body_at + body_len + 1
            if topic_at + 2 > rend:
                break
            topic_len = p[topic_at - 1]
            props_at = topic_at + topic_len + 2
            if props_at > rend:
                break
            props_len = (<Py_ssize_t>p[props_at - 2] << 8) | p[props_at - 1]
            if props_at + props_len != rend:
                break
            payload = PyBytes_FromStringAndSize(<const char*>p + body_at, body_len)
            if verify_crc and (<uint32_t>self.crc32(payload) & 0x7FFFFFFF) != <uint32_t>be_i32(p + pos + 8):
                break
            if topic_len != prev_topic_len or memcmp(p + topic_at, p + prev_topic_at, topic_len):
                topic = PyUnicode_DecodeUTF8(<const char*>p + topic_at, topic_len, "replace")
                prev_topic_at, prev_topic_len = topic_at, topic_len
            if prev_at < 0 or memcmp(p + pos + 48, p + prev_at + 48, 8):
                born = PyBytes_FromStringAndSize(<const char*>p + pos + 48, 8)
            if prev_at < 0 or memcmp(p + pos + 64, p + prev_at + 64, 8):
                store = PyBytes_FromStringAndSize(<const char*>p + pos + 64, 8)
            prev_at = pos
            o = PyType_GenericAlloc(<PyTypeObject*>self.cls, 0)
            r = <PyObject*>o
            # Like msgspec's Struct(gc=False): a message holds only strings, bytes, ints and None
            # (its properties, once parsed, a dict of strings), so it cannot close a reference
            # cycle; untracked, the collector never walks the thousands a pull makes.
            PyObject_GC_UnTrack(<void*>r)
            _put(r, f[0], topic)
            _put(r, f[1], payload)
            _put(r, f[2], PyBytes_FromStringAndSize(<const char*>p + props_at, props_len))
            _put(r, f[3], be_i32(p + pos + 12))  # queue id
            _put(r, f[4], be_i64(p + pos + 20))  # queue offset
            _put(r, f[5], commit_log_offset)
            _put(r, f[6], sys_flag)
            _put(r, f[7], be_i32(p + pos + 16))  # flag
            _put(r, f[8], be_i64(p + pos + 40))  # born timestamp
            _put(r, f[9], be_i64(p + pos + 56))  # store timestamp
            _put(r, f[10], born)
            _put(r, f[11], store)
            _put(r, f[12], be_i32(p + pos + 72))  # reconsume times
            _put(r, f[13], be_i64(p + pos + 76))  # prepared transaction offset
            _put(r, f[14], be_i32(p + pos + 8))  # body CRC
            _put(r, f[15], broker_name)
            for i in range(N_LAZY):
                _put(r, self.lazy_offsets[i], None)
            out.append(o)
            pos = rend
        return pos


cdef Py_ssize_t _slot_offset(type cls, str name) except -1:
    """Where the slot ``name`` of ``cls`` lives in its objects: the offset its member descriptor
    (a ``__slots__`` entry, type ``T_OBJECT_EX``) names."""
    descr = cls.__dict__.get(name)
    if type(descr) is not _MEMBER_DESCRIPTOR:
        raise TypeError(f"{cls.__name__}.{name} is not a slot")
    cdef PyMemberDef* member = (<PyMemberDescrObject*>descr).d_member
    if member.type != T_OBJECT_EX:
        raise TypeError(f"{cls.__name__}.{name} is not an object slot")
    return member.offset


_MEMBER_DESCRIPTOR = types.MemberDescriptorType
