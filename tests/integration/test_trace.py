"""Message trace end to end against a ``rocketlite start`` process with ``traceTopicEnable``: a
Producer and a PushConsumer with ``enable_trace`` write Pub / SubBefore / SubAfter records to
``RMQ_SYS_TRACE_TOPIC`` (created by the broker at start, one queue), found by msgId in the
broker's index and decoded with the codec; ``admin queryMsgTraceById --json`` shows who sent each
message, when it was stored, and each consumption with its result (success, a failure status, an
exception), and a LitePullConsumer's polls. A TransactionProducer writes Trans_Msg_Half Pub and
EndTransaction records, its own decision and a check-back's. A producer with its own trace topic
writes there and only there."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from brokerhelp import started
from rocketlite.cli.main import app
from rocketlite.client.instance import ClientConfig
from rocketlite.client.lite_pull_consumer import LitePullConsumer
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer
from rocketlite.client.push_consumer import ConsumeStatus, PushConsumer
from rocketlite.client.send_types import SendResult
from rocketlite.client.trace_codec import TRACE_TOPIC, TraceType, decode
from rocketlite.client.transaction import LocalTransactionState, TransactionProducer
from rocketlite.protocol.bodies import ConsumeFromWhere

pytestmark = pytest.mark.integration
runner = CliRunner()
TOPIC = "TraceT"
CUSTOM_TRACE = "MyTraceTopic"


@dataclass
class Env:
    ns: str
    addr: str
    results: list[SendResult]  # m0 (consumed fine), m1 (RECONSUME_LATER), m2 (the handler raises)
    custom: SendResult  # sent by a producer tracing to CUSTOM_TRACE
    committed: SendResult  # a transactional message committed at once
    checked: SendResult  # one left UNKNOW, rolled back when the broker checks


def admin(*args: str) -> Result:
    return runner.invoke(app, ["admin", *args])


def handler(msgs: list[MessageExt]) -> ConsumeStatus:
    (m,) = msgs
    if m.body == b"m2":
        raise RuntimeError("handler failure")
    return ConsumeStatus.RECONSUME_LATER if m.body == b"m1" else ConsumeStatus.CONSUME_SUCCESS


class TxListener:
    def __init__(self) -> None:
        self.checked = asyncio.Event()

    async def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE if msg.body == b"commit" else LocalTransactionState.UNKNOW

    async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.checked.set()
        return LocalTransactionState.ROLLBACK_MESSAGE


async def transactions(ns: str) -> tuple[SendResult, SendResult]:
    listener = TxListener()
    async with TransactionProducer("TraceTxPG", listener, namesrv_addr=ns, enable_trace=True) as p:
        committed = await p.send_message_in_transaction(Message(TOPIC, b"commit", tags="tx"))
        checked = await p.send_message_in_transaction(Message(TOPIC, b"check", keys="txk"))
        async with asyncio.timeout(60):
            await listener.checked.wait()
        await asyncio.sleep(0.2)  # the answer to the check is traced just after
    return committed, checked


async def traffic(ns: str) -> tuple[list[SendResult], SendResult]:
    seen: set[bytes] = set()
    all_seen = asyncio.Event()

    def counting(msgs: list[MessageExt]) -> ConsumeStatus:
        seen.update(m.body for m in msgs)
        if seen >= {b"m0", b"m1", b"m2"}:
            all_seen.set()
        return handler(msgs)

    async with Producer("TracePG", namesrv_addr=ns, enable_trace=True) as p:
        results = [await p.send(Message(TOPIC, b"m0", tags="tagA", keys="tk0")),
                   await p.send_async(Message(TOPIC, b"m1", keys=["tk1", "other"])),
                   await p.send(Message(TOPIC, b"m2"))]
        c = PushConsumer("TraceCG", enable_trace=True,
                         consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                         config=ClientConfig(namesrv_addr=ns, rebalance_interval=0.5,
                                             persist_offset_interval=0.5, heartbeat_interval=1.0))
        c.subscribe(TOPIC, "*")
        c.register_listener(counting)
        await c.start()
        try:
            async with asyncio.timeout(60):
                await all_seen.wait()
        finally:
            await c.shutdown()
        lite = LitePullConsumer("TraceLPG", enable_trace=True,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                                config=ClientConfig(namesrv_addr=ns, rebalance_interval=0.5))
        lite.subscribe(TOPIC, "*")
        polled: set[bytes] = set()
        async with lite, asyncio.timeout(60):
            while polled < {b"m0", b"m1", b"m2"}:
                polled.update(m.body for m in await lite.poll(1.0))
    async with Producer("TracePG2", namesrv_addr=ns, enable_trace=True, trace_topic=CUSTOM_TRACE) as p2:
        custom = await p2.send(Message(TOPIC, b"custom"))
    return results, custom


def trace_json(ns: str, msg_id: str, *extra: str, subs: int = 1) -> Any:
    """``queryMsgTraceById --json`` once it shows a Pub and ``subs`` finished consumptions (the
    trace messages are indexed just after they are stored)."""
    deadline = time.monotonic() + 30
    while True:
        r = admin("queryMsgTraceById", "-n", ns, "-i", msg_id, *extra, "--json")
        if r.exit_code == 0:
            tr = json.loads(r.stdout)
            if tr["pubs"] and sum(s["success"] is not None for s in tr["subs"]) >= subs:
                return tr
        assert time.monotonic() < deadline, r.output
        time.sleep(0.2)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with started(tmp_path_factory.mktemp("trace"), traceTopicEnable="true",
                 transactionTimeOut="1", transactionCheckInterval="200") as s:
        results, custom = asyncio.run(traffic(s.ns))
        committed, checked = asyncio.run(transactions(s.ns))
        yield Env(s.ns, s.addr, results, custom, committed, checked)
        assert s.server.stop() == 0, s.server.log()


def test_the_broker_creates_the_trace_topic_with_one_queue(env: Env) -> None:
    r = admin("topicRoute", "-n", env.ns, "-t", TRACE_TOPIC, "--json")
    assert r.exit_code == 0, r.output
    (qd,) = json.loads(r.stdout)["queueDatas"]
    assert (qd["readQueueNums"], qd["writeQueueNums"]) == (1, 1)


def test_the_trace_topic_holds_pub_and_sub_records_keyed_by_msg_id(env: Env) -> None:
    msg_id = env.results[0].msg_id
    trace_json(env.ns, msg_id)  # written by now
    r = admin("queryMsgByKey", "-n", env.ns, "-t", TRACE_TOPIC, "-k", msg_id, "--json")
    assert r.exit_code == 0, r.output
    records = [rec for m in json.loads(r.stdout) for rec in decode(base64.b64decode(m["body"]).decode())
               if rec.msg_id == msg_id]
    kinds = {rec.type for rec in records}
    assert kinds == {TraceType.Pub, TraceType.SubBefore, TraceType.SubAfter}
    pub = next(rec for rec in records if rec.type is TraceType.Pub)
    assert (pub.group, pub.topic, pub.tags, pub.keys, pub.store_host, pub.body_length) == \
        ("TracePG", TOPIC, "tagA", "tk0", env.addr, 2)
    assert pub.offset_msg_id == env.results[0].offset_msg_id and pub.success
    # ... and by the message's key too (the trace message carries its KEYS)
    r = admin("queryMsgByKey", "-n", env.ns, "-t", TRACE_TOPIC, "-k", "tk0", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout), r.output


def test_query_msg_trace_by_id_shows_the_send_and_each_consumption(env: Env) -> None:
    expected = [(True, "SUCCESS"), (False, "FAILED"), (False, "EXCEPTION")]
    for res, (success, status) in zip(env.results, expected, strict=True):
        tr = trace_json(env.ns, res.msg_id)
        assert tr["msgId"] == res.msg_id and tr["traceTopic"] == TRACE_TOPIC
        (pub,) = tr["pubs"]
        assert (pub["producerGroup"], pub["topic"], pub["broker"], pub["success"], pub["msgType"]) == \
            ("TracePG", TOPIC, env.addr, True, "Normal_Msg")
        assert pub["offsetMsgId"] == res.offset_msg_id
        stored = json.loads(admin("queryMsgById", "-n", env.ns, "-i", res.offset_msg_id, "--json").stdout)
        assert pub["sendTime"] <= stored["storeTimestamp"] <= pub["sendTime"] + pub["costMs"]
        assert pub["sendTime"] <= pub["storeTime"] <= pub["sendTime"] + pub["costMs"]
        first = tr["subs"][0]
        assert (first["consumerGroup"], first["retryTimes"], first["success"], first["status"]) == \
            ("TraceCG", 0, success, status)
        assert first["consumeTime"] >= stored["storeTimestamp"] and first["costMs"] >= 0
        assert first["endTime"] >= first["consumeTime"]
    assert tr["pubs"][0]["keys"] is None
    tr = trace_json(env.ns, env.results[1].msg_id)
    assert tr["pubs"][0]["keys"] == "tk1 other"
    text = admin("queryMsgTraceById", "-n", env.ns, "-i", env.results[0].msg_id)
    assert text.exit_code == 0 and "TracePG" in text.stdout and "TraceCG" in text.stdout


def test_a_custom_trace_topic_holds_its_producers_traces(env: Env) -> None:
    tr = trace_json(env.ns, env.custom.msg_id, "-t", CUSTOM_TRACE, subs=0)
    assert tr["traceTopic"] == CUSTOM_TRACE and tr["pubs"][0]["producerGroup"] == "TracePG2"
    r = admin("queryMsgTraceById", "-n", env.ns, "-i", env.custom.msg_id)
    assert r.exit_code == 1 and "no trace of message" in r.stderr


def test_transactional_sends_write_half_pub_and_end_transaction_records(env: Env) -> None:
    for res, state, from_check in ((env.committed, "COMMIT_MESSAGE", False),
                                   (env.checked, "UNKNOW", False)):
        tr = trace_json(env.ns, res.msg_id, subs=0)
        (pub,) = tr["pubs"]
        assert (pub["producerGroup"], pub["msgType"], pub["broker"]) == \
            ("TraceTxPG", "Trans_Msg_Half", env.addr)
        first = tr["endTransactions"][0]
        assert (first["producerGroup"], first["state"], first["fromTransactionCheck"], first["broker"]) == \
            ("TraceTxPG", state, from_check, env.addr)
        assert first["transactionId"] == (res.transaction_id or res.msg_id)  # as END_TRANSACTION
    deadline = time.monotonic() + 30
    while len(tr["endTransactions"]) < 2:  # the check-back's answer
        assert time.monotonic() < deadline, tr
        time.sleep(0.2)
        tr = trace_json(env.ns, env.checked.msg_id, subs=0)
    assert [(e["state"], e["fromTransactionCheck"]) for e in tr["endTransactions"]] == \
        [("UNKNOW", False), ("ROLLBACK_MESSAGE", True)]


def test_a_lite_pull_consumers_polls_are_traced_as_consumed(env: Env) -> None:
    tr = trace_json(env.ns, env.results[0].msg_id, subs=2)
    lite = [s for s in tr["subs"] if s["consumerGroup"] == "TraceLPG"]
    assert [(s["success"], s["status"], s["retryTimes"]) for s in lite] == [(True, "SUCCESS", 0)]
