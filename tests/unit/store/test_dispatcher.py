"""Dispatch in bounded rounds: a record cut by a round's limit waits for the next round."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rocketlite.formats import message_record as rec
from rocketlite.formats.properties import encode_properties
from rocketlite.store import commitlog as commitlog_mod
from rocketlite.store import dispatcher
from rocketlite.store.message import MessageToStore
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
        s.commitlog.dispatch_hints.clear()  # parse the log, as recovery does
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


@pytest.mark.parametrize("sync", [False, True])
def test_single_appends_dispatch_the_same_from_hints_as_from_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sync: bool
) -> None:
    """Hints left by single-message appends (any topics and queues, segment rolls, transaction
    flags, keys) give the ConsumeQueues and index that parsing the same records gives."""
    flags = [0, rec.SYSFLAG_TRANSACTION_PREPARED, rec.SYSFLAG_TRANSACTION_COMMIT,
             rec.SYSFLAG_TRANSACTION_ROLLBACK]
    batches = [[MessageToStore(
        topic=f"T{i % 3}", body=b"m%d-%d" % (b, i) * (1 + i % 5), queue_id=i % 4,
        properties=encode_properties({k: v for k, v in {
            "TAGS": "ABC"[i % 3] if i % 4 else "", "KEYS": f"k{i % 7} x{b}" if i % 2 else "",
            "UNIQ_KEY": f"U{b}-{i}" if i % 3 == 0 else ""}.items() if v}),
        sys_flag=flags[i % 4] if i % 5 == 0 else 0, born_timestamp=1,
    ) for i in range(23)] for b in range(12)]  # ~12 KiB: the 8 KiB segments roll

    def run(root: Path, hints: bool) -> tuple[list[object], list[object]]:
        monkeypatch.setattr(commitlog_mod, "DISPATCH_HINTS_MAX", 4096 if hints else 0)
        extra = {"flushDiskType": "SYNC_FLUSH"} if sync else {}
        with MessageStore(small_config(root, **extra), clock=lambda: 1_700_000_000_000) as s:
            for b in batches:
                s.put_messages_sync(b)
            wait_dispatched(s)
            assert not s.commitlog.dispatch_hints
            units = [(t, q, cq.get_units(0, 1000)) for (t, q), cq in sorted(s.queues.items())]
            found = [sorted(m.body for m in s.query_message(f"T{t}", key, max_num=100))
                     for t in range(3) for key in ["k1", "k4", "x3", "U5-0", "U0-3"]]
        return units, found

    assert run(tmp_path / "hinted", True) == run(tmp_path / "parsed", False)
