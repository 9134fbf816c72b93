"""The Spark topic sink against a real broker: rows/s of ``df.write.format("rocketmq")``,
at-least-once and exactly-once, and the client-side rates behind them for context.

    python bench/spark_sink_bench.py                     # 100k rows of 100 B, 20k exactly-once
    python bench/spark_sink_bench.py --rows 200000 --eo-rows 50000 --partitions 4

``rocketlite start`` runs as a subprocess with its store in a temporary folder; Spark is
``local[2]`` (``--master`` to change). The DataFrame (``--partitions`` partitions of ``--size``
byte bodies) is cached and counted before the clock starts, so the figures are the sink's: rows
-> messages in the Python workers, the sends, and (exactly-once) the driver's END round. Each
write is checked against the broker's queue offsets.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from broker_bench import broker_process
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def broker(store: Path) -> Iterator[str]:
    """``rocketlite start`` on free ports with its store at ``store``; yields the NameServer."""
    with broker_process(store=store) as (_addr, _pid, ns):
        yield ns


async def create(ns: str, topic: str) -> None:
    """One message through TBW102's route: the broker creates ``topic`` (4 queues)."""
    p = Producer("sink-bench-setup", namesrv_addr=ns)
    await p.start()
    try:
        await p.send(Message(topic, b"create"))
    finally:
        await p.shutdown()


async def stored(ns: str, topic: str) -> int:
    p = Producer("sink-bench-count", namesrv_addr=ns)
    await p.start()
    try:
        from rocketlite.client.broker_api import BrokerApi

        assert p.instance is not None
        api = BrokerApi(p.instance)
        return sum([await api.max_offset(mq) for mq in await p.publish_queues(topic)])
    finally:
        await p.shutdown()


def session(master: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from rocketlite.spark import register

    spark = (SparkSession.builder.master(master).appName("rocketlite-sink-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "2g")
             .config("spark.executorEnv.PYTHONPATH", str(ROOT / "src")).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def write(spark: Any, ns: str, df: Any, topic: str, rows: int, label: str, **options: str) -> None:
    asyncio.run(create(ns, topic))
    before = asyncio.run(stored(ns, topic))
    w = df.write.format("rocketmq").option("nameserver", ns).option("topic", topic).mode("append")
    for k, v in options.items():
        w = w.option(k, v)
    t0 = time.perf_counter()
    w.save()
    dt = time.perf_counter() - t0
    deadline = time.monotonic() + 60  # the consume queues trail the CommitLog by a dispatch
    while (got := asyncio.run(stored(ns, topic)) - before) < rows and time.monotonic() < deadline:
        time.sleep(0.2)
    assert got == rows, f"{label}: {got} messages stored, expected {rows}"
    extra = " ".join(f"{k}={v}" for k, v in options.items())
    print(f"  {label:<14} {rows:>8,} rows in {dt:6.2f} s = {rows / dt:>9,.0f} rows/s  {extra}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--eo-rows", type=int, default=20_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sink-bench-") as tmp, broker(Path(tmp) / "store") as ns:
        spark = session(args.master)
        try:
            def frame(n: int) -> Any:
                df = spark.range(0, n, 1, args.partitions).selectExpr(
                    f"CAST(lpad(CAST(id AS STRING), {args.size}, 'x') AS BINARY) AS body").cache()
                assert df.count() == n
                return df

            small = frame(1000)
            write(spark, ns, small, "SinkBenchWarm", 1000, "warm-up")
            df = frame(args.rows)
            print(f"{args.rows:,} rows of {args.size} B in {args.partitions} partitions, {args.master}:")
            write(spark, ns, df, "SinkBenchAlo", args.rows, "at-least-once")
            write(spark, ns, df, "SinkBenchAlo", args.rows, "at-least-once", batchSize="64",
                  maxInFlight="32")
            eo = frame(args.eo_rows)
            write(spark, ns, eo, "SinkBenchEo", args.eo_rows, "exactly-once",
                  deliveryGuarantee="exactly_once")
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
