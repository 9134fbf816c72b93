"""Warnings where silence would mislead a new user: a consumer subscribing to a topic that does not
exist logs it; a send to a topic only the broker writes is refused (Java's TopicValidator); a body
that compression would make larger goes uncompressed (and so fits max_message_size), and a
compressed one the broker refuses as too large says it was compressed."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from clientconf import Cluster, open_cluster

from rocketlite.broker.topics import NOT_ALLOWED_SEND_TOPICS
from rocketlite.client.errors import MQBrokerError
from rocketlite.client.lite_pull_consumer import LitePullConsumer
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer, SendStatus
from rocketlite.client.push_consumer import ConsumeStatus, PushConsumer
from rocketlite.client.simple_consumer import SimpleConsumer
from rocketlite.protocol.bodies import ConsumeFromWhere
from rocketlite.protocol.codes import ResponseCode

pytestmark = pytest.mark.integration

MISSING = "NoSuchTopicXyz"


def warned(caplog: pytest.LogCaptureFixture, topic: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and topic in r.getMessage() and "does not exist" in
            r.getMessage()]


async def test_push_consumer_warns_of_a_topic_that_does_not_exist(
        cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        await p.send(Message("Exists", b"x"))
    c = PushConsumer("CG1", namesrv_addr=cluster.ns_addr)
    c.subscribe(MISSING, "*")
    c.subscribe("Exists", "*")
    c.register_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
    with caplog.at_level(logging.WARNING):
        await c.start()
        await c.shutdown()
    assert len(warned(caplog, MISSING)) == 1, caplog.text
    assert not warned(caplog, "Exists") and not warned(caplog, "%RETRY%"), caplog.text


async def test_lite_pull_and_simple_consumers_warn_too(
        cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    lite = LitePullConsumer("CG2", namesrv_addr=cluster.ns_addr)
    lite.subscribe(MISSING, "*")
    simple = SimpleConsumer("CG3", namesrv_addr=cluster.ns_addr, subscriptions={MISSING: "*"})
    with caplog.at_level(logging.WARNING):
        await lite.start()
        await lite.shutdown()
        await simple.start()
        await simple.close()
    assert len(warned(caplog, MISSING)) == 2, caplog.text


@pytest.mark.parametrize("topic", sorted(NOT_ALLOWED_SEND_TOPICS))
async def test_a_send_to_a_broker_only_topic_is_refused(cluster: Cluster, topic: str) -> None:
    async with Producer("PG", namesrv_addr=cluster.ns_addr, retry_times_when_send_failed=0) as p:
        with pytest.raises(MQBrokerError, match=r"forbidden") as e:
            await p.send(Message(topic, b"x"))
    assert e.value.code == ResponseCode.NO_PERMISSION
    assert cluster.brokers["broker-a"].store.max_offset_in_queue(topic, 0) == 0


async def test_an_incompressible_body_at_the_limit_goes_uncompressed(cluster: Cluster) -> None:
    limit = 64 * 1024
    body = os.urandom(limit)  # zlib makes random bytes a little larger: over the limit
    async with Producer("PG", namesrv_addr=cluster.ns_addr, max_message_size=limit,
                        compress_over=1024) as p:
        r = await p.send(Message("Random", body))
    assert r.status is SendStatus.SEND_OK
    lite = LitePullConsumer("CG4", namesrv_addr=cluster.ns_addr,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    lite.subscribe("Random", "*")
    await lite.start()
    try:
        got = []
        for _ in range(50):
            got += await lite.poll(timeout=0.2)
            if got:
                break
    finally:
        await lite.shutdown()
    assert [m.body for m in got] == [body]
    assert not got[0].sys_flag & 0x1  # stored as sent: not compressed


async def test_a_compressed_body_the_broker_refuses_says_it_was_compressed(tmp_path: Path) -> None:
    body = os.urandom(100_000).hex().encode()  # 200,000 bytes; zlib leaves about half
    async with open_cluster(tmp_path, maxMessageSize="65536") as c, \
            Producer("PG", namesrv_addr=c.ns_addr) as p:
        with pytest.raises(MQBrokerError) as e:
            await p.send(Message("Big", body))
    assert e.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert "larger than maxMessageSize 65536" in e.value.remark
    assert "the body was compressed with zlib: 200000 bytes before" in e.value.remark
