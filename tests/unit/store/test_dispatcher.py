"""Dispatch in bounded rounds: a record cut by a round's limit waits for the next round."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rocketlite.store import dispatcher
from rocketlite.store.message_store import MessageStore
from storehelp import msg, small_config, wait_dispatched


def test_rounds_that_end_mid_record_lose_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(dispatcher, "DISPATCH_ROUND_BYTES", 333)  # never a record boundary
    caplog.set_level(logging.ERROR)
    with MessageStore(small_config(tmp_path)) as s:
        s.put_messages_sync([msg(queue_id=i % 3, body=b"%d" % i * 20) for i in range(200)])
        wait_dispatched(s)
        assert sum(s.max_offset_in_queue("TopicTest", q) for q in range(3)) == 200
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_corrupt_record_stops_dispatch_and_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with MessageStore(small_config(tmp_path)) as s:
        s.dispatcher.shutdown()
        res = s.commitlog.append([msg(), msg(), msg()])
        mf = s.commitlog.files.files[0]
        mf.mm[res[1].commit_log_offset + 4] ^= 0xFF  # wrong magic code in the second record
        caplog.set_level(logging.ERROR)
        s.dispatcher.dispatch_available(s.commitlog.max_offset)
        assert s.dispatcher.dispatch_from == res[1].commit_log_offset
        assert s.max_offset_in_queue("TopicTest", 0) == 1
        assert any("wrong magic" in r.getMessage() for r in caplog.records)
        mf.mm[res[1].commit_log_offset + 4] ^= 0xFF


def test_async_flush_appends_are_dispatched_on_the_appending_thread(tmp_path: Path) -> None:
    with MessageStore(small_config(tmp_path)) as s:
        assert s.inline_dispatch
        s.dispatcher.shutdown()  # no thread: only the append itself can dispatch
        s.put_messages([msg(queue_id=1), msg(queue_id=1)])
        assert s.max_offset_in_queue("TopicTest", 1) == 2
        assert s.dispatcher.dispatch_from == s.commitlog.max_offset


def test_an_inline_dispatch_leaves_the_work_to_the_thread_when_it_holds_the_lock(
    tmp_path: Path
) -> None:
    with MessageStore(small_config(tmp_path)) as s:
        with s.dispatcher.lock:  # the thread is in a round (or the flusher takes the dirty set)
            s.put_messages([msg()])
            assert s.max_offset_in_queue("TopicTest", 0) == 0
        wait_dispatched(s)  # ... and the thread, woken, dispatches it
        assert s.max_offset_in_queue("TopicTest", 0) == 1


def test_sync_flush_appends_are_dispatched_after_the_group_commit(tmp_path: Path) -> None:
    with MessageStore(small_config(tmp_path, flushDiskType="SYNC_FLUSH")) as s:
        assert not s.inline_dispatch
        s.put_messages_sync([msg()])
        wait_dispatched(s)
        assert s.max_offset_in_queue("TopicTest", 0) == 1
