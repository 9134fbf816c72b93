"""The kill -9 scenario's checker (``killburst.judge``) on made-up read-backs: each kind of loss
or damage it exists to catch is caught, and what each flush mode allows passes. Without this, a
checker that found nothing would pass every chaos round."""

from __future__ import annotations

import pytest

from failoverburst import ID_PROPERTY, body_of
from killburst import Sent, decision, judge
from rocketlite.formats.message_record import MessageRecord, body_crc
from rocketlite.formats.properties import encode_properties

pytestmark = pytest.mark.chaos

COMMIT = next(f"t{i}" for i in range(100) if decision(f"t{i}"))
ROLLBACK = next(f"t{i}" for i in range(100) if not decision(f"t{i}"))


def rec(msg_id: str, queue_id: int, queue_offset: int, *, stored_ms: int = 10_000,
        body: bytes | None = None) -> MessageRecord:
    b = body_of(msg_id) if body is None else body
    return MessageRecord(0, 0, body_crc(body_of(msg_id)), queue_id, 0, queue_offset, 0, 0, 0,
                         b"", 0, stored_ms, b"", 0, 0, 0, b, "Kill0",
                         encode_properties({ID_PROPERTY: msg_id}))


def sent() -> dict[str, Sent]:
    """a and b acked on queue 0 at 0 and 1, c acked on queue 1 at 0, a delay message due at
    5,000 ms, a committed and a rolled-back transactional message, an unacked single."""
    return {"a": Sent("single", True, 0, 0), "b": Sent("batch", True, 0, 1),
            "c": Sent("single", True, 1, 0), "d": Sent("delay", True, due_ms=5_000),
            COMMIT: Sent("txn", True), ROLLBACK: Sent("txn", True), "u": Sent("single")}


def full() -> dict[int, list[MessageRecord]]:
    return {0: [rec("a", 0, 0), rec("b", 0, 1), rec("d", 0, 2)],
            1: [rec("c", 1, 0), rec(COMMIT, 1, 1)]}


@pytest.mark.parametrize("mode", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_everything_there_passes_with_a_redelivered_delay_message(mode: str) -> None:
    records = full()
    records[1].append(rec("d", 1, 2))
    records[1].append(rec("u", 1, 3))  # unacknowledged, yet stored: allowed once
    assert judge(records, sent(), mode) == (0, 1, [])


def test_sync_flush_reports_an_acked_message_missing_even_in_a_suffix() -> None:
    records = full()
    records[1] = records[1][:1]  # the committed transactional message lost
    del records[0][1:]  # b and d lost: a suffix of queue 0
    missing, _, problems = judge(records, sent(), "SYNC_FLUSH")
    assert missing == 0
    assert sorted(p.split()[3] for p in problems) == sorted(["b", "d", COMMIT]), problems


def test_async_flush_allows_a_missing_suffix_but_not_a_gap() -> None:
    records = full()
    del records[0][1:]
    assert judge(records, sent(), "ASYNC_FLUSH") == (2, 0, [])  # b and d: the suffix
    records = full()
    records[0] = [rec("b", 0, 0)]  # a (offset 0) gone while b is read: b moved, a lost below
    _, _, problems = judge(records, sent(), "ASYNC_FLUSH")
    assert any("a at queue/offset (0, 0) LOST below 1" in p for p in problems), problems
    assert any("b acked at queue/offset (0, 1), read at (0, 0)" in p for p in problems)


@pytest.mark.parametrize("mode", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_damage_doubles_holes_rollbacks_and_early_delays_fail(mode: str) -> None:
    records = full()
    records[0][0] = rec("a", 0, 0, body=b"x" + body_of("a")[1:])
    records[0][2] = rec("d", 0, 2, stored_ms=4_999)
    records[1][1] = rec(COMMIT, 1, 2)  # a hole at offset 1
    records[1].append(rec(COMMIT, 1, 3))
    records[1].append(rec(ROLLBACK, 1, 4))
    records[1].append(rec("stranger", 1, 5))
    _, _, problems = judge(records, sent(), mode)
    text = "\n".join(problems)
    for needle in ("a damaged", "d delivered at 4999, 1 ms before its delay",
                   "record #1 has queue offset 2", f"{COMMIT} (txn) stored 2 times",
                   f"{ROLLBACK} was rolled back", "never sent (id 'stranger')"):
        assert needle in text, text
