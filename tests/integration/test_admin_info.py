"""GET_TOPIC_CONFIG (351) and GET_CONSUMER_RUNNING_INFO (307) on loopback sockets, with a broker
and a NameServer in the loop (``test_broker.running``): the topic config a broker holds, read back
through the body class; an unknown topic is TOPIC_NOT_EXIST with Java's remark."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_broker import running

from rocketlite.protocol.admin_bodies import TopicConfigAndQueueMapping
from rocketlite.protocol.bodies import TopicFilterType
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.headers import CreateTopicRequestHeader

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
