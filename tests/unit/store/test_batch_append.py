"""Batch appends (MessageExtBatch): same bytes as single appends, segment splits, dispatch hints."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.common.errors import MessageIllegalError
from rocketlite.formats import message_record as rec
from rocketlite.formats.javahash import tags_code
from rocketlite.formats.properties import encode_properties
from rocketlite.store import commitlog as commitlog_mod
from rocketlite.store.commitlog import CommitLog
from rocketlite.store.message import MessageBatch, MessageToStore
from rocketlite.store.message_store import MessageStore
from storehelp import small_config, wait_dispatched


def props_of(tags: str | None, keys: str | None = None) -> bytes:
    d = {}
    if tags:
        d["TAGS"] = tags
    if keys:
        d["KEYS"] = keys
    return encode_properties(d).encode()


def batch(topic: str, bodies: list[bytes], tags: list[str | None], queue_id: int = 0,
          flags: list[int] | None = None, host: bytes = b"\x0a\x00\x00\x07") -> MessageBatch:
    return MessageBatch(
        topic=topic, queue_id=queue_id, bodies=bodies, properties=[props_of(t) for t in tags],
        flags=flags, born_timestamp=1234, born_host=host, born_port=5555,
    )


def as_singles(b: MessageBatch) -> list[MessageToStore]:
    flags = b.flags or [0] * len(b.bodies)
    return [
        MessageToStore(topic=b.topic, body=body, queue_id=b.queue_id, flag=f,
                       properties=p.decode(), born_timestamp=b.born_timestamp,
                       born_host=b.born_host, born_port=b.born_port)
        for body, p, f in zip(b.bodies, b.properties, flags, strict=True)
    ]


def log_bytes(cl: CommitLog) -> bytes:
    return b"".join(bytes(mf.mm[: mf.wrote]) for mf in cl.files.files)


@given(
    topic=st.sampled_from(["T", "TopicTest", "t" * 200]),
    bodies=st.lists(st.binary(max_size=700), min_size=1, max_size=30),
    tag=st.sampled_from([None, "TagA", "标签"]),
    v6=st.booleans(),
)
def test_batch_writes_the_same_bytes_as_single_appends(
    tmp_path_factory: pytest.TempPathFactory, topic: str, bodies: list[bytes], tag: str | None,
    v6: bool,
) -> None:
    host = bytes(range(16)) if v6 else b"\x0a\x00\x00\x07"
    b = batch(topic, bodies, [tag] * len(bodies), queue_id=3,
              flags=list(range(len(bodies))), host=host)
    one = CommitLog(small_config(tmp_path_factory.mktemp("one")), clock=lambda: 99)
    many = CommitLog(small_config(tmp_path_factory.mktemp("many")), clock=lambda: 99)
    try:
        one.append(as_singles(b))  # a few records first, so offsets do not start at 0
        many.append(as_singles(b))
        res = one.append_batch(b)
        singles = many.append(as_singles(b))
        assert log_bytes(one) == log_bytes(many)
        assert res.offsets == [r.commit_log_offset for r in singles]
        assert res.sizes == [r.size for r in singles]
        assert res.queue_offset == singles[0].queue_offset == len(bodies)
        assert res.store_timestamp == 99
    finally:
        one.close()
        many.close()


def test_batch_split_at_segment_end_is_dispatched_in_order(tmp_path: Path) -> None:
    store = MessageStore(small_config(tmp_path)).start()
    try:
        bodies = [bytes([i]) * 300 for i in range(60)]  # ~24 KiB: three 8 KiB segments
        tags = ["TagA" if i % 2 else "TagB" for i in range(60)]
        res = store.put_batch(batch("TopicTest", bodies, tags, queue_id=1)).result
        assert len(res) == 60 and res.queue_offset == 0
        for off, size in zip(res.offsets, res.sizes, strict=True):
            assert off // 8192 == (off + size - 1) // 8192  # no record straddles a segment
        assert len(store.commitlog.files.files) >= 3
        wait_dispatched(store)
        assert store.max_offset_in_queue("TopicTest", 1) == 60
        cq = store.consume_queue("TopicTest", 1)
        for i in range(60):
            unit = cq.get_unit(i)
            assert unit == (res.offsets[i], res.sizes[i], tags_code(tags[i]))
            m = store.look_message(res.offsets[i])
            assert m is not None and m.body == bodies[i] and m.queue_offset == i
    finally:
        store.shutdown()


def test_batches_and_single_appends_interleave(tmp_path: Path) -> None:
    store = MessageStore(small_config(tmp_path, messageIndexEnable="true")).start()
    try:
        expected: list[tuple[bytes, int]] = []
        for round_ in range(5):
            store.put_messages_sync([MessageToStore(topic="Mix", body=b"single%d" % round_,
                                                    properties=encode_properties({"TAGS": "S"}))])
            expected.append((b"single%d" % round_, tags_code("S")))
            bodies = [b"batch%d-%d" % (round_, i) for i in range(7)]
            b = MessageBatch(topic="Mix", queue_id=0, bodies=bodies,
                             properties=[props_of("B", keys=f"k{round_}-{i}") for i in range(7)])
            store.put_batch(b)
            expected += [(body, tags_code("B")) for body in bodies]
        wait_dispatched(store)
        got = store.get_message("Mix", 0, 0, max_count=100, max_bytes=1 << 20)
        decoded = [rec.decode_record(m) for m in got.messages]
        assert [(m.body, tags_code(m.properties.get("TAGS"))) for m in decoded if m] == expected
        assert [m.queue_offset for m in decoded if m] == list(range(len(expected)))
        found = store.query_message("Mix", "k3-4", max_num=10, begin_ms=0, end_ms=1 << 62)
        assert [m.body for m in found] == [b"batch3-4"]
    finally:
        store.shutdown()


def test_dispatch_without_hints_parses_the_log(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commitlog_mod, "DISPATCH_HINTS_MAX", 2)
    store = MessageStore(small_config(tmp_path)).start()
    try:
        store.dispatcher.shutdown()  # let hints pile up past the bound
        store.inline_dispatch = False
        for i in range(10):
            store.put_batch(batch("Hints", [b"%d-%d" % (i, j) for j in range(5)], ["TagA"] * 5))
        assert len(store.commitlog.dispatch_hints) == 2
        store.dispatcher.dispatch_available(store.commitlog.max_offset)
        assert store.max_offset_in_queue("Hints", 0) == 50
        got = store.get_message("Hints", 0, 0, max_count=100, max_bytes=1 << 20)
        bodies = [rec.decode_record(m).body for m in got.messages]  # type: ignore[union-attr]
        assert bodies == [b"%d-%d" % (i, j) for i in range(10) for j in range(5)]
        assert not store.commitlog.dispatch_hints
    finally:
        store.shutdown()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"bodies": []}, "one properties entry"),
        ({"properties": [b""]}, "one properties entry"),
        ({"flags": [0]}, "one properties entry"),
        ({"topic": "bad topic"}, "illegal characters"),
        ({"topic": ""}, "empty"),
        ({"sys_flag": rec.SYSFLAG_TRANSACTION_PREPARED}, "transactional"),
        ({"queue_id": 70000}, "out of range"),
        ({"born_host": b"\x01\x02"}, "born host"),
        ({"bodies": [b"x", b"y" * 5000]}, "maxMessageSize"),
    ],
)
def test_bad_batches_are_refused_whole(tmp_path: Path, change: dict[str, object],
                                       reason: str) -> None:
    store = MessageStore(small_config(tmp_path, maxMessageSize="4096")).start()
    try:
        good = MessageBatch(topic="T", queue_id=0, bodies=[b"a", b"b"], properties=[b"", b""])
        for k, v in change.items():
            setattr(good, k, v)
        with pytest.raises(MessageIllegalError, match=reason):
            store.put_batch(good)
        assert store.commitlog.max_offset == 0
        assert store.commitlog.topic_queue_table == {}
    finally:
        store.shutdown()
