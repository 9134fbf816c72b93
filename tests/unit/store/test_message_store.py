"""The store's public behaviour: append, segment roll, reads by queue, id, key and time."""

from __future__ import annotations

import logging
import re
import struct
from pathlib import Path

import pytest

from rocketlite.common.errors import MessageIllegalError, StoreLockedError
from rocketlite.formats import message_record as rec
from rocketlite.formats.javahash import tags_code
from rocketlite.store.get_message import GetMessageStatus
from rocketlite.store.message_store import MessageStore
from storehelp import msg, small_config, wait_dispatched


@pytest.fixture
def store(tmp_path: Path) -> MessageStore:
    s = MessageStore(small_config(tmp_path)).start()
    yield s  # type: ignore[misc]
    s.shutdown()


def test_append_assigns_queue_and_commitlog_offsets(store: MessageStore) -> None:
    res = store.put_messages_sync([msg(queue_id=0), msg(queue_id=1), msg(queue_id=0)])
    assert [r.queue_offset for r in res] == [0, 0, 1]
    assert res[0].commit_log_offset == 0
    assert res[1].commit_log_offset == res[0].size
    wait_dispatched(store)
    assert store.max_offset_in_queue("TopicTest", 0) == 2
    assert store.max_offset_in_queue("TopicTest", 1) == 1
    got = store.get_message("TopicTest", 0, 0)
    assert got.status is GetMessageStatus.FOUND
    assert got.next_begin_offset == 2
    decoded = [rec.decode_record(b) for b in got.messages]
    assert [m.queue_offset for m in decoded if m] == [0, 1]


def test_segments_roll_with_blank_record(store: MessageStore) -> None:
    body = b"x" * 1000
    res = store.put_messages_sync([msg(body=body) for _ in range(30)])
    wait_dispatched(store)
    names = sorted(p.name for p in store.config.commit_log_dir.iterdir())
    assert len(names) >= 4
    assert all(re.fullmatch(r"\d{20}", n) for n in names)
    assert [int(n) for n in names] == [i * 8192 for i in range(len(names))]
    for r in res:  # no record straddles a segment
        assert r.commit_log_offset // 8192 == (r.end_offset - 1) // 8192
    seg0 = (store.config.commit_log_dir / names[0]).read_bytes()
    first_in_seg1 = min(r.commit_log_offset for r in res if r.commit_log_offset >= 8192)
    last_end = max(r.end_offset for r in res if r.end_offset <= 8192)
    assert first_in_seg1 == 8192
    size, magic = rec.BLANK.unpack_from(seg0, last_end)
    assert magic == rec.BLANK_MAGIC and size == 8192 - last_end
    got = store.get_message("TopicTest", 0, 0, max_count=100, max_bytes=1 << 30)
    assert len(got.messages) == 30
    assert all(rec.decode_record(b).body == body for b in got.messages)  # type: ignore[union-attr]


def test_get_message_statuses(store: MessageStore) -> None:
    st = GetMessageStatus
    assert store.get_message("Nope", 0, 0).status is st.NO_MATCHED_LOGIC_QUEUE
    store.put_messages_sync([msg() for _ in range(3)])
    wait_dispatched(store)
    assert store.get_message("TopicTest", 0, 3).status is st.OFFSET_OVERFLOW_ONE
    bad = store.get_message("TopicTest", 0, 10)
    assert bad.status is st.OFFSET_OVERFLOW_BADLY and bad.next_begin_offset == 0
    limited = store.get_message("TopicTest", 0, 0, max_count=2)
    assert len(limited.messages) == 2 and limited.next_begin_offset == 2
    one = store.get_message("TopicTest", 0, 0, max_count=10, max_bytes=1)
    assert len(one.messages) == 1  # always at least one message
    none = store.get_message("TopicTest", 0, 0, tag_filter=lambda code: code == tags_code("B"))
    assert none.status is st.NO_MATCHED_MESSAGE and none.next_begin_offset == 3


def test_filtered_pulls_read_units_in_chunks_and_find_every_match(store: MessageStore) -> None:
    # 1,000 messages, every 97th tagged B: a filtered pull skips runs of non-matching units,
    # longer than the first chunk (max_count units), within the scan window of 800 units.
    store.put_messages_sync([msg(tags="B" if i % 97 == 0 else "A", body=b"%d" % i)
                             for i in range(1000)])
    wait_dispatched(store)
    is_b = tags_code("B").__eq__
    got: list[int] = []
    offset = 0
    for _ in range(100):
        r = store.get_message("TopicTest", 0, offset, max_count=4, tag_filter=is_b)
        got += r.queue_offsets
        assert all(rec.decode_record(m).body == b"%d" % q  # type: ignore[union-attr]
                   for m, q in zip(r.messages, r.queue_offsets, strict=True))
        offset = r.next_begin_offset
        if offset >= 1000:
            break
    assert got == list(range(0, 1000, 97))
    plain = store.get_message("TopicTest", 0, 5, max_count=32)
    assert plain.queue_offsets == list(range(5, 37)) and plain.next_begin_offset == 37


def test_tag_codes_in_consume_queue(store: MessageStore) -> None:
    store.put_messages_sync([msg(tags="TagA"), msg(tags=None)])
    wait_dispatched(store)
    cq = store.find_queue("TopicTest", 0)
    assert cq is not None
    assert [u[2] for u in cq.get_units(0, 10)] == [2598919, 0]


def test_lookup_by_id_key_and_time(store: MessageStore) -> None:
    res = store.put_messages_sync(
        [msg(keys="k1 k2", body=b"a"), msg(keys="k2", body=b"b"), msg(topic="Other", keys="k1")]
    )
    wait_dispatched(store)
    m = store.look_message_by_id(store.message_id(res[1].commit_log_offset))
    assert m is not None and m.body == b"b"
    assert store.look_message_by_id("00" * 16) is not None  # offset 0 is the first record
    assert store.look_message_by_id("not-hex") is None
    assert sorted(x.body for x in store.query_message("TopicTest", "k2")) == [b"a", b"b"]
    assert [x.body for x in store.query_message("TopicTest", "k1")] == [b"a"]
    assert store.query_message("TopicTest", "k1", begin_ms=0, end_ms=1) == []
    ts = res[0].store_timestamp
    assert store.offset_in_queue_by_time("TopicTest", 0, ts) == 0
    assert store.offset_in_queue_by_time("TopicTest", 0, ts + 10_000) == 2
    assert store.earliest_message_time() == ts
    assert store.earliest_message_time("TopicTest", 0) == ts


def test_bad_messages_are_refused_and_nothing_is_written(store: MessageStore) -> None:
    before = store.commitlog.max_offset
    too_big = msg(body=b"x" * (store.config.max_message_size + 1))
    for bad, pattern in [
        (too_big, "maxMessageSize"),
        (msg(topic=""), "empty"),
        (msg(topic="bad topic!"), "illegal"),
        (msg(queue_id=-1), "queue id"),
        (msg(body=b"x" * 9000), "does not fit"),
    ]:
        with pytest.raises(MessageIllegalError, match=pattern):
            store.put_messages_sync([msg(), bad])
    assert store.commitlog.max_offset == before


def test_a_field_out_of_range_refuses_the_batch_and_takes_no_queue_offset(
        store: MessageStore) -> None:
    """Found before anything is written (it used to surface while encoding, after the messages
    before it had taken queue offsets that no record then held)."""
    before = store.commitlog.max_offset
    for field in ("flag", "born_port", "reconsume_times"):
        bad = msg()
        setattr(bad, field, 2**31)
        with pytest.raises(struct.error):
            store.put_messages_sync([msg(), msg(queue_id=1), bad])
    assert store.commitlog.max_offset == before
    assert store.commitlog.topic_queue_table == {}
    assert [r.queue_offset for r in store.put_messages_sync([msg(), msg()])] == [0, 1]


def test_a_pull_skips_exactly_the_damaged_records_across_segments(
        store: MessageStore, caplog: pytest.LogCaptureFixture) -> None:
    """Records are checked per segment run; a run with a damaged record makes the pull read again
    record by record: the result is the record-by-record one (the damaged records skipped, the
    pull not cut short by them), each damaged record logged once."""
    from rocketlite.store.get_message import _collect

    res = store.put_messages_sync([msg(body=b"%03d" % i + b"x" * 500) for i in range(30)])
    wait_dispatched(store)
    assert len({store.commitlog.files.find(r.commit_log_offset) for r in res}) >= 3
    for i in (5, 20):
        mf = store.commitlog.files.find(res[i].commit_log_offset)
        assert mf is not None
        mf.mm[res[i].commit_log_offset - mf.file_from_offset + 88 + 1] ^= 0x01  # its body
    caplog.set_level(logging.ERROR, logger="rocketlite.store.get_message")
    got = store.get_message("TopicTest", 0, 0, 32)
    assert got.queue_offsets == [i for i in range(30) if i not in (5, 20)]
    assert (got.status, got.next_begin_offset) == (GetMessageStatus.FOUND, 30)
    assert got.messages == [store.read_raw(r.commit_log_offset, r.size)
                            for i, r in enumerate(res) if i not in (5, 20)]
    assert [m for m in caplog.messages if "not serving" in m] == [
        m for m in caplog.messages if "CRC" in m] and len(caplog.messages) == 2
    cq = store.consume_queue("TopicTest", 0)
    assert cq is not None
    for count, size in ((32, 1 << 20), (5, 1 << 20), (32, 3000)):  # as record by record
        fast = store.get_message("TopicTest", 0, 0, count, size)
        slow = _collect(store.commitlog, cq, 0, count, size, None, True)
        assert slow is not None
        assert (fast.queue_offsets, fast.next_begin_offset, fast.body) == \
            (slow.queue_offsets, slow.next_begin_offset, slow.body)


def test_records_of_another_shape_are_served_from_the_run_check(
        store: MessageStore, caplog: pytest.LogCaptureFixture) -> None:
    """A topic longer than 127 bytes takes V2 records, which the one-call check leaves to
    ``unit_mismatch``: they are served, nothing logged."""
    topic = "T" * 130
    res = store.put_messages_sync([msg(topic=topic, body=b"b%d" % i) for i in range(4)])
    wait_dispatched(store)
    caplog.set_level(logging.ERROR, logger="rocketlite.store.get_message")
    got = store.get_message(topic, 0, 0, 32)
    assert got.queue_offsets == [0, 1, 2, 3] and caplog.messages == []
    assert [rec.decode_record(m).body for m in got.messages] == [  # type: ignore[union-attr]
        b"b%d" % i for i in range(len(res))]


def test_second_store_on_same_root_is_refused(store: MessageStore) -> None:
    with pytest.raises(StoreLockedError, match=str(store.root)):
        MessageStore(store.config).start()


def test_a_pull_keeps_the_records_it_found_when_retention_closes_their_segment(
        store: MessageStore) -> None:
    from rocketlite.store.get_message import _SegmentReader

    res = store.put_messages_sync([msg(body=b"m%d" % i) for i in range(3)])
    wait_dispatched(store)
    want = store.get_message("TopicTest", 0, 0).body
    cq = store.consume_queue("TopicTest", 0)
    queue_offsets: list[int] = []
    reader = _SegmentReader(store.commitlog, cq, queue_offsets, True)
    for r in res:
        assert reader.read(r.commit_log_offset, r.size, r.queue_offset)
        queue_offsets.append(r.queue_offset)
    segment = store.commitlog.files.files[0]
    segment.close()  # retention deletes the segment between the reads and the copy
    assert not segment.mm.closed  # the reader's view keeps the mapping
    assert reader.body() == want and len(want) == sum(r.size for r in res)
    assert not reader.damaged
    reader.release()
    segment.mm.close()  # no view is left: the mapping can go now (BufferError if one were)
    late = _SegmentReader(store.commitlog, cq, [], True)
    assert not late.read(res[0].commit_log_offset, res[0].size, 0)  # a closed segment: removing
