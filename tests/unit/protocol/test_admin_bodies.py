"""The admin bodies read and write what Java's fastjson does: ``MessageQueue`` objects as map
keys, doubles with a fraction, sets as arrays; malformed keys are BodyErrors naming the path."""

from __future__ import annotations

import pytest

from rocketlite.common.errors import BodyError
from rocketlite.protocol.admin_bodies import (
    ClientConnection,
    ConsumeStats,
    OffsetWrapper,
    ProducerConnection,
    ResetOffsetBody,
    TopicOffset,
    TopicStatsTable,
)
from rocketlite.protocol.bodies import MessageQueue

MQ0 = MessageQueue(topic="t", brokerName="b", queueId=0)
MQ1 = MessageQueue(topic="t", brokerName="b", queueId=1)


def test_topic_stats_table_is_written_with_object_keys() -> None:
    table = TopicStatsTable(offsetTable={
        MQ1: TopicOffset(minOffset=1, maxOffset=5, lastUpdateTimestamp=7), MQ0: TopicOffset()})
    assert table.to_json() == (
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"lastUpdateTimestamp":0,'
        b'"maxOffset":0,"minOffset":0},{"brokerName":"b","queueId":1,"topic":"t"}:'
        b'{"lastUpdateTimestamp":7,"maxOffset":5,"minOffset":1}},"topicPutTps":0.0}')
    assert TopicStatsTable.from_json(table.to_json()) == table


def test_consume_stats_as_a_java_broker_sends_them() -> None:
    # member order and spacing as fastjson may write them; consumeTps as a Java double
    data = (b'{"consumeTps":1.5,"offsetTable":{{"topic":"t","queueId":1,"brokerName":"b"}:'
            b'{"brokerOffset":9,"consumerOffset":4,"lastTimestamp":123,"pullOffset":4}}}')
    stats = ConsumeStats.from_json(data)
    assert stats.consumeTps == 1.5
    assert stats.offsetTable == {MQ1: OffsetWrapper(brokerOffset=9, consumerOffset=4,
                                                    pullOffset=4, lastTimestamp=123)}
    assert stats.total_diff() == 5


def test_reset_offset_body_round_trip_and_bad_keys() -> None:
    body = ResetOffsetBody(offsetTable={MQ0: 3, MQ1: 4})
    assert body.to_json() == (b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:3,'
                              b'{"brokerName":"b","queueId":1,"topic":"t"}:4}}')
    assert ResetOffsetBody.from_json(body.to_json()) == body
    with pytest.raises(BodyError, match=r"ResetOffsetBody.offsetTable key: expected a MessageQueue"):
        ResetOffsetBody.from_json(b'{"offsetTable":{"t":3}}')
    with pytest.raises(BodyError, match=r"offsetTable key.queueId"):
        ResetOffsetBody.from_json(b'{"offsetTable":{{"brokerName":"b","queueId":"x","topic":"t"}:3}}')
    with pytest.raises(BodyError, match="expected a number"):
        ConsumeStats.from_json(b'{"consumeTps":"fast"}')


def test_connections_are_a_set_written_as_a_sorted_array() -> None:
    pc = ProducerConnection(connectionSet={
        ClientConnection(clientId="b@2", clientAddr="127.0.0.1:2", language="CPP", version=63),
        ClientConnection(clientId="a@1", clientAddr="127.0.0.1:1", language="JAVA", version=479)})
    assert pc.to_json() == (
        b'{"connectionSet":[{"clientAddr":"127.0.0.1:1","clientId":"a@1","language":"JAVA",'
        b'"version":479},{"clientAddr":"127.0.0.1:2","clientId":"b@2","language":"CPP",'
        b'"version":63}]}')
    assert ProducerConnection.from_json(pc.to_json()) == pc
