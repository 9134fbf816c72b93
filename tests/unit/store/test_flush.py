"""SYNC_FLUSH group commit, flush errors reported to the writer, flush timeouts."""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path

import pytest

from rocketlite.common.errors import FlushError, FlushTimeoutError
from rocketlite.store import disk
from rocketlite.store.message_store import MessageStore
from storehelp import msg, small_config, wait_dispatched


def sync_store(tmp_path: Path, **extra: str) -> MessageStore:
    return MessageStore(small_config(tmp_path, flushDiskType="SYNC_FLUSH", **extra)).start()


def test_sync_flush_acknowledges_only_durable_records(tmp_path: Path) -> None:
    with sync_store(tmp_path) as s:
        res = s.put_messages_sync([msg() for _ in range(10)])
        assert s.commitlog.flushed_offset >= res[-1].end_offset
        wait_dispatched(s)
        assert s.max_offset_in_queue("TopicTest", 0) == 10


def test_group_commit_uses_fewer_syncs_than_writers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = os.fdatasync

    def counting(fd: int) -> None:
        nonlocal calls
        calls += 1
        time.sleep(0.002)  # a slow disk lets writers pile up behind one sync
        real(fd)

    monkeypatch.setattr(disk.LAYER, "sync", counting)
    with sync_store(tmp_path) as s:
        def writer() -> None:
            for _ in range(20):
                s.put_messages_sync([msg()])

        threads = [threading.Thread(target=writer) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wait_dispatched(s)
        assert s.max_offset_in_queue("TopicTest", 0) == 160
    assert 0 < calls < 160


def test_fsync_error_reaches_the_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with sync_store(tmp_path) as s:
        s.put_messages_sync([msg()])

        def failing(fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(disk.LAYER, "sync", failing)
        with pytest.raises(FlushError, match="Input/output error"):
            s.put_messages_sync([msg()])
        monkeypatch.undo()
        [r] = s.put_messages_sync([msg()])  # the disk is back: the next sync covers everything
        assert s.commitlog.flushed_offset >= r.end_offset


def test_flush_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.fdatasync

    def slow(fd: int) -> None:
        time.sleep(0.5)
        real(fd)

    with sync_store(tmp_path, syncFlushTimeout="100") as s:
        monkeypatch.setattr(disk.LAYER, "sync", slow)
        with pytest.raises(FlushTimeoutError, match="100 ms"):
            s.put_messages_sync([msg()])
        monkeypatch.undo()


def test_async_flush_flushes_on_its_interval(tmp_path: Path) -> None:
    with MessageStore(small_config(tmp_path, flushIntervalCommitLog="20")) as s:
        [r] = s.put_messages_sync([msg()])
        deadline = time.monotonic() + 5
        while s.commitlog.flushed_offset < r.end_offset and time.monotonic() < deadline:
            time.sleep(0.005)
        assert s.commitlog.flushed_offset >= r.end_offset
        assert s.checkpoint is not None and s.checkpoint.physic_msg_timestamp == r.store_timestamp


def test_sync_flush_hides_messages_until_flushed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = threading.Event()
    real = os.fdatasync

    def gated(fd: int) -> None:
        gate.wait(10)
        real(fd)

    with sync_store(tmp_path) as s:
        monkeypatch.setattr(disk.LAYER, "sync", gated)
        put = s.put_messages([msg()])
        time.sleep(0.1)
        assert put.flushed is not None and not put.flushed.done()
        assert s.max_offset_in_queue("TopicTest", 0) == 0  # written, not durable: invisible
        gate.set()
        put.flushed.result(5)
        wait_dispatched(s)
        assert s.max_offset_in_queue("TopicTest", 0) == 1


def test_transient_store_pool_commits_on_its_interval(tmp_path: Path) -> None:
    cfg = small_config(tmp_path, transientStorePoolEnable="true", commitIntervalCommitLog="50",
                       flushIntervalCommitLog="10000")
    with MessageStore(cfg) as s:
        [r] = s.put_messages_sync([msg(body=b"pooled")])
        assert s.commitlog.committed_offset <= r.commit_log_offset + r.size
        wait_dispatched(s)  # the dispatcher sees the record once the commit (every 50 ms) ran
        assert s.commitlog.committed_offset >= r.end_offset
        m = s.look_message(r.commit_log_offset)
        assert m is not None and m.body == b"pooled"
    with MessageStore(cfg) as s:  # a clean stop committed and flushed everything
        m = s.look_message(r.commit_log_offset)
        assert m is not None and m.body == b"pooled"


def test_transient_store_pool_hides_uncommitted_appends(tmp_path: Path) -> None:
    cfg = small_config(tmp_path, transientStorePoolEnable="true", commitIntervalCommitLog="60000",
                       flushIntervalCommitLog="60000")
    with MessageStore(cfg) as s:
        [r] = s.put_messages_sync([msg()])
        time.sleep(0.05)
        assert s.look_message(r.commit_log_offset) is None
        assert s.max_offset_in_queue("TopicTest", 0) == 0
        s.flusher.flush_once()  # commit + flush
        wait_dispatched(s)
        assert s.max_offset_in_queue("TopicTest", 0) == 1
