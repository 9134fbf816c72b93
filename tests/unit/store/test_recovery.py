"""The recovery matrix of RocketMQ's store tests: clean restart, a damaged last record with and
without the abort file, ConsumeQueue ahead of and behind the CommitLog."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rocketlite.store.config import StoreConfig
from rocketlite.store.message import AppendResult
from rocketlite.store.message_store import MessageStore
from storehelp import msg, small_config, wait_dispatched

N = 25


def fill(cfg: StoreConfig, n: int = N) -> list[AppendResult]:
    with MessageStore(cfg) as s:
        res = s.put_messages_sync([msg(body=b"m%03d" % i * 50, keys=f"key{i}") for i in range(n)])
        wait_dispatched(s)
    return res


def damage(cfg: StoreConfig, offset: int, at: int = 100) -> None:
    seg = offset - offset % cfg.mapped_file_size_commit_log
    path = cfg.commit_log_dir / f"{seg:020d}"
    data = bytearray(path.read_bytes())
    data[offset - seg + at] ^= 0xFF
    path.write_bytes(bytes(data))


def crash_marker(cfg: StoreConfig) -> None:
    cfg.abort_path.touch()


def bodies(s: MessageStore) -> list[bytes]:
    got = s.get_message("TopicTest", 0, 0, max_count=1000, max_bytes=1 << 30)
    from rocketlite.formats.message_record import decode_record

    return [decode_record(b).body for b in got.messages]  # type: ignore[union-attr]


def test_clean_restart_keeps_everything(tmp_path: Path) -> None:
    cfg = small_config(tmp_path)
    res = fill(cfg)
    assert not cfg.abort_path.exists()
    with MessageStore(cfg) as s:
        assert s.commitlog.max_offset == res[-1].end_offset
        assert s.max_offset_in_queue("TopicTest", 0) == N
        assert len(bodies(s)) == N
        [r] = s.put_messages_sync([msg()])
        assert r.queue_offset == N
        assert r.commit_log_offset >= res[-1].end_offset
        assert len(s.query_message("TopicTest", "key3")) == 1


@pytest.mark.parametrize("abort", [True, False], ids=["with-abort", "without-abort"])
def test_damaged_last_record_rolls_back_to_previous(tmp_path: Path, abort: bool) -> None:
    cfg = small_config(tmp_path)
    res = fill(cfg)
    damage(cfg, res[-1].commit_log_offset)
    if abort:
        crash_marker(cfg)
    with MessageStore(cfg) as s:
        assert s.commitlog.max_offset == res[-2].end_offset
        assert s.max_offset_in_queue("TopicTest", 0) == N - 1
        assert len(bodies(s)) == N - 1
        [r] = s.put_messages_sync([msg(body=b"new")])
        wait_dispatched(s)
        assert r.queue_offset == N - 1
        assert r.commit_log_offset == res[-1].commit_log_offset
        assert bodies(s)[-1] == b"new"
    with MessageStore(cfg) as s:  # and the repaired store survives another restart
        assert bodies(s)[-1] == b"new"


def test_damage_in_an_earlier_record_cuts_there(tmp_path: Path) -> None:
    cfg = small_config(tmp_path)
    res = fill(cfg)
    damage(cfg, res[-5].commit_log_offset, at=4)  # wrong magic code
    crash_marker(cfg)
    with MessageStore(cfg) as s:
        assert s.commitlog.max_offset == res[-6].end_offset
        assert s.max_offset_in_queue("TopicTest", 0) == N - 5


def test_consume_queue_ahead_of_commitlog_is_trimmed(tmp_path: Path) -> None:
    cfg = small_config(tmp_path)
    res = fill(cfg)
    # The CommitLog lost its last three records (never flushed), the ConsumeQueue kept them.
    cut = res[-3].commit_log_offset
    seg = cut - cut % cfg.mapped_file_size_commit_log
    path = cfg.commit_log_dir / f"{seg:020d}"
    data = bytearray(path.read_bytes())
    data[cut - seg :] = bytes(len(data) - (cut - seg))
    path.write_bytes(bytes(data))
    for p in cfg.commit_log_dir.iterdir():
        if int(p.name) > seg:
            p.unlink()
    crash_marker(cfg)
    with MessageStore(cfg) as s:
        assert s.commitlog.max_offset == cut
        assert s.max_offset_in_queue("TopicTest", 0) == N - 3
        assert len(bodies(s)) == N - 3
        [r] = s.put_messages_sync([msg()])
        assert r.queue_offset == N - 3


@pytest.mark.parametrize("abort", [True, False], ids=["with-abort", "without-abort"])
def test_consume_queue_behind_commitlog_is_rebuilt(tmp_path: Path, abort: bool) -> None:
    cfg = small_config(tmp_path)
    fill(cfg)
    qdir = cfg.consume_queue_dir / "TopicTest" / "0"
    files = sorted(qdir.iterdir())
    files[-1].unlink()  # the last ConsumeQueue segment is gone
    if abort:
        crash_marker(cfg)
    with MessageStore(cfg) as s:
        wait_dispatched(s)
        assert s.max_offset_in_queue("TopicTest", 0) == N
        assert len(bodies(s)) == N


def test_consume_queue_deleted_entirely_is_rebuilt(tmp_path: Path) -> None:
    cfg = small_config(tmp_path)
    fill(cfg)
    shutil.rmtree(cfg.consume_queue_dir / "TopicTest")
    with MessageStore(cfg) as s:
        assert s.max_offset_in_queue("TopicTest", 0) == N
        assert len(bodies(s)) == N
        assert len(s.query_message("TopicTest", "key7")) == 1


def test_truncated_commitlog_segment_file(tmp_path: Path) -> None:
    cfg = small_config(tmp_path)
    res = fill(cfg)
    last = sorted(cfg.commit_log_dir.iterdir())[-1]
    with last.open("r+b") as f:
        f.truncate(100)  # a short file: extended with zeros, its torn record cut
    crash_marker(cfg)
    with MessageStore(cfg) as s:
        assert s.commitlog.max_offset <= res[-1].end_offset
        n = s.max_offset_in_queue("TopicTest", 0)
        assert len(bodies(s)) == n
        s.put_messages_sync([msg()])
