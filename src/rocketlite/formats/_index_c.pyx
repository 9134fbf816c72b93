# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twins of ``rocketlite.formats.index_entries``: ``put_entries`` (a batch of IndexFile
entries and their hash slots written in one call) and ``key_entries`` (the index keys of a run of
messages; a message whose KEYS or UNIQ_KEY is not plain ASCII goes to the pure ``message_keys``).
``tests/unit/native/test_index_twin.py`` checks both against the pure functions. Also
``key_hash_entries``, the twin of ``store.index_service._key_hash_entries_py``: ``key_entries``
with each key's index hash in its place, hashed here without making the key."""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeASCII
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memchr, memcmp

from rocketlite.common._bytes cimport be_i32

from rocketlite.formats.javahash import index_key_hash, java_string_hash


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
    \\x02; the first entry that starts with ``name``), its end in ``vend``; -1 when absent."""
    cdef Py_ssize_t i = 0, j
    cdef const unsigned char* q
    while n - i >= k:
        q = <const unsigned char*>memchr(p + i, 2, n - i)
        j = n if q == NULL else q - p  # this entry is p[i:j]
        if j - i >= k and memcmp(p + i, name, k) == 0:
            vend[0] = j
            return i + k
        i = j + 1
    return -1


cdef inline bint _plain(const unsigned char* p, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    """ASCII, and no whitespace ``str.strip`` would take but the space that separates keys."""
    cdef unsigned char c
    for i in range(a, b):
        c = p[i]
        if c >= 0x80 or (9 <= c <= 13) or (28 <= c <= 31):
            return False
    return True


cdef inline long _key_hash(uint32_t h) noexcept nogil:
    """``javahash.index_key_hash`` of a string whose Java hashCode is ``h``."""
    cdef int32_t v = <int32_t>h
    if v == -2147483648:
        return 0
    return -v if v < 0 else v


cdef enum:
    _SEEN = 64  # keys of one message deduplicated here; a message with more goes to the pure


cdef int _add(list out, str prefix, const unsigned char* p, Py_ssize_t a, Py_ssize_t b,
              Py_ssize_t* seen, Py_ssize_t* nseen, bint hashed, uint32_t prefix_hash) except -1:
    """Append ``prefix + p[a:b]`` (``hashed``: its index key hash, from ``prefix``'s Java hash)
    unless empty or already among this message's keys (``seen``: their ranges, ``nseen`` of
    them); 1 when ``seen`` is full (nothing appended)."""
    cdef Py_ssize_t i, s, e
    cdef uint32_t h = prefix_hash
    if a >= b:
        return 0
    for i in range(nseen[0]):
        s = seen[2 * i]
        e = seen[2 * i + 1]
        if e - s == b - a and memcmp(p + s, p + a, b - a) == 0:
            return 0
    if nseen[0] == _SEEN:
        return 1
    seen[2 * nseen[0]] = a
    seen[2 * nseen[0] + 1] = b
    nseen[0] += 1
    if hashed:
        for i in range(a, b):
            h = 31 * h + p[i]
        out.append(_key_hash(h))
    else:
        out.append(prefix + PyUnicode_DecodeASCII(<const char*>p + a, b - a, NULL))
    return 0


def key_entries(topics, props, phy_offsets, timestamps, int64_t done):
    return _entries(topics, props, phy_offsets, timestamps, done, False)


def key_hash_entries(topics, props, phy_offsets, timestamps, int64_t done):
    return _entries(topics, props, phy_offsets, timestamps, done, True)


cdef tuple _entries(topics, props, phy_offsets, timestamps, int64_t done, bint hashed):
    """``key_entries``; ``hashed``: each key's ``index_key_hash`` instead of the key (the ASCII
    ones hashed here, from the Java hash of ``topic#``, without making the key)."""
    cdef Py_ssize_t n = len(props), m, i, j, k0, ks, ke, us, ue, a, b, plen, nseen
    cdef Py_ssize_t seen[2 * _SEEN]
    cdef const unsigned char* p
    cdef int64_t phy
    cdef int full
    cdef uint32_t prefix_hash = 0
    cdef list keys = [], phys = [], stamps = []
    cdef bytes pb
    cdef str topic, last_topic = None, prefix = None
    if len(topics) != n or len(phy_offsets) != n or len(timestamps) != n:
        raise ValueError("key_entries: the lists differ in length")
    fallback = None
    for i in range(n):
        phy_obj = phy_offsets[i]
        phy = phy_obj
        if phy <= done:
            continue
        topic = topics[i]
        pb = props[i]
        p = <const unsigned char*>PyBytes_AS_STRING(pb)
        plen = PyBytes_GET_SIZE(pb)
        ks = _value(p, plen, "KEYS\x01", 5, &ke)
        us = _value(p, plen, "UNIQ_KEY\x01", 9, &ue)
        k0 = len(keys)
        full = (ks >= 0 and not _plain(p, ks, ke)) or (us >= 0 and not _plain(p, us, ue))
        if not full:
            if topic is not last_topic:
                last_topic = topic
                prefix = topic + "#"
                if hashed:
                    prefix_hash = <uint32_t>(<int64_t>java_string_hash(prefix))
            nseen = 0
            if us >= 0:
                a, b = us, ue
                while a < b and p[a] == 32:
                    a += 1
                while b > a and p[b - 1] == 32:
                    b -= 1
                full = _add(keys, prefix, p, a, b, seen, &nseen, hashed, prefix_hash)
            if ks >= 0:
                a = ks
                for j in range(ks, ke + 1):
                    if full:
                        break
                    if j == ke or p[j] == 32:
                        full = _add(keys, prefix, p, a, j, seen, &nseen, hashed, prefix_hash)
                        a = j + 1
        if full:  # not plain ASCII, or too many keys: the pure function's keys
            del keys[k0:]
            if fallback is None:
                from rocketlite.formats.index_entries import message_keys as fallback
            keys += map(index_key_hash, fallback(topic, pb)) if hashed else fallback(topic, pb)
        m = len(keys) - k0
        if m:
            stamp = timestamps[i]
            for j in range(m):
                phys.append(phy_obj)
                stamps.append(stamp)
            done = phy
    return keys, phys, stamps, done
