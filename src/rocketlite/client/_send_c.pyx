# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of ``rocketlite.client.send_codec``: ``SendFrame`` (a lane's SEND frames, written
into one ``bytes`` with memcpy), ``send_reply`` (a SEND reply's header fields), ``uniq_key``
(``MessageClientIDSetter``'s id) and ``UniqKeys`` (a generator of them that reads the clock with
``clock_gettime``) and ``PlainPrep`` (the producer's fast path for a plain message, setting the
prepared object's slots directly). Same signatures and results as the pure ``SendFramePy``, ``send_reply_py``,
``uniq_key_py``, ``UniqKeysPy`` and ``PlainPrepPy`` (``tests/unit/native/test_send_twin.py``); the layout is
documented there."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_Size
from cpython.object cimport Py_TYPE, PyObject, descrsetfunc
from cpython.unicode cimport PyUnicode_FromStringAndSize
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.string cimport memcpy
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec
from rocketlite.common._decimal cimport write_decimal

from rocketlite.common.errors import ProtocolError
from rocketlite.protocol.codes import CURRENT_VERSION, LanguageCode, RequestCode

cdef int _PYTHON = int(LanguageCode.PYTHON)
cdef int _VERSION = CURRENT_VERSION
cdef int _SEND_V2 = int(RequestCode.SEND_MESSAGE_V2)
cdef int _SEND_BATCH = int(RequestCode.SEND_BATCH_MESSAGE)
cdef const char* _HEX = b"0123456789ABCDEF"


cdef bytes _entry(str key, str value):
    cdef bytes kb = key.encode(), vb = value.encode()
    return (len(kb)).to_bytes(2, "big", signed=True) + kb + (len(vb)).to_bytes(4, "big", signed=True) + vb


cdef inline void _put32(unsigned char* p, uint32_t v) noexcept nogil:
    p[0] = (v >> 24) & 0xFF
    p[1] = (v >> 16) & 0xFF
    p[2] = (v >> 8) & 0xFF
    p[3] = v & 0xFF


cdef inline unsigned char* _var(unsigned char* p, char key, const char* v, Py_ssize_t n) noexcept nogil:
    p[0] = 0
    p[1] = 1
    p[2] = <unsigned char>key
    _put32(p + 3, <uint32_t>n)
    memcpy(p + 7, v, n)
    return p + 7 + n


cdef class SendFrame:
    cdef int code
    cdef bytes prefix, suffix

    def __init__(self, str group, str topic, str create_topic_key, int default_queue_nums,
                 int queue_id, str broker_name, bint batch):
        self.code = _SEND_BATCH if batch else _SEND_V2
        self.prefix = b"".join((
            _entry("a", group), _entry("b", topic), _entry("c", create_topic_key),
            _entry("d", str(default_queue_nums)), _entry("e", str(queue_id))))
        self.suffix = b"".join((
            _entry("j", "0"), _entry("k", "false"), _entry("m", "true" if batch else "false"),
            _entry("n", broker_name)))

    def frame(self, int opaque, int64_t sys_flag, int64_t born_ms, int64_t flag, bytes properties,
              bytes body):
        cdef char f[21]
        cdef char g[21]
        cdef char h[21]
        cdef Py_ssize_t fn = write_decimal(sys_flag, f), gn = write_decimal(born_ms, g), hn = write_decimal(flag, h)
        cdef Py_ssize_t pn = PyBytes_GET_SIZE(self.prefix), sn = PyBytes_GET_SIZE(self.suffix)
        cdef Py_ssize_t in_ = PyBytes_GET_SIZE(properties), bn = PyBytes_GET_SIZE(body)
        cdef Py_ssize_t ext_len = pn + sn + 28 + fn + gn + hn + in_
        cdef Py_ssize_t hlen = 21 + ext_len
        if hlen > 0xFFFFFF:
            raise ProtocolError(f"header of {hlen} bytes does not fit the 24-bit header length")
        cdef Py_ssize_t length = 4 + hlen + bn
        if length > 0x7FFFFFFF:
            raise ProtocolError(f"frame of {length} bytes does not fit the int32 length")
        cdef bytes out = PyBytes_FromStringAndSize(NULL, 4 + length)
        cdef unsigned char* p = <unsigned char*>PyBytes_AS_STRING(out)
        _put32(p, <uint32_t>length)
        _put32(p + 4, <uint32_t>((1 << 24) | hlen))
        p[8] = (self.code >> 8) & 0xFF
        p[9] = self.code & 0xFF
        p[10] = <unsigned char>_PYTHON
        p[11] = (_VERSION >> 8) & 0xFF
        p[12] = _VERSION & 0xFF
        _put32(p + 13, <uint32_t>opaque)
        _put32(p + 17, 0)
        _put32(p + 21, 0)
        _put32(p + 25, <uint32_t>ext_len)
        p += 29
        memcpy(p, PyBytes_AS_STRING(self.prefix), pn)
        p += pn
        p = _var(p, 102, f, fn)
        p = _var(p, 103, g, gn)
        p = _var(p, 104, h, hn)
        p = _var(p, 105, PyBytes_AS_STRING(properties), in_)
        memcpy(p, PyBytes_AS_STRING(self.suffix), sn)
        p += sn
        memcpy(p, PyBytes_AS_STRING(body), bn)
        return out


cdef object _parse_int(PyObject* raw, int bits):
    """Java's ``Integer/Long.parseInt`` of ASCII decimal (an optional sign, 1-19 digits), or None."""
    if raw == NULL or type(<object>raw) is not str:
        return None
    cdef str s = <str>raw
    cdef Py_ssize_t n = len(s), i = 0
    cdef bint neg = False
    cdef uint64_t v = 0
    cdef Py_UCS4 c
    cdef uint32_t d
    if n and (s[0] == u"-" or s[0] == u"+"):
        neg = s[0] == u"-"
        i = 1
    if n - i < 1 or n - i > 19:
        return None
    while i < n:
        c = s[i]
        d = <uint32_t>c
        if d < 48 or d > 57:
            return None
        v = v * 10 + (d - 48)
        i += 1
    if neg:
        if v > (<uint64_t>1 << bits):
            return None
        return -<object>v
    if v >= (<uint64_t>1 << bits):
        return None
    return <object>v


def send_reply(dict ext):
    cdef PyObject* msg_id = PyDict_GetItem(ext, "msgId")
    if msg_id == NULL:
        return None
    queue_id = _parse_int(PyDict_GetItem(ext, "queueId"), 31)
    queue_offset = _parse_int(PyDict_GetItem(ext, "queueOffset"), 63)
    if queue_id is None or queue_offset is None:
        return None
    return (<object>msg_id, queue_id, queue_offset, ext.get("transactionId"), ext.get("MSG_REGION"))


cdef class ResultReader:
    cdef object result_cls, queue_cls, queue_id_descr
    cdef list rdescrs, qdescrs
    cdef descrsetfunc rset[8]
    cdef descrsetfunc qset[3]

    def __init__(self, result_cls, queue_cls):
        self.result_cls = result_cls
        self.queue_cls = queue_cls
        rnames = ("status", "msg_id", "offset_msg_id", "queue", "queue_offset", "transaction_id",
                  "region_id", "recall_handle")
        qnames = ("topic", "brokerName", "queueId")
        self.rdescrs = [result_cls.__dict__[n] for n in rnames]
        self.qdescrs = [queue_cls.__dict__[n] for n in qnames]
        self.queue_id_descr = self.qdescrs[2]
        cdef int i
        for i in range(8):
            self.rset[i] = Py_TYPE(self.rdescrs[i]).tp_descr_set
            if self.rset[i] is NULL:
                raise TypeError(f"{result_cls.__name__}.{rnames[i]} is not a slot")
        for i in range(3):
            self.qset[i] = Py_TYPE(self.qdescrs[i]).tp_descr_set
            if self.qset[i] is NULL:
                raise TypeError(f"{queue_cls.__name__}.{qnames[i]} is not a slot")

    def read(self, dict ext, status, str uniq_key, mq):
        header = send_reply(ext)
        if header is None:
            return None
        msg_id, queue_id, queue_offset, transaction_id, region_id = <tuple>header
        cdef list q = self.qdescrs
        if queue_id != mq.queueId:
            topic, broker = mq.topic, mq.brokerName
            mq = self.queue_cls.__new__(self.queue_cls)
            self.qset[0](q[0], mq, topic)
            self.qset[1](q[1], mq, broker)
            self.qset[2](q[2], mq, queue_id)
        cdef list d = self.rdescrs
        o = self.result_cls.__new__(self.result_cls)
        self.rset[0](d[0], o, status)
        self.rset[1](d[1], o, uniq_key)
        self.rset[2](d[2], o, msg_id)
        self.rset[3](d[3], o, mq)
        self.rset[4](d[4], o, queue_offset)
        self.rset[5](d[5], o, transaction_id)
        self.rset[6](d[6], o, region_id)
        self.rset[7](d[7], o, ext.get("recallHandle"))
        return o


def uniq_key(str prefix, long long since, long long counter):
    return _uniq_key(prefix, <uint64_t>since, <uint64_t>counter)


cdef str _uniq_key(str prefix, uint64_t since, uint64_t counter):
    cdef char tail[12]
    cdef uint32_t t = <uint32_t>(since & 0xFFFFFFFF)
    cdef uint32_t c = <uint32_t>(counter & 0xFFFF)
    cdef int i
    for i in range(8):
        tail[i] = _HEX[(t >> (28 - 4 * i)) & 0xF]
    for i in range(4):
        tail[8 + i] = _HEX[(c >> (12 - 4 * i)) & 0xF]
    return prefix + PyUnicode_FromStringAndSize(tail, 12)


cdef class UniqKeys:
    cdef str prefix
    cdef uint64_t counter
    cdef double month_start_ms, next_month_ms
    cdef object roll

    def __init__(self, str prefix, counter, roll):
        self.prefix = prefix
        self.counter = <uint64_t>(counter & 0xFFFFFFFFFFFFFFFF)  # only its low 16 bits show
        self.roll = roll
        self.month_start_ms = 0.0
        self.next_month_ms = 0.0

    cpdef str at(self, double now_ms):
        if now_ms >= self.next_month_ms:
            start, nxt = self.roll(now_ms)
            self.month_start_ms = start
            self.next_month_ms = nxt
        cdef uint64_t counter = self.counter
        self.counter = counter + 1
        cdef double since = now_ms - self.month_start_ms
        if not -9.2e18 < since < 9.2e18:
            raise OverflowError(f"{since} ms since the month start does not fit an int64")
        return _uniq_key(self.prefix, <uint64_t><int64_t>since, counter)

    def next(self):
        cdef timespec ts
        clock_gettime(CLOCK_REALTIME, &ts)
        return self.at(<double>ts.tv_sec * 1000.0 + <double>ts.tv_nsec / 1e6)

    def many(self, Py_ssize_t n):
        return [self.next() for _ in range(n)]


cdef class PlainPrep:
    cdef object message_cls, cls, uniq_keys
    cdef set valid_topics
    cdef list descrs
    cdef descrsetfunc dset[8]

    def __init__(self, message_cls, cls, uniq_keys, set valid_topics):
        self.message_cls = message_cls
        self.cls = cls
        self.uniq_keys = uniq_keys
        self.valid_topics = valid_topics
        names = ("topic", "body", "properties", "sys_flag", "flag", "uniq_key", "batch", "wire")
        self.descrs = [getattr(cls, n) for n in names]
        cdef int i
        for i in range(8):
            self.dset[i] = Py_TYPE(self.descrs[i]).tp_descr_set
            if self.dset[i] is NULL:
                raise TypeError(f"{cls.__name__}.{names[i]} is not a slot")

    def prepare(self, msg, max_size, compress_over):
        if type(msg) is not self.message_cls or not _nothing_but_topic_body_flag(msg):
            return None
        topic = msg.topic
        body = msg.body
        flag = msg.flag
        if type(topic) is not str or type(body) is not bytes or type(flag) is not int:
            return None
        if flag < -0x80000000 or flag > 0x7FFFFFFF or topic not in self.valid_topics:
            return None
        cdef Py_ssize_t size = PyBytes_GET_SIZE(body)
        if not size or size > max_size or size >= compress_over:
            return None
        uniq = self.uniq_keys.next()
        cdef str text = "UNIQ_KEY\x01" + uniq + "\x02"
        cls = self.cls
        o = cls.__new__(cls)
        cdef list d = self.descrs
        self.dset[0](d[0], o, topic)
        self.dset[1](d[1], o, body)
        self.dset[2](d[2], o, text)
        self.dset[3](d[3], o, 0)
        self.dset[4](d[4], o, flag)
        self.dset[5](d[5], o, uniq)
        self.dset[6](d[6], o, False)
        self.dset[7](d[7], o, text.encode())
        return o


cdef bint _nothing_but_topic_body_flag(msg) except -1:
    """No tags, keys, properties, delay, deliver time or preset UNIQ_KEY; waits for the store."""
    if msg.tags is not None or msg.keys is not None or msg.uniq_key is not None:
        return False
    if msg.deliver_time_ms is not None or msg.wait_store_msg_ok is not True:
        return False
    properties = msg.properties
    if type(properties) is not dict or PyDict_Size(properties) != 0:
        return False
    delay = msg.delay_level
    return type(delay) is int and delay <= 0
