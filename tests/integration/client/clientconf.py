"""A NameServer and brokers in the test's event loop, on loopback ports, for the client's tests."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from rocketlite.broker.broker import Broker
from rocketlite.broker.config import BrokerConfig
from rocketlite.namesrv.server import NameServer
from rocketlite.store.config import StoreConfig

TIMEOUT = 10.0


def store_config(root: Path, **extra: str) -> StoreConfig:
    props = {
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": str(4 << 20),
        "mappedFileSizeConsumeQueue": str(20 * 6000),
        "maxHashSlotNum": "4096",
        "maxIndexNum": "20000",
        "flushIntervalCommitLog": "20",
        "flushIntervalConsumeQueue": "20",
        # 18 levels of 1 s: retries (delay level 3 + reconsumeTimes) come back in a second, not
        # RocketMQ's 10 s, 30 s, 1 m ...
        "messageDelayLevel": " ".join(["1s"] * 18),
    }
    props.update(extra)
    return StoreConfig.from_properties(props)


class Cluster:
    """One NameServer and named brokers (``broker-a`` first) that tests can stop and restart on
    the same port and store."""

    def __init__(self, root: Path, ns: NameServer, store_props: dict[str, str] | None = None) -> None:
        self.root = root
        self.ns = ns
        self.store_props = store_props or {}  # extra store properties for every broker
        self.ns_addr = f"127.0.0.1:{ns.port}"
        self.brokers: dict[str, Broker] = {}
        self.ports: dict[str, int] = {}

    async def start_broker(self, name: str = "broker-a", **props: str) -> Broker:
        conf = {"namesrvAddr": self.ns_addr, "brokerName": name}
        conf.update(props)
        store = store_config(self.root / name, listenPort=str(self.ports.get(name, 0)), brokerIP1="127.0.0.1",
                             **self.store_props)
        broker = Broker(BrokerConfig.from_properties(conf), store)
        await broker.start()
        self.brokers[name] = broker
        self.ports[name] = broker.port
        return broker

    async def stop_broker(self, name: str) -> None:
        broker = self.brokers.pop(name)
        await broker.close()

    def addr(self, name: str = "broker-a") -> str:
        return f"127.0.0.1:{self.ports[name]}"

    async def close(self) -> None:
        for name in list(self.brokers):
            await self.stop_broker(name)
        await self.ns.close()


@contextlib.asynccontextmanager
async def open_cluster(root: Path, **store_props: str) -> AsyncIterator[Cluster]:
    """A NameServer and ``broker-a`` (store properties ``store_props`` on top of the defaults),
    closed on exit."""
    ns = NameServer("127.0.0.1", 0, auto_create_route=False)
    await ns.start()
    c = Cluster(root, ns, store_props)
    try:
        await c.start_broker("broker-a")
        yield c
    finally:
        await c.close()


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with open_cluster(tmp_path) as c:
        yield c


async def eventually(check: Callable[[], object], timeout: float = TIMEOUT) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)
