"""An end-to-end pipeline on rocketlite and Spark: produce events, read them with Structured
Streaming, aggregate per event-time window, write the windows to Parquet and back to a topic.

Run it against a broker (``scripts/start`` in another terminal)::

    .venv/bin/python examples/spark_pipeline.py --namesrv 127.0.0.1:9876 --out /tmp/pipeline

The same script runs on a Spark cluster with ``--master spark://host:7077`` (or through
``spark-submit``) once every executor has ``pip install rocketlite[spark]``, the NameServer and
brokers are reachable from the executors, and ``--out`` is a path they all share (HDFS, S3, NFS).

The stream uses ``trigger(availableNow=True)``: it reads what the topic holds when it starts, in
batches of at most ``--batch`` messages, and stops; run it again and it resumes from its
checkpoint. Drop the trigger for a query that runs until stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

EVENTS_TOPIC = "pipeline-events"
STATS_TOPIC = "pipeline-window-stats"
ACTIONS = ("view", "click", "buy")


def produce_events(namesrv: str, count: int, *, start_ms: int, span_ms: int, seed: int = 7) -> None:
    """``count`` JSON events with event times spread over ``span_ms`` from ``start_ms``."""
    from rocketlite.client import Message
    from rocketlite.client.sync import SyncProducer

    rnd = random.Random(seed)
    with SyncProducer("pipeline-producer", namesrv_addr=namesrv) as producer:
        for i in range(count):
            action = ACTIONS[rnd.randrange(len(ACTIONS))]
            event = {"user": f"u{rnd.randrange(50)}", "action": action,
                     "amount": rnd.randrange(1, 100), "ts": start_ms + i * span_ms // count}
            producer.send_async(Message(EVENTS_TOPIC, json.dumps(event).encode(), tags=action,
                                        keys=event["user"]))
        producer.flush()


def run_pipeline(spark: Any, namesrv: str, out: Path, *, batch: int = 500) -> None:
    """Read ``EVENTS_TOPIC`` as a stream, count and sum per 1-minute window and action, and write
    each closed window to ``out/windows`` (Parquet) and to ``STATS_TOPIC`` (JSON bodies)."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    event = "user STRING, action STRING, amount INT, ts LONG"
    events = (
        spark.readStream.format("rocketmq")
        .option("nameserver", namesrv)
        .option("subscribe", EVENTS_TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(batch))
        .load()
        .select(F.from_json(F.col("body").cast("string"), event).alias("e"))
        .select("e.*")
        .withColumn("event_time", F.timestamp_millis("ts"))
    )
    windows = (
        events.withWatermark("event_time", "30 seconds")
        .groupBy(F.window("event_time", "1 minute").alias("w"), "action")
        .agg(F.count("*").alias("events"), F.sum("amount").alias("amount"))
        .select(F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"),
                "action", "events", "amount")
    )

    def write_batch(df: DataFrame, batch_id: int) -> None:
        # A batch Spark replays after a crash rewrites its own Parquet folder (overwrite), and its
        # messages carry the same UNIQ_KEYs (sinkId per batch), so consumers can drop the copies.
        df = df.persist()
        df.withColumn("date", F.to_date("window_start")).write.mode("overwrite") \
            .partitionBy("date").parquet(str(out / "windows" / f"batch={batch_id}"))
        (df.select(F.to_json(F.struct(*df.columns)).alias("body"),
                   F.col("action").alias("keys"), F.lit("window").alias("tags"))
           .write.format("rocketmq").option("nameserver", namesrv).option("topic", STATS_TOPIC)
           .option("sinkId", f"pipeline-windows-{batch_id}").mode("append").save())
        df.unpersist()

    query = (
        windows.writeStream.outputMode("append")
        .foreachBatch(write_batch)
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--out", type=Path, default=Path("pipeline-out"))
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=1000, help="maxOffsetsPerTrigger")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from rocketlite.spark import register

    now = int(time.time() * 1000)
    produce_events(args.namesrv, args.events, start_ms=now - 10 * 60_000, span_ms=10 * 60_000)
    spark = (SparkSession.builder.master(args.master).appName("rocketlite-pipeline")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    try:
        run_pipeline(spark, args.namesrv, args.out, batch=args.batch)
        spark.read.parquet(str(args.out / "windows")).orderBy("window_start", "action").show(40, False)
        stats = (spark.read.format("rocketmq").option("nameserver", args.namesrv)
                 .option("subscribe", STATS_TOPIC).load())
        print(f"{stats.count()} window results in topic {STATS_TOPIC}")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
