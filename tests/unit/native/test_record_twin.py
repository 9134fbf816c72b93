"""The compiled segment walks against the pure ones in ``formats/record_scan``: ``scan_records``
(recovery) and ``dispatch_plan`` (ConsumeQueue units per queue) give the same result on random
runs of records of every shape, with BLANK records, damaged bytes, torn (zeroed) tails and trailing
garbage, from any start to any end; ``encode_batch`` (``formats/record_batch``) the same
bytes, or the same error for a flag out of range; ``unit_record_ok`` and ``records_match_units``
(a pull's check of its records against their units) the same answer, with ISA-L's CRC called
directly and through Python."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nativehelp import twin
from rocketlite.formats import message_record as rec
from rocketlite.formats import record_batch as batch
from rocketlite.formats import record_scan as ref
from rocketlite.formats.properties import encode_properties
from strategies import records

C = twin("rocketlite.formats._record_c")
I64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def plain_records(draw: st.DrawFn, queues: dict[tuple[str, int], int]) -> bytes:
    """Mostly what dispatch takes whole: a few topics and queues with consecutive queue offsets,
    tags (now and then not ASCII), keys; now and then a transaction flag or the schedule topic."""
    topic = draw(st.sampled_from(["TopicA", "TopicB", "SCHEDULE_TOPIC_XXXX", "t" * 127]))
    qid = draw(st.integers(0, 2))
    qoff = queues.get((topic, qid), draw(st.integers(0, 5)))
    if draw(st.integers(0, 9)) == 0:
        qoff += draw(st.integers(-2, 2))  # a rewrite or a gap
    queues[(topic, qid)] = qoff + 1
    props: dict[str, str] = {}
    if draw(st.booleans()):
        props["TAGS"] = draw(st.sampled_from(["TagA", "", "x y", "\u00e9t\u00e9", "T" * 40]))
    if draw(st.integers(0, 3)) == 0:
        props["KEYS"] = draw(st.sampled_from(["k1", "k1 k2"]))
    if draw(st.integers(0, 3)) == 0:
        props["UNIQ_KEY"] = "0A0B0C"
    text = encode_properties(props)
    if draw(st.integers(0, 7)) == 0:
        text = draw(st.text(alphabet="\x01\x02TAGSKEY\u00e9", max_size=20))
    body = draw(st.binary(max_size=40))
    sys_flag = draw(st.sampled_from([0, 0, 0, 0x4, 0x8, 0xC, 0x2]))
    tb = topic.encode()
    return rec.encode_record(
        topic=tb, body=body, properties=text.encode(), queue_id=qid, flag=0, queue_offset=qoff,
        commit_log_offset=draw(st.integers(-3, 2**40)), sys_flag=sys_flag,
        born_timestamp=0, born_host=b"\x7f\0\0\x01", born_port=1,
        store_timestamp=draw(st.integers(0, 100)), store_host=b"\x7f\0\0\x01", store_port=2,
    )


@st.composite
def segments(draw: st.DrawFn) -> bytes:
    queues: dict[tuple[str, int], int] = {}
    parts = draw(st.lists(plain_records(queues) | records().map(lambda m: m.encode()),
                          max_size=8))
    data = bytearray(b"".join(parts))
    tail = draw(st.sampled_from(["none", "blank", "damage", "torn", "garbage"]))
    if tail == "blank":
        data += rec.encode_blank(64) + bytes(56)
    elif tail == "damage" and data:
        i = draw(st.integers(0, len(data) - 1))
        data[i] ^= draw(st.integers(1, 255))
    elif tail == "torn" and data:
        cut = draw(st.integers(0, len(data)))
        data[cut:] = bytes(len(data) - cut)
    elif tail == "garbage":
        data += draw(st.binary(max_size=20))
    return bytes(data + bytes(draw(st.integers(0, 16))))


@given(segments(), st.data(), st.booleans(), I64)
def test_scan_records(data: bytes, d: st.DataObject, check_crc: bool, after_ts: int) -> None:
    start = d.draw(st.integers(0, len(data)))
    end = d.draw(st.integers(start, len(data)))
    assert C.scan_records(data, start, end, check_crc, after_ts) == \
        ref._scan_records_py(data, start, end, check_crc, after_ts)


@given(segments(), st.data())
def test_dispatch_plan(data: bytes, d: st.DataObject) -> None:
    start = d.draw(st.integers(0, len(data)))
    limit = d.draw(st.integers(start, len(data)))
    assert C.dispatch_plan(data, start, limit) == ref._dispatch_plan_py(data, start, limit)


@given(st.lists(plain_records({}), max_size=6))
def test_whole_records_scan_to_the_end(parts: list[bytes]) -> None:
    """A run of whole records is walked to its end, on both paths, with or without CRC."""
    data = b"".join(parts)
    for f in (C.scan_records, ref._scan_records_py):
        stop, n, last, blank, first = f(data, 0, len(data), True, -1)
        assert (stop, n, blank) == (len(data), len(parts), False)
        assert last == (len(parts[-1]) if parts else 0)
        assert first == (0 if parts else -1)


def test_a_plan_packs_units_per_queue() -> None:
    def record(topic: bytes, qid: int, qoff: int, phys: int, tags: str) -> bytes:
        return rec.encode_record(
            topic=topic, body=b"x" * 10, properties=encode_properties({"TAGS": tags}).encode(),
            queue_id=qid, flag=0, queue_offset=qoff, commit_log_offset=phys, sys_flag=0,
            born_timestamp=0, born_host=b"\0" * 4, born_port=0, store_timestamp=7,
            store_host=b"\0" * 4, store_port=0)

    a = record(b"T", 0, 5, 100, "TagA")
    b = record(b"T", 1, 0, 100 + len(a), "TagA")
    c = record(b"T", 0, 6, 100 + 2 * len(a), "TagA")
    data = a + b + c
    for f in (C.dispatch_plan, ref._dispatch_plan_py):
        stop, runs, keyed, ts = f(data, 0, len(data))
        assert (stop, keyed, ts) == (len(data), [], 7)
        assert [r[:3] for r in runs] == [[b"T", 0, 5], [b"T", 1, 0]]
        assert len(runs[0][3]) == 40 and runs[0][4] == 100 + 3 * len(a)
        assert runs[0][3][12:20] == (2598919).to_bytes(8, "big", signed=True)  # "TagA".hashCode()


def outcome(f: object, *args: object) -> object:
    try:
        return f(*args)  # type: ignore[operator]
    except (struct.error, OverflowError) as e:
        return type(e).__name__


@given(st.lists(st.tuples(st.binary(max_size=40), st.binary(max_size=30),
                          st.integers(-(2**31), 2**31 - 1) | st.sampled_from([2**31, -(2**31) - 1])),
                max_size=8),
       st.data(), st.booleans(), st.sampled_from([b"", b"m" * 13, bytes(range(40))]),
       st.sampled_from([b"\x04abcd", b"\x00\x80" + b"t" * 128]))
def test_encode_batch(items: list[tuple[bytes, bytes, int]], d: st.DataObject, with_flags: bool,
                      mid: bytes, topic_block: bytes) -> None:
    bodies = [b for b, _, _ in items]
    props = [p for _, p, _ in items]
    flags = [f for _, _, f in items] if with_flags else None
    lo = d.draw(st.integers(0, len(items)))
    hi = d.draw(st.integers(lo, len(items)))
    args = (bodies, props, flags, lo, hi, d.draw(st.integers(0, 65535)),
            d.draw(st.integers(0, 2**40)), d.draw(st.integers(0, 2**50)), mid,
            struct.pack(">i", rec.MAGIC_V1), topic_block)
    assert outcome(C.encode_batch, *args) == outcome(batch._encode_batch_py, *args)


def test_encode_batch_writes_records_a_reader_decodes() -> None:
    mid = rec.batch_mid(0, 1, b"\x7f\0\0\x01", 2, 3, b"\x7f\0\0\x01", 4)
    data = C.encode_batch([b"ab", b"cde"], [b"", b"TAGS\x01x\x02"], None, 0, 2, 3, 10, 1000, mid,
                          struct.pack(">i", rec.MAGIC_V1), rec.topic_block(b"T"))
    first = rec.decode_record(data, 0)
    assert first is not None
    second = rec.decode_record(data, first.total_size)
    assert second is not None
    assert (first.body, first.queue_offset, first.commit_log_offset, first.queue_id) == \
        (b"ab", 10, 1000, 3)
    assert (second.body, second.queue_offset, second.commit_log_offset, second.properties) == \
        (b"cde", 11, 1000 + first.total_size, {"TAGS": "x"})


@given(st.lists(st.binary(max_size=20) | st.text(alphabet="\x01\x02TAGSxé ", max_size=24).map(
    str.encode) | st.sampled_from([b"TAGS\x01TagA\x02", b"a\x02TAGS\x01\xc3\xa9t\xc3\xa9", b""]),
    max_size=10))
def test_tags_codes(props: list[bytes]) -> None:
    assert C.tags_codes(props) == ref._tags_codes_py(props)


def test_tags_codes_hash_as_java() -> None:
    assert C.tags_codes([b"TAGS\x01TagA\x02", b"", b"KEYS\x01k\x02"]) == [2598919, 0, 0]


@given(st.lists(plain_records({}) | records().map(lambda m: m.encode()), min_size=1, max_size=4),
       st.data())
def test_unit_record_ok(parts: list[bytes], d: st.DataObject) -> None:
    """A pull's check of a record against its ConsumeQueue unit: the twin says yes exactly when
    the pure one does (ISA-L's CRC called directly or through Python), whatever unit (right,
    another record's, a wrong size, CommitLog offset, queue, queue offset or topic) and whatever
    damage; what either accepts, ``unit_mismatch`` accepts too, and it refuses a wrong offset,
    queue or queue offset."""
    data = bytearray(b"".join(parts))
    starts = [0]
    for p in parts[:-1]:
        starts.append(starts[-1] + len(p))
    i = d.draw(st.integers(0, len(parts) - 1))
    m = rec.decode_record(bytes(parts[i]))
    assert m is not None
    pos, size = starts[i], len(parts[i])
    phys, qid, qoff, topic = m.commit_log_offset, m.queue_id, m.queue_offset, m.topic.encode()
    what = d.draw(st.sampled_from(["right", "pos", "size", "phys", "qid", "qoff", "topic",
                                   "damage"]))
    if what == "pos":
        pos = d.draw(st.integers(-2, len(data)))
    elif what == "size":
        size = d.draw(st.integers(0, len(data) + 2))
    elif what == "phys":
        phys ^= 1 << d.draw(st.integers(0, 62))  # another int64
    elif what == "qid":
        qid += d.draw(st.sampled_from([-1, 1, 2**31]))
    elif what == "qoff":
        qoff ^= 1 << d.draw(st.integers(0, 62))
    elif what == "topic":
        topic = d.draw(st.binary(max_size=8))
    elif what == "damage":
        at = d.draw(st.integers(starts[i], starts[i] + size - 1))
        data[at] ^= 1 << d.draw(st.integers(0, 7))
    buf = bytes(data)
    want = rec.unit_record_ok(buf, pos, size, phys, qid, qoff, topic)
    with crc_path(d.draw(st.booleans())):
        assert C.unit_record_ok(buf, pos, size, phys, qid, qoff, topic) == want
        assert C.unit_record_ok(memoryview(buf), pos, size, phys, qid, qoff, topic) == want
    if want:
        assert rec.unit_mismatch(buf, pos, size, phys, qid, qoff, topic) is None
    if what == "right":
        assert rec.unit_mismatch(buf, pos, size, phys, qid, qoff, topic) is None
    elif what in ("phys", "qid", "qoff"):
        assert rec.unit_mismatch(buf, pos, size, phys, qid, qoff, topic) is not None


@contextmanager
def crc_path(direct: bool) -> Iterator[None]:
    """The compiled checks with ISA-L's C CRC (``direct``, where its module exports it) or with
    the Python-level ``crc32``; restored after."""
    was = C._direct_crc()
    C._direct_crc(direct)
    try:
        yield
    finally:
        C._direct_crc(was)


def test_the_direct_crc_is_there_with_isal() -> None:
    """The fast path is not silently lost: with ISA-L installed the checks call its C CRC."""
    from isal import isal_zlib
    assert rec.crc32 is isal_zlib.crc32 and C._direct_crc()


def run_record(body: bytes, props: bytes) -> bytes:
    """A record of topic ``TopicA`` (its queue fields are patched by the test)."""
    return rec.encode_record(
        topic=b"TopicA", body=body, properties=props, queue_id=0, flag=0, queue_offset=0,
        commit_log_offset=0, sys_flag=0, born_timestamp=0, born_host=b"\x7f\0\0\x01",
        born_port=1, store_timestamp=0, store_host=b"\x7f\0\0\x01", store_port=2)


RUN_RECORD = st.builds(run_record, st.binary(max_size=300), st.sampled_from([b"", b"a\x01b"]))


OTHER_RECORD = plain_records({}) | records().map(lambda m: m.encode())


@given(st.lists(st.integers(0, 7).flatmap(lambda i: RUN_RECORD if i else OTHER_RECORD),
                min_size=1, max_size=6),
       st.data())
def test_records_match_units(parts: list[bytes], d: st.DataObject) -> None:
    """A segment run of a pull checked in one call: the compiled batch (ISA-L's CRC called
    directly or through Python) names the record the pure one names (the first from ``start``
    that ``unit_record_ok`` refuses; -1 for none), for runs whose units mostly match (queue,
    queue offset, CommitLog offset patched to what the unit says) and now and then do not, with
    gaps between records, damage, spans off a record and any earlier runs' queue offsets before
    them."""
    base = d.draw(st.integers(0, 2**40))
    qid = d.draw(st.integers(0, 3))
    topic = b"TopicA" if d.draw(st.integers(0, 9)) else d.draw(st.binary(max_size=7))
    queue_offsets = d.draw(st.lists(st.integers(0, 2**40), max_size=3))
    first = len(queue_offsets)
    data = bytearray(d.draw(st.binary(max_size=3)))
    spans: list[int] = []
    for p in parts:
        rel = len(data)
        data += p
        qoff = d.draw(st.integers(0, 2**40))
        if d.draw(st.integers(0, 9)):  # the record its unit says, but for another topic perhaps
            struct.pack_into(">i", data, rel + 12, qid)
            struct.pack_into(">q", data, rel + 20, qoff)
            struct.pack_into(">q", data, rel + 28, base + rel)
        queue_offsets.append(qoff if d.draw(st.integers(0, 19)) else qoff ^ 1)
        size = len(p) + (d.draw(st.integers(-2, 2)) if not d.draw(st.integers(0, 19)) else 0)
        spans += (rel if d.draw(st.integers(0, 19)) else rel + d.draw(st.integers(-3, 3)), size)
        data += d.draw(st.binary(max_size=3))  # a gap: a filtered record, say
    if not d.draw(st.integers(0, 4)):
        data[d.draw(st.integers(0, len(data) - 1))] ^= 1 << d.draw(st.integers(0, 7))
    buf = bytes(data)
    start = d.draw(st.integers(-1, len(parts) + 1))
    want = ref._records_match_units_py(buf, spans, base, queue_offsets, first, qid, topic, start)
    with crc_path(d.draw(st.booleans())):
        assert C.records_match_units(buf, spans, base, queue_offsets, first, qid, topic,
                                     start) == want
        assert C.records_match_units(memoryview(buf), spans, base, queue_offsets, first, qid,
                                     topic, start) == want
    end = len(parts) if want < 0 else want
    for k in range(max(start, 0), end):  # the ones before it, unit_mismatch accepts
        rel, size = spans[2 * k], spans[2 * k + 1]
        assert rec.unit_mismatch(buf, rel, size, base + rel, qid, queue_offsets[first + k],
                                 topic) is None
    if want >= 0:
        assert not C.unit_record_ok(buf, spans[2 * want], spans[2 * want + 1],
                                    base + spans[2 * want], qid, queue_offsets[first + want], topic)


def test_records_match_units_refuses_spans_without_queue_offsets() -> None:
    for f in (C.records_match_units, ref._records_match_units_py):
        with pytest.raises(ValueError, match="pairs"):
            f(b"", [0], 0, [0], 0, 0, b"T", 0)
        with pytest.raises(IndexError):
            f(b"", [0, 91, 91, 91], 0, [0, 1], 1, 0, b"T", 0)
        assert f(b"", [], 0, [], 0, 0, b"T", 0) == -1
