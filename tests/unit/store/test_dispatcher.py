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
