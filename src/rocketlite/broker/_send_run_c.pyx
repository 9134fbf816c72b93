# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twins of ``rocketlite.broker.send_run``: ``SendTaker`` (the usual single sends of a
run of requests turned into the store's messages in one call; what "usual" means, and why
anything else stops the run, is documented there; the message is built through its slots' C
setters) and ``OkRuns`` (an append's success replies written straight into one buffer per
connection from ``SendOkFrames.layout()``). ``tests/unit/native/test_send_run_twin.py`` checks
each against its pure twin."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_SetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcpy
from cpython.object cimport Py_TYPE, PyObject, descrsetfunc
from cpython.unicode cimport PyUnicode_GET_LENGTH, PyUnicode_READ_CHAR
from rocketlite.common._decimal cimport write_decimal

cdef enum:
    NKEYS = 14
    NFIELDS = 11
    TXN_MASK = 0x4 | 0x8

_MESSAGE_FIELDS = ("topic", "body", "queue_id", "flag", "properties", "sys_flag",
                   "born_timestamp", "born_host", "born_port", "reconsume_times",
                   "prepared_transaction_offset")


cdef class SendTaker:
    cdef object cls
    cdef dict keys  # request code -> tuple of NKEYS wire keys
    cdef object not_allowed
    cdef long perm_write
    cdef list descrs
    cdef descrsetfunc setters[NFIELDS]
    cdef object zero, empty

    def __init__(self, message_cls, keys, not_allowed, perm_write):
        fields = getattr(message_cls, "__slots__", ())
        if tuple(fields) != _MESSAGE_FIELDS:
            raise TypeError(f"{message_cls.__name__} has fields {fields}, the taker knows "
                            f"{_MESSAGE_FIELDS}")
        self.keys = {}
        for code, k in keys.items():
            if len(k) != NKEYS:
                raise TypeError(f"request code {code}: {len(k)} keys, the taker reads {NKEYS}")
            self.keys[int(code)] = tuple(k)
        self.cls = message_cls
        self.not_allowed = not_allowed
        self.perm_write = perm_write
        self.descrs = [message_cls.__dict__[name] for name in _MESSAGE_FIELDS]
        cdef int i
        for i in range(NFIELDS):
            self.setters[i] = Py_TYPE(self.descrs[i]).tp_descr_set
            if self.setters[i] is NULL:
                raise TypeError(f"{message_cls.__name__}.{_MESSAGE_FIELDS[i]} is not a slot")
        self.zero = 0
        self.empty = ""

    def take(self, conn, list cmds, Py_ssize_t start, table, bint diverting, list msgs,
             list pending):
        cdef dict writable = {}
        cdef dict ext
        cdef tuple keys
        cdef PyObject* raw
        cdef PyObject* kraw
        cdef long long queue_id, sys_flag, born, flag, reconsume, queues
        cdef Py_ssize_t i = start, n = PyList_GET_SIZE(cmds)
        cdef list d = self.descrs
        host = conn.peer_host
        port = conn.peer_port
        while i < n:
            cmd = <object>PyList_GET_ITEM(cmds, i)
            kraw = PyDict_GetItem(self.keys, cmd.code)
            if kraw is NULL:
                return i
            keys = <tuple>kraw
            e = cmd.ext_fields
            if type(e) is not dict:
                return i
            ext = <dict>e
            if not _is_str(ext, keys[0]) or not _is_str(ext, keys[2]):
                return i
            raw = PyDict_GetItem(ext, keys[1])
            if raw is NULL or type(<object>raw) is not str:
                return i
            topic = <object>raw
            if (_int(ext, keys[3], 9) < 0):
                return i
            queue_id = _int(ext, keys[4], 9)
            sys_flag = _int(ext, keys[5], 9)
            born = _int(ext, keys[6], 18)
            flag = _int(ext, keys[7], 9)
            if queue_id < 0 or sys_flag < 0 or born < 0 or flag < 0:
                return i
            raw = PyDict_GetItem(ext, keys[8])
            if raw is NULL or <object>raw is None:
                props = self.empty
            elif type(<object>raw) is str:
                props = <object>raw
            else:
                return i
            reconsume = 0
            if _present(ext, keys[9]):
                reconsume = _int(ext, keys[9], 9)
                if reconsume < 0:
                    return i
            if _present(ext, keys[10]) and _bool(ext, keys[10]) < 0:
                return i
            if _present(ext, keys[11]) and _bool(ext, keys[11]) != 0:  # a batch, or not usual
                return i
            if _present(ext, keys[12]) and _int(ext, keys[12], 9) < 0:
                return i
            if _present(ext, keys[13]) and not _is_str(ext, keys[13]):
                return i
            raw = PyDict_GetItem(writable, topic)
            if raw is NULL:
                tc = table.get(topic)
                if tc is None or not tc.perm & self.perm_write or topic in self.not_allowed:
                    queues = 0
                else:
                    queues = tc.writeQueueNums
                PyDict_SetItem(writable, topic, queues)
            else:
                queues = <object>raw
            if queue_id >= queues:
                return i
            if diverting and (sys_flag & TXN_MASK or "DELAY\x01" in props or "TIMER_" in props):
                return i
            o = self.cls.__new__(self.cls)
            self.setters[0](d[0], o, topic)
            self.setters[1](d[1], o, cmd.body)
            self.setters[2](d[2], o, queue_id)
            self.setters[3](d[3], o, flag)
            self.setters[4](d[4], o, props)
            self.setters[5](d[5], o, sys_flag)
            self.setters[6](d[6], o, born)
            self.setters[7](d[7], o, host)
            self.setters[8](d[8], o, port)
            self.setters[9](d[9], o, reconsume)
            self.setters[10](d[10], o, self.zero)
            msgs.append(o)
            pending.append((conn, cmd, queue_id))
            i += 1
        return i


cdef inline bint _present(dict ext, object key):
    cdef PyObject* raw = PyDict_GetItem(ext, key)
    return raw is not NULL and <object>raw is not None


cdef inline bint _is_str(dict ext, object key):
    cdef PyObject* raw = PyDict_GetItem(ext, key)
    return raw is not NULL and type(<object>raw) is str


cdef long long _int(dict ext, object key, Py_ssize_t most):
    """The value of 1 to ``most`` ASCII digits at ``key``, else -1 (absent or not that form)."""
    cdef PyObject* raw = PyDict_GetItem(ext, key)
    if raw is NULL or type(<object>raw) is not str:
        return -1
    cdef str v = <str>raw
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(v), i
    cdef Py_UCS4 c
    cdef long long acc = 0
    if n == 0 or n > most:
        return -1
    for i in range(n):
        c = PyUnicode_READ_CHAR(v, i)
        if c < 48 or c > 57:
            return -1
        acc = acc * 10 + (<long long>c - 48)
    return acc


cdef int _bool(dict ext, object key):
    """1 for ``true``/``1``, 0 for ``false``/``0``, -1 for anything else."""
    cdef PyObject* raw = PyDict_GetItem(ext, key)
    if raw is NULL or type(<object>raw) is not str:
        return -1
    v = <str>raw
    if v == "false" or v == "0":
        return 0
    if v == "true" or v == "1":
        return 1
    return -1


cdef class _Buf:
    """A growing byte buffer."""
    cdef char* p
    cdef Py_ssize_t n, cap

    def __dealloc__(self):
        PyMem_Free(self.p)

    cdef int reserve(self, Py_ssize_t more) except -1:
        cdef Py_ssize_t cap = self.cap
        cdef char* q
        if self.n + more <= cap:
            return 0
        cap = max(2 * cap, self.n + more, 4096)
        q = <char*>PyMem_Realloc(self.p, cap)
        if q is NULL:
            raise MemoryError()
        self.p = q
        self.cap = cap
        return 0

    cdef inline void put(self, bytes b):
        cdef Py_ssize_t k = PyBytes_GET_SIZE(b)
        memcpy(self.p + self.n, PyBytes_AS_STRING(b), k)
        self.n += k

    cdef inline void be32(self, uint32_t v):
        cdef unsigned char* q = <unsigned char*>self.p + self.n
        q[0] = v >> 24
        q[1] = v >> 16
        q[2] = v >> 8
        q[3] = v
        self.n += 4

    cdef inline void be16(self, unsigned int v):
        cdef unsigned char* q = <unsigned char*>self.p + self.n
        q[0] = v >> 8
        q[1] = v
        self.n += 2

    cdef inline void hex16(self, uint64_t v):
        cdef int i
        cdef char* q = self.p + self.n
        for i in range(15, -1, -1):
            q[i] = b"0123456789ABCDEF"[v & 15]
            v >>= 4
        self.n += 16

    cdef inline void dec(self, int64_t v):
        self.n += write_decimal(v, self.p + self.n)

    cdef bytes take(self):
        out = PyBytes_FromStringAndSize(self.p, self.n)
        self.n = 0
        return out


cdef inline Py_ssize_t _dec_len(int64_t v) noexcept:
    cdef char tmp[24]
    return write_decimal(v, tmp)


cdef class OkRuns:
    cdef bytes j0, j1, j2, j3, j4, bin_id, bin_qid, bin_qoff, bin_tail
    cdef Py_ssize_t json_fixed, bin_fixed_size
    cdef int fixed_ext, fixed_header, language, version, flag
    cdef uint32_t binary_type
    cdef long oneway
    cdef object other, json_frame, binary_frame

    def __init__(self, frames, oneway, other):
        lay = frames.layout()
        if len(lay.json_parts) != 5:
            raise TypeError(f"{len(lay.json_parts)} JSON parts, the writer knows 5")
        self.j0, self.j1, self.j2, self.j3, self.j4 = lay.json_parts
        self.bin_id, self.bin_qid, self.bin_qoff, self.bin_tail = (
            lay.bin_id, lay.bin_qid, lay.bin_qoff, lay.bin_tail)
        self.fixed_ext, self.fixed_header = lay.fixed_ext, lay.fixed_header
        self.language, self.version, self.flag = lay.language, lay.version, lay.flag
        self.binary_type = lay.binary_type
        self.json_fixed = sum(len(p) for p in lay.json_parts)
        self.bin_fixed_size = (len(self.bin_id) + len(self.bin_qid) + len(self.bin_qoff)
                               + len(self.bin_tail))
        self.oneway = oneway
        self.other = other
        self.json_frame = frames.frame  # numbers out of the usual ranges: the reference writes
        self.binary_frame = frames.binary_frame

    def runs(self, list pending, list results):
        cdef list out = []
        cdef _Buf buf = _Buf()
        cdef Py_ssize_t i, n = PyList_GET_SIZE(pending), hlen, lq, lo
        cdef object to = None, conn, cmd, r
        cdef tuple row
        cdef int64_t qid, offset, qoff, opaque
        cdef long stype
        if PyList_GET_SIZE(results) != n:
            raise ValueError(f"{n} sends and {PyList_GET_SIZE(results)} results")
        for i in range(n):
            row = <tuple>PyList_GET_ITEM(pending, i)
            conn = <object>PyTuple_GET_ITEM(row, 0)
            cmd = <object>PyTuple_GET_ITEM(row, 1)
            if cmd.flag & self.oneway:
                continue
            if conn is not to:
                if buf.n:
                    out.append((to, buf.take()))
                to = conn
            r = <object>PyList_GET_ITEM(results, i)
            qid = <object>PyTuple_GET_ITEM(row, 2)
            offset = r[0]
            qoff = r[2]
            opaque = cmd.opaque
            stype = cmd.serialize_type
            if stype == 0 and offset >= 0 and opaque == <int32_t>opaque:
                buf.reserve(8 + self.json_fixed + 16 + 3 * 20)
                hlen = self.json_fixed + 16 + _dec_len(qid) + _dec_len(qoff) + _dec_len(opaque)
                buf.be32(<uint32_t>(hlen + 4))
                buf.be32(<uint32_t>hlen)
                buf.put(self.j0)
                buf.hex16(<uint64_t>offset)
                buf.put(self.j1)
                buf.dec(qid)
                buf.put(self.j2)
                buf.dec(qoff)
                buf.put(self.j3)
                buf.dec(opaque)
                buf.put(self.j4)
            elif stype == 1 and offset >= 0 and opaque == <int32_t>opaque:
                buf.reserve(29 + self.bin_fixed_size + 16 + 8 + 2 * 20)
                lq = _dec_len(qid)
                lo = _dec_len(qoff)
                hlen = self.fixed_header + lq + lo
                buf.be32(<uint32_t>(4 + hlen))
                buf.be32(self.binary_type | <uint32_t>hlen)
                buf.be16(0)
                buf.p[buf.n] = <char>self.language
                buf.n += 1
                buf.be16(<unsigned int>self.version)
                buf.be32(<uint32_t><int32_t>opaque)
                buf.be32(<uint32_t>self.flag)
                buf.be32(0)
                buf.be32(<uint32_t>(self.fixed_ext + lq + lo))
                buf.put(self.bin_id)
                buf.hex16(<uint64_t>offset)
                buf.put(self.bin_qid)
                buf.be32(<uint32_t>lq)
                buf.dec(qid)
                buf.put(self.bin_qoff)
                buf.be32(<uint32_t>lo)
                buf.dec(qoff)
                buf.put(self.bin_tail)
            else:
                if stype == 0:
                    frame = self.json_frame(opaque, qid, offset, qoff)
                elif stype == 1:
                    frame = self.binary_frame(opaque, qid, offset, qoff)
                else:
                    frame = self.other(cmd, qid, offset, qoff)
                buf.reserve(PyBytes_GET_SIZE(frame))
                buf.put(frame)
        if buf.n:
            out.append((to, buf.take()))
        return out
