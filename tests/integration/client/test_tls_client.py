"""rocketlite's client over TLS (issue 22): a NameServer and a broker that accept TLS only, the
broker registering over TLS (``tls.enable``), a producer and a lite pull consumer with
``ClientConfig(tls=...)`` sending and reading back; a plain producer is refused with an error that
names TLS; with permissive ports plain and TLS clients share them."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from clientconf import store_config

from rocketlite.broker.broker import Broker
from rocketlite.broker.config import BrokerConfig
from rocketlite.client.errors import MQBrokerError
from rocketlite.client.instance import ClientConfig
from rocketlite.client.lite_pull_consumer import LitePullConsumer
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer, SendStatus
from rocketlite.namesrv.server import NameServer
from rocketlite.protocol.bodies import ConsumeFromWhere
from rocketlite.remoting.tls import TlsSettings
from tlshelp import Certs, make_certs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


@contextlib.asynccontextmanager
async def tls_cluster(root: Path, certs: Certs, mode: str) -> AsyncIterator[str]:
    """A NameServer and a broker whose ports are ``mode``; the broker registers over TLS."""
    server = certs.server_tls(mode)
    ns = NameServer("127.0.0.1", 0, auto_create_route=False, tls=server)
    await ns.start()
    broker: Broker | None = None
    try:
        ns_addr = f"127.0.0.1:{ns.port}"
        config = BrokerConfig.from_properties({"namesrvAddr": ns_addr, "brokerName": "broker-t"})
        broker = Broker(config, store_config(root, listenPort="0", brokerIP1="127.0.0.1"),
                        TlsSettings(server, certs.client_tls()))
        await broker.start()
        yield ns_addr
    finally:
        if broker is not None:
            await broker.close()
        await ns.close()


def client_config(ns: str, tls: object) -> ClientConfig:
    return ClientConfig(namesrv_addr=ns, tls=tls, rebalance_interval=0.5,  # type: ignore[arg-type]
                        heartbeat_interval=1.0, persist_offset_interval=0.5)


async def read_all(ns: str, certs: Certs, topic: str, n: int) -> list[bytes]:
    got: list[MessageExt] = []
    async with LitePullConsumer("TLSG", config=client_config(ns, certs.client_tls()),
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                                broker_suspend_max=1.0) as c:
        c.assign(await c.fetch_queues(topic))
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            got += await c.poll(0.5)
    return sorted(m.body for m in got)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


async def test_send_and_consume_over_tls_and_plain_refused(tmp_path: Path, certs: Certs) -> None:
    async with tls_cluster(tmp_path, certs, "enforcing") as ns:
        sent = [b"tls-%d" % i for i in range(50)]
        async with Producer("TLSP", config=client_config(ns, certs.client_tls())) as p:
            for body in sent:
                assert (await p.send(Message("TlsTopic", body))).status is SendStatus.SEND_OK
        assert await read_all(ns, certs, "TlsTopic", len(sent)) == sorted(sent)
        with pytest.raises(MQBrokerError, match=r"SYSTEM_ERROR .*accepts TLS connections only"):
            async with Producer("PLAIN", config=client_config(ns, None)) as p:
                await p.send(Message("TlsTopic", b"plain"))


async def test_permissive_ports_serve_plain_and_tls_clients(tmp_path: Path, certs: Certs) -> None:
    async with tls_cluster(tmp_path, certs, "permissive") as ns:
        for i, tls in enumerate((None, certs.client_tls(), None)):
            async with Producer(f"MIX{i}", config=client_config(ns, tls)) as p:
                assert (await p.send(Message("MixTopic", b"m%d" % i))).status is SendStatus.SEND_OK
        assert await read_all(ns, certs, "MixTopic", 3) == [b"m0", b"m1", b"m2"]
