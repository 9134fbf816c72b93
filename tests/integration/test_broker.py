"""The broker on loopback sockets, with a NameServer in the same loop and a small store: send in
every form, pull (found, not found, moved, filtered, long polling), offsets, clients and their
notifications, lookups, locks, topic administration, errors, SYNC_FLUSH and restarts."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from brokerhelp import decode_records as records
from brokerhelp import free_port
from rocketlite.broker.broker import Broker
from rocketlite.broker.config import BrokerConfig
from rocketlite.common.errors import FlushError, ProtocolError
from rocketlite.formats.message_id import decode_message_id
from rocketlite.formats.properties import encode_properties
from rocketlite.namesrv.server import NameServer
from rocketlite.protocol.bodies import (
    ConsumerData,
    ConsumeType,
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    MessageQueue,
    ProducerData,
    SubscriptionData,
    TopicConfigSerializeWrapper,
    TopicRouteData,
    UnlockBatchRequestBody,
)
from rocketlite.protocol.codes import PullSysFlag, RequestCode, ResponseCode, SerializeType
from rocketlite.protocol.command import FrameDecoder, RemotingCommand
from rocketlite.protocol.headers import (
    CreateTopicRequestHeader,
    PullMessageRequestHeader,
    QueryMessageRequestHeader,
    SendMessageRequestHeader,
)
from rocketlite.protocol.message_batch import encode_batch
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import Connection
from rocketlite.store import disk
from rocketlite.store.config import StoreConfig

pytestmark = pytest.mark.integration

RC = ResponseCode
TIMEOUT = 5.0
SUB = int(PullSysFlag.SUBSCRIPTION)
SUSPEND = int(PullSysFlag.SUSPEND)
COMMIT = int(PullSysFlag.COMMIT_OFFSET)


def store_config(root: Path, **extra: str) -> StoreConfig:
    props = {
        "storePathRootDir": str(root),
        "listenPort": "0",
        "mappedFileSizeCommitLog": str(1 << 20),
        "mappedFileSizeConsumeQueue": "2000",
        "maxHashSlotNum": "256",
        "maxIndexNum": "2000",
        "maxMessageSize": "65536",
        "flushIntervalCommitLog": "20",
        "flushIntervalConsumeQueue": "20",
    }
    props.update(extra)
    return StoreConfig.from_properties(props)


class Env:
    def __init__(self, ns: NameServer, broker: Broker, client: RemotingClient) -> None:
        self.ns = ns
        self.broker = broker
        self.client = client
        self.addr = f"127.0.0.1:{broker.port}"
        self.ns_addr = f"127.0.0.1:{ns.port}"

    async def call(self, code: int, ext: dict[str, str] | None = None, body: bytes = b"",
                   client: RemotingClient | None = None) -> RemotingCommand:
        cmd = RemotingCommand.request(code, ext or {}, body)
        return await (client or self.client).invoke(self.addr, cmd, TIMEOUT)

    async def send(self, topic: str, body: bytes = b"hello", *, queue_id: int = 0,
                   tags: str | None = "TagA", keys: str | None = None, uniq: str | None = None,
                   code: int = RequestCode.SEND_MESSAGE_V2, queue_nums: int = 4,
                   batch: bool | None = None) -> RemotingCommand:
        given = {"TAGS": tags, "KEYS": keys, "UNIQ_KEY": uniq}
        props = {name: value for name, value in given.items() if value}
        h = SendMessageRequestHeader(
            producerGroup="PG", topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=queue_nums,
            queueId=queue_id, sysFlag=0, bornTimestamp=int(time.time() * 1000), flag=0,
            properties=encode_properties(props), batch=batch,
        )
        ext = h.to_ext() if code == RequestCode.SEND_MESSAGE else h.to_v2_ext()
        return await self.call(code, ext, body)

    async def pull(self, topic: str, offset: int, *, queue_id: int = 0, group: str = "CG",
                   sys_flag: int = SUB, expression: str | None = "*", suspend_ms: int = 0,
                   commit_offset: int = 0, max_nums: int = 32,
                   client: RemotingClient | None = None) -> RemotingCommand:
        h = PullMessageRequestHeader(
            consumerGroup=group, topic=topic, queueId=queue_id, queueOffset=offset,
            maxMsgNums=max_nums, sysFlag=sys_flag, commitOffset=commit_offset,
            suspendTimeoutMillis=suspend_ms, subVersion=0, subscription=expression,
            expressionType="TAG",
        )
        cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, h.to_ext())
        return await (client or self.client).invoke(self.addr, cmd, TIMEOUT + suspend_ms / 1000)

    async def held_pull(self, topic: str, offset: int, suspend_ms: int, *, queue_id: int = 0,
                        expression: str = "*") -> asyncio.Future[RemotingCommand]:
        """A suspended pull, once the broker holds it (the reply is the future's result)."""
        before = self.broker.hold.count
        fut = asyncio.ensure_future(self.pull(topic, offset, queue_id=queue_id,
                                              sys_flag=SUB | SUSPEND, suspend_ms=suspend_ms,
                                              expression=expression))
        await eventually(lambda: self.broker.hold.count == before + 1 or fut.done())
        assert not fut.done(), fut.result()
        return fut

    async def heartbeat(self, client: RemotingClient, client_id: str, group: str = "CG",
                        topic: str = "T", expression: str = "*") -> RemotingCommand:
        hb = HeartbeatData(
            clientID=client_id,
            consumerDataSet=[ConsumerData(
                groupName=group, consumeType=ConsumeType.CONSUME_PASSIVELY,
                messageModel=MessageModel.CLUSTERING,
                subscriptionDataSet=[SubscriptionData.from_expression(topic, expression)],
            )],
            producerDataSet=[ProducerData(groupName="PG")],
        )
        return await self.call(RequestCode.HEART_BEAT, body=hb.to_json(), client=client)

    async def wait_dispatched(self) -> None:
        store = self.broker.store
        await eventually(lambda: store.dispatcher.dispatch_from >= store.commitlog.max_offset)

    async def route(self, topic: str) -> TopicRouteData | None:
        cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        r = await self.client.invoke(self.ns_addr, cmd, TIMEOUT)
        return TopicRouteData.from_json(r.body) if r.code == RC.SUCCESS else None

    async def route_eventually(self, topic: str) -> TopicRouteData:
        """The NameServer's route for ``topic`` once the broker has registered it."""
        for _ in range(int(TIMEOUT / 0.02)):
            route = await self.route(topic)
            if route is not None:
                return route
            await asyncio.sleep(0.02)
        raise AssertionError(f"no route for {topic} at the NameServer")


@contextlib.asynccontextmanager
async def running(root: Path, broker_props: dict[str, str] | None = None,
                  **store_props: str) -> AsyncIterator[Env]:
    ns = NameServer("127.0.0.1", 0, auto_create_route=False)
    await ns.start()
    broker: Broker | None = None
    client = RemotingClient()
    try:
        props = {"namesrvAddr": f"127.0.0.1:{ns.port}", "brokerName": "broker-t"}
        props.update(broker_props or {})
        broker = Broker(BrokerConfig.from_properties(props), store_config(root, **store_props))
        await broker.start()
        yield Env(ns, broker, client)
    finally:
        await client.close()
        if broker is not None:
            await broker.close()
        await ns.close()


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with running(tmp_path / "store") as e:
        yield e


async def eventually(check: Callable[[], object], timeout: float = TIMEOUT) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


# -- send ------------------------------------------------------------------------------------------


async def test_every_send_form_answers_ids_of_the_stored_records(env: Env) -> None:
    store = env.broker.store
    ids: list[tuple[str, bytes, int]] = []  # (msgId, body, queue offset)
    r = await env.send("SendTopic", b"v1", code=RequestCode.SEND_MESSAGE)
    assert r.code == RC.SUCCESS, r.remark
    assert r.ext_fields["queueId"] == "0" and r.ext_fields["queueOffset"] == "0"
    ids.append((r.ext_fields["msgId"], b"v1", 0))
    r = await env.send("SendTopic", b"v2")
    assert r.code == RC.SUCCESS and r.ext_fields["queueOffset"] == "1"
    ids.append((r.ext_fields["msgId"], b"v2", 1))
    bodies = [b"b0", b"b1", b"b2"]
    batch = encode_batch(bodies, [{"KEYS": f"bk{i}"} for i in range(3)])
    r = await env.send("SendTopic", batch, code=RequestCode.SEND_BATCH_MESSAGE)
    assert r.code == RC.SUCCESS, r.remark
    assert r.ext_fields["queueOffset"] == "2"
    batch_ids = r.ext_fields["msgId"].split(",")
    assert len(batch_ids) == 3
    ids += [(mid, b, 2 + i) for i, (mid, b) in enumerate(zip(batch_ids, bodies, strict=True))]
    # C++ clients send batches as 310 (and 10) with the batch flag
    for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_MESSAGE):
        r = await env.send("SendTopic", encode_batch([b"c0", b"c1"]), code=code, batch=True)
        assert r.code == RC.SUCCESS, r.remark
        first = int(r.ext_fields["queueOffset"])
        ids += [(mid, b, first + i) for i, (mid, b) in
                enumerate(zip(r.ext_fields["msgId"].split(","), [b"c0", b"c1"], strict=True))]
    assert [q for _, _, q in ids] == list(range(9))
    for msg_id, body, queue_offset in ids:
        ip, port, offset = decode_message_id(msg_id)
        assert (ip, port) == (b"\x7f\x00\x00\x01", env.broker.port)
        m = store.look_message(offset)
        assert m is not None and m.commit_log_offset == offset
        assert (m.topic, m.body, m.queue_offset) == ("SendTopic", body, queue_offset)
        assert m.store_port == env.broker.port
    assert env.broker.stats.put_messages == 9


async def test_oneway_sends_are_stored_and_never_answered(env: Env) -> None:
    def frame(i: int, oneway: bool) -> bytes:
        h = SendMessageRequestHeader(
            producerGroup="PG", topic="OnewayTopic", defaultTopic="TBW102",
            defaultTopicQueueNums=4, queueId=0, sysFlag=0,
            bornTimestamp=int(time.time() * 1000), flag=0, properties="")
        cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h.to_v2_ext(), b"o%d" % i,
                                      oneway=oneway)
        cmd.opaque = 100 + i
        return cmd.encode()

    reader, writer = await asyncio.open_connection("127.0.0.1", env.broker.port)
    try:  # five oneway sends, then a two-way one: its reply must be the only frame back
        writer.write(b"".join(frame(i, oneway=True) for i in range(5)) + frame(5, oneway=False))
        decoder = FrameDecoder()
        got: list[RemotingCommand | ProtocolError] = []
        async with asyncio.timeout(TIMEOUT):
            while not got:
                got += decoder.feed(await reader.read(65536))
        await asyncio.sleep(0.05)  # a stray reply would have followed by now
        assert not reader.at_eof() and decoder.buffered == 0
    finally:
        writer.close()
    assert len(got) == 1 and isinstance(got[0], RemotingCommand)
    assert (got[0].opaque, got[0].code, got[0].ext_fields["queueOffset"]) == (105, RC.SUCCESS, "5")
    assert env.broker.store.max_offset_in_queue("OnewayTopic", 0) == 6


async def test_sends_in_the_binary_header_are_answered_in_it(env: Env) -> None:
    h = SendMessageRequestHeader(
        producerGroup="PG", topic="BinTopic", defaultTopic="TBW102", defaultTopicQueueNums=4,
        queueId=1, sysFlag=0, bornTimestamp=int(time.time() * 1000), flag=0, properties="")
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h.to_v2_ext(), b"bin")
    cmd.serialize_type = SerializeType.ROCKETMQ
    r = await env.client.invoke(env.addr, cmd, TIMEOUT)
    assert r.code == RC.SUCCESS, r.remark
    assert r.serialize_type == SerializeType.ROCKETMQ
    assert (r.ext_fields["queueId"], r.ext_fields["queueOffset"]) == ("1", "0")
    m = env.broker.store.look_message(decode_message_id(r.ext_fields["msgId"])[2])
    assert m is not None and (m.topic, m.body) == ("BinTopic", b"bin")


async def test_auto_created_topic_reaches_the_namesrv_route(env: Env) -> None:
    assert await env.route("NewTopic") is None
    r = await env.send("NewTopic", queue_nums=3, queue_id=2)
    assert r.code == RC.SUCCESS, r.remark
    tc = env.broker.topics.get("NewTopic")
    assert tc is not None and tc.writeQueueNums == 3  # min(3, TBW102's 8)
    route = await env.route_eventually("NewTopic")
    assert [(q.brokerName, q.writeQueueNums, q.perm) for q in route.queueDatas] == [
        ("broker-t", 3, 6)]
    assert route.brokerDatas[0].brokerAddrs == {0: env.broker.address}


async def test_no_auto_creation_answers_topic_not_exist(tmp_path: Path) -> None:
    async with running(tmp_path, {"autoCreateTopicEnable": "false"}) as env:
        r = await env.send("Unknown")
        assert r.code == RC.TOPIC_NOT_EXIST and "Unknown" in (r.remark or "")
        assert env.broker.topics.get("Unknown") is None
        # a group's retry topic is created all the same (one queue), as Java does
        r = await env.send("%RETRY%SomeGroup", b"again")
        assert r.code == RC.SUCCESS, r.remark
        tc = env.broker.topics.get("%RETRY%SomeGroup")
        assert tc is not None and (tc.readQueueNums, tc.writeQueueNums) == (1, 1)


async def test_send_errors(env: Env) -> None:
    r = await env.send("QTopic", queue_nums=2)
    assert r.code == RC.SUCCESS
    r = await env.send("QTopic", queue_id=7)
    assert r.code == RC.SYSTEM_ERROR and "queueId[7]" in (r.remark or "")
    r = await env.send("QTopic", b"x" * 70_000)
    assert r.code == RC.MESSAGE_ILLEGAL and r.remark
    r = await env.send("bad topic/name")
    assert r.code == RC.MESSAGE_ILLEGAL and "topic" in (r.remark or "")
    r = await env.send("QTopic", b"not a batch", code=RequestCode.SEND_BATCH_MESSAGE)
    assert r.code == RC.MESSAGE_ILLEGAL
    # a negative queue id picks a queue
    r = await env.send("QTopic", queue_id=-1)
    assert r.code == RC.SUCCESS and r.ext_fields["queueId"] in ("0", "1")
    await env.wait_dispatched()
    assert env.broker.store.max_offset_in_queue("QTopic", 0) + \
        env.broker.store.max_offset_in_queue("QTopic", 1) == 2
    # topics only the broker writes (delay levels, transactions, self test)
    for topic in ("SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "SELF_TEST_TOPIC"):
        r = await env.send(topic, b"sneaky")
        assert r.code == RC.NO_PERMISSION and f"topic[{topic}] is forbidden" in (r.remark or "")
        r = await env.send(topic, encode_batch([b"a"]), code=RequestCode.SEND_BATCH_MESSAGE)
        assert r.code == RC.NO_PERMISSION
    assert env.broker.store.max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 0) == 0


async def test_read_only_broker_refuses_sends_and_advertises_read_only_routes(
    tmp_path: Path,
) -> None:
    async with running(tmp_path, {"brokerPermission": "4"}) as env:
        h = CreateTopicRequestHeader(topic="RO", defaultTopic="TBW102", readQueueNums=2,
                                     writeQueueNums=2, perm=6, topicFilterType="SINGLE_TAG")
        assert (await env.call(RequestCode.UPDATE_AND_CREATE_TOPIC, h.to_ext())).code == 0
        r = await env.send("RO")
        assert r.code == RC.NO_PERMISSION
        # Java masks each topic's perm with the broker's when registering: producers route
        # around a read-only broker instead of failing on it
        route = await env.route_eventually("RO")
        assert [q.perm for q in route.queueDatas] == [4]
        tc = env.broker.topics.get("RO")
        assert tc is not None and tc.perm == 6  # the broker's own table is unchanged


# -- pull ------------------------------------------------------------------------------------------


async def test_pull_found_not_found_and_moved(env: Env) -> None:
    for i in range(5):
        assert (await env.send("PullTopic", b"m%d" % i)).code == RC.SUCCESS
    await env.wait_dispatched()
    r = await env.pull("PullTopic", 0, max_nums=3)
    assert r.code == RC.SUCCESS and r.remark == "FOUND"
    got = records(r.body)
    assert [m.body for m in got] == [b"m0", b"m1", b"m2"]
    assert [m.queue_offset for m in got] == [0, 1, 2]
    assert (r.ext_fields["nextBeginOffset"], r.ext_fields["minOffset"],
            r.ext_fields["maxOffset"]) == ("3", "0", "5")
    assert r.ext_fields["suggestWhichBrokerId"] == "0"
    r = await env.pull("PullTopic", 3)
    assert [m.body for m in records(r.body)] == [b"m3", b"m4"]
    r = await env.pull("PullTopic", 5)
    assert r.code == RC.PULL_NOT_FOUND and r.body == b""
    assert r.ext_fields["nextBeginOffset"] == "5"
    r = await env.pull("PullTopic", 50)  # far past the end: back to the minimum, 0 (Java's)
    assert r.code == RC.PULL_OFFSET_MOVED and r.remark == "OFFSET_OVERFLOW_BADLY"
    assert r.ext_fields["nextBeginOffset"] == "0"
    # a queue with nothing in it: not found at 0, moved elsewhere
    r = await env.pull("PullTopic", 0, queue_id=1)
    assert r.code == RC.PULL_NOT_FOUND
    r = await env.pull("PullTopic", 4, queue_id=1)
    assert r.code == RC.PULL_OFFSET_MOVED and r.ext_fields["nextBeginOffset"] == "0"
    r = await env.pull("PullTopic", 0, queue_id=99)
    assert r.code == RC.SYSTEM_ERROR
    r = await env.pull("NoSuchTopic", 0)
    assert r.code == RC.TOPIC_NOT_EXIST


async def test_pull_filters_by_tag(env: Env) -> None:
    for tag in ("TagC", "TagC", "TagA", "TagC", "TagB", "TagD"):
        await env.send("TagTopic", tag.encode(), tags=tag)
    await env.wait_dispatched()
    r = await env.pull("TagTopic", 0, expression="TagA || TagB")
    assert r.code == RC.SUCCESS
    assert [m.body for m in records(r.body)] == [b"TagA", b"TagB"]
    assert r.ext_fields["nextBeginOffset"] == "6"
    # maxMsgNums counts matches, not the units scanned past
    r = await env.pull("TagTopic", 0, expression="TagA || TagB", max_nums=1)
    assert [m.body for m in records(r.body)] == [b"TagA"]
    assert r.ext_fields["nextBeginOffset"] == "3"
    r = await env.pull("TagTopic", 0, expression="TagX")
    assert r.code == RC.PULL_RETRY_IMMEDIATELY and r.remark == "NO_MATCHED_MESSAGE"
    assert r.ext_fields["nextBeginOffset"] == "6"
    r = await env.pull("TagTopic", 5, expression="TagA || TagB")
    assert r.code == RC.PULL_RETRY_IMMEDIATELY and r.ext_fields["nextBeginOffset"] == "6"
    r = await env.pull("TagTopic", 0, expression="*")
    assert len(records(r.body)) == 6


async def test_pull_with_the_heartbeat_subscription(env: Env) -> None:
    await env.send("T", b"a", tags="TagA")
    await env.send("T", b"b", tags="TagB")
    await env.wait_dispatched()
    r = await env.pull("T", 0, sys_flag=0, expression=None)
    assert r.code == RC.SUBSCRIPTION_NOT_EXIST
    assert (await env.heartbeat(env.client, "c1@1", expression="TagB")).code == RC.SUCCESS
    r = await env.pull("T", 0, sys_flag=0, expression=None)
    assert r.code == RC.SUCCESS and [m.body for m in records(r.body)] == [b"b"]


async def test_long_polling_answers_on_arrival(env: Env) -> None:
    assert (await env.send("LP")).code == RC.SUCCESS
    await env.wait_dispatched()
    t0 = time.monotonic()
    held = await env.held_pull("LP", 1, 10_000)
    sender = RemotingClient()
    try:
        r = await env.call(RequestCode.SEND_MESSAGE_V2, (await _v2("LP")), b"late", client=sender)
        assert r.code == RC.SUCCESS
        async with asyncio.timeout(3.0):
            reply = await held
    finally:
        await sender.close()
    assert reply.code == RC.SUCCESS and [m.body for m in records(reply.body)] == [b"late"]
    assert time.monotonic() - t0 < 3.0
    assert env.broker.hold.count == 0


async def _v2(topic: str) -> dict[str, str]:
    return SendMessageRequestHeader(
        producerGroup="PG", topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=4, queueId=0,
        sysFlag=0, bornTimestamp=1, flag=0, properties=encode_properties({"TAGS": "TagA"}),
    ).to_v2_ext()


async def test_long_polling_times_out_with_not_found(env: Env) -> None:
    await env.send("LP2")
    await env.wait_dispatched()
    t0 = time.monotonic()
    r = await env.pull("LP2", 1, sys_flag=SUB | SUSPEND, suspend_ms=300)
    elapsed = time.monotonic() - t0
    assert r.code == RC.PULL_NOT_FOUND
    assert 0.25 <= elapsed < 2.0
    # without SUSPEND the answer is immediate
    t0 = time.monotonic()
    r = await env.pull("LP2", 1, suspend_ms=5000)
    assert r.code == RC.PULL_NOT_FOUND and time.monotonic() - t0 < 1.0


async def test_held_pulls_are_answered_at_shutdown(tmp_path: Path) -> None:
    async with running(tmp_path) as env:
        await env.send("LP3")
        await env.wait_dispatched()
        held = await env.held_pull("LP3", 1, 30_000)
        await env.broker.close()
        async with asyncio.timeout(3.0):
            r = await held
        assert r.code == RC.PULL_NOT_FOUND


async def test_commit_offset_flag_stores_the_offset(env: Env) -> None:
    await env.send("CO")
    await env.wait_dispatched()
    r = await env.pull("CO", 0, sys_flag=SUB | COMMIT, commit_offset=1, group="G1")
    assert r.code == RC.SUCCESS
    assert env.broker.offsets.query("G1", "CO", 0) == 1
    r = await env.call(RequestCode.QUERY_CONSUMER_OFFSET,
                       {"consumerGroup": "G1", "topic": "CO", "queueId": "0"})
    assert r.code == RC.SUCCESS and r.ext_fields["offset"] == "1"
    # without the flag nothing is stored
    await env.pull("CO", 0, sys_flag=SUB, commit_offset=0, group="G1")
    assert env.broker.offsets.query("G1", "CO", 0) == 1


# -- consumer offsets ------------------------------------------------------------------------------


async def test_query_and_update_consumer_offset(env: Env) -> None:
    await env.send("OT")
    await env.wait_dispatched()
    q = {"consumerGroup": "G", "topic": "OT", "queueId": "0"}
    r = await env.call(RequestCode.QUERY_CONSUMER_OFFSET, q)
    assert r.code == RC.SUCCESS and r.ext_fields["offset"] == "0"  # young queue
    r = await env.call(RequestCode.QUERY_CONSUMER_OFFSET, {**q, "setZeroIfNotFound": "false"})
    assert r.code == RC.QUERY_NOT_FOUND
    r = await env.call(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "1"})
    assert r.code == RC.SUCCESS
    r = await env.call(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "-1"})
    assert r.code == RC.SUCCESS  # ignored
    r = await env.call(RequestCode.QUERY_CONSUMER_OFFSET, q)
    assert r.ext_fields["offset"] == "1"


async def test_max_min_offsets_timestamps(env: Env) -> None:
    t0 = int(time.time() * 1000)
    for i in range(3):
        await env.send("Off", b"%d" % i)
    await env.wait_dispatched()
    q = {"topic": "Off", "queueId": "0"}
    r = await env.call(RequestCode.GET_MAX_OFFSET, q)
    assert r.code == RC.SUCCESS and r.ext_fields["offset"] == "3"
    r = await env.call(RequestCode.GET_MIN_OFFSET, q)
    assert r.ext_fields["offset"] == "0"
    r = await env.call(RequestCode.GET_MAX_OFFSET, {"topic": "Off", "queueId": "3"})
    assert r.ext_fields["offset"] == "0"
    r = await env.call(RequestCode.GET_EARLIEST_MSG_STORETIME, q)
    first_ts = int(r.ext_fields["timestamp"])
    assert t0 - 1000 <= first_ts <= int(time.time() * 1000)
    first = env.broker.store.look_message(0)
    assert first is not None and first_ts == first.store_timestamp
    r = await env.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**q, "timestamp": "0"})
    assert r.code == RC.SUCCESS and r.ext_fields["offset"] == "0"
    r = await env.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                       {**q, "timestamp": str(int(time.time() * 1000) + 60_000)})
    assert r.ext_fields["offset"] == "3"


# -- clients ---------------------------------------------------------------------------------------


async def test_heartbeat_consumer_list_notify_and_unregister(env: Env) -> None:
    notified: list[RemotingCommand] = []
    got_notice = asyncio.Event()

    def on_request(conn: Connection, cmd: RemotingCommand) -> None:
        notified.append(cmd)
        got_notice.set()

    first, second = RemotingClient(on_request), RemotingClient()
    try:
        r = await env.heartbeat(first, "10.0.0.1@1")
        assert r.code == RC.SUCCESS
        assert "IS_SUPPORT_HEART_BEAT_V2" in r.ext_fields and "IS_SUB_CHANGE" in r.ext_fields
        # a first member: the group's only member is told too
        async with asyncio.timeout(TIMEOUT):
            await got_notice.wait()
        got_notice.clear()
        notified.clear()
        assert (await env.heartbeat(first, "10.0.0.1@1")).code == RC.SUCCESS  # no change
        assert env.broker.topics.get("%RETRY%CG") is not None
        r = await env.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG"})
        assert GetConsumerListByGroupResponseBody.from_json(r.body).consumerIdList == ["10.0.0.1@1"]
        assert (await env.heartbeat(second, "10.0.0.2@2")).code == RC.SUCCESS
        async with asyncio.timeout(TIMEOUT):
            await got_notice.wait()
        assert [c.code for c in notified] == [RequestCode.NOTIFY_CONSUMER_IDS_CHANGED]
        assert notified[0].ext_fields == {"consumerGroup": "CG"}
        r = await env.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG"})
        ids = GetConsumerListByGroupResponseBody.from_json(r.body).consumerIdList
        assert sorted(ids) == ["10.0.0.1@1", "10.0.0.2@2"]
        got_notice.clear()
        r = await env.call(RequestCode.UNREGISTER_CLIENT,
                           {"clientID": "10.0.0.2@2", "consumerGroup": "CG", "producerGroup": "PG"},
                           client=second)
        assert r.code == RC.SUCCESS
        async with asyncio.timeout(TIMEOUT):
            await got_notice.wait()
        assert env.broker.consumers.client_ids("CG") == ["10.0.0.1@1"]
        assert len(env.broker.producers.channels("PG")) == 1
        # a closed connection leaves its groups
        await first.close()
        await eventually(lambda: env.broker.consumers.get("CG") is None)
        r = await env.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG"})
        assert r.code == RC.SYSTEM_ERROR
    finally:
        await first.close()
        await second.close()


async def test_lock_and_unlock_batch(env: Env) -> None:
    mqs = {MessageQueue(topic="T", brokerName="broker-t", queueId=i) for i in range(3)}
    foreign = MessageQueue(topic="T", brokerName="other-broker", queueId=0)

    async def lock(client_id: str, qs: set[MessageQueue]) -> set[MessageQueue]:
        body = LockBatchRequestBody(consumerGroup="OG", clientId=client_id, mqSet=qs).to_json()
        r = await env.call(RequestCode.LOCK_BATCH_MQ, body=body)
        assert r.code == RC.SUCCESS, r.remark
        return LockBatchResponseBody.from_json(r.body).lockOKMQSet

    assert await lock("c1", mqs | {foreign}) == mqs
    assert await lock("c2", mqs) == set()
    body = UnlockBatchRequestBody(consumerGroup="OG", clientId="c1",
                                  mqSet={MessageQueue(topic="T", brokerName="broker-t", queueId=0)})
    r = await env.call(RequestCode.UNLOCK_BATCH_MQ, body=body.to_json())
    assert r.code == RC.SUCCESS
    assert await lock("c2", mqs) == {MessageQueue(topic="T", brokerName="broker-t", queueId=0)}
    r = await env.call(RequestCode.LOCK_BATCH_MQ, body=LockBatchRequestBody(mqSet=mqs).to_json())
    assert r.code == RC.SYSTEM_ERROR


# -- lookups ---------------------------------------------------------------------------------------


async def test_query_message_by_key_and_unique_key_and_view_by_id(env: Env) -> None:
    r = await env.send("QM", b"first", keys="order-1 shared", uniq="UNIQ0001")
    msg_id = r.ext_fields["msgId"]
    await env.send("QM", b"second", keys="order-2 shared", uniq="UNIQ0002")
    await env.send("Other", b"elsewhere", keys="order-1")
    await env.wait_dispatched()

    async def query(key: str, unique: bool = False, max_num: int = 32) -> RemotingCommand:
        h = QueryMessageRequestHeader(topic="QM", key=key, maxNum=max_num, beginTimestamp=0,
                                      endTimestamp=2**62, uniqueKeyQuery=unique or None)
        return await env.call(RequestCode.QUERY_MESSAGE, h.to_ext())

    await eventually(lambda: env.broker.store.query_message("QM", "shared", 4) != [])
    r = await query("order-1")
    assert r.code == RC.SUCCESS and [m.body for m in records(r.body)] == [b"first"]
    assert "indexLastUpdateTimestamp" in r.ext_fields and "indexLastUpdatePhyoffset" in r.ext_fields
    r = await query("shared")
    assert sorted(m.body for m in records(r.body)) == [b"first", b"second"]
    r = await query("shared", max_num=1)
    assert len(records(r.body)) == 1
    r = await query("UNIQ0002", unique=True)
    assert [m.body for m in records(r.body)] == [b"second"]
    r = await query("nothing-like-it")
    assert r.code == RC.QUERY_NOT_FOUND
    _, _, offset = decode_message_id(msg_id)
    r = await env.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset), "topic": "QM"})
    assert r.code == RC.SUCCESS and [m.body for m in records(r.body)] == [b"first"]
    for bad in (offset + 1, 10**9, -1):
        r = await env.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(bad)})
        assert r.code == RC.SYSTEM_ERROR, bad


# -- administration --------------------------------------------------------------------------------


async def test_topic_administration(env: Env) -> None:
    h = CreateTopicRequestHeader(topic="AdminTopic", defaultTopic="TBW102", readQueueNums=2,
                                 writeQueueNums=3, perm=6, topicFilterType="SINGLE_TAG",
                                 attributes="+message.type=NORMAL")
    r = await env.call(RequestCode.UPDATE_AND_CREATE_TOPIC, h.to_ext())
    assert r.code == RC.SUCCESS, r.remark
    tc = env.broker.topics.get("AdminTopic")
    assert tc is not None and (tc.readQueueNums, tc.writeQueueNums) == (2, 3)
    assert tc.attributes == {"message.type": "NORMAL"}
    for system in ("TBW102", "SCHEDULE_TOPIC_XXXX", "broker-t", "DefaultCluster", "rmq_sys_X"):
        r = await env.call(RequestCode.UPDATE_AND_CREATE_TOPIC,
                           {**h.to_ext(), "topic": system})
        assert r.code == RC.SYSTEM_ERROR, system
    r = await env.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {**h.to_ext(), "readQueueNums": "0"})
    assert r.code == RC.SYSTEM_ERROR
    r = await env.call(RequestCode.GET_ALL_TOPIC_CONFIG)
    table = TopicConfigSerializeWrapper.from_json(r.body).topicConfigTable
    assert {"AdminTopic", "TBW102", "SCHEDULE_TOPIC_XXXX"} <= set(table)
    # delete: the topic, its queues and its consumer offsets go
    assert (await env.send("AdminTopic")).code == RC.SUCCESS
    await env.wait_dispatched()
    env.broker.offsets.commit("G", "AdminTopic", 0, 1)
    r = await env.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "AdminTopic"})
    assert r.code == RC.SUCCESS
    assert env.broker.topics.get("AdminTopic") is None
    assert env.broker.offsets.query("G", "AdminTopic", 0) == -1
    assert env.broker.store.max_offset_in_queue("AdminTopic", 0) == 0
    r = await env.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "TBW102"})
    assert r.code == RC.SYSTEM_ERROR and env.broker.topics.get("TBW102") is not None
    r = await env.call(RequestCode.GET_BROKER_RUNTIME_INFO)
    info = KVTable.from_json(r.body).table
    assert info["msgPutTotalTodayNow"] == "1"
    assert int(info["commitLogMaxOffset"]) == env.broker.store.commitlog.max_offset
    assert info["topicCount"] == str(len(env.broker.topics))


async def test_unknown_code_and_malformed_header(env: Env) -> None:
    r = await env.call(9999)
    assert r.code == RC.REQUEST_CODE_NOT_SUPPORTED and "9999" in (r.remark or "")
    r = await env.call(RequestCode.PULL_MESSAGE, {"consumerGroup": "G", "topic": "T"})
    assert r.code == RC.SYSTEM_ERROR and "queueId" in (r.remark or "")
    r = await env.call(RequestCode.SEND_MESSAGE_V2, {"b": "T"})
    assert r.code != RC.SUCCESS and r.remark
    r = await env.call(RequestCode.HEART_BEAT, body=b"{not json")
    assert r.code == RC.SYSTEM_ERROR
    r = await env.call(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "zero"})
    assert r.code == RC.SYSTEM_ERROR and "queueId" in (r.remark or "")
    # still serving, on the same connection
    assert (await env.send("StillHere")).code == RC.SUCCESS


# -- durability ------------------------------------------------------------------------------------


async def test_sync_flush_send_answers_after_the_flush(tmp_path: Path) -> None:
    async with running(tmp_path, flushDiskType="SYNC_FLUSH", flushIntervalCommitLog="500") as env:
        cl = env.broker.store.commitlog
        for i in range(5):
            r = await env.send("SF", b"durable %d" % i)
            assert r.code == RC.SUCCESS, r.remark
            _, _, offset = decode_message_id(r.ext_fields["msgId"])
            m = env.broker.store.look_message(offset)
            assert m is not None
            assert cl.flushed_offset >= offset + m.total_size
        r = await env.send("SF", encode_batch([b"x", b"y"]), code=RequestCode.SEND_BATCH_MESSAGE)
        assert r.code == RC.SUCCESS
        assert cl.flushed_offset == cl.max_offset


@pytest.mark.parametrize("failure", ["slow", "broken"])
async def test_sync_flush_that_is_late_or_fails_is_answered_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    """A group commit slower than syncFlushTimeout answers FLUSH_DISK_TIMEOUT with the ids (the
    message is stored); a failing one answers SERVICE_NOT_AVAILABLE: single sends and batches."""
    async with running(tmp_path, flushDiskType="SYNC_FLUSH", syncFlushTimeout="200") as env:
        files = env.broker.store.commitlog.files
        real_flush = files.flush

        def flush() -> int:
            if failure == "slow":
                time.sleep(0.6)
                return real_flush()
            raise FlushError("disk on fire")

        monkeypatch.setattr(files, "flush", flush)
        replies = await asyncio.gather(
            *(env.send("SlowDisk", b"s%d" % i) for i in range(3)),
            env.send("SlowDisk", encode_batch([b"x", b"y"]), code=RequestCode.SEND_BATCH_MESSAGE))
        for r in replies:
            if failure == "slow":
                assert r.code == RC.FLUSH_DISK_TIMEOUT, r.remark
                assert "not flushed within 0.2 s" in (r.remark or "")
                for msg_id in r.ext_fields["msgId"].split(","):
                    assert env.broker.store.look_message(decode_message_id(msg_id)[2]) is not None
            else:
                assert r.code == RC.SERVICE_NOT_AVAILABLE, r.remark
                assert "disk on fire" in (r.remark or "") and not r.ext_fields
        monkeypatch.setattr(files, "flush", real_flush)
        cl = env.broker.store.commitlog
        await eventually(lambda: cl.flushed_offset >= cl.max_offset)  # the slow one finished
        r = await env.send("SlowDisk", b"after")
        assert r.code == RC.SUCCESS, r.remark


class FailingSync(disk.FileLayer):
    """The store's file layer with every fdatasync failing as a dying disk's does (EIO)."""

    def sync(self, fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))


async def test_an_fsync_failure_in_the_file_layer_reaches_the_senders(tmp_path: Path) -> None:
    """A SYNC_FLUSH broker whose fdatasync fails (injected in ``store.disk``'s file layer, under
    the CommitLog's own flush) answers every waiting sender SERVICE_NOT_AVAILABLE with the
    system's reason, acknowledges nothing, and acknowledges again once syncs work."""
    async with running(tmp_path, flushDiskType="SYNC_FLUSH") as env:
        assert (await env.send("SyncFail", b"before")).code == RC.SUCCESS
        previous = disk.install(FailingSync())
        try:
            replies = await asyncio.gather(
                *(env.send("SyncFail", b"f%d" % i) for i in range(3)),
                env.send("SyncFail", encode_batch([b"x", b"y"]),
                         code=RequestCode.SEND_BATCH_MESSAGE))
        finally:
            disk.install(previous)
        for r in replies:
            assert r.code == RC.SERVICE_NOT_AVAILABLE, r.remark
            assert "fdatasync of" in (r.remark or "") and "Input/output error" in (r.remark or "")
            assert not r.ext_fields  # no message id: nothing acknowledged
        r = await env.send("SyncFail", b"after")
        assert r.code == RC.SUCCESS, r.remark
        cl = env.broker.store.commitlog
        assert cl.flushed_offset >= cl.max_offset


async def test_offsets_topics_and_messages_survive_a_restart(tmp_path: Path) -> None:
    async with running(tmp_path) as env:
        await env.send("Durable", b"kept", queue_nums=2)
        h = CreateTopicRequestHeader(topic="Made", defaultTopic="TBW102", readQueueNums=5,
                                     writeQueueNums=5, perm=6, topicFilterType="SINGLE_TAG")
        assert (await env.call(RequestCode.UPDATE_AND_CREATE_TOPIC, h.to_ext())).code == RC.SUCCESS
        r = await env.call(RequestCode.UPDATE_CONSUMER_OFFSET,
                           {"consumerGroup": "G", "topic": "Durable", "queueId": "0",
                            "commitOffset": "1"})
        assert r.code == RC.SUCCESS
        env.broker.subscriptions.get("G")
    assert not (tmp_path / "abort").exists()
    async with running(tmp_path, {"autoCreateTopicEnable": "false"}) as env:
        tc = env.broker.topics.get("Durable")
        assert tc is not None and tc.writeQueueNums == 2
        made = env.broker.topics.get("Made")
        assert made is not None and made.readQueueNums == 5
        r = await env.call(RequestCode.QUERY_CONSUMER_OFFSET,
                           {"consumerGroup": "G", "topic": "Durable", "queueId": "0"})
        assert r.ext_fields["offset"] == "1"
        assert "G" in env.broker.subscriptions.table
        await env.wait_dispatched()
        r = await env.pull("Durable", 0)
        assert [m.body for m in records(r.body)] == [b"kept"]
        # the topic is known: sending works without auto-creation
        assert (await env.send("Durable", b"more")).code == RC.SUCCESS
        # and the NameServer learns it from the registration at start
        await env.route_eventually("Made")


# -- long polling, more ----------------------------------------------------------------------------


async def test_long_polling_on_a_queue_never_written_and_woken_by_a_batch(env: Env) -> None:
    h = CreateTopicRequestHeader(topic="Empty", defaultTopic="TBW102", readQueueNums=2,
                                 writeQueueNums=2, perm=6, topicFilterType="SINGLE_TAG")
    assert (await env.call(RequestCode.UPDATE_AND_CREATE_TOPIC, h.to_ext())).code == RC.SUCCESS
    held = await env.held_pull("Empty", 0, 10_000, queue_id=1)
    sender = RemotingClient()
    try:
        ext = {**(await _v2("Empty")), "e": "1"}
        r = await env.call(RequestCode.SEND_BATCH_MESSAGE, ext, encode_batch([b"p", b"q"]),
                           client=sender)
        assert r.code == RC.SUCCESS, r.remark
        async with asyncio.timeout(3.0):
            reply = await held
    finally:
        await sender.close()
    assert reply.code == RC.SUCCESS and [m.body for m in records(reply.body)] == [b"p", b"q"]


async def test_held_pull_limit_and_short_polling(tmp_path: Path) -> None:
    # a short poll long enough that a busy machine answers the second pull within it
    props = {"maxHeldPulls": "1", "longPollingEnable": "false", "shortPollingTimeMills": "2000"}
    async with running(tmp_path, props) as env:
        await env.send("SP")
        await env.wait_dispatched()
        t0 = time.monotonic()
        first = await env.held_pull("SP", 1, 20_000)
        r = await env.pull("SP", 1, sys_flag=SUB | SUSPEND, suspend_ms=20_000)
        # not held (the limit is reached): answered while the first is still held
        assert r.code == RC.PULL_NOT_FOUND and not first.done()
        async with asyncio.timeout(10.0):
            r = await first
        # held for shortPollingTimeMills, not the request's 20 s
        assert r.code == RC.PULL_NOT_FOUND and 1.9 <= time.monotonic() - t0 < 10.0


async def test_pull_refused_for_a_disabled_or_unknown_group(tmp_path: Path) -> None:
    from rocketlite.broker.subscriptions import SubscriptionGroupConfig

    async with running(tmp_path, {"autoCreateSubscriptionGroup": "false"}) as env:
        await env.send("G")
        r = await env.pull("G", 0, group="Unknown")
        assert r.code == RC.SUBSCRIPTION_GROUP_NOT_EXIST
        # its heartbeat still registers the consumer and the producer (as Java does), but
        # creates no retry topic and no group
        r = await env.heartbeat(env.client, "cid-1", group="Unknown", topic="G")
        assert r.code == RC.SUCCESS, r.remark
        assert env.broker.consumers.client_ids("Unknown") == ["cid-1"]
        assert env.broker.producers.groups.get("PG")
        assert env.broker.topics.get("%RETRY%Unknown") is None
        assert env.broker.subscriptions.table.get("Unknown") is None
        env.broker.subscriptions.update(SubscriptionGroupConfig(groupName="Off",
                                                                consumeEnable=False))
        r = await env.pull("G", 0, group="Off")
        assert r.code == RC.NO_PERMISSION


# -- housekeeping ----------------------------------------------------------------------------------


async def test_offsets_are_persisted_periodically(tmp_path: Path) -> None:
    async with running(tmp_path / "s", {"flushConsumerOffsetInterval": "50"}) as env:
        r = await env.call(RequestCode.UPDATE_CONSUMER_OFFSET,
                           {"consumerGroup": "G", "topic": "T", "queueId": "3",
                            "commitOffset": "42"})
        assert r.code == RC.SUCCESS
        path = tmp_path / "s" / "config" / "consumerOffset.json"
        await eventually(lambda: path.exists() and b"T@G" in path.read_bytes())
        assert path.read_bytes() == b'{"offsetTable":{"T@G":{3:42}}}'


async def test_silent_clients_expire(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rocketlite.broker import broker as broker_module

    monkeypatch.setattr(broker_module, "CLIENT_SCAN_INTERVAL_S", 0.05)
    notices = asyncio.Queue[RemotingCommand]()

    def on_request(conn: Connection, cmd: RemotingCommand) -> None:
        notices.put_nowait(cmd)

    async with running(tmp_path, {"channelExpiredTimeout": "300"}) as env:
        stays, goes = RemotingClient(on_request), RemotingClient()
        try:
            await env.heartbeat(goes, "silent@1")
            await env.heartbeat(stays, "alive@2")
            async with asyncio.timeout(TIMEOUT):
                await notices.get()
            conn = await goes.connection(env.addr)
            deadline = time.monotonic() + TIMEOUT
            # "alive" keeps beating; "silent" does not and is dropped, its connection closed
            while env.broker.consumers.client_ids("CG") != ["alive@2"]:
                assert time.monotonic() < deadline, env.broker.consumers.client_ids("CG")
                await env.heartbeat(stays, "alive@2")
                await asyncio.sleep(0.05)
            async with asyncio.timeout(TIMEOUT):
                await conn.wait_closed()
                while (await notices.get()).code != RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
                    pass
            assert len(env.broker.producers.channels("PG")) == 1
        finally:
            await stays.close()
            await goes.close()


async def test_broker_starts_and_serves_without_a_namesrv(tmp_path: Path) -> None:
    dead = NameServer("127.0.0.1", 0)
    await dead.start()
    dead_addr = f"127.0.0.1:{dead.port}"
    await dead.close()
    broker = Broker(BrokerConfig(namesrv_addr=dead_addr), store_config(tmp_path))
    client = RemotingClient()
    try:
        await broker.start()
        cmd = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"})
        r = await client.invoke(f"127.0.0.1:{broker.port}", cmd, TIMEOUT)
        assert r.code == RC.SUCCESS
    finally:
        await client.close()
        async with asyncio.timeout(TIMEOUT):
            await broker.close()
    assert not (tmp_path / "abort").exists()


async def test_close_shuts_the_store_down_even_if_a_config_file_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_cm = running(tmp_path)
    env = await env_cm.__aenter__()
    try:
        await env.send("T")

        def full_disk(force: bool = True) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(env.broker.offsets, "persist", full_disk)
        with pytest.raises(OSError, match="No space"):
            await env.broker.close()
        assert not env.broker.store.running
        assert not (tmp_path / "abort").exists()
        assert (tmp_path / "config" / "topics.json").exists()  # the others were still written
    finally:
        await env_cm.__aexit__(None, None, None)


async def test_a_failing_housekeeping_round_neither_stops_the_loop_nor_breaks_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rocketlite.broker import broker as broker_module

    monkeypatch.setattr(broker_module, "CLIENT_SCAN_INTERVAL_S", 0.02)
    async with running(tmp_path) as env:
        calls = 0

        def flaky_expire() -> int:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise RuntimeError("housekeeping broke")
            return 0

        monkeypatch.setattr(env.broker.locks, "expire", flaky_expire)
        await eventually(lambda: calls >= 3)
    assert not (tmp_path / "abort").exists()


async def test_after_retention_offsets_start_above_zero(tmp_path: Path) -> None:
    async with running(tmp_path, mappedFileSizeCommitLog="65536", fileReservedTime="0") as env:
        for i in range(40):  # ~160 KiB: three CommitLog segments
            assert (await env.send("Old", b"%04d" % i * 1000)).code == RC.SUCCESS
        await env.wait_dispatched()
        report = await asyncio.to_thread(env.broker.store.retention.run_once, True)
        assert report.commitlog_files_deleted >= 1
        q = {"topic": "Old", "queueId": "0"}
        low = int((await env.call(RequestCode.GET_MIN_OFFSET, q)).ext_fields["offset"])
        assert 0 < low < 40
        r = await env.call(RequestCode.QUERY_CONSUMER_OFFSET, {**q, "consumerGroup": "New"})
        assert r.code == RC.QUERY_NOT_FOUND  # the client applies consumeFromWhere
        r = await env.pull("Old", 0)
        assert r.code == RC.PULL_OFFSET_MOVED and r.remark == "OFFSET_TOO_SMALL"
        assert r.ext_fields["nextBeginOffset"] == str(low)
        r = await env.pull("Old", low, max_nums=1)
        (oldest,) = records(r.body)
        assert oldest.queue_offset == low
        r = await env.call(RequestCode.GET_EARLIEST_MSG_STORETIME, q)
        assert int(r.ext_fields["timestamp"]) == oldest.store_timestamp


async def test_broker_registers_soon_with_a_namesrv_that_starts_after_it(tmp_path: Path) -> None:
    port = free_port()
    broker = Broker(BrokerConfig(namesrv_addr=f"127.0.0.1:{port}"), store_config(tmp_path))
    ns = NameServer("127.0.0.1", port)
    try:
        await broker.start()
        await asyncio.sleep(0.2)  # the first registration has failed by now
        await ns.start()
        # well before the 30 s registerNameServerPeriod
        await eventually(lambda: bool(ns.routes.cluster_info().brokerAddrTable), timeout=4.0)
    finally:
        await broker.close()
        await ns.close()


async def test_held_pull_waits_for_a_message_its_subscription_matches(env: Env) -> None:
    await env.send("LPTag", b"old", tags="TagA")
    await env.wait_dispatched()
    held = await env.held_pull("LPTag", 1, 10_000, expression="TagA")
    sender = RemotingClient()
    try:
        for i in range(3):  # other tags: the pull stays held, as with Java's tag-aware wake-up
            r = await env.call(RequestCode.SEND_MESSAGE_V2,
                               {**(await _v2("LPTag")), "i": encode_properties({"TAGS": "TagB"})},
                               b"b%d" % i, client=sender)
            assert r.code == RC.SUCCESS
        await env.wait_dispatched()
        await asyncio.sleep(0.1)
        assert not held.done() and env.broker.hold.count == 1
        r = await env.call(RequestCode.SEND_MESSAGE_V2, await _v2("LPTag"), b"wanted", client=sender)
        assert r.code == RC.SUCCESS
        async with asyncio.timeout(3.0):
            reply = await held
    finally:
        await sender.close()
    assert reply.code == RC.SUCCESS and [m.body for m in records(reply.body)] == [b"wanted"]
    assert reply.ext_fields["nextBeginOffset"] == "5"


async def test_held_filtered_pull_times_out_past_what_it_skipped(env: Env) -> None:
    await env.send("LPTag2", b"x", tags="TagB")
    await env.wait_dispatched()
    held = await env.held_pull("LPTag2", 1, 300, expression="TagA")
    await env.send("LPTag2", b"y", tags="TagB")
    async with asyncio.timeout(3.0):
        r = await held
    assert r.code in (RC.PULL_NOT_FOUND, RC.PULL_RETRY_IMMEDIATELY)
    assert r.ext_fields["nextBeginOffset"] == "2"
    assert env.broker.hold.count == 0


async def test_a_second_broker_on_the_same_store_is_refused_and_touches_nothing(
    tmp_path: Path,
) -> None:
    from rocketlite.common.errors import StoreLockedError

    async with running(tmp_path) as env:
        for topic in ("A", "B"):  # two versions: topics.json and its .bak differ
            h = CreateTopicRequestHeader(topic=topic, defaultTopic="TBW102", readQueueNums=1,
                                         writeQueueNums=1, perm=6, topicFilterType="SINGLE_TAG")
            assert (await env.call(RequestCode.UPDATE_AND_CREATE_TOPIC, h.to_ext())).code == 0
        cfg = tmp_path / "config"
        before = {p.name: p.read_bytes() for p in cfg.iterdir()}
        second = Broker(BrokerConfig(namesrv_addr=env.ns_addr), store_config(tmp_path))
        with pytest.raises(StoreLockedError):
            await second.start()
        await second.close()
        assert {p.name: p.read_bytes() for p in cfg.iterdir()} == before
        assert (tmp_path / "abort").exists()  # still the first broker's
        assert (await env.send("A", b"still serving")).code == RC.SUCCESS


async def test_a_taken_port_fails_the_start_and_releases_the_store(tmp_path: Path) -> None:
    taken = NameServer("127.0.0.1", 0)
    await taken.start()
    try:
        broker = Broker(BrokerConfig(namesrv_addr=f"127.0.0.1:{taken.port}"),
                        store_config(tmp_path, listenPort=str(taken.port), brokerIP1="127.0.0.1"))
        broker.server.host = "127.0.0.1"
        with pytest.raises(OSError):
            await broker.start()
        await broker.close()
        assert not (tmp_path / "abort").exists()
        async with running(tmp_path) as env:  # the store is free again
            assert (await env.send("T")).code == RC.SUCCESS
    finally:
        await taken.close()


async def test_close_right_after_a_topic_change(tmp_path: Path) -> None:
    """The change wakes the register loop in the same loop iteration as close() cancels it
    (Python 3.11's wait_for returned the finished wait and dropped the cancellation)."""
    from rocketlite.protocol.bodies import TopicConfig

    async with running(tmp_path) as env:
        await env.route_eventually("TBW102")  # registered: the loop now waits for a change
        await asyncio.sleep(0.05)
        env.broker.topics.update(TopicConfig(topicName="Late"))
        t0 = time.monotonic()
        async with asyncio.timeout(TIMEOUT):
            await env.broker.close()
        assert time.monotonic() - t0 < 2.0
        assert not env.broker.store.running


async def test_close_itself_can_be_cancelled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    async with running(tmp_path) as env:
        async def stuck() -> None:
            await asyncio.sleep(3600)

        monkeypatch.setattr(env.broker, "_unregister_all", stuck)
        closing = asyncio.ensure_future(env.broker.close())
        await asyncio.sleep(0.05)
        closing.cancel()
        with pytest.raises(asyncio.CancelledError):
            async with asyncio.timeout(TIMEOUT):
                await closing
        assert not env.broker.store.running  # the store is shut down all the same
