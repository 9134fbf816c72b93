"""Records with odd content against recovery, dispatch, reads and ``store verify`` (issue 17).

The rule: a record the store acknowledged is never cut by recovery. Recovery cuts by what a crash
can produce (a frame that is not whole, or a last record whose zeroed tail blocks hide part of its
topic or properties), never by what a whole record contains. The store refuses a NUL in the
properties at the door; a record with one that is already on disk (an older version, another
broker) is kept and served byte for byte."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from rocketlite.cli.store_commands import verify_store
from rocketlite.common.errors import MessageIllegalError
from rocketlite.formats import message_record as rec
from rocketlite.formats.properties import encode_properties
from rocketlite.store.config import StoreConfig
from rocketlite.store.message import AppendResult, MessageBatch, MessageToStore
from rocketlite.store.message_store import MessageStore
from storehelp import msg, small_config, wait_dispatched

N = 25
ODD = 10  # the index of the odd record among N


def segment_of(cfg: StoreConfig, offset: int) -> tuple[Path, int]:
    base = offset - offset % cfg.mapped_file_size_commit_log
    return cfg.commit_log_dir / f"{base:020d}", base


def rewrite(cfg: StoreConfig, r: AppendResult, old: bytes, new: bytes) -> None:
    """Replace the last ``old`` inside the record ``r`` (its topic or properties, which BODYCRC
    does not cover: the frame stays whole) and drop the ConsumeQueues and the index, so that
    recovery re-dispatches the record as it now reads."""
    path, base = segment_of(cfg, r.commit_log_offset)
    data = bytearray(path.read_bytes())
    at = data.rfind(old, r.commit_log_offset - base, r.end_offset - base)
    assert at >= 0 and len(new) == len(old)
    data[at : at + len(old)] = new
    path.write_bytes(bytes(data))
    shutil.rmtree(cfg.consume_queue_dir)
    shutil.rmtree(cfg.index_dir)


def fill(cfg: StoreConfig, odd: MessageToStore) -> list[AppendResult]:
    msgs = [msg(body=b"m%03d" % i * 50, keys=f"key{i}") for i in range(N)]
    msgs[ODD] = odd
    with MessageStore(cfg) as s:
        res = s.put_messages_sync(msgs)
        wait_dispatched(s)
    return res


def records(s: MessageStore, topic: str = "TopicTest") -> list[rec.MessageRecord]:
    got = s.get_message(topic, 0, 0, max_count=1000, max_bytes=1 << 30)
    out = [rec.decode_record(b) for b in got.messages]
    assert all(m is not None for m in out)
    return out  # type: ignore[return-value]


@pytest.mark.parametrize("abort", [True, False], ids=["crash", "clean-stop"])
def test_a_record_with_a_nul_in_its_properties_is_kept_and_served(tmp_path: Path,
                                                                  abort: bool) -> None:
    cfg = small_config(tmp_path)
    res = fill(cfg, msg(body=b"odd", keys="odd\x03key"))
    rewrite(cfg, res[ODD], b"odd\x03key", b"odd\x00key")
    assert verify_store(tmp_path) == []  # before recovery too: odd, not corrupt
    if abort:
        cfg.abort_path.touch()
    with MessageStore(cfg) as s:
        assert s.commitlog.max_offset == res[-1].end_offset  # nothing cut
        wait_dispatched(s)
        got = records(s)
        assert [m.commit_log_offset for m in got] == [r.commit_log_offset for r in res]
        assert got[ODD].properties_text == encode_properties({"TAGS": "TagA", "KEYS": "odd\x00key"})
        assert got[ODD].body == b"odd"
        assert [len(s.query_message("TopicTest", f"key{i}")) for i in (ODD - 1, ODD + 1, N - 1)] \
            == [1, 1, 1]
        [r] = s.put_messages_sync([msg(body=b"new")])
        wait_dispatched(s)
        assert r.queue_offset == N and r.commit_log_offset == res[-1].end_offset
    assert verify_store(tmp_path) == []


@pytest.mark.parametrize("odd_topic", [b"Odd\x00Topic", b"Odd/Topic", b"Odd.Topic"])
def test_a_record_whose_topic_cannot_name_a_queue_is_kept_without_a_unit(
        tmp_path: Path, odd_topic: bytes, caplog: pytest.LogCaptureFixture) -> None:
    cfg = small_config(tmp_path)
    res = fill(cfg, msg(topic="Odd_Topic", body=b"odd"))
    rewrite(cfg, res[ODD], b"Odd_Topic", odd_topic)
    cfg.abort_path.touch()
    with caplog.at_level(logging.ERROR), MessageStore(cfg) as s:
        assert s.commitlog.max_offset == res[-1].end_offset
        wait_dispatched(s)
        assert len(records(s)) == N - 1
        odd = s.commitlog.read_record(res[ODD].commit_log_offset)
        assert odd is not None and odd.topic.encode() == odd_topic and odd.body == b"odd"
    assert sorted(p.name for p in cfg.consume_queue_dir.iterdir()) == ["TopicTest"]
    assert "cannot name a ConsumeQueue" in caplog.text
    assert verify_store(tmp_path) == []


def torn_tail_store(cfg: StoreConfig) -> tuple[int, int]:
    """Five records, then one whose properties straddle a ``TEAR_UNIT`` boundary; return where
    that last record starts and the boundary."""
    props_len = len(encode_properties({"TAGS": "TagA", "KEYS": "lastkey"}))
    with MessageStore(cfg) as s:
        res = s.put_messages_sync([msg(body=b"x" * 100, keys=f"key{i}") for i in range(5)])
        start = res[-1].end_offset
        boundary = (start // rec.TEAR_UNIT + 2) * rec.TEAR_UNIT
        fixed = rec.record_size(0, len(b"TopicTest"), props_len) - props_len
        body_len = boundary - 3 - start - fixed  # the properties begin 3 bytes before it
        [last] = s.put_messages_sync([msg(body=b"y" * body_len, keys="lastkey")])
        wait_dispatched(s)
    assert last.commit_log_offset == start and start + fixed + body_len == boundary - 3
    return start, boundary


def test_a_torn_tail_over_the_properties_is_still_cut(tmp_path: Path) -> None:
    cfg = small_config(tmp_path)
    start, boundary = torn_tail_store(cfg)
    path, base = segment_of(cfg, start)
    data = bytearray(path.read_bytes())
    end = data.index(b"lastkey\x02", start - base) + len(b"lastkey\x02")
    data[boundary - base : end] = bytes(end - boundary + base)  # the block never written
    path.write_bytes(bytes(data))
    assert any("torn last record" in p for p in verify_store(tmp_path))
    cfg.abort_path.touch()
    with MessageStore(cfg) as s:
        assert s.commitlog.max_offset == start
        assert len(records(s)) == 5
        [r] = s.put_messages_sync([msg(body=b"after")])
        assert (r.commit_log_offset, r.queue_offset) == (start, 5)


def test_a_whole_last_record_with_the_same_layout_is_kept(tmp_path: Path) -> None:
    cfg = small_config(tmp_path)
    start, _ = torn_tail_store(cfg)
    cfg.abort_path.touch()
    with MessageStore(cfg) as s:
        assert s.commitlog.max_offset > start
        assert records(s)[-1].properties_text.endswith("lastkey\x02")
    assert verify_store(tmp_path) == []


def test_the_store_refuses_a_nul_in_properties_and_writes_nothing(tmp_path: Path) -> None:
    cfg = small_config(tmp_path)
    with MessageStore(cfg) as s:
        s.put_messages_sync([msg()])
        before = s.commitlog.max_offset
        bad = MessageToStore(topic="TopicTest", body=b"b", queue_id=0,
                             properties="TAGS\x01t\x00ag\x02", born_timestamp=1)
        with pytest.raises(MessageIllegalError, match="NUL byte at byte 6, in the value of "
                                                      "property 'TAGS'"):
            s.put_messages_sync([msg(), bad])
        props = [encode_properties({"KEYS": f"k{i}"}).encode() for i in range(4)]
        props[2] = b"K\x00EYS\x01v\x02"
        with pytest.raises(MessageIllegalError, match=r"batch message 2: .*byte 1, in the name"):
            s.put_batch(MessageBatch(topic="TopicTest", queue_id=0, bodies=[b"b"] * 4,
                                     properties=props))
        assert s.commitlog.max_offset == before
