"""4.x and 5.x consumption of one topic: a 4.x PushConsumer (pull) group and a POP group each get
every message; a POP group shares the consumer offsets its 4.x members committed (the rule in
``broker/pop/service.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from integration.client.clientconf import Cluster, eventually, open_cluster
from integration.test_send_back import push
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer
from rocketlite.client.push_consumer import ConsumeStatus
from rocketlite.protocol.bodies import SubscriptionData

pytestmark = pytest.mark.integration

N = 20
ALL = SubscriptionData.from_expression("MixT", "*")


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with open_cluster(tmp_path) as c:
        yield c


async def pop_all(cluster: Cluster, group: str) -> list[bytes]:
    svc = cluster.brokers["broker-a"].pop
    out: list[bytes] = []
    while True:
        r = await svc.pop(group, "MixT", -1, 32, 60_000, 0, ALL)
        if not r.messages:
            return out
        for m in r.messages:
            out.append(m.record.body)
            svc.ack(group, "MixT", m.receipt_handle)


async def test_pull_and_pop_groups_each_get_every_message(cluster: Cluster) -> None:
    seen: list[MessageExt] = []

    def handler(msgs: list[MessageExt]) -> ConsumeStatus:
        seen.extend(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    async with Producer("PG", namesrv_addr=cluster.ns_addr) as p:
        for i in range(N):
            await p.send(Message("MixT", b"x%d" % i))
        c = await push(cluster, "Mix4", "MixT", handler)
        try:
            await eventually(lambda: len(seen) >= N, timeout=15)
            popped = await pop_all(cluster, "Mix5")
            assert sorted(popped) == sorted(b"x%d" % i for i in range(N))
            assert sorted(m.body for m in seen) == sorted(popped)
            # the 4.x group's offsets are the POP view of that group too: nothing left for it
            broker = cluster.brokers["broker-a"]
            await eventually(lambda: sum(broker.offsets.offsets_of("Mix4", "MixT").values()) == N,
                             timeout=10)
            assert await pop_all(cluster, "Mix4") == []
        finally:
            await c.shutdown()
