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
from cpython.object cimport Py_TYPE, descrsetfunc
from cpython.unicode cimport PyUnicode_DecodeUTF8
from rocketlite.common._bytes cimport be_i16, be_i32, be_i64, be_u32
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

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


cdef class Decoder:
    """Built once by ``client/message.py`` with the class to build, the slots it sets from a
    record (``MessageExt.DECODED``), the slots it leaves None (``MessageExt.LAZY``) and crc32."""

    cdef object cls, crc32
    cdef list descrs, lazy
    cdef descrsetfunc setters[N_DECODED]
    cdef descrsetfunc lazy_setters[N_LAZY]

    def __init__(self, cls, decoded, lazy, crc32):
        self.cls = cls
        self.crc32 = crc32
        if len(decoded) != N_DECODED or len(lazy) != N_LAZY:
            raise TypeError(f"MessageExt has {len(decoded)} decoded and {len(lazy)} lazy slots, "
                            f"the twin knows {N_DECODED} and {N_LAZY}")
        self.descrs = [cls.__dict__[name] for name in decoded]
        self.lazy = [cls.__dict__[name] for name in lazy]
        cdef int i
        for i in range(N_DECODED):
            self.setters[i] = Py_TYPE(self.descrs[i]).tp_descr_set
            if self.setters[i] is NULL:
                raise TypeError(f"MessageExt.{decoded[i]} is not a slot")
        for i in range(N_LAZY):
            self.lazy_setters[i] = Py_TYPE(self.lazy[i]).tp_descr_set
            if self.lazy_setters[i] is NULL:
                raise TypeError(f"MessageExt.{lazy[i]} is not a slot")

    def run(self, bytes body, Py_ssize_t pos, Py_ssize_t end, str broker_name, bint verify_crc,
            list out):
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(body)
        cdef Py_ssize_t size, body_len, body_at, topic_at, topic_len, props_at, props_len, rend
        cdef int32_t sys_flag
        cdef int64_t commit_log_offset
        cdef int i
        cdef list d = self.descrs
        cdef list z = self.lazy
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
            if verify_crc and (self.crc32(payload) & 0x7FFFFFFF) != <uint32_t>be_i32(p + pos + 8):
                break
            o = self.cls.__new__(self.cls)
            self.setters[0](d[0], o, PyUnicode_DecodeUTF8(<const char*>p + topic_at, topic_len,
                                                          "replace"))
            self.setters[1](d[1], o, payload)
            self.setters[2](d[2], o, PyBytes_FromStringAndSize(<const char*>p + props_at, props_len))
            self.setters[3](d[3], o, be_i32(p + pos + 12))  # queue id
            self.setters[4](d[4], o, be_i64(p + pos + 20))  # queue offset
            self.setters[5](d[5], o, commit_log_offset)
            self.setters[6](d[6], o, sys_flag)
            self.setters[7](d[7], o, be_i32(p + pos + 16))  # flag
            self.setters[8](d[8], o, be_i64(p + pos + 40))  # born timestamp
            self.setters[9](d[9], o, be_i64(p + pos + 56))  # store timestamp
            self.setters[10](d[10], o, PyBytes_FromStringAndSize(<const char*>p + pos + 48, 8))
            self.setters[11](d[11], o, PyBytes_FromStringAndSize(<const char*>p + pos + 64, 8))
            self.setters[12](d[12], o, be_i32(p + pos + 72))  # reconsume times
            self.setters[13](d[13], o, be_i64(p + pos + 76))  # prepared transaction offset
            self.setters[14](d[14], o, be_i32(p + pos + 8))  # body CRC
            self.setters[15](d[15], o, broker_name)
            for i in range(N_LAZY):
                self.lazy_setters[i](z[i], o, None)
            out.append(o)
            pos = rend
        return pos
