"""The Spark tier: one ``local[2]`` session for the whole pytest run (UI off, workers on this
venv's Python, loopback only) and a NameServer + broker running in a background thread, so that
Spark's blocking driver calls and the broker's event loop run side by side.

Tests in this folder are marked ``spark``; they need Java 17 and pyspark (``.[spark]``, which
``scripts/test`` installs; ``.ci/run`` installs Java if the machine has none). Without them the
tests fail with the reason: nothing is skipped.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import threading
from collections.abc import Coroutine, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import pytest

from rocketlite.broker.broker import Broker
from rocketlite.broker.config import BrokerConfig
from rocketlite.client import Message, Producer
from rocketlite.namesrv.server import NameServer
from rocketlite.store.config import StoreConfig

T = TypeVar("T")
SRC = str(Path(__file__).resolve().parents[2] / "src")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/spark/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one SparkSession of this pytest run, with ``rocketmq`` and ``rocketmq-store`` registered."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("Spark needs Java 17: no java on PATH and no JAVA_HOME "
                    "(apt-get install openjdk-17-jre-headless)", pytrace=False)
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        pytest.fail(f"pyspark is not installed ({e}): pip install -e '.[spark]'", pytrace=False)

    from rocketlite.spark import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("rocketlite-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.executorEnv.PYTHONPATH", SRC)
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


def store_properties(root: Path, **extra: str) -> dict[str, str]:
    props = {
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": str(1 << 20),
        "mappedFileSizeConsumeQueue": str(20 * 1000),
        "maxHashSlotNum": "4096",
        "maxIndexNum": "20000",
        "flushIntervalCommitLog": "20",
        "flushIntervalConsumeQueue": "20",
    }
    props.update(extra)
    return props


class BrokerThread:
    """A NameServer and one broker (``broker-a``) on an event loop in a daemon thread.

    ``run(coro)`` runs a coroutine on that loop and returns its result; the broker's store is
    ``broker.store`` (touch it only through ``run``/``call``)."""

    def __init__(self, root: Path, **store_props: str) -> None:
        self.root = root
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="broker-loop", daemon=True)
        self._thread.start()
        self.ns = NameServer("127.0.0.1", 0, auto_create_route=False)
        self.run(self.ns.start())
        self.ns_addr = f"127.0.0.1:{self.ns.port}"
        conf = BrokerConfig.from_properties({"namesrvAddr": self.ns_addr, "brokerName": "broker-a"})
        store = StoreConfig.from_properties(
            store_properties(root / "broker-a", listenPort="0", brokerIP1="127.0.0.1", **store_props))
        self.broker = Broker(conf, store)
        self.run(self.broker.start())
        self._producer: Producer | None = None

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        fut: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(timeout)

    def call(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` on the broker's loop thread."""
        async def go() -> Any:
            return fn(*args)
        return self.run(go())

    @property
    def store_root(self) -> Path:
        return Path(self.broker.store_config.store_path_root_dir)

    def create_topic(self, topic: str, queues: int = 2) -> None:
        """Create ``topic`` with ``queues`` queues and register the route with the NameServer."""
        self.call(self.broker.topics.create_plain, topic, queues)
        assert self.run(self.broker.register_all())

    def send(self, topic: str, bodies: Sequence[bytes], *, tags: str | None = None,
             keys: Sequence[str] | None = None, queue_id: int | None = None) -> list[Any]:
        """Send ``bodies`` in order (to ``queue_id`` if given, else round robin); the SendResults."""
        async def go() -> list[Any]:
            if self._producer is None:
                self._producer = Producer("spark-tests", namesrv_addr=self.ns_addr)
                await self._producer.start()
            out = []
            for i, body in enumerate(bodies):
                msg = Message(topic, body, tags=tags, keys=[keys[i]] if keys else [])
                if queue_id is None:
                    out.append(await self._producer.send(msg))
                else:
                    out.append(await self._producer.send(
                        msg, selector=lambda mqs, _m, qid: next(q for q in mqs if q.queueId == qid),
                        arg=queue_id))
            return out
        return self.run(go())

    def close(self) -> None:
        async def go() -> None:
            if self._producer is not None:
                await self._producer.shutdown()
            await self.broker.close()
            await self.ns.close()
        try:
            self.run(go())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    """A broker for one test module (tests use their own topics)."""
    b = BrokerThread(tmp_path_factory.mktemp("spark-broker"))
    try:
        yield b
    finally:
        b.close()
