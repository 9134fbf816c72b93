"""The Spark topic source against a real broker: rows/s of a batch read through the broker, and
end-to-end latency of a streaming query (producer -> broker -> Spark micro-batch).

    python bench/spark_bench.py                       # 1M messages of 100 B, then 20 s of streaming
    python bench/spark_bench.py --messages 200000 --stream-seconds 10 --rate 2000

``rocketlite start`` runs as a subprocess with its store in a temporary folder; Spark is
``local[2]`` (``--master`` to change). The same messages are then scanned from the broker's store
files (``format("rocketmq-store")``) and read by plain Python in one process (the decoders of
``spark_store_bench.py``): the Spark overhead ratio on the same data.

Figures: preload rate (send_batch, for context), batch read ``count`` + ``sum(length(body))``
rows/s and MB/s, and for the stream: p50/p99/max of (batch end - born timestamp) per message at a
steady ``--rate`` with the default trigger (the next micro-batch as soon as the last ends).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from broker_bench import broker_process, percentiles
from rocketlite.client.message import Message
from rocketlite.client.producer import Producer

ROOT = Path(__file__).resolve().parents[1]
TOPIC = "SparkBench"
STREAM_TOPIC = "SparkBenchStream"


@contextlib.contextmanager
def broker(store: Path) -> Iterator[str]:
    """``rocketlite start`` on free ports with its store at ``store``; yields the NameServer."""
    with broker_process(store=store) as (_addr, _pid, ns):
        yield ns


async def preload(ns: str, topic: str, count: int, size: int) -> float:
    """Send ``count`` messages of ``size`` bytes in batches of 256, 4 batches in flight; msgs/s."""
    p = Producer("spark-bench", namesrv_addr=ns, default_topic_queue_nums=4)
    await p.start()
    body = b"x" * size
    try:
        t0 = time.perf_counter()
        sent = 0

        async def worker(n: int) -> None:
            nonlocal sent
            while n > 0:
                k = min(256, n)
                await p.send_batch([Message(topic, body, keys=f"k{sent + i}") for i in range(k)])
                sent += k
                n -= k

        per = count // 4
        await asyncio.gather(*(worker(per + (count % 4 if i == 0 else 0)) for i in range(4)))
        return count / (time.perf_counter() - t0)
    finally:
        await p.shutdown()


def session(master: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from rocketlite.spark import register

    spark = (SparkSession.builder.master(master).appName("rocketlite-spark-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "2g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def batch_read(spark: Any, ns: str, expected: int) -> None:
    df = (spark.read.format("rocketmq").option("nameserver", ns).option("subscribe", TOPIC)
          .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())
    for attempt in ("cold", "warm"):
        t0 = time.perf_counter()
        rows, size = df.selectExpr("count(*)", "sum(length(body))").first()
        dt = time.perf_counter() - t0
        assert rows == expected, f"read {rows} rows, expected {expected}"
        print(f"  batch read ({attempt}): {rows:,} rows in {dt:.1f} s = {rows / dt:,.0f} rows/s, "
              f"{size / dt / 1e6:.1f} MB/s of bodies")


def store_scan(spark: Any, store: Path, parts: int) -> None:
    """The broker's store files through ``rocketmq-store`` and through plain Python."""
    from spark_store_bench import python_reads

    df = (spark.read.format("rocketmq-store").option("topics", TOPIC)
          .option("partitionsPerSegment", str(parts)).load(str(store)))
    spark_dt = 0.0
    for attempt in ("cold", "warm"):
        t0 = time.perf_counter()
        rows, _size = df.selectExpr("count(*)", "sum(length(body))").first()
        spark_dt = time.perf_counter() - t0
        print(f"  store scan ({attempt}): {rows:,} rows in {spark_dt:.1f} s = {rows / spark_dt:,.0f} rows/s")
    spark_rate = rows / spark_dt
    for name, (dt, n) in python_reads(store, 1).items():
        rate = n / dt
        print(f"  {name}: {n:,} rows in {dt:.1f} s = {rate:,.0f} rows/s "
              f"(the Spark store scan does {spark_rate / rate:.2f}x this)")


def stream_latency(spark: Any, ns: str, rate: int, seconds: float, work: Path) -> None:
    """A producer at ``rate`` msgs/s for ``seconds``; latency = batch end - born timestamp."""
    asyncio.run(preload(ns, STREAM_TOPIC, 4, 10))  # create the topic and its route
    lat_ms: list[int] = []
    batches: list[int] = []

    def on_batch(df: Any, _batch_id: int) -> None:
        born = [r[0] for r in df.selectExpr("cast(unix_millis(born_timestamp) as long)").collect()]
        now = int(time.time() * 1000)
        lat_ms.extend(now - b for b in born)
        batches.append(len(born))

    q = (spark.readStream.format("rocketmq").option("nameserver", ns).option("subscribe", STREAM_TOPIC)
         .option("startingOffsets", "latest").load()
         .writeStream.foreachBatch(on_batch).option("checkpointLocation", str(work / "ckpt")).start())
    stop = threading.Event()

    def produce() -> None:
        async def go() -> None:
            p = Producer("spark-bench-stream", namesrv_addr=ns)
            await p.start()
            try:
                t0 = time.monotonic()
                n = 0
                while not stop.is_set():
                    due = t0 + n / rate
                    delay = due - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    p.send_async(Message(STREAM_TOPIC, b"y" * 100))
                    n += 1
                await p.flush()
            finally:
                await p.shutdown()
        asyncio.run(go())

    while not q.recentProgress:  # the query planned its first batch: "latest" is resolved
        time.sleep(0.2)
    t = threading.Thread(target=produce)
    t.start()
    time.sleep(seconds)
    stop.set()
    t.join()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and q.status["isDataAvailable"]:
        time.sleep(0.5)
    time.sleep(3)
    q.stop()
    s = percentiles([x * 1_000_000 for x in lat_ms])
    if not s:
        print("  stream: no rows arrived")
        return
    print(f"  stream at {rate:,} msgs/s for {seconds:.0f} s: {len(lat_ms):,} rows in {len(batches)} "
          f"micro-batches (median {sorted(batches)[len(batches) // 2]} rows); end-to-end latency "
          f"p50 {s['p50_ms']:.0f} ms, p99 {s['p99_ms']:.0f} ms, max {s['max_ms']:.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rate", type=int, default=1000, help="streaming producer rate, msgs/s")
    ap.add_argument("--stream-seconds", type=float, default=20.0)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--parts", type=int, default=2,
                    help="store scan partitionsPerSegment (the broker's segments are 1 GiB)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rocketlite-spark-bench-", dir="."))
    try:
        with broker(work / "store") as ns:
            rate = asyncio.run(preload(ns, TOPIC, args.messages, args.size))
            print(f"preloaded {args.messages:,} messages of {args.size} B at {rate:,.0f} msgs/s")
            spark = session(args.master)
            try:
                batch_read(spark, ns, args.messages)
                store_scan(spark, work / "store", args.parts)
                stream_latency(spark, ns, args.rate, args.stream_seconds, work)
            finally:
                spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
