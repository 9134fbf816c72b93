"""The driver program of test_standalone_cluster.py, run as its own process against a Spark
standalone master (a pytest process may already hold a ``local[2]`` SparkContext, and there is
one per JVM).

    python tests/spark/standalone_job.py --master spark://127.0.0.1:PORT --namesrv NS --out DIR

1. The example pipeline (examples/spark_pipeline.py ``run_pipeline``) over its events topic;
   then its last batch is replayed (the batch's entry in ``commits/`` removed, as a driver that
   died before logging it would leave it) and the pipeline run again.
2. An exactly-once copy of the events topic to ``COPY_TOPIC`` (``deliveryGuarantee=exactly_once``,
   a fixed ``sinkId``), each message carrying the broker group it was read from; its last batch is
   replayed the same way.
3. ``rocketlite spark export STORE --topic EVENTS`` of each ``--store`` (name=path), through the
   command's own code (typer) in this process: the command runs in the active session, so on
   the standalone cluster, without a second driver JVM and executors (about 25 s each here).
4. What the checks need, read back through the brokers and from the Parquet, to
   ``DIR/result.json``, with the wall time of each run.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "spark_pipeline.py"
COPY_TOPIC = "pipeline-events-copy"
COPY_SINK = "standalone-copy"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spark_pipeline", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def session(master: str, src: str) -> Any:
    """A session on ``master``: executors run this interpreter with ``src`` on PYTHONPATH (so
    they import the rocketlite this driver imports), 1 core and 512 MiB each, every address on
    loopback."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from rocketlite.spark import register

    spark = (
        SparkSession.builder.master(master).appName("rocketlite-standalone-test")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.executorEnv.PYTHONPATH", src)
        .config("spark.executor.cores", "1").config("spark.executor.memory", "512m")
        .config("spark.cores.max", "2").config("spark.driver.memory", "768m")
        .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def drop_last_commit(checkpoint: Path) -> int:
    """Make the next start replay the last batch: remove its commit entry and checksum."""
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink()
    return last


def end_offsets(checkpoint: Path) -> dict[str, Any]:
    """The source offsets the last planned batch ends at: the last line of the newest
    ``offsets/N`` file (``v1``, the batch metadata, then one offset JSON per source)."""
    last = max(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
    lines = (checkpoint / "offsets" / str(last)).read_text(encoding="utf-8").splitlines()
    return dict(json.loads(lines[-1]))


def copy_exactly_once(spark: Any, namesrv: str, source: str, checkpoint: Path, batch: int) -> None:
    from pyspark.sql import functions as F

    (spark.readStream.format("rocketmq").option("nameserver", namesrv)
     .option("subscribe", source).option("startingOffsets", "earliest")
     .option("maxOffsetsPerTrigger", str(batch)).load()
     .select("body", F.create_map(F.lit("src_broker"), F.col("broker_name"),
                                  F.lit("src_msg_id"), F.col("msg_id")).alias("properties"))
     .writeStream.format("rocketmq").option("nameserver", namesrv).option("topic", COPY_TOPIC)
     .option("deliveryGuarantee", "exactly_once").option("sinkId", COPY_SINK)
     .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
     .start().awaitTermination())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", required=True)
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--store", action="append", default=[], help="NAME=PATH, to export")
    args = parser.parse_args()
    example = load_example()
    result: dict[str, Any] = {"timings": {}}
    timings = result["timings"]
    began = time.monotonic()
    spark = session(args.master, str(ROOT / "src"))
    timings["session"] = time.monotonic() - began
    pipeline = args.out / "pipeline"
    try:
        # a first job waits until both executors (one per worker) run Python, so that the
        # pipeline's time is the pipeline's
        began = time.monotonic()
        hosts = spark.sparkContext.parallelize(range(4), 4).map(lambda _: os.getpid()).collect()
        timings["executors"] = time.monotonic() - began
        result["python_workers"] = len(set(hosts))
        began = time.monotonic()
        example.run_pipeline(spark, args.namesrv, pipeline, batch=args.batch)
        timings["pipeline"] = time.monotonic() - began
        result["pipeline_batches"] = sorted(
            int(p.name) for p in (pipeline / "checkpoint" / "commits").iterdir() if p.name.isdigit())
        result["pipeline_windows_first_run"] = len(spark.read.parquet(str(pipeline / "windows")).collect())
        result["pipeline_replayed"] = drop_last_commit(pipeline / "checkpoint")
        began = time.monotonic()
        example.run_pipeline(spark, args.namesrv, pipeline, batch=args.batch)
        timings["pipeline_replay"] = time.monotonic() - began
        result["pipeline_end_offsets"] = end_offsets(pipeline / "checkpoint")

        began = time.monotonic()
        copy_exactly_once(spark, args.namesrv, example.EVENTS_TOPIC, args.out / "copy-checkpoint",
                          args.batch)
        timings["copy"] = time.monotonic() - began
        result["copy_replayed"] = drop_last_commit(args.out / "copy-checkpoint")
        began = time.monotonic()
        copy_exactly_once(spark, args.namesrv, example.EVENTS_TOPIC, args.out / "copy-checkpoint",
                          args.batch)
        timings["copy_replay"] = time.monotonic() - began
        result["copy_end_offsets"] = end_offsets(args.out / "copy-checkpoint")

        from typer.testing import CliRunner

        from rocketlite.cli.main import app

        began = time.monotonic()
        for item in args.store:
            name, _, path = item.partition("=")
            done = CliRunner().invoke(app, ["spark", "export", path, "--out",
                                            str(args.out / "export" / name),
                                            "--topic", example.EVENTS_TOPIC])
            if done.exit_code != 0:
                raise RuntimeError(f"export of {path}: {done.output}") from done.exception
        timings["export"] = time.monotonic() - began

        def topic(name: str, *cols: str) -> list[dict[str, Any]]:
            df = (spark.read.format("rocketmq").option("nameserver", args.namesrv)
                  .option("subscribe", name).load())
            return [r.asDict() for r in df.select(*cols).collect()]

        result["windows"] = [
            {"window_start": int(r.window_start.timestamp() * 1000), "action": r.action,
             "events": r.events, "amount": r.amount}
            for r in spark.read.parquet(str(pipeline / "windows")).collect()]
        result["stats"] = [{"msg_id": r["msg_id"], "body": r["body"].decode()}
                           for r in topic(example.STATS_TOPIC, "msg_id", "body")]
        result["events"] = [{"broker": r["broker_name"], "msg_id": r["msg_id"]}
                            for r in topic(example.EVENTS_TOPIC, "broker_name", "msg_id")]
        result["copy"] = [{"msg_id": r["msg_id"], "src_broker": r["properties"].get("src_broker"),
                           "src_msg_id": r["properties"].get("src_msg_id")}
                          for r in topic(COPY_TOPIC, "msg_id", "properties")]
    finally:
        spark.stop()
    (args.out / "result.json").write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
