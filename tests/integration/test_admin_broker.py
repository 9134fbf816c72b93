"""mqadmin's broker requests (issue 21) on loopback sockets, with a broker and a NameServer in the
loop (``test_broker.running``): topic stats (202), consume stats (208), consumer and producer
connections (203, 204), subscription group create/delete (200, 207), offset reset by time with the
push to online members (222 -> 220), broker config get/update (26, 25). Each answer is read back
through the body classes and checked against what the broker stored, and the raw JSON against the
form Java's fastjson writes (MessageQueue objects as map keys)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from test_broker import TIMEOUT, Env, eventually, running

from brokerhelp import decode_records
from rocketlite.broker.subscriptions import SubscriptionGroupConfig, SubscriptionGroupWrapper
from rocketlite.broker.topics import keeps_queues
from rocketlite.protocol.admin_bodies import (
    ConsumerConnection,
    ConsumeStats,
    GroupList,
    ProducerConnection,
    ResetOffsetBody,
    ResetOffsetBodyForC,
    TopicStatsTable,
)
from rocketlite.protocol.bodies import (
    ConsumerData,
    ConsumeType,
    DataVersion,
    HeartbeatData,
    MessageModel,
    MessageQueue,
    SubscriptionData,
    TopicList,
)
from rocketlite.protocol.codes import CURRENT_VERSION, RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import Connection
from rocketlite.store.config import load_properties

pytestmark = pytest.mark.integration

RC = ResponseCode
RQ = RequestCode
TOPIC = "AdminT"
BROKER = "broker-t"


def mq(qid: int, topic: str = TOPIC) -> MessageQueue:
    return MessageQueue(topic=topic, brokerName=BROKER, queueId=qid)


async def fill(env: Env, per_queue: dict[int, int], topic: str = TOPIC) -> None:
    for qid, n in per_queue.items():
        for i in range(n):
            r = await env.send(topic, f"m{qid}-{i}".encode(), queue_id=qid)
            assert r.code == RC.SUCCESS, r.remark
    await env.wait_dispatched()


def store_time(env: Env, qid: int, offset: int, topic: str = TOPIC) -> int:
    """The store timestamp of a queue's message, read through a pull (not the admin code)."""
    cq = env.broker.store.find_queue(topic, qid)
    assert cq is not None
    unit = cq.get_unit(offset)
    assert unit is not None
    return env.broker.store.commitlog.store_timestamp_at(unit[0])


async def commit(env: Env, group: str, qid: int, offset: int, topic: str = TOPIC) -> None:
    r = await env.call(RQ.UPDATE_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic,
                                                   "queueId": str(qid), "commitOffset": str(offset)})
    assert r.code == RC.SUCCESS


async def test_topic_stats_answer_each_queue_in_fastjson_form(tmp_path: Path) -> None:
    async with running(tmp_path / "store") as env:
        await fill(env, {0: 3, 1: 1})
        r = await env.call(RQ.GET_TOPIC_STATS_INFO, {"topic": TOPIC})
        assert r.code == RC.SUCCESS, r.remark
        # Java's fastjson: a MessageQueue object is the map key
        assert (b'{"brokerName":"broker-t","queueId":0,"topic":"AdminT"}:{"lastUpdateTimestamp":'
                + str(store_time(env, 0, 2)).encode() + b',"maxOffset":3,"minOffset":0}') in r.body
        table = TopicStatsTable.from_json(r.body)
        tc = env.broker.topics.get(TOPIC)
        assert tc is not None
        assert set(table.offsetTable) == {mq(q) for q in range(max(tc.readQueueNums,
                                                                   tc.writeQueueNums))}
        assert table.offsetTable[mq(1)].maxOffset == 1
        assert table.offsetTable[mq(1)].lastUpdateTimestamp == store_time(env, 1, 0)
        empty = table.offsetTable[mq(2)]
        assert (empty.minOffset, empty.maxOffset, empty.lastUpdateTimestamp) == (0, 0, 0)

        r = await env.call(RQ.GET_TOPIC_STATS_INFO, {"topic": "NoSuchTopic"})
        assert (r.code, r.remark) == (RC.TOPIC_NOT_EXIST, "topic[NoSuchTopic] not exist")


async def test_consume_stats_show_each_queue_lag(tmp_path: Path) -> None:
    async with running(tmp_path / "store") as env:
        await fill(env, {0: 3, 1: 1})
        await fill(env, {0: 2}, topic="OtherT")
        await commit(env, "CG", 0, 2)
        await commit(env, "CG", 0, 1, topic="OtherT")

        r = await env.call(RQ.GET_CONSUME_STATS, {"consumerGroup": "CG", "topic": TOPIC})
        assert r.code == RC.SUCCESS, r.remark
        assert b'{"brokerName":"broker-t","queueId":0,"topic":"AdminT"}:{"brokerOffset":3,' in r.body
        stats = ConsumeStats.from_json(r.body)
        q0, q1 = stats.offsetTable[mq(0)], stats.offsetTable[mq(1)]
        assert (q0.brokerOffset, q0.consumerOffset, q0.pullOffset) == (3, 2, 2)
        assert q0.lastTimestamp == store_time(env, 0, 1)  # the last consumed message's
        assert (q1.brokerOffset, q1.consumerOffset, q1.lastTimestamp) == (1, 0, 0)
        assert stats.total_diff() == 2
        assert {m.topic for m in stats.offsetTable} == {TOPIC}

        # no topic: every topic the group committed offsets for
        r = await env.call(RQ.GET_CONSUME_STATS, {"consumerGroup": "CG"})
        stats = ConsumeStats.from_json(r.body)
        assert {m.topic for m in stats.offsetTable} == {TOPIC, "OtherT"}
        assert stats.offsetTable[mq(0, "OtherT")].consumerOffset == 1

        # online members subscribing to TOPIC only: OtherT is left out, unless listed
        member = RemotingClient()
        try:
            assert (await env.heartbeat(member, "c@1", topic=TOPIC)).code == RC.SUCCESS
            r = await env.call(RQ.GET_CONSUME_STATS, {"consumerGroup": "CG"})
            assert {m.topic for m in ConsumeStats.from_json(r.body).offsetTable} == {TOPIC}
            r = await env.call(RQ.GET_CONSUME_STATS,
                               {"consumerGroup": "CG", "topicList": f"OtherT;{TOPIC}"})
            assert {m.topic for m in ConsumeStats.from_json(r.body).offsetTable} == {
                TOPIC, "OtherT"}
            # who consumes: online subscribers and groups with offsets
            await commit(env, "Offline", 0, 1)
            assert (await env.heartbeat(member, "c@1", group="OnlyOnline",
                                        topic=TOPIC)).code == RC.SUCCESS
            r = await env.call(RQ.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC})
            assert GroupList.from_json(r.body).groupList == {"CG", "Offline", "OnlyOnline"}
            r = await env.call(RQ.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "OtherT"})
            assert GroupList.from_json(r.body).groupList == {"CG"}
            r = await env.call(RQ.QUERY_TOPICS_BY_CONSUMER, {"group": "CG"})
            topics = TopicList.from_json(r.body)
            assert (topics.topicList, topics.brokerAddr) == ({TOPIC, "OtherT"}, env.broker.address)
        finally:
            await member.close()

        r = await env.call(RQ.GET_CONSUME_STATS, {"consumerGroup": "NoOffsets"})
        assert r.code == RC.SUCCESS and ConsumeStats.from_json(r.body).offsetTable == {}


async def test_topic_and_consume_stats_answer_the_last_minute_s_rates(tmp_path: Path) -> None:
    async with running(tmp_path / "store") as env:
        b = env.broker
        assert b.metrics is not None  # metricsPort's default: on
        b.rates.sample(b.metrics, now=1000.0)
        await fill(env, {0: 6, 1: 2})
        r = await env.pull(TOPIC, 0, queue_id=0, group="CG")
        assert r.code == RC.SUCCESS, r.remark
        await commit(env, "CG", 0, 6)
        b.rates.sample(b.metrics, now=1004.0)  # what the housekeeping does every 5 s

        r = await env.call(RQ.GET_TOPIC_STATS_INFO, {"topic": TOPIC})
        assert TopicStatsTable.from_json(r.body).topicPutTps == 8 / 4
        r = await env.call(RQ.GET_CONSUME_STATS, {"consumerGroup": "CG", "topic": TOPIC})
        assert ConsumeStats.from_json(r.body).consumeTps == 6 / 4
        r = await env.call(RQ.GET_CONSUME_STATS, {"consumerGroup": "Idle", "topic": TOPIC})
        assert ConsumeStats.from_json(r.body).consumeTps == 0.0


async def test_consumer_and_producer_connections(tmp_path: Path) -> None:
    async with running(tmp_path / "store") as env:
        first, second = RemotingClient(), RemotingClient()
        try:
            assert (await env.heartbeat(first, "10.0.0.1@1", topic=TOPIC,
                                        expression="TagA || TagB")).code == RC.SUCCESS
            assert (await env.heartbeat(second, "10.0.0.2@2", topic=TOPIC,
                                        expression="TagA || TagB")).code == RC.SUCCESS
            r = await env.call(RQ.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG"})
            assert r.code == RC.SUCCESS, r.remark
            cc = ConsumerConnection.from_json(r.body)
            assert sorted(c.clientId for c in cc.connectionSet) == ["10.0.0.1@1", "10.0.0.2@2"]
            peers = {c.peer for c in env.broker.consumers.groups["CG"].channels
                     if isinstance(c, Connection)}
            assert {c.clientAddr for c in cc.connectionSet} == peers
            assert {(c.language, c.version) for c in cc.connectionSet} == {
                ("PYTHON", CURRENT_VERSION)}
            assert (cc.consumeType, cc.messageModel) == (ConsumeType.CONSUME_PASSIVELY,
                                                         MessageModel.CLUSTERING)
            sub = cc.subscriptionTable[TOPIC]
            assert isinstance(sub, SubscriptionData) and sub.tagsSet == {"TagA", "TagB"}

            r = await env.call(RQ.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG"})
            assert r.code == RC.SUCCESS, r.remark
            pc = ProducerConnection.from_json(r.body)
            assert sorted(c.clientId for c in pc.connectionSet) == ["10.0.0.1@1", "10.0.0.2@2"]

            await first.close()
            await second.close()
            await eventually(lambda: env.broker.consumers.get("CG") is None)
            r = await env.call(RQ.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG"})
            assert (r.code, r.remark) == (RC.CONSUMER_NOT_ONLINE,
                                          "the consumer group[CG] not online")
            r = await env.call(RQ.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG"})
            assert (r.code, r.remark) == (RC.SYSTEM_ERROR, "the producer group[PG] not exist")
        finally:
            await first.close()
            await second.close()


async def test_create_update_and_delete_a_subscription_group(tmp_path: Path) -> None:
    async with running(tmp_path / "store") as env:
        async def groups() -> SubscriptionGroupWrapper:
            r = await env.call(RQ.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            return SubscriptionGroupWrapper.from_json(r.body)

        sgc = SubscriptionGroupConfig(groupName="AdminG", retryMaxTimes=5, consumeEnable=False)
        r = await env.call(RQ.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=sgc.to_json())
        assert r.code == RC.SUCCESS, r.remark
        got = (await groups()).subscriptionGroupTable["AdminG"]
        assert (got.retryMaxTimes, got.consumeEnable) == (5, False)
        r = await env.call(RQ.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "AdminG"})
        assert r.code == RC.SUCCESS and SubscriptionGroupConfig.from_json(r.body) == got
        r = await env.call(RQ.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "NoSuchGroup"})
        assert (r.code, r.remark) == (RC.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
        assert "NoSuchGroup" not in env.broker.subscriptions.table  # not auto-created
        before = (await groups()).dataVersion.counter
        sgc.retryMaxTimes = 7
        assert (await env.call(RQ.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                               body=sgc.to_json())).code == RC.SUCCESS
        wrapper = await groups()
        assert wrapper.subscriptionGroupTable["AdminG"].retryMaxTimes == 7
        assert wrapper.dataVersion.counter == before + 1
        # survives a restart of the config file read
        assert "AdminG" in SubscriptionGroupWrapper.from_json(
            env.broker.subscriptions.path.read_bytes()).subscriptionGroupTable

        for bad, remark in (("bad name", "contains illegal characters"),
                            ("x" * 256, "longer than group max length 255")):
            r = await env.call(RQ.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                               body=SubscriptionGroupConfig(groupName=bad).to_json())
            assert r.code == RC.INVALID_PARAMETER and remark in (r.remark or "")
            assert bad not in (await groups()).subscriptionGroupTable
        r = await env.call(RQ.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"retryMaxTimes":1}')
        assert r.code == RC.INVALID_PARAMETER and "groupName" in (r.remark or "")

        await fill(env, {0: 2})
        await commit(env, "AdminG", 0, 2)
        r = await env.call(RQ.DELETE_SUBSCRIPTIONGROUP, {"groupName": "AdminG"})
        assert r.code == RC.SUCCESS
        assert "AdminG" not in (await groups()).subscriptionGroupTable
        assert env.broker.offsets.query("AdminG", TOPIC, 0) == 2  # kept without cleanOffset
        assert (await env.call(RQ.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                               body=sgc.to_json())).code == RC.SUCCESS
        r = await env.call(RQ.DELETE_SUBSCRIPTIONGROUP,
                           {"groupName": "AdminG", "cleanOffset": "true"})
        assert r.code == RC.SUCCESS
        assert "AdminG" not in (await groups()).subscriptionGroupTable
        r = await env.call(RQ.QUERY_CONSUMER_OFFSET,
                           {"consumerGroup": "AdminG", "topic": TOPIC, "queueId": "0"})
        assert r.code == RC.SUCCESS and r.ext_fields["offset"] == "0"  # queue starts at 0 again


async def test_reset_offset_by_time_commits_and_tells_the_members(tmp_path: Path) -> None:
    async with running(tmp_path / "store") as env:
        await fill(env, {0: 2, 1: 1})
        split = max(store_time(env, 0, 1), store_time(env, 1, 0)) + 1
        # the next messages are stored after ``split``
        await asyncio.sleep(max(0.0, split / 1000 - time.time()) + 0.002)
        await fill(env, {0: 2, 1: 2})
        await commit(env, "CG", 0, 4)
        await commit(env, "CG", 1, 0)

        pushed: asyncio.Queue[RemotingCommand] = asyncio.Queue()

        def on_request(conn: Connection, cmd: RemotingCommand) -> None:
            if cmd.code == RQ.RESET_CONSUMER_CLIENT_OFFSET:
                pushed.put_nowait(cmd)

        member = RemotingClient(on_request)
        try:
            assert (await env.heartbeat(member, "c@1", topic=TOPIC)).code == RC.SUCCESS
            ext = {"topic": TOPIC, "group": "CG", "timestamp": str(split), "isForce": "false"}
            r = await env.call(RQ.INVOKE_BROKER_TO_RESET_OFFSET, ext)
            assert r.code == RC.SUCCESS, r.remark
            want = {mq(0): 2, mq(1): 0}  # q1: its committed 0 is already behind the target 1
            tc = env.broker.topics.get(TOPIC)
            assert tc is not None
            want.update({mq(q): 0 for q in range(2, tc.readQueueNums)})
            assert ResetOffsetBody.from_json(r.body).offsetTable == want
            assert {q: env.broker.offsets.query("CG", TOPIC, q) for q in (0, 1)} == {0: 2, 1: 0}
            async with asyncio.timeout(TIMEOUT):
                note = await pushed.get()
            assert note.ext_fields["topic"] == TOPIC and note.ext_fields["group"] == "CG"
            assert note.ext_fields["timestamp"] == str(split)
            assert ResetOffsetBody.from_json(note.body).offsetTable == want

            # forced: moves forward too (-1: each queue's max offset)
            ext.update(timestamp="-1", isForce="true")
            r = await env.call(RQ.INVOKE_BROKER_TO_RESET_OFFSET, ext)
            offsets = ResetOffsetBody.from_json(r.body).offsetTable
            assert (offsets[mq(0)], offsets[mq(1)]) == (4, 3)
            assert env.broker.offsets.query("CG", TOPIC, 1) == 3
            # not forced: an offset behind the target stays
            await commit(env, "CG", 1, 1)
            ext.update(isForce="false")
            r = await env.call(RQ.INVOKE_BROKER_TO_RESET_OFFSET, ext)
            assert ResetOffsetBody.from_json(r.body).offsetTable[mq(1)] == 1

            # 5.x's one-queue form with an offset, checked against the queue's range
            one = {"topic": TOPIC, "group": "CG", "timestamp": "0", "isForce": "true",
                   "queueId": "0", "offset": "1"}
            r = await env.call(RQ.INVOKE_BROKER_TO_RESET_OFFSET, one)
            assert ResetOffsetBody.from_json(r.body).offsetTable == {mq(0): 1}
            assert env.broker.offsets.query("CG", TOPIC, 0) == 1
            one["offset"] = "99"
            r = await env.call(RQ.INVOKE_BROKER_TO_RESET_OFFSET, one)
            assert r.code == RC.SYSTEM_ERROR and "not in consume queue range [0-4]" in (r.remark or "")
            assert env.broker.offsets.query("CG", TOPIC, 0) == 1
        finally:
            await member.close()

        r = await env.call(RQ.INVOKE_BROKER_TO_RESET_OFFSET,
                           {"topic": "NoSuchTopic", "group": "CG", "timestamp": "0",
                            "isForce": "true"})
        assert r.code == RC.TOPIC_NOT_EXIST
        r = await env.call(RQ.INVOKE_BROKER_TO_RESET_OFFSET,
                           {"topic": TOPIC, "group": "NoSuchGroup", "timestamp": "0",
                            "isForce": "true"})
        assert (r.code, r.remark) == (RC.SUBSCRIPTION_GROUP_NOT_EXIST,
                                      "Group NoSuchGroup does not exist")
        assert env.broker.offsets.offsets_of("NoSuchGroup", TOPIC) == {}
        # an offline group with offsets is reset all the same
        r = await env.call(RQ.INVOKE_BROKER_TO_RESET_OFFSET,
                           {"topic": TOPIC, "group": "CG", "timestamp": "0", "isForce": "true"})
        assert r.code == RC.SUCCESS and env.broker.offsets.query("CG", TOPIC, 0) == 0


async def test_reset_offset_pushes_a_list_to_cpp_clients(tmp_path: Path) -> None:
    async with running(tmp_path / "store") as env:
        await fill(env, {0: 3})
        pushed: asyncio.Queue[RemotingCommand] = asyncio.Queue()
        member = RemotingClient(lambda conn, cmd: pushed.put_nowait(cmd))
        try:
            hb = RemotingCommand.request(RQ.HEART_BEAT, {}, _heartbeat_body("cpp@1"))
            hb.language = "CPP"
            assert (await member.invoke(env.addr, hb, TIMEOUT)).code == RC.SUCCESS
            r = await env.call(RQ.INVOKE_BROKER_TO_RESET_OFFSET,
                               {"topic": TOPIC, "group": "CG", "timestamp": "-1",
                                "isForce": "true"})
            assert r.code == RC.SUCCESS
            async with asyncio.timeout(TIMEOUT):
                while (note := await pushed.get()).code != RQ.RESET_CONSUMER_CLIENT_OFFSET:
                    pass
            body = ResetOffsetBodyForC.from_json(note.body)  # a standard JSON list
            assert {(q.queueId, q.offset) for q in body.offsetTable if q.queueId == 0} == {(0, 3)}
            assert b'"offsetTable":[{"brokerName":"broker-t","offset":3,"queueId":0,' in note.body
        finally:
            await member.close()


def _heartbeat_body(client_id: str) -> bytes:
    return HeartbeatData(clientID=client_id, consumerDataSet=[ConsumerData(
        groupName="CG", consumeType=ConsumeType.CONSUME_PASSIVELY,
        messageModel=MessageModel.CLUSTERING,
        subscriptionDataSet=[SubscriptionData.from_expression(TOPIC, "*")])]).to_json()


async def test_broker_config_get_and_live_update(tmp_path: Path) -> None:
    async with running(tmp_path / "store") as env:
        async def config() -> tuple[dict[str, str], DataVersion]:
            r = await env.call(RQ.GET_BROKER_CONFIG)
            assert r.code == RC.SUCCESS
            return load_properties(r.body.decode()), DataVersion.from_json(r.ext_fields["version"])

        props, version = await config()
        assert props["brokerName"] == BROKER
        assert props["maxTransferCountOnMessageInMemory"] == "32"
        assert props["storePathRootDir"] == str(tmp_path / "store")  # the store's keys too

        await fill(env, {0: 5})
        r = await env.call(RQ.UPDATE_BROKER_CONFIG, body=b"maxTransferCountOnMessageInMemory=2\n")
        assert r.code == RC.SUCCESS, r.remark
        pulled = await env.pull(TOPIC, 0)
        assert pulled.code == RC.SUCCESS and len(_records(pulled)) == 2  # applied at once
        props, newer = await config()
        assert props["maxTransferCountOnMessageInMemory"] == "2"
        assert newer.counter == version.counter + 1

        # one key that cannot change live refuses the whole update
        r = await env.call(RQ.UPDATE_BROKER_CONFIG,
                           body=b"maxTransferCountOnMessageInMemory=5\nbrokerName=other\n")
        assert r.code == RC.NO_PERMISSION
        assert (r.remark or "").startswith("brokerName: cannot change while the broker runs")
        r = await env.call(RQ.UPDATE_BROKER_CONFIG, body=b"maxTransferCountOnMessageInMemory=x")
        assert r.code == RC.INVALID_PARAMETER and "maxTransferCountOnMessageInMemory" in (
            r.remark or "")
        r = await env.call(RQ.UPDATE_BROKER_CONFIG, body=b"noSuchKey=1")
        assert r.code == RC.INVALID_PARAMETER and (r.remark or "").startswith("noSuchKey:")
        props, _ = await config()
        assert (props["maxTransferCountOnMessageInMemory"], props["brokerName"]) == ("2", BROKER)

        # brokerPermission: sends refused at once, routes re-registered read-only
        r = await env.call(RQ.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4")
        assert r.code == RC.SUCCESS, r.remark
        assert (await env.send(TOPIC, b"x")).code == RC.NO_PERMISSION
        for _ in range(int(TIMEOUT / 0.02)):
            route = await env.route(TOPIC)
            if route is not None and route.queueDatas[0].perm == 4:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the route's perm did not become read-only")
        r = await env.call(RQ.UPDATE_BROKER_CONFIG, body=b"brokerPermission=6")
        assert (await env.send(TOPIC, b"x")).code == RC.SUCCESS

        # autoCreateSubscriptionGroup reaches the subscription manager
        r = await env.call(RQ.UPDATE_BROKER_CONFIG, body=b"autoCreateSubscriptionGroup=false")
        assert r.code == RC.SUCCESS
        assert env.broker.subscriptions.get("NeverSeen") is None


def _records(reply: RemotingCommand) -> list[object]:
    return list(decode_records(reply.body))


async def test_clean_expired_consume_queues(tmp_path: Path) -> None:
    async with running(tmp_path / "store", fileReservedTime="0") as env:
        store = env.broker.store
        await fill(env, {0: 3}, topic="OldT")
        await fill(env, {0: 1}, topic="%RETRY%G")  # not a system topic: cleaned too, as Java
        for _ in range(20):  # past the first 1 MiB CommitLog segment, all in NewT's queue 0
            assert (await env.send("NewT", b"x" * 60_000, queue_id=0)).code == RC.SUCCESS
        await env.wait_dispatched()
        report = await asyncio.to_thread(store.retention.run_once, True)
        assert report.commitlog_files_deleted >= 1
        assert store.max_offset_in_queue("OldT", 0) == 3
        assert store.min_offset_in_queue("OldT", 0) == 3  # nothing left to read

        r = await env.call(RQ.CLEAN_EXPIRED_CONSUMEQUEUE)
        assert r.code == RC.SUCCESS, r.remark
        assert store.find_queue("OldT", 0) is None and store.find_queue("%RETRY%G", 0) is None
        assert not (store.config.consume_queue_dir / "OldT").exists()
        new_q = store.find_queue("NewT", 0)
        assert new_q is not None and new_q.max_offset == 20  # its last messages are still there
        for name in ("SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "rmq_sys_wheel_timer"):
            assert keeps_queues(name, env.broker.config)
        assert not keeps_queues("%RETRY%G", env.broker.config)

        # the queue starts again at offset 0 (Java's behaviour)
        r = await env.send("OldT", b"again", queue_id=0)
        assert r.code == RC.SUCCESS and r.ext_fields["queueOffset"] == "0"
        await env.wait_dispatched()
        r = await env.call(RQ.GET_TOPIC_STATS_INFO, {"topic": "OldT"})
        got = TopicStatsTable.from_json(r.body).offsetTable[mq(0, "OldT")]
        assert (got.minOffset, got.maxOffset) == (0, 1)
        assert records_of(await env.pull("OldT", 0, queue_id=0)) == [b"again"]


def records_of(reply: RemotingCommand) -> list[bytes]:
    return [bytes(m.body) for m in decode_records(reply.body)]
