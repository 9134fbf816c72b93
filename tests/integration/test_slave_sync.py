"""A slave's metadata sync and consumers on the slave, with a NameServer, a master and a slave in
one process on loopback: topics, groups, consumer and delay offsets reach the slave in one
``sync_once``; GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET and GET_ALL_SUBSCRIPTIONGROUP_CONFIG
answer Java's bodies; pulls suggest the slave to a consumer far behind; a PushConsumer goes on
consuming from the slave while the master is down, commits there, and goes back to the master."""

from __future__ import annotations

import collections
import contextlib
from pathlib import Path

import pytest

import hahelp
from brokerhelp import eventually
from hahelp import Pair
from rocketlite.broker.broker import Broker
from rocketlite.broker.subscriptions import SubscriptionGroupConfig, SubscriptionGroupWrapper
from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer
from rocketlite.client.push_consumer import ConsumeStatus, PushConsumer
from rocketlite.formats.properties import encode_properties
from rocketlite.protocol import fastjson
from rocketlite.protocol.bodies import (
    ConsumeFromWhere,
    ConsumerOffsetSerializeWrapper,
    DelayOffsetSerializeWrapper,
    MessageQueue,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from rocketlite.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from rocketlite.protocol.headers import PullMessageRequestHeader
from rocketlite.store.message import MessageToStore

pytestmark = pytest.mark.integration

NAME = "broker-ss"


def pair(tmp: Path) -> contextlib.AbstractAsyncContextManager[Pair]:
    """A NameServer, a master on fixed ports (so it restarts where the slave and the clients
    look for it) and a slave."""
    return hahelp.pair(tmp, NAME, broker={"flushConsumerOffsetInterval": "200"},
                       store={"brokerIP1": "127.0.0.1", "mappedFileSizeConsumeQueue": "60000"},
                       fixed_ports=True)


# -- the sync ---------------------------------------------------------------------------------


async def test_sync_once_copies_topics_groups_and_offsets(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        master = await p.start_master()
        slave = await p.start_slave()
        assert slave.slave_sync is not None and master.slave_sync is None
        master.topics.update(TopicConfig(topicName="SyncA", readQueueNums=3, writeQueueNums=3))
        master.topics.update(TopicConfig(topicName="SyncB", readQueueNums=2, writeQueueNums=2,
                                         perm=4))
        master.subscriptions.update(SubscriptionGroupConfig(groupName="G1", retryMaxTimes=5))
        master.offsets.commit("G1", "SyncA", 0, 7)
        master.offsets.commit("G1", "SyncA", 2, 9)
        with master.schedule.lock:
            master.schedule.offsets[3] = 11
        slave.offsets.commit("G2", "Other", 0, 4)  # only the slave has it: kept
        assert slave.topics.get("SyncA") is None

        assert await slave.slave_sync.sync_once()
        assert slave.slave_sync.last_master == master.address
        assert slave.topics.get("SyncA") == master.topics.get("SyncA")
        assert slave.topics.get("SyncB") == master.topics.get("SyncB")
        assert slave.topics.data_version == master.topics.data_version
        sgc = slave.subscriptions.table.get("G1")
        assert sgc is not None and sgc.retryMaxTimes == 5
        assert slave.offsets.offsets_of("G1", "SyncA") == {0: 7, 2: 9}
        assert slave.offsets.query("G2", "Other", 0) == 4
        assert slave.schedule.offsets[3] == 11
        # persisted as the master persists them
        cfg = tmp_path / "s" / "config"
        topics = TopicConfigSerializeWrapper.from_json((cfg / "topics.json").read_bytes())
        assert "SyncA" in topics.topicConfigTable
        offsets_file = cfg / "consumerOffset.json"  # written by the persist loop (200 ms)
        await eventually(lambda: offsets_file.exists() and b"SyncA@G1" in offsets_file.read_bytes())
        groups = SubscriptionGroupWrapper.from_json((cfg / "subscriptionGroup.json").read_bytes())
        assert groups.subscriptionGroupTable["G1"].retryMaxTimes == 5
        delay = DelayOffsetSerializeWrapper.from_json((cfg / "delayOffset.json").read_bytes())
        assert delay.offsetTable[3] == 11

        # removals and later commits follow; a commit made on the slave is overwritten
        master.topics.delete("SyncB")
        master.subscriptions.delete("G1")
        master.offsets.commit("G1", "SyncA", 0, 20)
        slave.offsets.commit("G1", "SyncA", 2, 1)
        rounds = slave.slave_sync.rounds  # the loop's first round ran at start
        assert await slave.slave_sync.sync_once()
        assert slave.topics.get("SyncB") is None and slave.topics.get("SyncA") is not None
        assert "G1" not in slave.subscriptions.table
        assert slave.offsets.offsets_of("G1", "SyncA") == {0: 20, 2: 9}
        assert slave.slave_sync.rounds >= rounds + 1  # the start round may finish meanwhile

        # no master registered: nothing to do, the slave keeps its tables
        await p.stop_master()
        assert not await slave.slave_sync.sync_once()
        assert slave.topics.get("SyncA") is not None
        assert slave.offsets.offsets_of("G1", "SyncA") == {0: 20, 2: 9}


async def test_the_request_codes_answer_javas_bodies(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        master = await p.start_master()
        master.offsets.commit("G", "T", 0, 5)
        master.offsets.commit("G", "T", 1, 7)
        master.subscriptions.update(SubscriptionGroupConfig(groupName="G", consumeEnable=False))
        with master.schedule.lock:
            master.schedule.offsets[2] = 3

        r = await p.call(master, RequestCode.GET_ALL_CONSUMER_OFFSET)
        assert r.code == ResponseCode.SUCCESS
        # consumerOffset.json's content: fastjson's bare integer queue ids
        assert r.body == b'{"offsetTable":{"T@G":{0:5,1:7}}}'
        offsets = ConsumerOffsetSerializeWrapper.from_json(r.body)
        assert offsets.offsetTable == {"T@G": {0: 5, 1: 7}}
        # what a Java 5.x master sends (with a dataVersion) decodes too
        java = (b'{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000000},'
                b'"offsetTable":{"TopicTest@please_rename_unique_group_name_4":{0:250,1:249}}}')
        decoded = ConsumerOffsetSerializeWrapper.from_json(java)
        assert decoded.offsetTable == {"TopicTest@please_rename_unique_group_name_4": {0: 250, 1: 249}}
        assert decoded.dataVersion is not None and decoded.dataVersion.counter == 3

        r = await p.call(master, RequestCode.GET_ALL_DELAY_OFFSET)
        assert r.code == ResponseCode.SUCCESS
        assert DelayOffsetSerializeWrapper.from_json(r.body).offsetTable[2] == 3
        assert DelayOffsetSerializeWrapper.from_json(b'{"offsetTable":{1:8,2:3}}').offsetTable == \
            {1: 8, 2: 3}

        r = await p.call(master, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        assert r.code == ResponseCode.SUCCESS
        obj = fastjson.loads(r.body)
        assert isinstance(obj, dict) and set(obj) == {"subscriptionGroupTable", "dataVersion"}
        groups = SubscriptionGroupWrapper.from_json(r.body)
        g = groups.subscriptionGroupTable["G"]
        assert g.consumeEnable is False and g.whichBrokerWhenConsumeSlowly == 1
        assert groups.dataVersion == master.subscriptions.data_version

        r = await p.call(master, RequestCode.GET_ALL_TOPIC_CONFIG)
        assert r.code == ResponseCode.SUCCESS
        assert NAME in TopicConfigSerializeWrapper.from_json(r.body).topicConfigTable


# -- pulls from the slave ---------------------------------------------------------------------


def _pull(topic: str, offset: int) -> dict[str, str]:
    return PullMessageRequestHeader(
        consumerGroup="SG", topic=topic, queueId=0, queueOffset=offset, maxMsgNums=1,
        sysFlag=int(PullSysFlag.SUBSCRIPTION), commitOffset=0, suspendTimeoutMillis=0,
        subVersion=0, subscription="*", expressionType="TAG").to_ext()


async def test_pulls_suggest_the_slave_to_a_consumer_far_behind(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        master = await p.start_master()
        master.topics.create_plain("Far", 1)
        master.topics.create_plain("NotYet", 1)  # no message: no queue on either broker
        slave = await p.start_slave()
        master.store.put_messages([
            MessageToStore(topic="Far", body=bytes([i]) * 2000, queue_id=0, born_timestamp=1,
                           properties=encode_properties({"TAGS": "a"}))
            for i in range(10)])
        await p.caught_up()
        assert slave.slave_sync is not None and await slave.slave_sync.sync_once()
        for b in (master, slave):
            b.pull.in_memory_bytes = 5000  # two records and a half
        await eventually(lambda: master.ha_server is not None and master.ha_server.slave_connected)

        async def suggested(broker: Broker, offset: int) -> str:
            r = await p.call(broker, RequestCode.PULL_MESSAGE, _pull("Far", offset))
            assert r.code == ResponseCode.SUCCESS, r.remark
            return r.ext_fields["suggestWhichBrokerId"]

        assert await suggested(master, 0) == "1"  # 9 records behind: read from the slave
        assert await suggested(master, 9) == "0"  # the last record: in memory
        assert await suggested(slave, 0) == "1"  # still behind: stay on the slave
        assert await suggested(slave, 9) == "0"  # caught up: back to the master
        # an offset beyond a slave's queue is kept (replication may be behind); a master moves it
        r = await p.call(slave, RequestCode.PULL_MESSAGE, _pull("Far", 50))
        assert (r.code, r.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_NOT_FOUND, "50")
        r = await p.call(slave, RequestCode.PULL_MESSAGE, _pull("NotYet", 5))
        assert (r.code, r.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_NOT_FOUND, "5")
        r = await p.call(master, RequestCode.PULL_MESSAGE, _pull("Far", 50))
        assert (r.code, r.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_OFFSET_MOVED, "0")
        # a group may name other brokers (Java's whichBrokerWhenConsumeSlowly / brokerId)
        master.subscriptions.update(SubscriptionGroupConfig(groupName="SG",
                                                            whichBrokerWhenConsumeSlowly=2))
        assert await suggested(master, 0) == "2"
        master.subscriptions.update(SubscriptionGroupConfig(groupName="SG"))
        # without a slave there is nowhere else to read
        await slave.close()
        p.slave = None
        await eventually(lambda: master.ha_server is not None
                         and not master.ha_server.slave_connected)
        assert await suggested(master, 0) == "0"


# -- a PushConsumer on the slave --------------------------------------------------------------


class Sink:
    def __init__(self) -> None:
        self.msgs: list[MessageExt] = []

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        self.msgs += msgs
        return ConsumeStatus.CONSUME_SUCCESS

    def count(self) -> collections.Counter[bytes]:
        return collections.Counter(m.body for m in self.msgs)


def _consumer(p: Pair, sink: Sink) -> PushConsumer:
    config = ClientConfig(namesrv_addr=p.ns_addr, rebalance_interval=0.5,
                          persist_offset_interval=0.3, heartbeat_interval=1.0,
                          poll_name_server_interval=0.3)
    c = PushConsumer("FG", config=config, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                     broker_suspend_max=1.0, pull_error_delay=0.2)
    c.subscribe("Fo", "*")
    c.register_listener(sink)
    return c


async def _produce(p: Pair, start: int, n: int) -> set[bytes]:
    async with Producer("FP", namesrv_addr=p.ns_addr) as prod:
        for i in range(start, start + n):
            await prod.send(Message("Fo", b"m%d" % i))
    return {b"m%d" % i for i in range(start, start + n)}


def _ends(broker: Broker) -> dict[int, int]:
    return {q: broker.store.max_offset_in_queue("Fo", q) for q in range(2)}


async def test_push_consumer_reads_from_the_slave_while_the_master_is_down(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        master = await p.start_master()
        master.topics.create_plain("Fo", 2)
        slave = await p.start_slave()
        assert slave.slave_sync is not None
        first = await _produce(p, 0, 20)
        sink = Sink()
        async with _consumer(p, sink):
            await eventually(lambda: set(sink.count()) == first)
            await eventually(lambda: master.offsets.offsets_of("FG", "Fo") == _ends(master))
        second = await _produce(p, 20, 20)  # produced while nobody consumes
        await p.caught_up()
        assert await slave.slave_sync.sync_once()  # the slave learns the topic and the offsets
        assert slave.offsets.offsets_of("FG", "Fo") == master.offsets.offsets_of("FG", "Fo")
        ends = _ends(master)
        await p.stop_master()

        # the route now names only the slave: the consumer starts from the offsets the slave
        # synced, reads what was replicated and commits on the slave
        consumer = _consumer(p, sink)
        async with consumer:
            await eventually(lambda: set(sink.count()) == first | second)
            await eventually(lambda: slave.offsets.offsets_of("FG", "Fo") == ends)
            assert all(sink.count()[b] == 1 for b in second)
            assert not await slave.slave_sync.sync_once()  # no master: the slave's table stays

            # the master comes back: new messages are read from it and commits go to it
            master = await p.start_master()
            assert master.offsets.offsets_of("FG", "Fo") != ends  # it missed the slave's commits
            third = await _produce(p, 40, 20)
            await eventually(lambda: set(sink.count()) == first | second | third)
            await eventually(lambda: master.offsets.offsets_of("FG", "Fo") == _ends(master))
            # acknowledged messages are not delivered again
            assert all(sink.count()[b] == 1 for b in second | third)
            mqs = {MessageQueue(topic="Fo", brokerName=NAME, queueId=q) for q in range(2)}
            api = consumer.api
            assert api is not None
            assert all(("FG", mq) not in api.pull_from for mq in mqs)  # pulls go to the master
            # the next sync hands the slave the master's (now current) offsets
            assert await slave.slave_sync.sync_once()
            assert slave.offsets.offsets_of("FG", "Fo") == master.offsets.offsets_of("FG", "Fo")
