"""A slave's store primitives (4.x HA, no network): raw reads of the master's CommitLog, raw
appends at the slave's max offset, truncation of a diverged slave, and the slave's refusal of
sends."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketlite.common.errors import SlaveModeError, StoreError
from rocketlite.store.message_store import MessageStore
from storehelp import msg, small_config, wait_dispatched

SEG = 8192


def _master(root: Path, n: int, **extra: str) -> MessageStore:
    store = MessageStore(small_config(root, **extra)).start()
    for i in range(n):
        store.put_messages_sync([msg(body=b"x" * (10 + i * 37 % 300), queue_id=i % 3,
                                     keys=f"k{i}", tags=f"T{i % 4}")])
    wait_dispatched(store)
    return store


def _slave(root: Path, **extra: str) -> MessageStore:
    return MessageStore(small_config(root, brokerRole="SLAVE", **extra)).start()


def _copy(master: MessageStore, slave: MessageStore, chunk: int, upto: int | None = None) -> None:
    end = master.commitlog.max_offset if upto is None else upto
    pos = slave.commitlog.max_offset
    while pos < end:
        data = master.read_commitlog(pos, min(chunk, end - pos))
        assert data, pos
        pos = slave.append_raw(pos, data)


def _units(store: MessageStore) -> dict[tuple[str, int], list[tuple[int, int, int]]]:
    return {key: cq.get_units(cq.min_offset, cq.max_offset - cq.min_offset)
            for key, cq in sorted(store.queues.items())}


def _files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "commitlog").iterdir())}


def test_read_commitlog_stays_within_a_segment(tmp_path: Path) -> None:
    m = _master(tmp_path / "m", 120)
    try:
        top = m.commitlog.max_offset
        assert top > 2 * SEG
        assert m.read_commitlog(0, 100) == m.read_raw(0, 100)
        data = m.read_commitlog(SEG - 50, 1000)
        assert data is not None and len(data) == 50  # up to the segment end, not across it
        assert m.read_commitlog(top, 1000) == b""  # nothing yet
        assert m.read_commitlog(top + 1, 10) is None
        last = m.read_commitlog(top - 10, 1000)
        assert last is not None and len(last) == 10
    finally:
        m.shutdown()


@pytest.mark.parametrize("chunk", [1, 333, 4096, SEG])
def test_raw_append_makes_an_identical_log_and_queues(tmp_path: Path, chunk: int) -> None:
    m = _master(tmp_path / "m", 150 if chunk > 1 else 40)
    s = _slave(tmp_path / "s")
    try:
        _copy(m, s, chunk)
        wait_dispatched(s)
        assert s.commitlog.max_offset == m.commitlog.max_offset
        assert _units(s) == _units(m)
        assert [r.topic for r in s.query_message("TopicTest", "k7")] == ["TopicTest"]
    finally:
        m.shutdown()
        s.shutdown()
    assert _files(tmp_path / "s") == _files(tmp_path / "m")


def test_dispatch_waits_for_the_rest_of_a_split_record(tmp_path: Path) -> None:
    m = _master(tmp_path / "m", 3)
    s = _slave(tmp_path / "s")
    try:
        first = m.commitlog.record_size_at(0)
        _copy(m, s, 1 << 20, upto=first + 10)  # one record and a piece of the next
        wait_dispatched_to(s, first)
        assert s.max_offset_in_queue("TopicTest", 0) == 1
        assert s.max_offset_in_queue("TopicTest", 1) == 0
        _copy(m, s, 1 << 20)
        wait_dispatched(s)
        assert _units(s) == _units(m)
    finally:
        m.shutdown()
        s.shutdown()


def wait_dispatched_to(store: MessageStore, offset: int) -> None:
    import time
    deadline = time.monotonic() + 10
    while store.dispatcher.dispatch_from < offset:
        assert time.monotonic() < deadline
        time.sleep(0.002)
    time.sleep(0.05)
    assert store.dispatcher.dispatch_from == offset


def test_raw_append_elsewhere_is_refused(tmp_path: Path) -> None:
    m = _master(tmp_path / "m", 60)
    s = _slave(tmp_path / "s")
    try:
        data = m.read_commitlog(0, 500)
        assert data is not None
        with pytest.raises(StoreError, match="must start a segment"):
            s.append_raw(100, data)
        s.append_raw(0, data)
        with pytest.raises(StoreError, match="the log ends at 500"):
            s.append_raw(400, data)
        with pytest.raises(StoreError, match="the log ends at 500"):
            s.append_raw(600, data)
        assert s.commitlog.max_offset == 500
    finally:
        m.shutdown()
        s.shutdown()


def test_an_empty_slave_starts_at_a_later_segment(tmp_path: Path) -> None:
    m = _master(tmp_path / "m", 150)
    s = _slave(tmp_path / "s")
    try:
        s.append_raw(SEG, m.read_commitlog(SEG, SEG) or b"")
        _copy(m, s, 3000)
        assert s.commitlog.min_offset == SEG
        assert s.commitlog.max_offset == m.commitlog.max_offset
        wait_dispatched(s)
        for key, units in _units(s).items():
            assert units == [u for u in _units(m)[key] if u[0] >= SEG]
    finally:
        m.shutdown()
        s.shutdown()


def test_truncate_then_catch_up(tmp_path: Path) -> None:
    m = _master(tmp_path / "m", 150)
    s = _slave(tmp_path / "s")
    try:
        _copy(m, s, 5000)
        wait_dispatched(s)
        units = _units(m)
        cut = units[("TopicTest", 1)][10][0]  # the 11th record of queue 1
        s.truncate_commitlog(cut)
        assert s.commitlog.max_offset == cut
        assert s.max_offset_in_queue("TopicTest", 1) == 10
        # the segments up to the cut and the next one, prepared ahead: no gap left behind
        names = sorted(p.name for p in (tmp_path / "s" / "commitlog").iterdir())
        assert [int(n) for n in names] == [k * SEG for k in range(cut // SEG + 2)]
        assert s.query_message("TopicTest", "k149") == []
        _copy(m, s, 777)
        wait_dispatched(s)
        assert _units(s) == units
        assert len(s.query_message("TopicTest", "k149")) == 1
    finally:
        m.shutdown()
        s.shutdown()
    assert _files(tmp_path / "s") == _files(tmp_path / "m")


def test_a_restarted_slave_resumes_at_its_last_whole_record(tmp_path: Path) -> None:
    m = _master(tmp_path / "m", 80)
    s = _slave(tmp_path / "s")
    first = m.commitlog.record_size_at(0)
    _copy(m, s, 1 << 20, upto=first + 30)
    s.shutdown()
    s = _slave(tmp_path / "s")
    try:
        assert s.commitlog.max_offset == first  # the piece of a record was cut
        _copy(m, s, 999)
        wait_dispatched(s)
        assert _units(s) == _units(m)
    finally:
        m.shutdown()
        s.shutdown()


@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_a_slave_refuses_sends(tmp_path: Path, flush: str) -> None:
    s = _slave(tmp_path / "s", flushDiskType=flush)
    try:
        with pytest.raises(SlaveModeError, match="slave"):
            s.put_messages([msg()])
        with pytest.raises(SlaveModeError):
            s.put_messages_sync([msg()])
        assert s.commitlog.max_offset == 0
    finally:
        s.shutdown()


def test_sync_flush_slave_dispatches_after_flush(tmp_path: Path) -> None:
    m = _master(tmp_path / "m", 50)
    s = _slave(tmp_path / "s", flushDiskType="SYNC_FLUSH")
    try:
        _copy(m, s, 2048)
        wait_dispatched(s)
        assert s.commitlog.flushed_offset == s.commitlog.max_offset
        assert _units(s) == _units(m)
    finally:
        m.shutdown()
        s.shutdown()
