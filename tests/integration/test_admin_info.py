"""GET_TOPIC_CONFIG (351) and GET_CONSUMER_RUNNING_INFO (307) on loopback sockets, with a broker
and a NameServer in the loop (``test_broker.running``): the topic config a broker holds, read back
through the body class; an unknown topic is TOPIC_NOT_EXIST with Java's remark. A live
rocketlite PushConsumer's and LitePullConsumer's running info relayed by the broker; a member gone,
silent or refusing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_broker import eventually, running

from rocketlite.client.instance import ClientConfig
from rocketlite.client.lite_pull_consumer import LitePullConsumer
from rocketlite.client.push_consumer import PushConsumer
from rocketlite.protocol.admin_bodies import TopicConfigAndQueueMapping
from rocketlite.protocol.bodies import ConsumeFromWhere, MessageQueue, TopicFilterType
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.headers import CreateTopicRequestHeader
from rocketlite.protocol.running_info import ConsumerRunningInfo
from rocketlite.remoting.client import RemotingClient

pytestmark = pytest.mark.integration

RC = ResponseCode
RQ = RequestCode


async def test_topic_config_is_what_the_broker_holds(tmp_path: Path) -> None:
    async with running(tmp_path / "store") as env:
        h = CreateTopicRequestHeader(topic="CfgT", defaultTopic="TBW102", readQueueNums=3,
                                     writeQueueNums=2, perm=4, topicFilterType="MULTI_TAG",
                                     order=True, attributes="+k=v")
        assert (await env.call(RQ.UPDATE_AND_CREATE_TOPIC, h.to_ext())).code == RC.SUCCESS
        r = await env.call(RQ.GET_TOPIC_CONFIG, {"topic": "CfgT", "lo": "false"})
        assert r.code == RC.SUCCESS, r.remark
        assert b"mappingDetail" not in r.body
        tc = TopicConfigAndQueueMapping.from_json(r.body)
        assert tc == TopicConfigAndQueueMapping(
            topicName="CfgT", readQueueNums=3, writeQueueNums=2, perm=4,
            topicFilterType=TopicFilterType.MULTI_TAG, order=True, attributes={"k": "v"})
        assert tc.to_json() == env.broker.topics.get("CfgT").to_json()  # type: ignore[union-attr]

        r = await env.call(RQ.GET_TOPIC_CONFIG, {"topic": "NoSuchTopic"})
        assert (r.code, r.remark) == (RC.TOPIC_NOT_EXIST, "No topic in this broker. topic: NoSuchTopic")
        assert env.broker.topics.get("NoSuchTopic") is None  # asking does not create it
        r = await env.call(RQ.GET_TOPIC_CONFIG, {})
        assert r.code != RC.SUCCESS  # the topic is @CFNotNull


async def test_running_info_is_relayed_from_the_consumer(tmp_path: Path) -> None:
    """A live PushConsumer answers 307 through the broker: its queues with the offsets it
    consumed to, its figures, its settings, a thread dump on request; a client id that is not
    (or no longer) online is Java's SYSTEM_ERROR."""
    got: list[bytes] = []
    async with running(tmp_path / "store", brokerIP1="127.0.0.1") as env:
        for qid, n in ((0, 5), (1, 3)):
            for i in range(n):
                assert (await env.send("RunT", b"m%d-%d" % (qid, i), queue_id=qid,
                                       queue_nums=2)).code == RC.SUCCESS
        c = PushConsumer("RunG", config=ClientConfig(
            namesrv_addr=env.ns_addr, rebalance_interval=0.5, heartbeat_interval=0.5),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        c.subscribe("RunT", "*")
        c.register_listener(lambda msgs: got.extend(m.body for m in msgs))
        await c.start()
        try:
            mq0, mq1 = (MessageQueue(topic="RunT", brokerName="broker-t", queueId=q) for q in (0, 1))
            assert c.offset_store is not None and c.instance is not None
            store = c.offset_store
            await eventually(lambda: len(got) == 8 and store.in_memory(mq0) == 5
                             and store.in_memory(mq1) == 3)
            cid = c.instance.client_id
            r = await env.call(RQ.GET_CONSUMER_RUNNING_INFO,
                               {"consumerGroup": "RunG", "clientId": cid, "jstackEnable": "false"})
            assert r.code == RC.SUCCESS, r.remark
            assert b'{"brokerName":"broker-t","queueId":0,"topic":"RunT"}:{' in r.body  # fastjson
            info = ConsumerRunningInfo.from_json(r.body)
            assert set(info.mqTable) == set(c.owned_queues())
            assert {mq0, mq1} <= set(info.mqTable)
            assert (info.mqTable[mq0].commitOffset, info.mqTable[mq1].commitOffset) == (5, 3)
            assert info.mqTable[mq0].cachedMsgCount == 0 and not info.mqTable[mq0].droped
            assert info.mqTable[mq0].lastPullTimestamp > 0
            assert [s.topic for s in info.subscriptionSet] == ["%RETRY%RunG", "RunT"]
            assert info.statusTable["RunT"].consumeOKTPS > 0
            assert info.statusTable["RunT"].pullTPS > 0 and info.statusTable["RunT"].consumeFailedMsgs == 0
            props = info.properties
            assert (props["consumerGroup"], props["PROP_CONSUME_TYPE"], props["PROP_CONSUMEORDERLY"],
                    props["messageModel"]) == ("RunG", "CONSUME_PASSIVELY", "false", "CLUSTERING")
            assert props["PROP_NAMESERVER_ADDR"] == env.ns_addr + ";" and info.jstack is None

            r = await env.call(RQ.GET_CONSUMER_RUNNING_INFO,
                               {"consumerGroup": "RunG", "clientId": cid, "jstackEnable": "true"})
            dump = ConsumerRunningInfo.from_json(r.body).jstack
            assert dump is not None and '"MainThread"' in dump and "heartbeat" in dump

            r = await env.call(RQ.GET_CONSUMER_RUNNING_INFO,
                               {"consumerGroup": "RunG", "clientId": "nobody@1"})
            assert (r.code, r.remark) == (RC.SYSTEM_ERROR, "The Consumer <RunG> <nobody@1> not online")
        finally:
            await c.shutdown()
        r = await env.call(RQ.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "RunG", "clientId": cid})
        assert (r.code, r.remark) == (RC.SYSTEM_ERROR, f"The Consumer <RunG> <{cid}> not online")


async def test_a_client_that_does_not_answer_times_out(tmp_path: Path) -> None:
    """A member that never answers broker requests (as ali-ons 3.x): CONSUME_MSG_TIMEOUT once the
    broker's wait is over; a member that answers with an error: its reply, relayed."""
    async with running(tmp_path / "store") as env:
        env.broker.client_calls.timeout_s = 0.5
        silent = RemotingClient(lambda conn, cmd: None)
        refusing = RemotingClient(lambda conn, cmd: cmd.response(RC.SYSTEM_ERROR, "not mine"))
        try:
            assert (await env.heartbeat(silent, "silent@1", group="QuietG")).code == RC.SUCCESS
            assert (await env.heartbeat(refusing, "refusing@1", group="QuietG")).code == RC.SUCCESS
            r = await env.call(RQ.GET_CONSUMER_RUNNING_INFO,
                               {"consumerGroup": "QuietG", "clientId": "silent@1"})
            assert r.code == RC.CONSUME_MSG_TIMEOUT
            assert r.remark is not None and r.remark.startswith("consumer <QuietG> <silent@1> Timeout: ")
            r = await env.call(RQ.GET_CONSUMER_RUNNING_INFO,
                               {"consumerGroup": "QuietG", "clientId": "refusing@1"})
            assert (r.code, r.remark) == (RC.SYSTEM_ERROR, "not mine")
        finally:
            await silent.close()
            await refusing.close()


async def test_lite_pull_consumer_answers_with_its_buffered_messages(tmp_path: Path) -> None:
    """A LitePullConsumer (CONSUME_ACTIVELY) answers too: its queues, what it pulled and was not
    yet polled, what it pulled per topic."""
    async with running(tmp_path / "store", brokerIP1="127.0.0.1") as env:
        for i in range(6):
            assert (await env.send("LiteT", b"l%d" % i, queue_id=0, queue_nums=1)).code == RC.SUCCESS
        c = LitePullConsumer("LiteG", config=ClientConfig(
            namesrv_addr=env.ns_addr, rebalance_interval=0.5, heartbeat_interval=0.5),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, auto_commit=False)
        c.subscribe("LiteT", "*")
        await c.start()
        try:
            mq = MessageQueue(topic="LiteT", brokerName="broker-t", queueId=0)

            async def info() -> ConsumerRunningInfo:
                assert c.instance is not None
                r = await env.call(RQ.GET_CONSUMER_RUNNING_INFO, {
                    "consumerGroup": "LiteG", "clientId": c.instance.client_id})
                assert r.code == RC.SUCCESS, r.remark
                return ConsumerRunningInfo.from_json(r.body)

            async def buffered() -> int:
                got = await info()
                return got.mqTable[mq].cachedMsgCount if mq in got.mqTable else -1

            deadline = asyncio.get_running_loop().time() + 30
            while await buffered() != 6:  # pulled, none polled yet
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.1)
            got = await info()
            assert got.properties["PROP_CONSUME_TYPE"] == "CONSUME_ACTIVELY"
            assert got.statusTable["LiteT"].pullTPS > 0
            assert len(await c.poll(5.0)) == 6
            assert await buffered() == 0
        finally:
            await c.shutdown()
