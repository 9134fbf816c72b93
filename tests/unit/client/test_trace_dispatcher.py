"""``TraceDispatcher`` with a stand-in sender: records go out batched into trace messages keyed by
msgId and KEYS, split at the body limit; a full queue drops and counts instead of blocking, and a
failing sender is counted, never raised to the caller."""

from __future__ import annotations

import asyncio

import pytest

from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message
from rocketlite.client.trace import TraceDispatcher
from rocketlite.client.trace_codec import TRACE_TOPIC, TraceRecord, TraceType, decode, encode_record


class Sender:
    def __init__(self, fail: bool = False) -> None:
        self.sent: list[Message] = []
        self.fail = fail
        self.gate = asyncio.Event()
        self.gate.set()
        self.waiting = 0

    async def send(self, msg: Message) -> None:
        self.waiting += 1
        await self.gate.wait()
        self.waiting -= 1
        if self.fail:
            raise RuntimeError("broker gone")
        self.sent.append(msg)

    async def shutdown(self) -> None:
        pass


def sub_before(i: int, keys: str | None = None) -> TraceRecord:
    return TraceRecord(TraceType.SubBefore, 1000 + i, "R", "CG", f"REQ{i}", msg_id=f"ID{i}", keys=keys)


def dispatcher(**kw: int) -> TraceDispatcher:
    return TraceDispatcher(ClientConfig(namesrv_addr="127.0.0.1:1"), **kw)


async def test_records_are_sent_in_batches_keyed_by_msg_id_and_keys() -> None:
    d, s = dispatcher(), Sender()
    await d.start(s)
    assert d.append([sub_before(i, "a b" if i == 0 else None) for i in range(250)])
    await d.flush()
    await d.shutdown()
    assert d.discarded == 0 and d.failed == 0
    assert all(m.topic == TRACE_TOPIC for m in s.sent)
    records = [r for m in s.sent for r in decode(m.body.decode())]
    assert [r.msg_id for r in records] == [f"ID{i}" for i in range(250)]
    assert [len(decode(m.body.decode())) for m in s.sent] == [100, 100, 50]  # batches of 100
    assert s.sent[0].key_list() == ["ID0", "a", "b"] + [f"ID{i}" for i in range(1, 100)]
    assert s.sent[2].key_list() == [f"ID{i}" for i in range(200, 250)]


async def test_a_batch_is_split_at_the_body_limit() -> None:
    d, s = dispatcher(max_body=200), Sender()
    await d.start(s)
    d.append([sub_before(i) for i in range(20)])
    await d.flush()
    await d.shutdown()
    assert len(s.sent) > 1
    for m in s.sent:
        recs = decode(m.body.decode())
        last = len(encode_record(recs[-1]))
        assert len(m.body) - last < 200  # cut right after the record that reached the limit
        assert m is s.sent[-1] or len(m.body) >= 200
        assert [r.msg_id for r in recs] == m.key_list()
    assert sorted(r.msg_id or "" for m in s.sent for r in decode(m.body.decode())) == \
        sorted(f"ID{i}" for i in range(20))


async def test_a_full_queue_drops_and_counts_without_blocking() -> None:
    d, s = dispatcher(queue_size=10, batch_size=5, max_in_flight=1), Sender()
    s.gate.clear()  # the sender hangs: records pile up
    await d.start(s)
    accepted = sum(d.append([sub_before(i)]) for i in range(40))
    await asyncio.sleep(0.05)
    accepted += sum(d.append([sub_before(i)]) for i in range(40, 60))
    assert accepted < 60 and d.discarded == 60 - accepted
    assert 10 <= accepted <= 10 + 2 * 5  # the queue, the batch in flight, the one waiting its turn
    s.gate.set()
    await d.flush()
    await d.shutdown()
    assert sum(len(decode(m.body.decode())) for m in s.sent) == accepted


async def test_a_failing_sender_is_counted_not_raised() -> None:
    d, s = dispatcher(), Sender(fail=True)
    await d.start(s)
    assert d.append([sub_before(1)])
    await d.flush()
    assert d.failed == 1 and d.sent == 0
    await d.shutdown()


def test_records_appended_before_start_are_discarded() -> None:
    d = dispatcher()
    assert not d.append([sub_before(1)])
    assert d.discarded == 1


async def test_up_to_max_in_flight_trace_messages_go_at_once() -> None:
    d, s = dispatcher(max_in_flight=4), Sender()
    s.gate.clear()
    await d.start(s)
    d.append([sub_before(i) for i in range(700)])
    await asyncio.sleep(0.05)
    assert s.waiting == 4 and not s.sent
    s.gate.set()
    await d.flush()
    await d.shutdown()
    assert len(s.sent) == 7


async def test_a_trickle_of_records_shares_one_trace_message() -> None:
    d, s = dispatcher(), Sender()
    await d.start(s)
    for i in range(10):  # one at a time, as sync sends would add them
        d.append([sub_before(i)])
        await asyncio.sleep(0)
    await d.flush()
    await d.shutdown()
    assert len(s.sent) == 1 and len(decode(s.sent[0].body.decode())) == 10


async def test_a_trace_producer_that_cannot_start_leaves_tracing_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    d = TraceDispatcher(ClientConfig(namesrv_addr=""))  # no NameServer: the inner producer fails
    await d.start()  # logged, not raised
    assert not d.append([sub_before(1)]) and d.discarded == 1
    await d.shutdown()


async def test_a_trace_message_keeps_its_keys_below_the_property_limit() -> None:
    d, s = dispatcher(), Sender()
    await d.start(s)
    d.append([sub_before(i, keys="k" * 400 + str(i)) for i in range(100)])  # 40 KB of keys
    await d.flush()
    await d.shutdown()
    assert len(s.sent) >= 3
    for m in s.sent:
        assert len(" ".join(m.key_list())) < 16_000 + 500
    assert sum(len(decode(m.body.decode())) for m in s.sent) == 100
    assert not d.append([sub_before(1)])  # after shutdown: discarded
