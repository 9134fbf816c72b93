# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twins of ``rocketlite.formats.index_entries``: ``put_entries`` (a batch of IndexFile
entries and their hash slots written in one call) and ``key_entries`` (the index keys of a run of
messages; a message whose KEYS or UNIQ_KEY is not plain ASCII goes to the pure ``message_keys``).
``tests/unit/native/test_index_twin.py`` checks both against the pure functions."""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeASCII
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.string cimport memcmp

from rocketlite.common._bytes cimport be_i32


cdef inline void _put_be32(unsigned char* p, uint32_t v) noexcept nogil:
    p[0] = (v >> 24) & 0xFF
    p[1] = (v >> 16) & 0xFF
    p[2] = (v >> 8) & 0xFF
    p[3] = v & 0xFF


def put_entries(buf, Py_ssize_t hash_slot_num, Py_ssize_t index_count, Py_ssize_t hash_slot_count,
                int64_t begin_timestamp, key_hashes, phy_offsets, timestamps):
    cdef Py_buffer view
    cdef unsigned char* b
    cdef Py_ssize_t k = len(key_hashes), i, slot_at, entry_at
    cdef Py_ssize_t entries_at = 40 + hash_slot_num * 4
    cdef int64_t n = index_count, key_hash, phy, ts, diff, prev
    if len(phy_offsets) != k or len(timestamps) != k:
        raise ValueError("put_entries: key_hashes, phy_offsets and timestamps differ in length")
    PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE)
    try:
        b = <unsigned char*>view.buf
        if k and entries_at + (n + k) * 20 > view.len:
            raise ValueError("put_entries: the entries do not fit the buffer")
        for i in range(k):
            key_hash = key_hashes[i]
            phy = phy_offsets[i]
            ts = timestamps[i]
            if key_hash < 0 or key_hash > 0x7FFFFFFF:
                raise ValueError(f"put_entries: key hash {key_hash} is not an IndexFile hash")
            slot_at = 40 + (key_hash % hash_slot_num) * 4
            prev = be_i32(b + slot_at)
            if prev < 0 or prev >= n:
                prev = 0
            if prev == 0:
                hash_slot_count += 1
            if begin_timestamp <= 0:
                diff = 0
            else:
                diff = ts - begin_timestamp
                diff = diff // 1000 if diff >= 0 else 0
                if diff > 0x7FFFFFFF:
                    diff = 0x7FFFFFFF
            entry_at = entries_at + n * 20
            _put_be32(b + entry_at, <uint32_t>key_hash)
            _put_be32(b + entry_at + 4, <uint32_t>(<uint64_t>phy >> 32))
            _put_be32(b + entry_at + 8, <uint32_t>phy)
            _put_be32(b + entry_at + 12, <uint32_t>diff)
            _put_be32(b + entry_at + 16, <uint32_t>prev)
            _put_be32(b + slot_at, <uint32_t>n)
            n += 1
    finally:
        PyBuffer_Release(&view)
    return n, hash_slot_count


cdef inline Py_ssize_t _value(const unsigned char* p, Py_ssize_t n, const char* name,
                              Py_ssize_t k, Py_ssize_t* vend) noexcept nogil:
    """``find_property``'s match: the start of ``name``'s value (entries start at 0 or after
    \\x02), its end in ``vend``; -1 when absent."""
    cdef Py_ssize_t i, j
    for i in range(n - k + 1):
        if p[i] == <unsigned char>name[0] and memcmp(p + i, name, k) == 0 and \
                (i == 0 or p[i - 1] == 2):
            j = i + k
            while j < n and p[j] != 2:
                j += 1
            vend[0] = j
            return i + k
    return -1


cdef inline bint _plain(const unsigned char* p, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    """ASCII, and no whitespace ``str.strip`` would take but the space that separates keys."""
    cdef unsigned char c
    for i in range(a, b):
        c = p[i]
        if c >= 0x80 or (9 <= c <= 13) or (28 <= c <= 31):
            return False
    return True


cdef int _add(list out, str prefix, const unsigned char* p, Py_ssize_t a, Py_ssize_t b,
              list seen_at) except -1:
    """Append ``prefix + p[a:b]`` unless empty or already among this message's keys."""
    cdef Py_ssize_t i, s, e
    if a >= b:
        return 0
    for i in range(0, len(seen_at), 2):
        s = seen_at[i]
        e = seen_at[i + 1]
        if e - s == b - a and memcmp(p + s, p + a, b - a) == 0:
            return 0
    seen_at.append(a)
    seen_at.append(b)
    out.append(prefix + PyUnicode_DecodeASCII(<const char*>p + a, b - a, NULL))
    return 0


def key_entries(topics, props, phy_offsets, timestamps, int64_t done):
    cdef Py_ssize_t n = len(props), m, i, j, k0, ks, ke, us, ue, a, b, plen
    cdef const unsigned char* p
    cdef int64_t phy
    cdef list keys = [], phys = [], stamps = [], seen_at
    cdef bytes pb
    cdef str topic, last_topic = None, prefix = None
    if len(topics) != n or len(phy_offsets) != n or len(timestamps) != n:
        raise ValueError("key_entries: the lists differ in length")
    fallback = None
    for i in range(n):
        phy = phy_offsets[i]
        if phy <= done:
            continue
        topic = topics[i]
        pb = props[i]
        p = <const unsigned char*>PyBytes_AS_STRING(pb)
        plen = PyBytes_GET_SIZE(pb)
        ks = _value(p, plen, "KEYS\x01", 5, &ke)
        us = _value(p, plen, "UNIQ_KEY\x01", 9, &ue)
        k0 = len(keys)
        if (ks >= 0 and not _plain(p, ks, ke)) or (us >= 0 and not _plain(p, us, ue)):
            if fallback is None:
                from rocketlite.formats.index_entries import message_keys as fallback
            keys += fallback(topic, pb)
        else:
            if topic is not last_topic:
                last_topic = topic
                prefix = topic + "#"
            seen_at = []
            if us >= 0:
                a, b = us, ue
                while a < b and p[a] == 32:
                    a += 1
                while b > a and p[b - 1] == 32:
                    b -= 1
                _add(keys, prefix, p, a, b, seen_at)
            if ks >= 0:
                a = ks
                for j in range(ks, ke + 1):
                    if j == ke or p[j] == 32:
                        _add(keys, prefix, p, a, j, seen_at)
                        a = j + 1
        m = len(keys) - k0
        if m:
            phys += [phy_offsets[i]] * m
            stamps += [timestamps[i]] * m
            done = phy
    return keys, phys, stamps, done
