"""The ``rocketmq-store`` scan through Spark against a plain Python read of the same files.

    python bench/spark_store_bench.py                      # 1M messages of 100 B, 64 MiB segments
    python bench/spark_store_bench.py --messages 200000 --master 'local[2]' --parts 2

Builds a store of ``--messages`` messages (``--body`` bytes, a TAGS and a UNIQ_KEY each, 16 queues
of one topic) with ``MessageStore.put_batch`` in a temporary folder, stops it cleanly, then times:

* **python, columnar**: the Spark tasks' own decoder (``store_scan.decode_range``) over every byte
  range in one process, one after the other: records to Arrow batches, no Spark;
* **python, via MessageExt**: ``client.message.iter_messages`` + ``rows.to_record_batch`` (the
  object-per-message path the columnar decoder replaced);
* **python, walk only**: ``message_record.unpack_v4`` over every record (the floor: reading and
  checking records, no columns);
* **spark**: ``count()`` and ``selectExpr("sum(length(body))")`` on
  ``format("rocketmq-store")``, each run twice (the first pays for Python worker start-up), plus
  the session start-up on its own line.

Prints rows/s per line and the Spark / Python ratio (wall time; Spark has ``--master``'s cores,
Python one). Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from rocketlite.formats.properties import encode_properties
from rocketlite.store.config import StoreConfig
from rocketlite.store.message import MessageBatch
from rocketlite.store.message_store import MessageStore

TOPIC = "StoreBench"
QUEUES = 16


def build_store(root: Path, messages: int, body: int, segment: int) -> float:
    """Fill a store at ``root``; return its CommitLog bytes."""
    cfg = StoreConfig.from_properties({"storePathRootDir": str(root), "mappedFileSizeCommitLog": str(segment),
                                       "flushDiskType": "ASYNC_FLUSH"})
    batch = 512
    bodies = [os.urandom(body) for _ in range(batch)]
    with MessageStore(cfg) as store:
        done = 0
        while done < messages:
            n = min(batch, messages - done)
            props = [encode_properties({"TAGS": "TagA", "UNIQ_KEY": f"{done + i:032X}"}).encode()
                     for i in range(n)]
            store.put_batch(MessageBatch(topic=TOPIC, queue_id=(done // batch) % QUEUES, bodies=bodies[:n],
                                         properties=props))
            done += n
        end = store.commitlog.max_offset
    return float(end)


def python_reads(root: Path, parts: int) -> dict[str, tuple[float, int]]:
    import pyarrow.compute as pc

    from rocketlite.client.message import iter_messages
    from rocketlite.formats import message_record as rec
    from rocketlite.spark.rows import to_record_batch
    from rocketlite.spark.store_scan import StoreScanOptions, decode_range, plan
    from rocketlite.store import store_reader

    out: dict[str, tuple[float, int]] = {}
    opts = StoreScanOptions.parse({"path": str(root), "partitionsPerSegment": str(parts)})
    t0 = time.perf_counter()
    _, ranges = plan(opts)
    rows = body_bytes = 0
    for r in ranges:
        for b in decode_range(r, opts):
            rows += b.num_rows
            body_bytes += pc.sum(pc.binary_length(b.column("body"))).as_py()
    out["python, columnar (decode_range)"] = (time.perf_counter() - t0, rows)

    t0 = time.perf_counter()
    n = 0
    for seg in store_reader.commitlog_segments(root):
        data = seg.path.read_bytes()
        end = store_reader.first_record_at_or_after(data, len(data), len(data))
        msgs = list(iter_messages(data[:end]))
        for at in range(0, len(msgs), 4096):
            n += to_record_batch(msgs[at:at + 4096], root.name).num_rows
    out["python, via MessageExt (iter_messages + to_record_batch)"] = (time.perf_counter() - t0, n)

    t0 = time.perf_counter()
    n = 0
    for seg in store_reader.commitlog_segments(root):
        with store_reader.mapped(seg.path) as mm:
            pos, limit = 0, len(mm)
            while (fast := rec.unpack_v4(mm, pos, limit, True)) is not None:
                pos += fast[0][0]
                n += 1
    out["python, walk only (unpack_v4 + CRC)"] = (time.perf_counter() - t0, n)
    return out


def spark_reads(root: Path, master: str, parts: int) -> dict[str, tuple[float, int]]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from rocketlite.spark.store_source import register_store_sources

    out: dict[str, tuple[float, int]] = {}
    t0 = time.perf_counter()
    spark = (SparkSession.builder.master(master).config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.memory", "2g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register_store_sources(spark)
    out["spark session start"] = (time.perf_counter() - t0, 0)
    try:
        df = spark.read.format("rocketmq-store").option("partitionsPerSegment", parts).load(str(root))
        for run in (1, 2):
            t0 = time.perf_counter()
            n = df.count()
            out[f"spark count() run {run}"] = (time.perf_counter() - t0, n)
            t0 = time.perf_counter()
            (row,) = df.selectExpr("count(*) AS n", "sum(length(body)) AS b").collect()
            out[f"spark sum(length(body)) run {run}"] = (time.perf_counter() - t0, int(row["n"]))
    finally:
        spark.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--body", type=int, default=100)
    ap.add_argument("--segment", type=int, default=64 << 20, help="CommitLog segment bytes")
    ap.add_argument("--parts", type=int, default=1, help="partitionsPerSegment")
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--dir", type=Path, default=None, help="where to build the store (kept)")
    args = ap.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="spark-store-bench-"))
    root = work / "store"
    try:
        if not (root / "commitlog").is_dir():
            t0 = time.perf_counter()
            size = build_store(root, args.messages, args.body, args.segment)
            print(f"store: {args.messages} messages, {size / 1e6:.0f} MB CommitLog, "
                  f"built in {time.perf_counter() - t0:.1f} s at {root}")
        py = python_reads(root, args.parts)
        sp = spark_reads(root, args.master, args.parts)
        base = py["python, columnar (decode_range)"][0]
        print(f"{'what':60} {'seconds':>8} {'rows':>9} {'rows/s':>10} {'vs python':>9}")
        for name, (secs, rows) in {**py, **sp}.items():
            rate = f"{rows / secs:10.0f}" if rows else " " * 10
            ratio = f"{secs / base:8.2f}x" if rows else ""
            print(f"{name:60} {secs:8.2f} {rows:9d} {rate} {ratio}")
        print(f"cores: {os.cpu_count()}, master {args.master}, partitionsPerSegment {args.parts}")
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
