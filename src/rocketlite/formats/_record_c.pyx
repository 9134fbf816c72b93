# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twins of ``rocketlite.formats.record_scan``: ``scan_records`` (recovery's walk over a
segment, checks as ``message_record.check_record``) and ``dispatch_plan`` (the ConsumeQueue units
of a run of plain records, packed per queue); of ``record_batch.encode_batch`` (a batch append's
records in one call); and of ``message_record.unit_record_ok`` (each record a pull serves checked
against its ConsumeQueue unit). ``tests/unit/native/test_record_twin.py`` checks them against the pure
functions; and of ``record_scan.records_match_units`` (a pull's run of records in one segment
checked against their units in one call). The body CRC is the one ``message_record`` uses (ISA-L's);
the checks of a pull call ISA-L's C function directly when its module exports it (``_direct_crc``),
which is most of what checking a 1 KiB record costs through Python.
"""

from cpython.buffer cimport PyBUF_READ, PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport (
    PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_GET_SIZE, PyByteArray_Resize,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.memoryview cimport PyMemoryView_FromMemory
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from rocketlite.common._bytes cimport be_i32, be_i64, be_u32
from rocketlite.formats._be_write cimport _be32, _be64

from struct import error as _struct_error

from rocketlite.formats.message_record import crc32 as _crc32

cdef enum:
    MAGIC_V1 = -626843481  # 0xDAA320A7
    MAGIC_V2 = -626843477  # 0xDAA320AB
    BLANK_MAGIC = -875286124  # 0xCBD43194
    FIXED_SIZE_V4 = 91
    HOSTS_V6 = 0x30
    V4_BODY_AT = 88  # TOTALSIZE ... BODYLENGTH with IPv4 hosts

cdef bytes _SCHEDULE = b"SCHEDULE_TOPIC_XXXX"


cdef inline Py_ssize_t _frame(const unsigned char* b, Py_ssize_t pos, Py_ssize_t limit,
                              Py_ssize_t* body_at, Py_ssize_t* body_len) noexcept nogil:
    """``message_record._parse``'s checks: the size, 0 for BLANK, -1 when not whole."""
    cdef int32_t size, magic, sys_flag, blen
    cdef Py_ssize_t end, p, topic_len
    if limit - pos < 8:
        return -1
    size = be_i32(b + pos)
    magic = be_i32(b + pos + 4)
    if magic == BLANK_MAGIC:
        return 0
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        return -1
    if size < FIXED_SIZE_V4 or size > limit - pos:
        return -1
    end = pos + size
    sys_flag = be_i32(b + pos + 36)
    p = pos + 48 + (20 if sys_flag & 0x10 else 8) + 8 + (20 if sys_flag & 0x20 else 8) + 12
    if p + 4 > end:
        return -1
    blen = be_i32(b + p)
    p += 4
    if blen < 0 or p + blen > end:
        return -1
    body_at[0] = p
    body_len[0] = blen
    p += blen
    if magic == MAGIC_V2:
        if p + 2 > end:
            return -1
        topic_len = (b[p] << 8) | b[p + 1]
        p += 2
    else:
        if p + 1 > end:
            return -1
        topic_len = b[p]
        p += 1
    p += topic_len
    if p + 2 > end:
        return -1
    if p + 2 + ((b[p] << 8) | b[p + 1]) != end:
        return -1
    return size


def scan_records(buf, Py_ssize_t start, Py_ssize_t end, bint check_crc, int64_t after_ts):
    cdef Py_buffer view
    cdef const unsigned char* b
    cdef Py_ssize_t pos = start, size, body_at = 0, body_len = 0, n = 0, last = 0
    cdef Py_ssize_t first_after = -1
    cdef bint blank = False
    cdef int64_t ts
    cdef object mv = memoryview(buf) if check_crc else None
    crc = _crc32
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        b = <const unsigned char*>view.buf
        if end > view.len:
            end = view.len
        while pos < end:
            size = _frame(b, pos, end, &body_at, &body_len)
            if size <= 0:
                blank = size == 0
                break
            if check_crc:
                if (crc(mv[body_at:body_at + body_len]) & 0x7FFFFFFF) != be_u32(b + pos + 8):
                    break
            if first_after < 0:
                ts = be_i64(b + pos + 48 + (20 if be_i32(b + pos + 36) & 0x10 else 8))
                if ts > after_ts:
                    first_after = pos
            pos += size
            n += 1
            last = size
    finally:
        PyBuffer_Release(&view)
        mv = None
    return pos, n, last, blank, first_after


cdef inline Py_ssize_t _find(const unsigned char* p, Py_ssize_t n, const char* name,
                             Py_ssize_t k, bint entry_start) noexcept nogil:
    """Position of ``name`` (``k`` bytes) in ``p[0:n]``; with ``entry_start`` only where an entry
    starts (at 0 or after a \\x02). -1 when absent."""
    cdef Py_ssize_t i
    for i in range(n - k + 1):
        if p[i] == <unsigned char>name[0] and memcmp(p + i, name, k) == 0:
            if not entry_start or i == 0 or p[i - 1] == 2:
                return i
    return -1


cdef inline int _ascii_tags_hash(const unsigned char* pr, Py_ssize_t plen, uint32_t* h) noexcept:
    """Java's ``String.hashCode`` of the TAGS value in properties ``pr`` into ``*h``: 1 when it
    is ASCII, -1 when it is not (the caller takes the pure path), 0 when there is no TAGS."""
    cdef Py_ssize_t i = _find(pr, plen, "TAGS\x01", 5, True), v
    cdef uint32_t acc = 0
    if i < 0:
        return 0
    for v in range(i + 5, plen):
        if pr[v] == 2:
            break
        if pr[v] >= 0x80:
            return -1
        acc = 31 * acc + pr[v]
    h[0] = acc
    return 1


def dispatch_plan(buf, Py_ssize_t pos, Py_ssize_t limit):
    cdef Py_buffer view
    cdef const unsigned char* b
    cdef const unsigned char* pr
    cdef int32_t size, qid, sys_flag, blen, txn
    cdef int64_t qoff, phys, ts, last_ts = 0, end_phys
    cdef Py_ssize_t end, t, p, topic_len, props_len, i, v, run_n
    cdef uint32_t h
    cdef unsigned char unit[20]
    cdef char* dst
    cdef list runs = []
    cdef list keyed = []
    cdef dict open_runs = {}
    cdef list run
    cdef bytes topic = None, props
    cdef object key
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        b = <const unsigned char*>view.buf
        if limit > view.len:
            limit = view.len
        while pos + 88 <= limit:
            size = be_i32(b + pos)
            sys_flag = be_i32(b + pos + 36)
            if be_i32(b + pos + 4) != MAGIC_V1 or sys_flag & HOSTS_V6:
                break
            end = pos + size
            blen = be_i32(b + pos + 84)
            if size < FIXED_SIZE_V4 or end > limit or blen < 0:
                break
            t = pos + 88 + blen
            if t >= end:
                break
            topic_len = b[t]
            p = t + 1 + topic_len
            if p + 2 > end:
                break
            props_len = (b[p] << 8) | b[p + 1]
            if p + 2 + props_len != end:
                break
            txn = sys_flag & 0xC
            if txn == 0x4 or txn == 0xC:
                break
            if topic is None or PyBytes_GET_SIZE(topic) != topic_len or \
                    memcmp(PyBytes_AS_STRING(topic), b + t + 1, topic_len) != 0:
                topic = PyBytes_FromStringAndSize(<const char*>b + t + 1, topic_len)
                if topic == _SCHEDULE:
                    topic = None
                    break
            pr = b + p + 2
            h = 0
            if _ascii_tags_hash(pr, props_len, &h) < 0:
                break
            qid = be_i32(b + pos + 12)
            qoff = be_i64(b + pos + 20)
            phys = be_i64(b + pos + 28)
            ts = be_i64(b + pos + 56)
            end_phys = phys + size
            _be64(<char*>unit, phys)
            _be32(<char*>unit + 8, <uint32_t>size)
            _be64(<char*>unit + 12, <int64_t><int32_t>h)  # tags code: the hash sign-extended
            key = (topic, qid)
            run = open_runs.get(key)
            if run is not None:
                run_n = PyByteArray_GET_SIZE(run[3])
                if <int64_t>run[2] + run_n // 20 != qoff:
                    run = None
            if run is None:
                run = [topic, qid, qoff, PyByteArray_FromStringAndSize(<const char*>unit, 20),
                       end_phys]
                open_runs[key] = run
                runs.append(run)
            else:
                PyByteArray_Resize(run[3], run_n + 20)
                dst = PyByteArray_AS_STRING(run[3])
                memcpy(dst + run_n, unit, 20)
                if end_phys > <int64_t>run[4]:
                    run[4] = end_phys
            if props_len >= 5 and (_find(pr, props_len, "KEYS\x01", 5, False) >= 0
                                   or _find(pr, props_len, "UNIQ_KEY\x01", 9, False) >= 0):
                props = PyBytes_FromStringAndSize(<const char*>pr, props_len)
                keyed.append((topic, props, phys, ts))
            last_ts = ts
            pos = end
    finally:
        PyBuffer_Release(&view)
    return pos, runs, keyed, last_ts


def encode_batch(bodies, props, flags, Py_ssize_t lo, Py_ssize_t hi, int32_t queue_id,
                 int64_t queue_offset, int64_t offset, bytes mid, bytes magic, bytes topic_block):
    cdef Py_ssize_t i, total = 0, blen, plen, size, at = 0
    cdef Py_ssize_t mlen = PyBytes_GET_SIZE(mid), tlen = PyBytes_GET_SIZE(topic_block)
    cdef Py_ssize_t fixed = 36 + mlen + 4 + tlen + 2
    cdef object body, p, f
    cdef int64_t flag
    cdef char* o
    cdef bytes out
    if PyBytes_GET_SIZE(magic) != 4:
        raise ValueError("encode_batch: the magic code is 4 bytes")
    for i in range(lo, hi):
        body = bodies[i]
        p = props[i]
        if type(body) is not bytes or type(p) is not bytes or PyBytes_GET_SIZE(p) > 0xFFFF:
            return _pure_encode_batch(bodies, props, flags, lo, hi, queue_id, queue_offset,
                                      offset, mid, magic, topic_block)
        total += fixed + PyBytes_GET_SIZE(body) + PyBytes_GET_SIZE(p)
    out = PyBytes_FromStringAndSize(NULL, total)
    o = PyBytes_AS_STRING(out)
    crc = _crc32
    for i in range(lo, hi):
        body = bodies[i]
        p = props[i]
        if flags is None:
            flag = 0
        else:
            f = flags[i]
            flag = f
            if flag < -2147483648 or flag > 2147483647:
                raise _struct_error("'i' format requires -2147483648 <= number <= 2147483647")
        blen = PyBytes_GET_SIZE(body)
        plen = PyBytes_GET_SIZE(p)
        size = fixed + blen + plen
        _be32(o + at, <uint32_t>size)
        memcpy(o + at + 4, PyBytes_AS_STRING(magic), 4)
        _be32(o + at + 8, (<uint32_t>crc(body)) & 0x7FFFFFFF)
        _be32(o + at + 12, <uint32_t>queue_id)
        _be32(o + at + 16, <uint32_t>flag)
        _be64(o + at + 20, queue_offset + i - lo)
        _be64(o + at + 28, offset)
        memcpy(o + at + 36, PyBytes_AS_STRING(mid), mlen)
        _be32(o + at + 36 + mlen, <uint32_t>blen)
        memcpy(o + at + 40 + mlen, PyBytes_AS_STRING(body), blen)
        memcpy(o + at + 40 + mlen + blen, PyBytes_AS_STRING(topic_block), tlen)
        o[at + 40 + mlen + blen + tlen] = <char>((plen >> 8) & 0xFF)
        o[at + 41 + mlen + blen + tlen] = <char>(plen & 0xFF)
        memcpy(o + at + 42 + mlen + blen + tlen, PyBytes_AS_STRING(p), plen)
        at += size
        offset += size
    return out


def _pure_encode_batch(*args):
    from rocketlite.formats.record_batch import _encode_batch_py
    return _encode_batch_py(*args)


def tags_codes(props):
    """``record_scan._tags_codes_py``: TAGS values in ASCII hashed here, any other by the pure
    ``_tags_code_py``."""
    cdef Py_ssize_t n = len(props), plen, k
    cdef const unsigned char* pr
    cdef uint32_t h
    cdef int found
    cdef list out = [0] * n
    cdef bytes pb
    pure = None
    for k in range(n):
        pb = props[k]
        pr = <const unsigned char*>PyBytes_AS_STRING(pb)
        plen = PyBytes_GET_SIZE(pb)
        found = _ascii_tags_hash(pr, plen, &h)
        if found == 0:
            continue
        if found < 0:
            if pure is None:
                from rocketlite.formats.record_scan import _tags_code_py as pure
            out[k] = pure(pb)
        else:
            out[k] = <int32_t>h
    return out


ctypedef uint32_t (*crc_fn)(uint32_t init, const unsigned char* buf, uint64_t length) noexcept nogil

cdef crc_fn _isal_crc = NULL  # ISA-L's crc32_gzip_refl, what ``isal_zlib.crc32`` calls
cdef crc_fn _direct = NULL  # _isal_crc while the direct path is on


def _find_isal_crc():
    """The address of ISA-L's ``crc32_gzip_refl`` in the module ``message_record.crc32`` comes
    from (0 when that CRC is not ISA-L's or its module does not export the function)."""
    try:
        import ctypes
        from isal import isal_zlib
        if _crc32 is not isal_zlib.crc32:
            return 0
        return ctypes.cast(ctypes.CDLL(isal_zlib.__file__).crc32_gzip_refl, ctypes.c_void_p).value or 0
    except (ImportError, OSError, AttributeError):
        return 0


_isal_crc = <crc_fn><size_t>_find_isal_crc()
_direct = _isal_crc
if _isal_crc != NULL and _isal_crc(0, <const unsigned char*>b"123456789", 9) != 0xCBF43926:
    _isal_crc = _direct = NULL  # not the CRC the records carry: keep to the Python call


def _direct_crc(on=None):
    """Whether the checks call ISA-L's CRC directly; ``on`` turns that on (where ISA-L exports it)
    or off (the Python-level ``crc32`` then, as the tests compare both paths)."""
    global _direct
    if on is not None:
        _direct = _isal_crc if on else NULL
    return _direct != NULL


cdef inline int _body_crc_ok(const unsigned char* body, Py_ssize_t n, uint32_t want) except -1:
    """Whether CRC32 of ``n`` bytes at ``body``, masked to 31 bits, is ``want``; through ISA-L's C
    function when it is at hand, else one call of ``crc32`` on a memoryview of those bytes."""
    if _direct != NULL:
        return (_direct(0, body, <uint64_t>n) & 0x7FFFFFFF) == want
    return (<uint32_t>_crc32(PyMemoryView_FromMemory(<char*>body, n, PyBUF_READ)) & 0x7FFFFFFF) \
        == want


cdef inline int _unit_ok(const unsigned char* b, Py_ssize_t size, int64_t phys, int64_t queue_id,
                         int64_t queue_offset, const char* topic, Py_ssize_t tlen) except -1:
    """``message_record.unit_record_ok`` on the ``size`` bytes at ``b`` (inside the buffer)."""
    cdef Py_ssize_t body_len, topic_at, props_at
    if size < V4_BODY_AT:
        return False
    body_len = be_i32(b + 84)
    if be_i32(b) != size or be_i32(b + 4) != MAGIC_V1 or be_i32(b + 36) & HOSTS_V6 or body_len < 0:
        return False
    topic_at = V4_BODY_AT + body_len + 1
    props_at = topic_at + tlen + 2
    if props_at > size or b[topic_at - 1] != tlen:
        return False
    if props_at + ((<Py_ssize_t>b[props_at - 2] << 8) | b[props_at - 1]) != size:
        return False
    if be_i32(b + 12) != queue_id or be_i64(b + 20) != queue_offset or be_i64(b + 28) != phys:
        return False
    if tlen and memcmp(b + topic_at, topic, tlen) != 0:
        return False
    return _body_crc_ok(b + V4_BODY_AT, body_len, <uint32_t>be_i32(b + 8))


def unit_record_ok(buf, Py_ssize_t pos, Py_ssize_t size, int64_t phys, int64_t queue_id,
                   int64_t queue_offset, bytes topic):
    cdef Py_buffer view
    cdef bint ok
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if size < V4_BODY_AT or pos < 0 or pos > view.len - size:
            return False
        ok = _unit_ok(<const unsigned char*>view.buf + pos, size, phys, queue_id, queue_offset,
                      PyBytes_AS_STRING(topic), PyBytes_GET_SIZE(topic))
    finally:
        PyBuffer_Release(&view)
    return ok


def records_match_units(buf, list spans, int64_t base, list queue_offsets, Py_ssize_t first,
                        int64_t queue_id, bytes topic, Py_ssize_t start=0):
    cdef Py_buffer view
    cdef Py_ssize_t n = len(spans) // 2, k, rel, size
    cdef const unsigned char* b
    cdef const char* t = PyBytes_AS_STRING(topic)
    cdef Py_ssize_t tlen = PyBytes_GET_SIZE(topic)
    if len(spans) % 2:
        raise ValueError("spans must be start, size pairs")
    if first < 0 or first > len(queue_offsets) - n:
        raise IndexError("fewer queue offsets than spans")
    if start < 0:
        start = 0
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        b = <const unsigned char*>view.buf
        for k in range(start, n):
            rel = spans[2 * k]
            size = spans[2 * k + 1]
            if size < V4_BODY_AT or rel < 0 or rel > view.len - size or not _unit_ok(
                    b + rel, size, base + rel, queue_id, <int64_t>queue_offsets[first + k], t,
                    tlen):
                return k
    finally:
        PyBuffer_Release(&view)
    return -1
